"""The cpu backend keeps freed large blocks in the heap (codegen/cpu_malloc.py): an
intermediate of megabytes allocated again on the next call reuses pages already mapped
instead of page-faulting fresh zeroed ones."""
from __future__ import annotations

import platform
import resource

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen.cpu_malloc import keep_freed_blocks

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="mallopt thresholds are glibc's")


def _faults_of_a_fresh_block(n: int) -> int:
    """Minor page faults while a block of ``n`` float32 is allocated, written and freed."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.empty(n, np.float32)
    a.fill(1.0)
    del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@glibc
def test_a_compile_keeps_freed_blocks_for_the_next_call():
    f = fg.compile(lambda x: (x * 2).sum())
    f(fg.ones(4))  # the cpu backend's first compile sets the thresholds
    n = 4 * 2**20  # 16 MiB: above glibc's default mmap threshold, below the one set
    _faults_of_a_fresh_block(n)
    # mmapped afresh, the block faults ~500 times (2 MiB huge pages where granted, else 4096)
    assert _faults_of_a_fresh_block(n) < 32
    assert keep_freed_blocks()


def _huge_pages_on_advice() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read()
    except OSError:
        return False
    return "[always]" in mode or "[madvise]" in mode


@pytest.mark.skipif(platform.system() != "Linux" or not _huge_pages_on_advice(),
                    reason="needs Linux transparent huge pages granted on madvise")
def test_a_large_fresh_result_asks_for_huge_pages():
    f = fg.compile(lambda x: x * 2 + 1)
    n = 12 * 2**20  # 48 MiB: above the mmap threshold's ceiling, so fresh pages every call
    x = fg.ones(n)
    f(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    r = f(x)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    # 4 KiB pages fault 12288 times; 2 MiB pages 24 times (a few more where one is refused)
    assert faults < 1024, faults
    np.testing.assert_array_equal(r.numpy()[::4096], np.full(n // 4096, 3.0, np.float32))
