"""Legacy Tensor methods PyTorch keeps: ``Tensor.new`` (a tensor of ``self``'s dtype and
device from sizes or data), ``resize_``/``resize_as_`` (a reshape when the element count
is unchanged, else fresh, uninitialized memory), and ``apply_``/``map_`` (a Python
callable applied to each element, eagerly, in place)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .exports import op
from .tensor import Tensor


@op(function=False)
def new(self: Tensor, *args, dtype=None, device=None) -> Tensor:
    """``Tensor.new(*sizes)``: an uninitialized tensor of ``self``'s dtype (``new()``: an empty
    one of size [0]); ``Tensor.new(data)``: a copy of data (a tuple or list is data, as
    PyTorch reads it; a ``Size`` is a size)."""
    import fusegrad
    dtype, device = dtype or self.dtype, device or self.device
    if not args:
        return fusegrad.empty(0, dtype=dtype, device=device)
    if len(args) == 1 and not isinstance(args[0], (int, fusegrad.Size)):
        if isinstance(args[0], (float, complex, bool)):
            raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__})")
        return fusegrad.tensor(args[0], dtype=dtype, device=device)
    size = tuple(args[0]) if len(args) == 1 and isinstance(args[0], fusegrad.Size) else tuple(args)
    return fusegrad.empty(size, dtype=dtype, device=device)


def _resize(self: Tensor, shape: tuple) -> Tensor:
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    d = self._data
    if type(d) is not np.ndarray:
        raise RuntimeError("resize_: only host tensors are resized (a traced or device tensor is not)")
    n = int(np.prod(shape))
    if n == d.size:
        self._data = d.reshape(shape) if d.flags.c_contiguous else np.ascontiguousarray(d).reshape(shape)
    else:  # (PyTorch keeps the old elements first; the rest is uninitialized memory, zeros here)
        new = np.zeros(n, dtype=d.dtype)
        k = min(n, d.size)
        new[:k] = d.reshape(-1)[:k]
        self._data = new.reshape(shape)
    self._bump()
    return self


@op(function=False)
def resize_(self: Tensor, *sizes, memory_format=None) -> Tensor:
    """``self`` given the shape ``sizes`` (its leading elements kept)."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    return _resize(self, shape)


@op
def resize_as_(self: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """``self`` given ``the_template``'s shape."""
    return _resize(self, tuple(the_template.shape))


@op(function=False)
def apply_(self: Tensor, callable: Callable) -> Tensor:  # noqa: A002
    """``self`` with ``callable`` applied to each element (eagerly; not differentiable)."""
    if self.requires_grad:
        raise RuntimeError("apply_ is only implemented on CPU tensors that don't require grad")
    d = self._concrete("apply_")
    d[...] = np.vectorize(callable, otypes=[d.dtype])(d) if d.size else d
    self._bump()
    return self


@op(function=False)
def map_(self: Tensor, tensor: Tensor, callable: Callable) -> Tensor:  # noqa: A002
    """``self`` with ``callable(self_i, tensor_i)`` at each element (``tensor`` broadcast to ``self``)."""
    if self.requires_grad:
        raise RuntimeError("map_ is only implemented on CPU tensors that don't require grad")
    d = self._concrete("map_")
    other = np.broadcast_to(tensor._concrete("map_"), d.shape)
    d[...] = np.vectorize(callable, otypes=[d.dtype])(d, other) if d.size else d
    self._bump()
    return self
