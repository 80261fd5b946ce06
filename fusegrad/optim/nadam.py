"""NAdam: Adam with Nesterov momentum and a momentum-decay schedule."""
from __future__ import annotations

from typing import Optional, Tuple

from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from ._checks import check_hyper
from .optimizer import Optimizer, ParamsT


class NAdam(Optimizer):
    """PyTorch's NAdam: ``mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))``, the
    running product of the ``mu`` kept in the state; the step mixes the gradient and the
    first moment with weights ``(1 - mu_t) / (1 - prod mu)`` and
    ``mu_{t+1} / (1 - prod mu * mu_{t+1})`` over ``sqrt(v / (1 - beta2^t)) + eps``."""

    def __init__(self, params: ParamsT, lr: float = 2e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: Optional[bool] = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        check_hyper(lr, eps, weight_decay, betas, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            maximize = guarded_value(group, "maximize")
            decoupled = guarded_value(group, "decoupled_weight_decay")
            for p, h in self._params_and_hyper(group, ("lr", "beta1", "beta2", "eps", "weight_decay",
                                                       "momentum_decay")):
                lr, beta1, beta2 = h["lr"], h["beta1"], h["beta2"]
                state = self._lazy_state(p, ("exp_avg", "exp_avg_sq"), mu_product=1.0)
                step = self._count(state["step"])
                g = self._decayed_grad(p, h, maximize, weight_decay, decoupled)
                bias_correction2 = 1 - beta2 ** step
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * h["momentum_decay"])))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * h["momentum_decay"])))
                mu_product_t = state["mu_product"]
                mu_product_t.mul_(mu)
                mu_product = mu_product_t if not isinstance(step, float) else mu_product_t.item()
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(g, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                denom = O.add(O.sqrt(O.div(exp_avg_sq, bias_correction2)), h["eps"])
                p.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
                p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product * mu_next))
