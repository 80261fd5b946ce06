"""Upsample (and its fixed-mode UpsamplingNearest2d, UpsamplingBilinear2d), PixelShuffle, PixelUnshuffle
and ChannelShuffle."""
from __future__ import annotations

from typing import Optional

from ...runtime.tensor import Tensor
from .. import functional as F
from .. import functional_pool as FP
from ..module import Module


class Upsample(Module):
    """Resizes (N, C, *sp) to ``size`` or by ``scale_factor`` (see ``F.interpolate``)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners: Optional[bool] = None,
                 recompute_scale_factor: Optional[bool] = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return FP.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour ``Upsample`` of (N, C, H, W)."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear ``Upsample`` of (N, C, H, W) with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return FP.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return FP.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Reorders the channels of (N, C, *) as (groups, C / groups) transposed."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
