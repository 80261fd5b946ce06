"""The eager CUDA service: one primitive applied to device arrays, as a kernel.

``apply(prim, args, params)`` builds the one-equation graph of ``prim`` on ``args``
(device arrays become graph inputs; Python scalars stay literals, weakly typed as in
eager), compiles it with the cuda backend and runs it. Executables are cached per
(primitive, params, input types and scalar values), and their kernels per structure
(codegen.cuda), so a repeated op costs one launch. What the backend cannot compile (a
matmul of integers, a cumsum of booleans) runs the primitive's NumPy impl on host copies;
the result comes back as a device array all the same."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..codegen.backend import Unsupported
from ..ir.graph import Eqn, Graph, Var

_EXES: dict = {}  # key -> executable (or _HostApply); an explicit cache
_LOCK = threading.Lock()


def _is_array(a) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, (np.generic, bool, int, float))


def _frozen(v: Any):
    """``v`` as a hashable cache-key part (params hold tuples, dtypes, nested sequences)."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return (type(v).__name__, v)


class _HostApply:
    """A primitive the cuda backend cannot compile for these operands: its impl on host
    copies, copied back."""

    def __init__(self, prim, params: dict, scalars: list):
        self.prim, self.params, self.scalars = prim, params, scalars

    def __call__(self, *arrays) -> tuple:
        from .cuda_driver import numba_cuda
        cuda = numba_cuda()
        it = iter(arrays)
        ins = [next(it).copy_to_host() if s is None else s for s in self.scalars]
        out = self.prim.impl(*ins, **self.params)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(cuda.to_device(np.ascontiguousarray(o)) for o in outs)


def _executable(prim, args: tuple, params: dict):
    key = (prim, _frozen(params),
           tuple(("a", tuple(a.shape), np.dtype(a.dtype).str) if _is_array(a) else _frozen(a) for a in args))
    exe = _EXES.get(key)
    if exe is not None:
        return exe
    g = Graph()
    ins, avals = [], []
    for a in args:
        if _is_array(a):
            v = Var(tuple(a.shape), a.dtype)
            g.inputs.append(v)
            ins.append(v)
            avals.append((v.shape, v.dtype))
        else:
            ins.append(a)
            avals.append(a)
    shape, dtype = prim.abstract(avals, params)
    out = Var(shape, dtype)
    g.eqns.append(Eqn(prim, tuple(ins), dict(params), out))
    g.outputs = [out]
    from ..codegen.cuda import CudaBackend
    try:
        exe = CudaBackend().compile(g)
    except Unsupported:
        exe = _HostApply(prim, dict(params), [None if _is_array(a) else a for a in args])
    with _LOCK:
        _EXES[key] = exe
    return exe


def apply(prim, args: tuple, params: dict):
    """``prim(*args, **params)`` on the device: ``args`` are device arrays (numba-cuda
    DeviceNDArray) or Python scalars; returns a device array (a tuple of them where the
    primitive's impl returns a tuple)."""
    if any(isinstance(a, np.ndarray) for a in args):  # host arrays go to the device first: results stay there
        from .cuda_driver import numba_cuda
        cuda = numba_cuda()
        args = tuple(cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in args)
    res = _executable(prim, args, params)(*[a for a in args if _is_array(a)])
    return res[0] if len(res) == 1 else res
