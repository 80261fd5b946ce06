"""ASGD: averaged stochastic gradient descent."""
from __future__ import annotations

from typing import Optional

from ..runtime import ops as O
from ..runtime.factory import tensor, zeros_like
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from ..tracer.live import guarded_value
from .optimizer import Optimizer, ParamsT


class ASGD(Optimizer):
    """PyTorch's ASGD: ``p *= 1 - lambd * eta``, ``p -= eta * g``; the average ``ax``
    follows ``p`` (``ax += mu * (p - ax)``, a copy while ``mu == 1``); then
    ``eta = lr / (1 + lambd * lr * step) ** alpha`` and ``mu = 1 / max(1, step - t0)``.
    State: ``step``, ``eta``, ``mu`` (0-d) and ``ax``."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: Optional[bool] = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            maximize = guarded_value(group, "maximize")
            for p, h in self._params_and_hyper(group, ("lr", "lambd", "alpha", "t0", "weight_decay")):
                state = self.state[p]
                if not state:
                    state["step"] = tensor(0.0)
                    state["eta"] = tensor(float(group["lr"]))
                    state["mu"] = tensor(1.0)
                    state["ax"] = zeros_like(p)
                step = self._count(state["step"])
                g = self._decayed_grad(p, h, maximize, weight_decay)
                eta, mu, ax = state["eta"], state["mu"], state["ax"]
                lr, lambd, alpha = h["lr"], h["lambd"], h["alpha"]
                if isinstance(step, float):
                    eta_value = eta.item()
                    p.mul_(1 - lambd * eta_value)
                    p.add_(g, alpha=-eta_value)
                    if mu.item() != 1:
                        ax.add_(O.mul(O.sub(p, ax), mu))
                    else:
                        ax.copy_(p)
                    eta.copy_(tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                    mu.copy_(tensor(1 / max(1, step - h["t0"])))
                else:  # traced: the counts are values of the graph (PyTorch's capturable path)
                    e = O.to(eta, p.dtype)
                    p.mul_(O.rsub(O.mul(e, lambd), 1))
                    O.muladd_(p, g, -e)
                    ax.add_(O.mul(O.sub(p, ax), O.to(mu, p.dtype)))
                    s = O.to(step, p.dtype)
                    eta.copy_(O.div(lr, O.pow(O.add(O.mul(O.mul(s, lambd), lr), 1), alpha)))
                    mu.copy_(O.div(1.0, O.clamp_min(O.sub(s, h["t0"]), 1.0)))
