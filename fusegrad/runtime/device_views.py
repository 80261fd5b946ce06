"""Views of CUDA tensors that share the device memory of their base, as NumPy's views do
on the host: an in-place write through ``x[0]``, ``x.t()`` or ``x.view(...)`` reaches ``x``.
A view the device array type cannot express (a non-contiguous reshape, a flip) is None
here, and the caller computes it as a copy, as NumPy does for such a reshape."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..cuda import driver
from ..ir import prims as P
from ..ir.prims.layout import decode_key


def view(prim, arr: Any, params: dict) -> Optional[Any]:
    """``prim`` (a view primitive) of device array ``arr`` sharing its memory, or None."""
    if driver.STATE.simulator:  # the simulator's arrays wrap NumPy arrays: NumPy's own view
        host = arr._ary
        out = prim.impl(host, **params)
        return type(arr)(out) if np.shares_memory(out, host) else None
    if prim is P.slice_:
        key = decode_key(params["key"])
        if all(not isinstance(k, slice) or (k.step or 1) > 0 for k in key):
            return arr[key]
        return None
    if prim is P.reshape:
        return arr.reshape(*params["shape"]) if arr.is_c_contiguous() else None
    if prim is P.transpose:
        perm = params["perm"]
        return _strided(arr, tuple(arr.shape[p] for p in perm), tuple(arr.strides[p] for p in perm))
    if prim is P.broadcast_to:
        shape = tuple(params["shape"])
        lead = len(shape) - arr.ndim
        strides = (0,) * lead + tuple(0 if (s == 1 and n != 1) else st
                                      for s, n, st in zip(arr.shape, shape[lead:], arr.strides))
        return _strided(arr, shape, strides)
    return None


def _strided(arr: Any, shape: tuple, strides: tuple) -> Any:
    """A device array over ``arr``'s memory with another shape and strides."""
    return type(arr)(shape, strides, arr.dtype, gpu_data=arr.gpu_data)
