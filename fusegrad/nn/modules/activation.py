"""Activation modules: thin wrappers over ``nn.functional``."""
from __future__ import annotations

from typing import Optional

from ...runtime.factory import full
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init as nn_init
from ..module import Module
from ..parameter import Parameter


def _inplace_str(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


def _with_inplace(text: str, inplace: bool) -> str:
    """``text`` followed by ``, inplace=True`` when ``inplace`` (PyTorch's extra_repr form)."""
    return text + (", inplace=True" if inplace else "")


class _Elementwise(Module):
    """An activation whose forward is ``fn(input, **options)``; ``options`` are its constructor arguments."""

    fn = None  # the functional form, set by each subclass

    def forward(self, input: Tensor) -> Tensor:
        return type(self).fn(input, **self._options())

    def _options(self) -> dict:
        return {}


class _InplaceElementwise(_Elementwise):
    """An elementwise activation whose one option is ``inplace``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def _options(self) -> dict:
        return {"inplace": self.inplace}

    def extra_repr(self) -> str:
        return _inplace_str(self.inplace)


class ReLU(_InplaceElementwise):
    """``max(x, 0)``."""

    fn = staticmethod(F.relu)


class LeakyReLU(Module):
    """``x`` where positive, ``negative_slope * x`` elsewhere."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return _with_inplace(f"negative_slope={self.negative_slope}", self.inplace)


class _AlphaElementwise(_Elementwise):
    """An elementwise activation with options ``alpha`` and ``inplace``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def _options(self) -> dict:
        return {"alpha": self.alpha, "inplace": self.inplace}

    def extra_repr(self) -> str:
        return _with_inplace(f"alpha={self.alpha}", self.inplace)


class ELU(_AlphaElementwise):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""

    fn = staticmethod(F.elu)


class SiLU(_InplaceElementwise):
    """``x * sigmoid(x)``."""

    fn = staticmethod(F.silu)


class GELU(Module):
    """Gaussian error linear unit; ``approximate`` is 'none' (erf) or 'tanh'."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """Logistic sigmoid."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Softmax(Module):
    """Softmax along ``dim``."""

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``."""

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class SELU(_InplaceElementwise):
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""

    fn = staticmethod(F.selu)


class CELU(_AlphaElementwise):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    fn = staticmethod(F.celu)


class Mish(_InplaceElementwise):
    """``x * tanh(softplus(x))``."""

    fn = staticmethod(F.mish)


class Hardtanh(_Elementwise):
    """``x`` clamped to ``[min_val, max_val]``."""

    fn = staticmethod(F.hardtanh)

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def _options(self) -> dict:
        return {"min_val": self.min_val, "max_val": self.max_val, "inplace": self.inplace}

    def extra_repr(self) -> str:
        return _with_inplace(f"min_val={self.min_val}, max_val={self.max_val}", self.inplace)


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_str(self.inplace)


class Hardsigmoid(_InplaceElementwise):
    """``relu6(x + 3) / 6``."""

    fn = staticmethod(F.hardsigmoid)


class Hardswish(_InplaceElementwise):
    """``x * relu6(x + 3) / 6``."""

    fn = staticmethod(F.hardswish)


class Softsign(_Elementwise):
    """``x / (1 + |x|)``."""

    fn = staticmethod(F.softsign)


class Tanhshrink(_Elementwise):
    """``x - tanh(x)``."""

    fn = staticmethod(F.tanhshrink)


class GLU(Module):
    """``a * sigmoid(b)`` with ``a, b`` the halves of the input along ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x, dim)``."""

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """``x`` where positive, a learned slope times ``x`` elsewhere (one slope, or one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))

    def reset_parameters(self) -> None:
        nn_init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class LogSigmoid(_Elementwise):
    """``log(sigmoid(x))``."""

    fn = staticmethod(F.logsigmoid)


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) at each position."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3, _stacklevel=5)


class Threshold(_Elementwise):
    """``x`` where ``x > threshold``, ``value`` elsewhere."""

    fn = staticmethod(F.threshold)

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def _options(self) -> dict:
        return {"threshold": self.threshold, "value": self.value, "inplace": self.inplace}

    def extra_repr(self) -> str:
        return _with_inplace(f"threshold={self.threshold}, value={self.value}", self.inplace)


class _Shrink(_Elementwise):
    """A shrinkage activation with the one option ``lambd``."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def _options(self) -> dict:
        return {"lambd": self.lambd}

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """``x`` where ``|x| > lambd``, 0 elsewhere."""

    fn = staticmethod(F.hardshrink)


class Softshrink(_Shrink):
    """``x`` moved ``lambd`` towards 0, 0 within ``lambd`` of it."""

    fn = staticmethod(F.softshrink)


class RReLU(Module):
    """Randomized leaky ReLU: in training each negative element's slope is drawn from U(lower, upper);
    in evaluation the slope is their mean."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return _with_inplace(f"lower={self.lower}, upper={self.upper}", self.inplace)


# PyTorch defines MultiheadAttention in this module, and model files import it from here
from .attention import MultiheadAttention  # noqa: E402,F401
