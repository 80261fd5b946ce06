"""The BLAS that compiled matmuls call: the OpenBLAS NumPy itself links, through its CBLAS
``gemm``, so that NumPy, fusegrad's eager matmuls and compiled kernels share one library
and one pool of BLAS threads.

Two OpenBLAS libraries in one process (NumPy's and SciPy's, which Numba's ``np.dot`` uses)
each keep worker threads that spin for a while after a call; a program that alternates
between them (eager and compiled code, or NumPy and a compiled step) has the two pools
fighting over the cores. Measured on the 2-core benchmark machine, W2's compiled step took
2.45 ms alone and 5.2 ms alternating with NumPy GEMMs; on one library the spinning workers
are the ones the next call needs.

The CBLAS entry is registered with LLVM under a fixed symbol, so generated kernels call it
by name and stay cacheable on disk. SciPy's OpenBLAS is the fallback for NumPy builds
without one (the symbol's integer width is part of the generated source), and adapters over
Numba's own gemm the last resort."""
from __future__ import annotations

import ctypes
import glob
import os
from typing import NamedTuple, Optional

from numba import types
from numba.core.typing.templates import Signature

from .backend import Unsupported


class Blas(NamedTuple):
    """One resolved CBLAS: its path, whether it takes 64-bit integers, its thread-count
    setter (OpenBLAS's ``openblas_set_num_threads_local``, which returns the previous count)
    and what must stay alive for the registered symbols to stay valid."""
    path: str
    ilp64: bool
    set_threads: Optional[ctypes._CFuncPtr]
    keep: tuple = ()


ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS enum values

# (package whose bundled libraries to search, CBLAS symbol pattern, 64-bit integers), newest
# wheels first: NumPy 2 bundles scipy-openblas64 ("scipy_" prefix), NumPy 1.26 openblas64_
# (no prefix); SciPy's own OpenBLAS is LP64, prefixed since 1.13. The "64_" suffix marks ILP64.
_CANDIDATES = (("numpy", "scipy_cblas_{}gemm64_", True), ("numpy", "cblas_{}gemm64_", True),
               ("scipy", "scipy_cblas_{}gemm", False), ("scipy", "cblas_{}gemm", False))
_SYMBOL = "fusegrad_cblas_{}gemm_{}"  # what generated code links against


def _libraries(package: str) -> list:
    """Paths of OpenBLAS libraries a package's wheel bundles (Linux, macOS and Windows layouts)."""
    try:
        mod = __import__(package)
    except ImportError:
        return []
    here = os.path.dirname(mod.__file__)
    dirs = [os.path.join(here, "..", f"{package}.libs"), os.path.join(here, ".dylibs")]
    return sorted(p for d in dirs for p in glob.glob(os.path.join(d, "*openblas*")))


def _open(package: str, pattern: str, ilp64: bool) -> Optional[Blas]:
    """The first of ``package``'s bundled libraries with the CBLAS gemm entries ``pattern``
    names, its entries registered with LLVM under ``_SYMBOL``; None if it has none."""
    from llvmlite import binding as llvm
    for path in _libraries(package):
        try:
            lib = ctypes.CDLL(path)  # already loaded by the package: the same handle
            fns = {k: getattr(lib, pattern.format(k)) for k in "sd"}
        except (OSError, AttributeError):
            continue
        for k, fn in fns.items():
            llvm.add_symbol(_SYMBOL.format(k, "i64" if ilp64 else "i32"), ctypes.cast(fn, ctypes.c_void_p).value)
        setter = getattr(lib, "openblas_set_num_threads_local", None)
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
        return Blas(path, ilp64, setter)
    return None


def _via_numba() -> Optional[Blas]:
    """The last resort, for a NumPy and SciPy that bundle no OpenBLAS (built on Accelerate,
    MKL, ...): CBLAS-shaped adapters over ``numba_xxgemm``, the Fortran gemm Numba's
    ``np.dot`` takes from SciPy's cython_blas. Numba cfuncs, compiled when the cpu backend
    is imported in such an environment (about a second per process); None without SciPy."""
    import numpy as np
    from llvmlite import binding as llvm
    from numba import cfunc
    from numba.np.linalg import ensure_blas
    try:
        ensure_blas()
    except ImportError:
        return None
    xxgemm = types.ExternalFunction("numba_xxgemm", types.intc(
        types.char, types.char, types.char, types.intp, types.intp, types.intp, types.voidptr, types.voidptr,
        types.intp, types.voidptr, types.intp, types.voidptr, types.voidptr, types.intp))
    t, n_ = ord("t"), ord("n")
    keep = []
    for kind, ft, dtype in (("s", types.float32, np.float32), ("d", types.float64, np.float64)):
        code = ord(kind)

        def adapter(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
            # row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T: B goes first
            scal = np.empty(2, dtype)  # numba_xxgemm takes alpha and beta by pointer
            scal[0], scal[1] = alpha, beta
            xxgemm(code, t if tb == TRANS else n_, t if ta == TRANS else n_, n, m, k, scal.ctypes, b, ldb,
                   a, lda, scal[1:].ctypes, c, ldc)

        compiled = cfunc(_gemm_type(ft, types.int32))(adapter)
        llvm.add_symbol(_SYMBOL.format(kind, "i32"), compiled.address)
        keep.append(compiled)
    return Blas("numba_xxgemm (SciPy's cython_blas)", False, None, tuple(keep))


def _resolve() -> Optional[Blas]:
    """The first candidate found, else the adapters over Numba's own gemm. Runs at import,
    so the symbols are registered before any kernel that calls them is compiled or loaded
    from Numba's cache (generated modules import this one)."""
    for candidate in _CANDIDATES:
        found = _open(*candidate)
        if found is not None:
            return found
    return _via_numba()


def _gemm_type(ft, it) -> Signature:
    return types.void(types.intc, types.intc, types.intc, it, it, it, ft, types.voidptr, it,
                      types.voidptr, it, ft, types.voidptr, it)


# The generated module imports the pair for its library's integer width (see prelude()).
sgemm_i64 = types.ExternalFunction(_SYMBOL.format("s", "i64"), _gemm_type(types.float32, types.int64))
dgemm_i64 = types.ExternalFunction(_SYMBOL.format("d", "i64"), _gemm_type(types.float64, types.int64))
sgemm_i32 = types.ExternalFunction(_SYMBOL.format("s", "i32"), _gemm_type(types.float32, types.int32))
dgemm_i32 = types.ExternalFunction(_SYMBOL.format("d", "i32"), _gemm_type(types.float64, types.int32))


#: The CBLAS compiled kernels call; None only without NumPy's or SciPy's OpenBLAS and without SciPy.
BLAS = _resolve()


def kind() -> str:
    """What of the BLAS the generated source depends on: the integer width of its entries
    (part of the generated-code cache key)."""
    return "none" if BLAS is None else "i64" if BLAS.ilp64 else "i32"


def prelude() -> str:
    """The generated module's import of the gemm entries for this process's library."""
    w = kind()
    if w == "none":
        raise Unsupported("cpu backend: matmul needs BLAS; found no OpenBLAS bundled with NumPy or SciPy, and no SciPy")
    return f"from fusegrad.codegen.cpu_blas import sgemm_{w} as _fg_sgemm, dgemm_{w} as _fg_dgemm"
