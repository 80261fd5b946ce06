"""The meta device: tensors with a shape, a dtype and strides but no data.

A meta tensor's payload is a ``MetaArray``, the description of an array without its
memory, where a CPU tensor holds a NumPy array and a CUDA tensor a device array
(``runtime.devices``). Nothing else needs a meta implementation of its own, because every
primitive already carries its shape rule (``Primitive.abstract``, the rule tracing uses):
eager dispatch (``runtime.dispatch``) runs an op whose operands are on the meta device
through that rule instead of the primitive's implementation, so every op made of
primitives gives a meta result of the right shape and dtype without computing anything,
and autograd records and runs on such results as on any others. Meta results are laid
out in C order, except views that slice, permute or broadcast (``t.t().stride()`` as
PyTorch's).

Where a value is needed (``item()``, ``tolist()``, ``numpy()``, copying to another
device) a meta tensor raises PyTorch's errors; so does an op mixing a meta tensor with a
CPU tensor that is not 0-d (PyTorch passes a 0-d one as a scalar), except the integer
indices of a gather or scatter (PyTorch indexes with CPU index tensors, and the
convolutions gather with a constant CPU table)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..ir import prims as P

#: PyTorch's error for reading a meta tensor's values (``tolist()``, ``.cpu()``)
NO_DATA = "Cannot copy out of meta tensor; no data!"


class _State:
    """``in_use``: a meta payload has been made (until then eager dispatch skips looking for
    one: the per-op hot path), as ``cuda.driver.STATE.initialized`` is for device arrays."""
    __slots__ = ("in_use",)

    def __init__(self) -> None:
        self.in_use = False


STATE = _State()


class MetaArray:
    """An array's shape, NumPy dtype and byte strides, without its elements."""
    __slots__ = ("shape", "dtype", "strides")

    def __init__(self, shape: Sequence[int], dtype: Any, strides: Optional[Sequence[int]] = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = c_strides(self.shape, self.dtype.itemsize) if strides is None else tuple(strides)
        STATE.in_use = True

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def is_c_contiguous(self) -> bool:
        return all(st == c or n == 1 for n, st, c in
                   zip(self.shape, self.strides, c_strides(self.shape, self.itemsize)))

    def __repr__(self) -> str:
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


def c_strides(shape: Sequence[int], itemsize: int) -> tuple:
    """The byte strides of a C-ordered array of ``shape``."""
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def evaluate(prim, args: Sequence, params: dict) -> MetaArray:
    """``prim`` applied to ``args``, of which one or more are meta tensors: its shape rule's
    result. A CPU tensor that is not 0-d among them (nor indices) is PyTorch's mixed-device
    error, named from the first tensor's device (the device the op expects)."""
    from .tensor import Tensor
    indexes = prim.kind in ("gather", "scatter")
    expected = None
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            passed = d.ndim == 0 or (indexes and d.dtype.kind in "iub")
            dev = "meta" if type(d) is MetaArray else None if passed else str(a.device)
            if expected is None:
                expected = dev
            elif dev is not None and dev != expected:
                raise RuntimeError(f"Tensor on device {dev} is not on the expected device {expected}!")
    avals = [(a._data.shape, a._data.dtype) if isinstance(a, Tensor) else a for a in args]
    shape, dtype = prim.abstract(avals, params)
    return MetaArray(shape, dtype, _view_strides(prim, args, params))


def _view_strides(prim, args: Sequence, params: dict) -> Optional[tuple]:
    """The strides of view ``prim`` of a meta tensor (None: C order). Slicing, permuting
    and broadcasting are NumPy views that read no element: their implementation, run on a
    one-element stand-in with the meta tensor's strides, gives the view's strides."""
    if prim not in (P.slice_, P.transpose, P.broadcast_to):
        return None
    src = args[0]._data
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, src.dtype), src.shape, src.strides)
    return prim.impl(stand_in, **params).strides
