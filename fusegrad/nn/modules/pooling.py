"""Pooling modules: max, average, adaptive and power-average pooling in 1, 2 and 3 dims, max
unpooling and fractional max pooling in 2 and 3 dims."""
from __future__ import annotations

from typing import Optional, Sequence

from ...runtime.tensor import Tensor
from .. import functional_pool as FP
from ..functional_conv import ntuple
from ..module import Module


class _WindowPool(Module):
    """The window options every sliding-window pool has; ``stride`` defaults to ``kernel_size``."""

    def __init__(self, kernel_size, stride, padding, ceil_mode: bool) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode


class _MaxPoolNd(_WindowPool):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation = dilation
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max over sliding windows of (N, C, L)."""

    def forward(self, input: Tensor):
        return FP.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """Max over sliding windows of (N, C, H, W)."""

    def forward(self, input: Tensor):
        return FP.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool3d(_MaxPoolNd):
    """Max over sliding windows of (N, C, D, H, W)."""

    def forward(self, input: Tensor):
        return FP.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class _AvgPoolNd(_WindowPool):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over sliding windows of (N, C, L)."""

    def forward(self, input: Tensor) -> Tensor:
        return FP.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """Mean over sliding windows of (N, C, H, W)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return FP.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad, self.divisor_override)


class AvgPool3d(_AvgPoolNd):
    """Mean over sliding windows of (N, C, D, H, W)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return FP.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad, self.divisor_override)


class _AdaptivePool(Module):
    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average pooling of (N, C, L) to ``output_size`` positions."""

    def __init__(self, output_size) -> None:
        super().__init__(output_size)

    def forward(self, input: Tensor) -> Tensor:
        return FP.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average pooling of (N, C, H, W) to ``output_size``."""

    def __init__(self, output_size) -> None:
        super().__init__(output_size)

    def forward(self, input: Tensor) -> Tensor:
        return FP.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """Max pooling of (N, C, L) to ``output_size`` positions."""

    def forward(self, input: Tensor):
        return FP.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    """Max pooling of (N, C, H, W) to ``output_size``."""

    def forward(self, input: Tensor):
        return FP.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average pooling of (N, C, D, H, W) to ``output_size``."""

    def __init__(self, output_size) -> None:
        super().__init__(output_size)

    def forward(self, input: Tensor) -> Tensor:
        return FP.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_AdaptivePool):
    """Max pooling of (N, C, D, H, W) to ``output_size``."""

    def forward(self, input: Tensor):
        return FP.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    """Power-average pooling: ``(sum of x^p over each window)^(1/p)``."""

    _fn = None

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool1d(_LPPoolNd):
    """Power-average pooling of (N, C, L)."""
    _fn = staticmethod(FP.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling of (N, C, H, W)."""
    _fn = staticmethod(FP.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling of (N, C, D, H, W)."""
    _fn = staticmethod(FP.lp_pool3d)


class _MaxUnpoolNd(Module):
    """The partial inverse of max pooling: values placed at the indices it returned."""

    _n = 0
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        n = self._n
        self.kernel_size = ntuple(kernel_size, n, "kernel_size")
        self.stride = ntuple(stride if stride is not None else kernel_size, n, "stride")
        self.padding = ntuple(padding, n, "padding")

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Tensor, indices: Tensor, output_size: Optional[Sequence[int]] = None) -> Tensor:
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """Inverse of ``MaxPool1d``: (N, C, L) values at the pooled indices of a zero (N, C, L_out)."""
    _n = 1
    _fn = staticmethod(FP.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """Inverse of ``MaxPool2d``: (N, C, H, W) values at the pooled indices of a zero output."""
    _n = 2
    _fn = staticmethod(FP.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """Inverse of ``MaxPool3d``."""
    _n = 3
    _fn = staticmethod(FP.max_unpool3d)


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling to ``output_size`` or to the input's size times ``output_ratio``
    (each in (0, 1)); ``_random_samples`` (a buffer, None: drawn at each call) fixes the regions."""
    _n = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples: Optional[Tensor] = None) -> None:
        super().__init__()
        n = self._n
        self.kernel_size = ntuple(kernel_size, n, "kernel_size")
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = ntuple(output_size, n, "output_size") if output_size is not None else None
        self.output_ratio = FP.repeated(output_ratio, n) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        pool = FP.fractional_max_pool2d if self._n == 2 else FP.fractional_max_pool3d
        return pool(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                    _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, H, W) or (C, H, W)."""
    _n = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, T, H, W) or (C, T, H, W)."""
    _n = 3
