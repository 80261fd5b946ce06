"""Large intermediate buffers reused from the heap instead of fresh pages from the kernel.

A compiled entry allocates its intermediates (megabytes each for a CNN's im2col columns) on
every call and frees them on return. glibc serves blocks above its mmap threshold with a
fresh ``mmap``, so each call page-faults and zero-fills every page of them again and
``munmap``s them after: W7's compiled step spent ~40% of its time in the kernel doing so.
Raising the mmap threshold (and the heap trim threshold with it) keeps freed blocks in the
heap for the next call, as PyTorch users get by preloading jemalloc or tcmalloc.

Blocks that stay fresh (above the ceiling of that threshold, and results a caller keeps) ask
for transparent huge pages, as NumPy's allocator does: one fault per 2 MiB instead of one per
4 KiB page, where the faults cost several times the kernel that writes the block."""
from __future__ import annotations

import ctypes
import functools
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's ceiling for the mmap threshold on 64-bit hosts (a block above it is still mmapped)
MMAP_THRESHOLD = 32 * 2**20
#: free memory at the heap's top kept rather than returned to the kernel
TRIM_THRESHOLD = 4 * MMAP_THRESHOLD
#: blocks from this size up are advised to use huge pages (NumPy's threshold)
HUGE_PAGE_MIN = 4 * 2**20
_MADV_HUGEPAGE = 14
#: the name generated code calls ``madvise`` by (see ``huge_page_advice``)
_MADVISE_SYMBOL = "fusegrad_madvise"


@functools.cache
def keep_freed_blocks() -> bool:
    """Set glibc's thresholds once per process (the cpu backend's first compile); False
    where the C library has no ``mallopt`` (not glibc) or refuses the values."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


@functools.cache
def huge_page_advice() -> "tuple[str, int] | None":
    """(symbol, advice): the ``madvise`` that generated code calls on a large new block, made
    known to LLVM's linker under ``symbol`` (also for kernels loaded from the disk cache), and
    ``MADV_HUGEPAGE``; None off Linux or without ``madvise``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None).madvise
    except (OSError, AttributeError):
        return None
    import llvmlite.binding as llvm
    llvm.add_symbol(_MADVISE_SYMBOL, ctypes.cast(madvise, ctypes.c_void_p).value)
    return _MADVISE_SYMBOL, _MADV_HUGEPAGE
