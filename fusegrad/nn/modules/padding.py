"""Padding layers: constant (and zero), reflection, replication and circular padding of the last
1, 2 or 3 dims, each a ``F.pad`` mode."""
from __future__ import annotations

from typing import Sequence, Tuple, Union

from ...runtime.tensor import Tensor
from .. import functional as F
from ..module import Module

PadSpec = Union[int, Sequence[int]]


def _amounts(padding: PadSpec, n: int) -> Tuple[int, ...]:
    """``padding`` as PyTorch's modules keep it: a sequence as a tuple, an int repeated ``n`` times."""
    return tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * n


class _PadNd(Module):
    """Pads the last ``dims`` dims by ``padding`` ((left, right) from the last dim back) in ``mode``."""

    mode = "constant"  # the F.pad mode, set by each family
    dims = 1           # how many trailing dims, set by each class

    def __init__(self, padding: PadSpec) -> None:
        super().__init__()
        self.padding = _amounts(padding, 2 * self.dims)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """Pads with the constant ``value``."""

    def __init__(self, padding: PadSpec, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim of (N, C, W) or (C, W) with ``value``."""

    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dims of (N, C, H, W) or (C, H, W) with ``value``."""

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dims of (N, C, D, H, W) or (C, D, H, W) with ``value``."""

    dims = 3


class _ZeroPad:
    """Constant padding with 0 (a mixin before a ``ConstantPadNd`` base, as PyTorch's ``ZeroPadNd``
    subclass those)."""

    def __init__(self, padding: PadSpec) -> None:
        _ConstantPadNd.__init__(self, padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pads the last dim with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pads the last two dims with zeros."""


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pads the last three dims with zeros."""


class ReflectionPad1d(_PadNd):
    """Pads the last dim with its reflection about the edge (the edge not repeated)."""

    mode, dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Pads the last two dims with their reflection about the edges."""

    mode, dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pads the last three dims with their reflection about the edges."""

    mode, dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pads the last dim by repeating its edge values."""

    mode, dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Pads the last two dims by repeating their edge values."""

    mode, dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pads the last three dims by repeating their edge values."""

    mode, dims = "replicate", 3


class _CircularPadNd(_PadNd):
    """Pads by wrapping around; as PyTorch's, takes only a batched or unbatched input of its rank."""

    mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"expected {self.dims + 1}D or {self.dims + 2}D input (got {input.ndim}D input)")
        return super().forward(input)


class CircularPad1d(_CircularPadNd):
    """Pads the last dim of (N, C, W) or (C, W) circularly."""

    dims = 1


class CircularPad2d(_CircularPadNd):
    """Pads the last two dims of (N, C, H, W) or (C, H, W) circularly."""

    dims = 2


class CircularPad3d(_CircularPadNd):
    """Pads the last three dims of (N, C, D, H, W) or (C, D, H, W) circularly."""

    dims = 3
