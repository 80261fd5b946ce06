"""More activations of ``nn.functional`` (re-exported there), each a composition of primitives: the
in-place forms (``relu_``, ``elu_``, ...), shrinkage, thresholds, randomized leaky ReLU, Gumbel softmax;
and the small layers that sit beside them in ``nn.functional`` (``bilinear``, ``local_response_norm``,
``channel_shuffle``, the deprecated ``upsample_*`` spellings, the ``*_with_indices`` pools)."""
from __future__ import annotations

import warnings
from typing import Callable, Optional

from ..ir import dtypes as D
from ..runtime import ops as O
from ..runtime.autocast_state import lower_precision
from ..runtime.factory import arange, rand
from ..runtime.ops import named
from ..runtime.tensor import Tensor
from . import functional as F
from .functional_losses import SCALAR_TYPE_NAMES
from .opmath import downcast, upcast
from ..tracer.trace import user_stacklevel

__all__ = ["selu", "celu", "mish", "hardtanh", "relu6", "hardswish", "hardsigmoid", "prelu", "glu", "softsign",
           "tanhshrink", "softmin",
           "relu_", "elu_", "leaky_relu_", "hardtanh_", "celu_", "selu_", "threshold", "threshold_", "rrelu",
           "rrelu_", "hardshrink", "softshrink", "gumbel_softmax", "bilinear", "local_response_norm",
           "channel_shuffle", "upsample_nearest", "upsample_bilinear", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inplace_named(input: Tensor, fn: Callable[[Tensor], Tensor], name: str) -> Tensor:
    """Write ``fn(input)`` into ``input``; its node takes the name PyTorch gives the in-place
    op's (``EluBackward1`` where the out-of-place one is ``EluBackward0``)."""
    return O.inplace(input, lambda x: named(fn(x), name))


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    if inplace:
        return _inplace_named(input, selu, "EluBackward1")
    return named(O.mul(F.elu(input, _SELU_ALPHA), _SELU_SCALE), "EluBackward0")


def selu_(input: Tensor) -> Tensor:
    """In-place ``selu``."""
    return selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    if inplace:
        return _inplace_named(input, lambda x: celu(x, alpha), "CeluBackward1")
    out = O.mul(F.elu(O.div(input, alpha)), alpha) if alpha != 1.0 else F.elu(input)
    return named(out, "CeluBackward0")


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``celu``."""
    return celu(input, alpha, inplace=True)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    if inplace:
        return O.inplace(input, mish)
    x = upcast(input)
    return downcast(named(O.mul(x, O.tanh(F.softplus(x))), "MishBackward0"), input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``; the gradient passes strictly inside, as PyTorch's."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return O.inplace(input, lambda x: hardtanh(x, min_val, max_val))
    out = O.where(O.le(input, min_val), min_val, O.where(O.ge(input, max_val), max_val, input))
    return named(O.to(out, input.dtype), "HardtanhBackward0")


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place ``hardtanh``."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    if inplace:
        return O.inplace(input, hardsigmoid)
    x = upcast(input)
    return downcast(named(O.no_grad_at_nan(x, O.div(relu6(O.add(x, 3.0)), 6.0)), "HardsigmoidBackward0"), input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    if inplace:
        return O.inplace(input, hardswish)
    x = upcast(input)
    # (a NaN gets the gradient 1, PyTorch's for x > 3; the product sees 0 there)
    nan = O.isnan(x)
    finite = O.where(nan, 0.0, x)
    return downcast(named(O.where(nan, x, O.mul(finite, hardsigmoid(finite))), "HardswishBackward0"), input)


@lower_precision
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where positive, ``weight * x`` elsewhere; ``weight`` has one slope or one per channel (dim 1)."""
    if weight.numel() == 1:   # one slope: the result keeps the input's shape (a 0-d input stays 0-d)
        weight = O.reshape(weight)
    else:
        channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim == 1 else 1)
        if weight.ndim != 1 or weight.shape[0] != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channels}.")
        if input.ndim >= 2:
            weight = O.reshape(weight, channels, *([1] * (input.ndim - 2)))
    return named(O.where(O.gt(input, 0), input, O.mul(weight, input)), "PreluKernelBackward0")


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a * sigmoid(b)`` with ``a, b`` the two halves of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size {n}")
    a, b = O.chunk(input, 2, dim)
    return named(O.mul(a, O.sigmoid(b)), "GluBackward0")


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return O.div(input, O.add(O.abs(input), 1.0))


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return O.sub(input, O.tanh(input))


