"""Rprop: resilient backpropagation, per-coordinate step sizes driven by gradient signs."""
from __future__ import annotations

from typing import Optional, Tuple

from ..runtime import ops as O
from ..runtime.factory import full_like, tensor
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from ..tracer.live import guarded_value, live_number
from ..tracer.trace import capturing
from .optimizer import Optimizer, ParamsT


class Rprop(Optimizer):
    """PyTorch's Rprop: where ``g * prev > 0`` the step size grows by ``etaplus``, where it
    is ``< 0`` it shrinks by ``etaminus`` and that coordinate's gradient is zeroed; step
    sizes are clamped to ``step_sizes`` and ``p -= sign(g) * step_size``; ``prev = g``.
    State: ``step``, ``prev`` (zeros) and ``step_size`` (starting at ``lr``)."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, etas: Tuple[float, float] = (0.5, 1.2),
                 step_sizes: Tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: Optional[bool] = None, maximize: bool = False, differentiable: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    @no_grad()
    def _update(self) -> None:
        live = capturing()
        for group in self.param_groups:
            maximize = guarded_value(group, "maximize")
            cache: dict = {}
            for p in self._params_with_grad(group):
                if p.dtype not in cache:
                    dt = p._data.dtype
                    vals = [live_number(group, key, i, dtype=dt) for key in ("etas", "step_sizes") for i in (0, 1)]
                    cache[p.dtype] = vals if live else [float(v) for v in vals]
                etaminus, etaplus, step_size_min, step_size_max = cache[p.dtype]
                state = self.state[p]
                if not state:
                    state["step"] = tensor(0.0)
                    state["prev"] = full_like(p, 0.0)
                    state["step_size"] = full_like(p, float(group["lr"]))
                g = O.neg(p.grad) if maximize else p.grad
                self._count(state["step"])
                prev, step_size = state["prev"], state["step_size"]
                prod = O.mul(g, prev)
                pos, neg = O.gt(prod, 0), O.lt(prod, 0)
                one = O.ones_of(p)
                factor = O.where(pos, O.mul(one, etaplus), O.where(neg, O.mul(one, etaminus), one))
                step_size.mul_(factor)
                step_size.copy_(O.clamp(step_size, step_size_min, step_size_max))
                g = O.where(neg, 0.0, g)
                p.addcmul_(O.to(g.sign(), p.dtype), step_size, value=-1)
                prev.copy_(g)
