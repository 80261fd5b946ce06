"""``torch.finfo`` / ``torch.iinfo`` (the numeric limits of a dtype) and the memory-format
constants (``torch.contiguous_format``, ...), which fusegrad's layouts accept and ignore:
its tensors are always strided NumPy-style arrays."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import dtypes as D


class finfo:  # noqa: N801 - PyTorch's name
    """Limits of a floating dtype (default: the default dtype): ``bits``, ``eps``, ``max``,
    ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype``."""

    def __init__(self, type: Optional[D.dtype] = None):  # noqa: A002 - PyTorch's keyword
        dt = D.get_default_dtype() if type is None else D.to_dtype(type)
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

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


class memory_format:  # noqa: N801 - PyTorch's name
    """A memory layout PyTorch lets a program ask for; accepted by ``contiguous``, ``clone``,
    ``to`` and the ``*_like`` factories, which lay out tensors as they always do."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
