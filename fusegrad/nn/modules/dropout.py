"""Dropout."""
from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from ..module import Module


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    """A dropout module whose forward is ``fn(input, p, training, inplace)``."""

    fn = None  # the functional form, set by each subclass

    def forward(self, input: Tensor) -> Tensor:
        return type(self).fn(input, self.p, self.training, self.inplace)


class Dropout1d(_ChannelDropout):
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` inputs in training mode."""

    fn = staticmethod(F.dropout1d)


class Dropout2d(_ChannelDropout):
    """Zeroes whole channels of ``(N, C, H, W)`` or ``(C, H, W)`` inputs in training mode."""

    fn = staticmethod(F.dropout2d)


class Dropout3d(_ChannelDropout):
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs in training mode."""

    fn = staticmethod(F.dropout3d)


class AlphaDropout(_ChannelDropout):
    """Dropout that keeps SELU's self-normalizing mean and variance."""

    fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_ChannelDropout):
    """Alpha dropout of whole channels."""

    fn = staticmethod(F.feature_alpha_dropout)
