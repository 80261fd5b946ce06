"""``torch.finfo`` / ``torch.iinfo`` (the numeric limits of a dtype) and the memory formats
(``torch.contiguous_format``, ``channels_last``, ...) with the layouts they stand for."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import dtypes as D


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating dtype (default: the default dtype): ``bits``, ``eps``, ``max``,
    ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype``."""

    def __init__(self, type: Optional[D.dtype] = None):  # noqa: A002 - PyTorch's keyword
        dt = D.get_default_dtype() if type is None else D.to_dtype(type)
        dt = dt.to_real()  # (a complex dtype's limits are its parts')
        if not dt.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        if dt == D.bfloat16:  # (8 exponent bits as float32, 7 fraction bits)
            self.bits, self.eps, self.resolution = 16, 2.0 ** -7, 0.01
            self.max, self.tiny = float((2 - 2.0 ** -7) * 2.0 ** 127), 2.0 ** -126
        else:
            info = np.finfo(dt.np)
            self.bits, self.eps, self.resolution = info.bits, float(info.eps), 10.0 ** -info.precision
            self.max, self.tiny = float(info.max), float(info.tiny)
        self.min, self.smallest_normal, self.dtype = -self.max, self.tiny, dt.name

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # (compared by value, so unhashable, as PyTorch's)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype: ``bits``, ``min``, ``max``, ``dtype``."""

    def __init__(self, type: D.dtype):  # noqa: A002 - PyTorch's keyword
        dt = D.to_dtype(type)
        if dt.is_floating_point or dt == D.bool_:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                            "'torch.iinfo'")
        info = np.iinfo(dt.np)
        self.bits, self.min, self.max, self.dtype = info.bits, int(info.min), int(info.max), dt.name

    __eq__ = finfo.__eq__
    __hash__ = None

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


class memory_format:  # noqa: N801 - PyTorch's name
    """A memory layout a program asks for (``contiguous``, ``clone``, ``to``, ``empty`` and the
    ``*_like`` factories, ``is_contiguous``): C order, or channels last (N, H, W, C in memory)."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def order(self, ndim: int):
        """The dims of an ``ndim``-d tensor in memory order, outermost first (None: C order or
        the layout kept, for ``preserve_format``)."""
        rank = {"channels_last": 4, "channels_last_3d": 5}.get(self._name)
        if rank is None:
            return None
        if ndim != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {self._name} format")
        return (0,) + tuple(range(2, ndim)) + (1,)


def laid_out(data, order):
    """Host array ``data`` with its dims in memory in ``order`` (None: C order): a copy, or
    ``data`` itself where it is laid out so already."""
    if order is None:
        return np.ascontiguousarray(data)
    return np.ascontiguousarray(data.transpose(order)).transpose(np.argsort(order))


def is_laid_out(data, order) -> bool:
    """Whether array ``data`` is dense with its dims in memory in ``order`` (None: C order);
    dims of size 1 may have any stride, as in PyTorch."""
    expected = data.itemsize
    for d in reversed(order if order is not None else range(data.ndim)):
        if data.shape[d] != 1:
            if data.strides[d] != expected:
                return False
            expected *= data.shape[d]
    return True


def channels_last_order(data):
    """The channels-last order of a 4-d or 5-d host array laid out so (and not also in C
    order), else None: the layout a convolution's result follows, as PyTorch's."""
    if type(data) is not np.ndarray or data.ndim not in (4, 5) or data.flags.c_contiguous:
        return None
    order = (0,) + tuple(range(2, data.ndim)) + (1,)
    return order if is_laid_out(data, order) and _channels_last_strides(data) else None


def _channels_last_strides(data) -> bool:
    """PyTorch's ``is_channels_last_strides_2d``/``_3d``: the strides rise through C, W, (D,) H,
    N, where a dim of size 1 still counts with its stride (a stack of permuted HWC images,
    whose unsqueezed batch dim has stride C, is not channels last, but C order)."""
    strides = data.strides
    if strides[1] == 0:
        return False
    least = 0
    for d in (1,) + tuple(range(data.ndim - 1, 1, -1)) + (0,):
        if least > strides[d] or (d == 0 and least == strides[1]):
            return False
        least = strides[d] * (data.shape[d] if data.shape[d] > 1 else 1)
    return True


contiguous_format = memory_format("contiguous_format")
legacy_contiguous_format = contiguous_format  # (PyTorch's other name of it: the same object)
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
