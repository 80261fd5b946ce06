"""The eager ``fma`` of float32 and float64 arrays in one pass: ``x * y + z`` rounded once by
the host's fused multiply-add instruction, as PyTorch's CPU kernels compute add/sub with
alpha, addcmul, addcdiv and lerp. NumPy has no fused multiply-add; emulated through float64
it took an optimizer's update six times as long (three passes, a float64 temporary).
Numba compiles each loop on first use and caches it on disk; LLVM contracts the multiply
and the add into one instruction (on a host without FMA they stay two roundings, as in
PyTorch's kernels there)."""
from __future__ import annotations

from typing import Optional

import numpy as np
from numba import njit

from ..dtypes import np_half

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@njit(fastmath={"contract"}, cache=True)
def _by_scalar(x, y, z, out):
    for i in range(x.size):
        out[i] = x[i] * y + z[i]


@njit(fastmath={"contract"}, cache=True)
def _by_array(x, y, z, out):
    for i in range(x.size):
        out[i] = x[i] * y[i] + z[i]


def fused(x, y, z, dt: np.dtype) -> Optional[np.ndarray]:
    """``x * y + z`` in ``dt`` for operands that broadcast together (numbers taken in ``dt``,
    as PyTorch takes a scalar alpha); float16 and bfloat16 computed in float32 and rounded
    once more at the end, as PyTorch's kernels compute them. None for other dtypes."""
    work = np.dtype(np.float32) if np_half(dt) else dt
    if work not in _DTYPES:
        return None
    shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(z))
    out = np.empty(shape, work)
    if np.ndim(y) == 0 and _whole(x, shape, work) and _whole(z, shape, work):  # an optimizer's update
        _by_scalar(x.reshape(-1), work.type(np.asarray(y, dt)), z.reshape(-1), out.reshape(-1))
    else:
        x, y, z = (np.ascontiguousarray(np.broadcast_to(np.asarray(np.asarray(v, dt), work), shape)).reshape(-1)
                   for v in (x, y, z))
        _by_array(x, y, z, out.reshape(-1))
    return out if work == dt else out.astype(dt)


def _whole(a, shape: tuple, dt: np.dtype) -> bool:
    return type(a) is np.ndarray and a.dtype == dt and a.shape == shape and a.flags.c_contiguous
