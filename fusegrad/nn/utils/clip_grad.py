"""Gradient clipping by total norm and by value."""
from __future__ import annotations

import warnings
from typing import Iterable, List, Optional, Union

from ...runtime import ops as O
from ...runtime.factory import tensor
from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor

_Params = Union[Tensor, Iterable[Tensor]]


def _grads(parameters: _Params) -> List[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _vector_norm(x: Tensor, norm_type: float) -> Tensor:
    if norm_type == float("inf"):
        return O.amax(O.abs(x))
    return O.norm(O.reshape(x, -1), norm_type)


@no_grad()
def get_total_norm(tensors: _Params, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: Optional[bool] = None) -> Tensor:
    """The ``norm_type`` norm of the norms of ``tensors`` (as if all were one vector)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    total = _vector_norm(O.stack([_vector_norm(g, norm_type) for g in tensors]), norm_type)
    if error_if_nonfinite and not bool(O.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


@no_grad()
def clip_grads_with_norm_(parameters: _Params, max_norm: float, total_norm: Tensor,
                          foreach: Optional[bool] = None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``."""
    coef = O.clamp(O.div(float(max_norm), O.add(total_norm, 1e-6)), max=1.0)
    for g in _grads(parameters):
        g.mul_(O.to(coef, g.dtype))


@no_grad()
def clip_grad_norm_(parameters: _Params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: Optional[bool] = None) -> Tensor:
    """Scale the gradients in place so that their joint ``norm_type`` norm is at most
    ``max_norm``; returns that norm (before clipping)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    if not grads:
        return tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_norm(parameters: _Params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: Optional[bool] = None) -> Tensor:
    """Deprecated name of ``clip_grad_norm_`` (it warns, as PyTorch's)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters: _Params, clip_value: float, foreach: Optional[bool] = None) -> None:
    """Clamp every gradient elementwise into ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)
