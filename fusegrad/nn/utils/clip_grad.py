"""Gradient clipping by total norm and by value."""
from __future__ import annotations

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
def clip_grad_norm_(parameters: _Params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: Optional[bool] = None) -> Tensor:
    """Scale the gradients in place so that their joint ``norm_type`` norm is at most
    ``max_norm``; returns that norm (before clipping)."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return tensor(0.0)
    total = _vector_norm(O.stack([_vector_norm(g, norm_type) for g in grads]), norm_type)
    if error_if_nonfinite and not bool(O.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    coef = O.clamp(O.div(max_norm, O.add(total, 1e-6)), max=1.0)
    for g in grads:
        g.mul_(O.to(coef, g.dtype))
    return total


@no_grad()
def clip_grad_value_(parameters: _Params, clip_value: float, foreach: Optional[bool] = None) -> None:
    """Clamp every gradient elementwise into ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)
