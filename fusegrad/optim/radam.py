"""RAdam: Adam with the variance of the adaptive learning rate rectified."""
from __future__ import annotations

from typing import Optional, Tuple

from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from ._checks import check_hyper
from .optimizer import Optimizer, ParamsT


class RAdam(Optimizer):
    """PyTorch's RAdam: with ``rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)``, the step is
    the bias-corrected first moment times ``lr``, and, once ``rho_t > 5``, times the
    rectification ``r_t`` and ``sqrt(1 - beta2^t) / (sqrt(v) + eps)``."""

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: Optional[bool] = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        check_hyper(lr, eps, weight_decay, betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            maximize = guarded_value(group, "maximize")
            decoupled = guarded_value(group, "decoupled_weight_decay")
            for p, h in self._params_and_hyper(group, ("lr", "beta1", "beta2", "eps", "weight_decay")):
                lr, beta1, beta2 = h["lr"], h["beta1"], h["beta2"]
                state = self._lazy_state(p, ("exp_avg", "exp_avg_sq"))
                step = self._count(state["step"])
                g = self._decayed_grad(p, h, maximize, weight_decay, decoupled)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(g, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                corrected = O.div(exp_avg, bias_correction1)
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2

                def rect_times_adaptive(rho_t=rho_t):
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    return O.mul(O.div(bias_correction2 ** 0.5, O.add(O.sqrt(exp_avg_sq), h["eps"])), rect)

                if isinstance(step, float):
                    update = rect_times_adaptive() if rho_t > 5.0 else 1.0
                else:  # traced: the step count is a value of the graph, so the branch is a select
                    update = O.where(O.gt(rho_t, 5.0), rect_times_adaptive(O.maximum(rho_t, 5.0)), 1.0)
                p.sub_(O.mul(O.mul(corrected, lr), update))
