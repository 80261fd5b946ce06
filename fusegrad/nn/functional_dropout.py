"""Channel-wise and alpha dropout of ``nn.functional`` (re-exported there)."""
from __future__ import annotations

import warnings

from ..runtime import ops as O
from ..runtime.factory import rand
from ..runtime.tensor import Tensor
from ..tracer.trace import user_stacklevel

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_NEG = -1.7580993408473766  # -selu's scale * alpha: where SELU saturates


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep(shape, p: float, dtype) -> Tensor:
    """A 0/1 mask of ``shape``, each entry kept with probability ``1 - p``."""
    return O.to(O.lt(rand(shape, dtype=dtype), 1.0 - p), dtype)


def _channel_dropout(input: Tensor, p: float, training: bool, inplace: bool, batched: bool) -> Tensor:
    """Zero whole channels (dim 1, or dim 0 unbatched) with probability ``p``, scaling the rest by ``1/(1-p)``."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    scale = O.mul(_keep(shape, p, input.dtype), 0.0 if p == 1.0 else 1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else O.mul(input, scale)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an ``(N, C, L)`` or ``(C, L)`` input."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(input, p, training, inplace, input.ndim == 3)


def _warn_rank(input: Tensor, spatial: int) -> None:
    """PyTorch's deprecation warning for ``dropout{spatial}d`` given an input of another rank."""
    if input.ndim not in (spatial + 1, spatial + 2):
        name = f"dropout{spatial}d"
        warnings.warn(f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that {name} exists to provide channel-wise dropout on inputs with "
                      f"{spatial} spatial dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      f"{spatial + 1}D or {spatial + 2}D inputs).", stacklevel=user_stacklevel())


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an ``(N, C, H, W)`` or ``(C, H, W)`` input."""
    _warn_rank(input, 2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=user_stacklevel())
    return _channel_dropout(input, p, training, inplace, True)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""
    _warn_rank(input, 3)
    return _channel_dropout(input, p, training, inplace, input.ndim != 4)


def _alpha(input: Tensor, p: float, training: bool, shape) -> Tensor:
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return O.mul(input, 0.0)
    keep = _keep(shape, p, input.dtype)
    a = ((1 - p) * (1 + p * _SELU_NEG ** 2)) ** -0.5
    b = -a * _SELU_NEG * p
    # kept: a * x + b; dropped: a * alpha' + b (SELU's saturation value, so mean and variance are preserved)
    return O.add(O.mul(O.add(O.mul(input, keep), O.mul(O.rsub(keep, 1.0), _SELU_NEG)), a), b)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that keeps SELU's self-normalizing mean and variance."""
    out = _alpha(input, p, training, tuple(input.shape))
    return input.copy_(out) if inplace and out is not input else out


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (dim 1)."""
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    out = _alpha(input, p, training, shape)
    return input.copy_(out) if inplace and out is not input else out
