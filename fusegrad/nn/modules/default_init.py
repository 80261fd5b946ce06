"""The weight-and-optional-bias parameters of Linear and the conv layers, and PyTorch's default
initialization of them."""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ...runtime.factory import empty
from ...runtime.tensor import Tensor
from .. import init
from ..module import Module
from ..parameter import Parameter


def register_weight_and_bias(module: Module, weight_shape: Sequence[int], out_features: int, bias: bool,
                             dtype=None, device=None) -> None:
    """Registers an uninitialized ``weight`` of ``weight_shape`` and a ``bias`` of ``(out_features,)``,
    or ``bias=None`` when ``bias`` is off, on ``device``."""
    module.weight = Parameter(empty(weight_shape, dtype=dtype, device=device))
    if bias:
        module.bias = Parameter(empty(out_features, dtype=dtype, device=device))
    else:
        module.register_parameter("bias", None)


def kaiming_reset_(weight: Tensor, bias: Optional[Tensor], *, zero_bias_without_fan_in: bool) -> None:
    """PyTorch's default: kaiming_uniform_(a=sqrt(5)) weight, U(+-1/sqrt(fan_in)) bias. With a fan_in of 0
    Linear draws the bias from U(0, 0) and the conv layers leave it as it is, as PyTorch's do."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is None:
        return
    fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
    if fan_in > 0:
        bound = 1 / math.sqrt(fan_in)
        init.uniform_(bias, -bound, bound)
    elif zero_bias_without_fan_in:
        init.uniform_(bias, 0, 0)
