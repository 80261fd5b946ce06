"""RMSprop, with PyTorch's momentum and centered variants."""
from __future__ import annotations

from typing import Optional

from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from ._checks import check_hyper
from .optimizer import Optimizer, ParamsT


class RMSprop(Optimizer):
    """PyTorch's RMSprop: ``v = alpha * v + (1 - alpha) * g^2``; centered subtracts the
    square of the running mean of ``g``; ``p -= lr * g / (sqrt(v) + eps)``, or through a
    momentum buffer ``b = momentum * b + g / (sqrt(v) + eps)``. A complex parameter is updated
    as pairs of real numbers."""

    supports_complex = True

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: Optional[bool] = None, maximize: bool = False, differentiable: bool = False) -> None:
        check_hyper(lr, eps, weight_decay, momentum=momentum, alpha=alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                                      weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            momentum, weight_decay = group["momentum"], group["weight_decay"]  # zero-ness guarded (tracer.live)
            centered, maximize = guarded_value(group, "centered"), guarded_value(group, "maximize")
            buffers = ("square_avg",) + (("momentum_buffer",) if momentum > 0 else ()) \
                + (("grad_avg",) if centered else ())
            for p, h in self._params_and_hyper(group, ("lr", "alpha", "eps", "weight_decay", "momentum")):
                state = self._lazy_state(p, buffers)
                g = self._decayed_grad(p, h, maximize, weight_decay)
                self._count(state["step"])
                square_avg, grad_avg, buf = (state.get(k) for k in ("square_avg", "grad_avg", "momentum_buffer"))
                if p._data.dtype.kind == "c":
                    p, g, square_avg, grad_avg, buf = self.as_real(p, g, square_avg, grad_avg, buf)
                square_avg.mul_(h["alpha"]).addcmul_(g, g, value=1 - h["alpha"])
                if centered:
                    grad_avg.lerp_(g, 1 - h["alpha"])
                    avg = O.sqrt(square_avg.addcmul(grad_avg, grad_avg, value=-1))
                else:
                    avg = O.sqrt(square_avg)
                avg = O.add(avg, h["eps"])
                if momentum > 0:
                    buf.mul_(h["momentum"]).addcdiv_(g, avg)
                    O.muladd_(p, buf, -h["lr"])
                else:
                    p.addcdiv_(g, avg, value=-h["lr"])
