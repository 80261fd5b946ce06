"""LayerNorm, GroupNorm, RMSNorm and LocalResponseNorm."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ...runtime.factory import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import functional_norm as FN
from .. import init
from ..module import Module
from ..parameter import Parameter
from .affine import register_affine, reset_affine


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` dims, with an optional learned
    elementwise scale (ones) and shift (zeros)."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        register_affine(self, self.normalized_shape, elementwise_affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_affine(self, self.elementwise_affine)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalizes each sample over groups of channels, with a learned per-channel scale
    (ones) and shift (zeros)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        register_affine(self, num_channels, affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_affine(self, self.affine)

    def forward(self, input: Tensor) -> Tensor:
        return FN.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps)`` over the trailing ``normalized_shape`` dims, with a learned
    elementwise scale (ones)."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: Optional[float] = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return FN.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Divides each channel by ``(k + alpha * mean of x^2 over size neighbouring channels) ** beta``."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
