"""``nn.init``: in-place initializers with PyTorch's distributions and gain/fan rules."""
from __future__ import annotations

import math
import warnings
from typing import Callable, Optional, Tuple

import numpy as np

from ..runtime import ops as O
from ..runtime.factory import arange, eye as _identity, rand, randn, tensor as _tensor
from ..runtime.grad_mode import no_grad
from ..runtime.sorting import argsort
from ..runtime.tensor import Tensor
from ..tracer.trace import user_stacklevel

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """The recommended gain for ``nonlinearity`` (``param`` is leaky_relu's slope)."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> Tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from N(mean, std**2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    with no_grad():
        return tensor.zero_()


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """He uniform: U(-b, b) with ``b = gain * sqrt(3 / fan)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    """He normal: N(0, std**2) with ``std = gain / sqrt(fan)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix times ``gain``: the Q of the QR factorization of a standard
    normal (rows, numel / rows) matrix (transposed when wider than tall), its columns' signs those of
    R's diagonal, as PyTorch's (Saxe et al. 2013); dims after the first are flattened."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = randn(rows, cols, dtype=tensor.dtype, generator=generator)
        q = _orthonormal_columns(flat.t() if rows < cols else flat)
        if rows < cols:
            q = q.t()
        return tensor.copy_(O.mul(O.reshape(q, tensor.shape), gain))


def _orthonormal_columns(a: Tensor) -> Tensor:
    """The (m, n) Q of ``a = QR`` (m >= n), its columns multiplied by the signs of R's diagonal
    (as PyTorch's ``orthogonal_`` does after ``linalg.qr``): LAPACK's Householder QR through
    NumPy, since an initializer needs no gradient."""
    q, r = np.linalg.qr(a.numpy())
    return _tensor(q * np.sign(np.diag(r)), dtype=a.dtype)


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Fill with draws from N(mean, std**2) truncated to [a, b], by rejection as PyTorch's: normal draws
    redrawn outside [a, b] when that interval holds over 30% of the mass, otherwise uniform proposals
    on [a, b] accepted with the normal density's ratio to its peak."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=user_stacklevel())
    shape, dtype = tuple(tensor.shape), tensor.dtype
    with no_grad():
        if _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std) > 0.3:
            # the bounds in the tensor's dtype, so that a draw rounding onto one is kept
            lo, hi = (_tensor(v, dtype=dtype).item() for v in (a, b))

            def draw() -> Tensor:
                return O.add(O.mul(randn(shape, dtype=dtype, generator=generator), std), mean)

            result = draw()
            while True:
                redo = O.logical_or(O.lt(result, lo), O.gt(result, hi))
                if not bool(O.any(redo)):
                    break
                result = O.where(redo, draw(), result)
        else:
            mode = max(a, min(mean, b))
            log_peak = -0.5 * ((mode - mean) / std) ** 2

            def propose() -> Tuple[Tensor, Tensor]:
                """Candidates on [a, b] and whether each is rejected."""
                cand = O.add(O.mul(rand(shape, dtype=dtype, generator=generator), b - a), a)
                log_ratio = O.sub(O.mul(O.square(O.div(O.sub(cand, mean), std)), -0.5), log_peak)
                return cand, O.gt(O.log(rand(shape, dtype=dtype, generator=generator)), log_ratio)

            result, pending = propose()
            while bool(O.any(pending)):
                cand, rejected = propose()
                result = O.where(pending, cand, result)
                pending = O.logical_and(pending, rejected)
        return tensor.copy_(result)


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-d convolution weight with the identity: 1 at the kernel's centre for output
    channel ``g * out_per_group + d`` and input channel ``d`` (each group keeps as many channels as it can)."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_channels, in_channels, *kernel = tensor.shape
    if out_channels % groups:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out_channels // groups
    # output channel o keeps input channel o % per_group (when there is one: the comparison fails otherwise)
    mask = O.eq(O.reshape(O.remainder(arange(out_channels), per_group), -1, 1), O.reshape(arange(in_channels), 1, -1))
    for size in kernel:
        centre = O.eq(arange(size), size // 2)
        mask = O.logical_and(O.unsqueeze(mask, -1), O.reshape(centre, *([1] * mask.ndim), size))
    with no_grad():
        return tensor.copy_(O.to(mask, tensor.dtype))


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-d tensor with the identity matrix (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(_identity(*tensor.shape, dtype=tensor.dtype))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fill a 2-d tensor with N(0, std**2) draws, then zero ``ceil(sparsity * rows)`` randomly chosen
    elements of each column (Martens 2010)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        values = O.mul(randn(rows, cols, dtype=tensor.dtype, generator=generator), std)
        # each column's rows in a random order (ranks of uniform draws): its first num_zeros are zeroed
        ranks = argsort(argsort(rand(rows, cols, generator=generator), 0), 0)
        return tensor.copy_(O.masked_fill(values, O.lt(ranks, num_zeros), 0.0))


def _make_deprecate(meth: Callable) -> Callable:
    """PyTorch's deprecated spelling of ``meth`` without its trailing underscore: warns, then calls it."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning,
                      stacklevel=user_stacklevel())
        return meth(*args, **kwargs)

    deprecated_init.__doc__ = f"Deprecated: use ``nn.init.{new_name}``."
    deprecated_init.__name__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
