"""Adamax: Adam with the infinity norm in place of the second moment."""
from __future__ import annotations

from typing import Optional, Tuple

from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from ._checks import check_hyper
from .optimizer import Optimizer, ParamsT


class Adamax(Optimizer):
    """PyTorch's Adamax: ``m = lerp(m, g, 1 - beta1)``, ``u = max(beta2 * u, |g| + eps)``,
    ``p -= lr / (1 - beta1^t) * m / u``."""

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: Optional[bool] = None, *,
                 maximize: bool = False, differentiable: bool = False, capturable: bool = False) -> None:
        check_hyper(lr, eps, weight_decay, betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            maximize = guarded_value(group, "maximize")
            for p, h in self._params_and_hyper(group, ("lr", "beta1", "beta2", "eps", "weight_decay")):
                state = self._lazy_state(p, ("exp_avg", "exp_inf"))
                step = self._count(state["step"])
                g = self._decayed_grad(p, h, maximize, weight_decay)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(g, 1 - h["beta1"])
                exp_inf.copy_(O.maximum(O.mul(exp_inf, h["beta2"]), O.add(O.abs(g), h["eps"])))
                clr = h["lr"] / (1 - h["beta1"] ** step)
                p.addcdiv_(exp_avg, exp_inf, value=-clr)
