"""Adadelta: steps scaled by the ratio of running RMS of updates and of gradients."""
from __future__ import annotations

from typing import Optional

from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from ._checks import check_hyper
from .optimizer import Optimizer, ParamsT


class Adadelta(Optimizer):
    """PyTorch's Adadelta: ``v = rho * v + (1 - rho) * g^2``,
    ``d = sqrt(u + eps) / sqrt(v + eps) * g``, ``u = rho * u + (1 - rho) * d^2``,
    ``p -= lr * d``."""

    def __init__(self, params: ParamsT, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: Optional[bool] = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        check_hyper(lr, eps, weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            maximize = guarded_value(group, "maximize")
            for p, h in self._params_and_hyper(group, ("lr", "rho", "eps", "weight_decay")):
                state = self._lazy_state(p, ("square_avg", "acc_delta"))
                self._count(state["step"])
                g = self._decayed_grad(p, h, maximize, weight_decay)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(h["rho"]).addcmul_(g, g, value=1 - h["rho"])
                std = O.sqrt(O.add(square_avg, h["eps"]))
                delta = O.mul(O.div(O.sqrt(O.add(acc_delta, h["eps"])), std), g)
                acc_delta.mul_(h["rho"]).addcmul_(delta, delta, value=1 - h["rho"])
                O.muladd_(p, delta, -h["lr"])
