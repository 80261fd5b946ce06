"""More activations of ``nn.functional`` (re-exported there), each a composition of primitives."""
from __future__ import annotations


from ..runtime import ops as O
from ..runtime.ops import named
from ..runtime.tensor import Tensor
from . import functional as F

__all__ = ["selu", "celu", "mish", "hardtanh", "relu6", "hardswish", "hardsigmoid", "prelu", "glu", "softsign",
           "tanhshrink", "softmin"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    if inplace:
        return O.inplace(input, selu)
    return named(O.mul(F.elu(input, _SELU_ALPHA), _SELU_SCALE), "EluBackward0")


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if inplace:
        return O.inplace(input, lambda x: celu(x, alpha))
    return O.mul(F.elu(O.div(input, alpha)), alpha) if alpha != 1.0 else F.elu(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    if inplace:
        return O.inplace(input, mish)
    return named(O.mul(input, O.tanh(F.softplus(input))), "MishBackward0")


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``; the gradient passes strictly inside, as PyTorch's."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if inplace:
        return O.inplace(input, lambda x: hardtanh(x, min_val, max_val))
    out = O.where(O.le(input, min_val), min_val, O.where(O.ge(input, max_val), max_val, input))
    return named(O.to(out, input.dtype), "HardtanhBackward0")


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    if inplace:
        return O.inplace(input, hardsigmoid)
    return named(O.div(relu6(O.add(input, 3.0)), 6.0), "HardsigmoidBackward0")


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    if inplace:
        return O.inplace(input, hardswish)
    return named(O.mul(input, hardsigmoid(input)), "HardswishBackward0")


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
        dim = F._softmax_dim("softmin", input.ndim, _stacklevel)
    return O.softmax(O.neg(input), dim, dtype=dtype)