def softmin(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``softmax(-x, dim)``."""
    if dim is None:
        dim = F._softmax_dim("softmin", input.ndim)
    return O.softmax(O.neg(input), dim, dtype=dtype)


# ---------------------------------------------------------------- in-place forms of nn.functional's activations
def relu_(input: Tensor) -> Tensor:
    """In-place ``relu``."""
    return input.relu_()


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place ``elu``."""
    return _inplace_named(input, lambda x: F.elu(x, alpha), "EluBackward1")


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place ``leaky_relu``."""
    return _inplace_named(input, lambda x: F.leaky_relu(x, negative_slope), "LeakyReluBackward1")


# ---------------------------------------------------------------- thresholds, shrinkage, randomized leaky ReLU
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, ``value`` elsewhere."""
    if inplace:
        return threshold_(input, threshold, value)
    return _threshold(input, threshold, value)


def _threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """The out-of-place threshold (inside ``threshold``, that name is its argument's)."""
    # (written as PyTorch's x <= threshold ? value : x, so that a NaN stays NaN)
    return named(O.to(O.where(O.le(input, threshold), value, input), input.dtype), "ThresholdBackward0")


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place ``threshold``."""
    return _inplace_named(input, lambda x: _threshold(x, threshold, value), "ThresholdBackward1")


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, 0 elsewhere."""
    return named(O.where(_within(input, lambd), 0.0, input), "HardshrinkBackward0")


def _within(x: Tensor, lambd: float) -> Tensor:
    """``-lambd <= x <= lambd``: false for NaN, which the shrinks keep (as PyTorch's)."""
    return O.logical_and(O.ge(x, -lambd), O.le(x, lambd))


# the floating dtypes' largest values, as PyTorch's softshrink error prints them
_LARGEST = {D.float16: "65504", D.bfloat16: "3.38953e+38", D.float32: "3.40282e+38", D.float64: "1.79769e+308"}


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, {_LARGEST.get(input.dtype, 'inf')}] for input dtype "
                           f"{SCALAR_TYPE_NAMES.get(input.dtype, input.dtype.name)}, but found {lambd:g}")
    out = O.where(_within(input, lambd), 0.0, O.where(O.gt(input, lambd), O.sub(input, lambd), O.add(input, lambd)))
    return named(out, "SoftshrinkBackward0")


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element in training, and is
    ``(lower + upper) / 2`` in evaluation."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if inplace:
        return _inplace_named(input, lambda x: _rrelu(x, lower, upper, training), "RreluWithNoiseBackward1")
    return named(_rrelu(input, lower, upper, training), "RreluWithNoiseBackward0")


def _rrelu(input: Tensor, lower: float, upper: float, training: bool) -> Tensor:
    if not training:
        return O.where(O.gt(input, 0), input, O.mul(input, (lower + upper) / 2))
    slope = O.add(O.mul(rand(input.shape, dtype=input.dtype, device=input.device), upper - lower), lower)
    # PyTorch draws the slope where x <= 0: a zero input takes the drawn slope as its derivative
    return O.where(O.gt(input, 0), input, O.mul(input, slope))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place ``rrelu``."""
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """``softmax((logits + g) / tau)`` with ``g`` Gumbel(0, 1) noise; ``hard``: the one-hot of its argmax
    in the forward pass and the soft sample's gradient (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=user_stacklevel())
    u = rand(logits.shape, dtype=logits.dtype, device=logits.device)
    # u in [0, 1): -log(u) is in (0, inf], so the noise is finite or -inf (a class never drawn), never +inf
    gumbels = O.neg(O.log(O.neg(O.log(u))))
    y_soft = O.softmax(O.div(O.add(logits, gumbels), tau), dim)
    if not hard:
        return y_soft
    d = dim % logits.ndim
    positions = O.reshape(arange(logits.shape[d], device=logits.device),
                          *[-1 if i == d else 1 for i in range(logits.ndim)])
    y_hard = O.to(O.eq(O.argmax(y_soft, d, keepdim=True), positions), logits.dtype)
    return O.add(O.sub(y_hard, y_soft.detach()), y_soft)
