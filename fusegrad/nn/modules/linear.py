"""Identity, Linear, LazyLinear and Bilinear."""
from __future__ import annotations

import math
from typing import Any

from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import UninitializedParameter
from .default_init import kaiming_reset_, register_weight_and_bias


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


class LazyLinear(Linear):
    """A ``Linear`` whose ``in_features`` is read from its first input (``input.shape[-1]``):
    the parameters are ``UninitializedParameter``s until then, materialized in place and
    initialized as ``Linear``'s; the module then becomes a ``Linear``."""
    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def has_uninitialized_params(self) -> bool:
        return any(isinstance(p, UninitializedParameter) for p in (self.weight, self.bias))

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """Materialize the parameters for ``input``'s last dimension and initialize them."""
        from ...ir.graph import Var
        from ...tracer.trace import user_frame
        if type(input._data) is Var:  # (compile's segments run it outside the trace; other traces break)
            with input._data.trace.eagerly(f"LazyLinear at {user_frame()} initializes its parameters on its first "
                                           "call, which runs eagerly"):
                self._materialize(int(input.shape[-1]))
        else:
            self._materialize(int(input.shape[-1]))

    def _materialize(self, in_features: int) -> None:
        self.in_features = in_features
        self.weight.materialize((self.out_features, self.in_features))
        if self.bias is not None:
            self.bias.materialize((self.out_features,))
        self.reset_parameters()

    def forward(self, input: Tensor) -> Tensor:
        if self.has_uninitialized_params():
            self.initialize_parameters(input)
            self.__class__ = self.cls_to_become
        return Linear.forward(self, input)


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
