"""Adagrad: per-coordinate steps scaled by the root of the summed squared gradients."""
from __future__ import annotations

from typing import Optional

from ..runtime import ops as O
from ..runtime.factory import full_like, tensor
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from ._checks import check_hyper
from .optimizer import Optimizer, ParamsT


class Adagrad(Optimizer):
    """PyTorch's Adagrad: ``s += g^2``, ``p -= clr * g / (sqrt(s) + eps)`` with
    ``clr = lr / (1 + (step - 1) * lr_decay)``. The state exists from construction
    (``sum`` starts at ``initial_accumulator_value``), as in PyTorch. A complex parameter is
    updated as pairs of real numbers; a parameter without state at a step (added by
    ``add_param_group``, or the state reset) gets it then, from the defaults, as PyTorch's."""

    supports_complex = True
    supports_sparse = True

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: Optional[bool] = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: Optional[bool] = None) -> None:
        check_hyper(lr, eps, weight_decay, lr_decay=lr_decay, initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group["initial_accumulator_value"])

    def _init_state(self, p, v: float) -> None:
        state = self.state[p]
        state["step"] = tensor(0.0)
        state["sum"] = full_like(p, complex(v, v) if p.is_complex() else v)  # (a complex one's parts each start at v)

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            maximize = guarded_value(group, "maximize")
            for p, h in self._params_and_hyper(group, ("lr", "lr_decay", "eps", "weight_decay")):
                state = self.state[p]
                if not state:  # added later (add_param_group) or state reset: as PyTorch, from the defaults
                    self._init_state(p, self.defaults["initial_accumulator_value"])
                step = self._count(state["step"])
                g = self._decayed_grad(p, h, maximize, weight_decay)
                clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
                p, g, acc = self.as_real(p, g, state["sum"])
                acc.addcmul_(g, g, value=1)
                std = O.add(O.sqrt(acc), h["eps"])
                p.addcdiv_(g, std, value=-clr)
