"""Numba's start-up in a process, before the first kernel compiles or loads from its cache.

Numba's CPU target loads its array support then (``load_additional_registries``), and that
checks for a BLAS by importing ``scipy.linalg.cython_blas``: the usual import runs all of
``scipy.linalg``'s package first (its array-API layer, its Python wrappers), much of that
start-up. fusegrad's kernels call BLAS through their own
symbol (codegen.cpu_blas), and Numba needs only to find the module. It gets the module
loaded on its own from SciPy's file (the extension needs nothing of its package), for as
long as Numba loads its support; then the name is forgotten, so that a later
``import scipy.linalg`` runs as usual."""
from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import os
import sys

_BLAS = "scipy.linalg.cython_blas"


def load_array_support() -> None:
    """Have Numba load its array support now (see the module docstring); nothing when it
    has, when ``scipy.linalg`` is imported already, or when SciPy's module is not found."""
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules or _BLAS in sys.modules:
        return
    module = _standalone_blas()
    if module is None:
        return
    from numba.core.registry import cpu_target
    sys.modules[_BLAS] = module
    try:
        cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - then Numba loads its support the usual way, at the first compile
        pass
    finally:
        if sys.modules.get(_BLAS) is module:
            del sys.modules[_BLAS]


def _standalone_blas():
    """SciPy's ``cython_blas`` extension loaded from its file, or None."""
    try:
        import scipy
    except ImportError:
        return None
    folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
    paths = [p for suffix in importlib.machinery.EXTENSION_SUFFIXES
             for p in glob.glob(os.path.join(folder, "cython_blas" + suffix))]
    if not paths:
        return None
    spec = importlib.util.spec_from_file_location(_BLAS, paths[0])
    if spec is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError):
        return None
    return module
