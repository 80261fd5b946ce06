"""Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d and their lazy forms."""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Union

from ...runtime.tensor import Tensor
from .. import functional_conv as FC
from ..module import Module
from ..parameter import UninitializedParameter
from .default_init import kaiming_reset_, register_weight_and_bias
from .lazy import _LazyLayer

_MODES = ("zeros", "reflect", "replicate", "circular")


def _check_in_channels(in_channels: int, groups: int) -> None:
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")


class _ConvNd(Module):
    """Shared parameters, PyTorch's default initialization and printed form."""

    _n = 0
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", output_padding=0,
                 device=None, dtype=None) -> None:
        super().__init__()
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        _check_in_channels(in_channels, groups)
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _MODES:
            raise ValueError(f"padding_mode must be one of {list(_MODES)}, but got padding_mode='{padding_mode}'")
        self.kernel_size = FC.ntuple(kernel_size, n, "kernel_size")
        self.stride = FC.ntuple(stride, n, "stride")
        self.dilation = FC.ntuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of ['valid', 'same']")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = FC.ntuple(padding, n, "padding")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.output_padding = FC.ntuple(output_padding, n, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        register_weight_and_bias(self, self._weight_shape(), out_channels, bias, dtype, device)
        self.reset_parameters()

    def _weight_shape(self) -> tuple:
        g = self.groups
        if self.transposed:
            return (self.in_channels, self.out_channels // g) + self.kernel_size
        return (self.out_channels, self.in_channels // g) + self.kernel_size

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform_(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias."""
        kaiming_reset_(self.weight, self.bias, zero_bias_without_fan_in=False)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding: Union[str, int,
                 Sequence[int]] = 0, dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return FC.convolution(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups,
                              self._n, f"conv{self._n}d", self.padding_mode)


class Conv1d(_Conv):
    """1-d convolution over (N, C, L) with weight (out, in // groups, k)."""
    _n = 1


class Conv2d(_Conv):
    """2-d convolution over (N, C, H, W) with weight (out, in // groups, kh, kw)."""
    _n = 2


class Conv3d(_Conv):
    """3-d convolution over (N, C, D, H, W) with weight (out, in // groups, kd, kh, kw)."""
    _n = 3


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input: Tensor, output_size: Optional[Sequence[int]]) -> tuple:
        """The output padding that gives ``output_size`` (the spatial sizes, or with N, C)."""
        if output_size is None:
            return self.output_padding
        n = self._n
        size = tuple(output_size)[-n:]
        pads = []
        for i in range(n):
            least = ((input.shape[input.ndim - n + i] - 1) * self.stride[i] - 2 * self.padding[i]
                     + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not least <= size[i] < least + self.stride[i]:
                raise ValueError(f"requested an output size of {list(size)}, but valid sizes range from {least} to "
                                 f"{least + self.stride[i] - 1} (for an input of {list(input.shape[-n:])})")
            pads.append(size[i] - least)
        return tuple(pads)

    def forward(self, input: Tensor, output_size: Optional[Sequence[int]] = None) -> Tensor:
        return FC.conv_transpose(input, self.weight, self.bias, self.stride, self.padding,
                                 self._output_padding(input, output_size), self.groups, self.dilation, self._n,
                                 f"conv_transpose{self._n}d")


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution with weight (in, out // groups, k)."""
    _n = 1


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution with weight (in, out // groups, kh, kw)."""
    _n = 2


class ConvTranspose3d(_ConvTranspose):
    """3-d transposed convolution with weight (in, out // groups, kd, kh, kw)."""
    _n = 3


class _LazyConvNd(_LazyLayer):
    """A conv layer whose ``in_channels`` is read from its first input (dim 1, or dim 0 of an
    unbatched input); it then becomes ``cls_to_become``."""
    _inferred = "in_channels"

    def _lazy_init(self, out_channels: int, bias: bool, device, dtype) -> None:
        """Replace the placeholder parameters of the constructor (0 channels, no bias) by lazy ones."""
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _size_from(self, input: Tensor) -> int:
        n = self._n
        if input.ndim not in (n + 1, n + 2):
            raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {input.shape}")
        in_channels = int(input.shape[1] if input.ndim == n + 2 else input.shape[0])
        _check_in_channels(in_channels, self.groups)
        return in_channels

    def _lazy_shapes(self) -> Dict[str, tuple]:
        return {"weight": self._weight_shape(), "bias": (self.out_channels,)}


class _LazyConv(_LazyConvNd, _Conv):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding: Union[str, int, Sequence[int]] = 0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A ``Conv1d`` whose ``in_channels`` is read from its first input."""
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A ``Conv2d`` whose ``in_channels`` is read from its first input."""
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A ``Conv3d`` whose ``in_channels`` is read from its first input."""
    cls_to_become = Conv3d


class _LazyConvTranspose(_LazyConvNd, _ConvTranspose):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ``ConvTranspose1d`` whose ``in_channels`` is read from its first input."""
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ``ConvTranspose2d`` whose ``in_channels`` is read from its first input."""
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ``ConvTranspose3d`` whose ``in_channels`` is read from its first input."""
    cls_to_become = ConvTranspose3d
