"""Identity, Linear, LazyLinear and Bilinear."""
from __future__ import annotations

import math
from typing import Any, Dict

from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import UninitializedParameter
from .default_init import kaiming_reset_, register_weight_and_bias
from .lazy import _LazyLayer


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        register_weight_and_bias(self, (out_features, in_features), out_features, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform_(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias."""
        kaiming_reset_(self.weight, self.bias, zero_bias_without_fan_in=True)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class LazyLinear(_LazyLayer, Linear):
    """A ``Linear`` whose ``in_features`` is read from its first input (``input.shape[-1]``):
    the parameters are ``UninitializedParameter``s until then, materialized in place and
    initialized as ``Linear``'s; the module then becomes a ``Linear``."""
    cls_to_become = Linear
    _inferred = "in_features"

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False)  # (no bias: none made just to be replaced)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _size_from(self, input: Tensor) -> int:
        return int(input.shape[-1])

    def _lazy_shapes(self) -> Dict[str, tuple]:
        return {"weight": (self.out_features, self.in_features), "bias": (self.out_features,)}


class Bilinear(Module):
    """``y = x1^T A x2 + b`` per output feature, with weight (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        register_weight_and_bias(self, (out_features, in1_features, in2_features), out_features, bias, dtype,
                                 device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: weight and bias from U(+-1/sqrt(in1_features))."""
        if self.in1_features <= 0:
            raise ValueError(f"in1_features must be > 0, but got (in1_features={self.in1_features})")
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
