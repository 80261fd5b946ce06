"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

from typing import Optional

from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..tracer.live import guarded_value
from .optimizer import Optimizer, ParamsT


class SGD(Optimizer):
    """PyTorch's SGD: ``g = grad + weight_decay * p``; with momentum,
    ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first step) and
    ``g = g + momentum * buf`` (Nesterov) or ``g = buf``; then ``p -= lr * g`` (complex
    parameters too: the update is linear)."""

    supports_complex = True
    supports_sparse = True

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: Optional[bool] = None, differentiable: bool = False, fused: Optional[bool] = None) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            # branches on zero-ness: under compile the live numbers guard it (tracer.live)
            momentum, weight_decay = group["momentum"], group["weight_decay"]
            nesterov, maximize = guarded_value(group, "nesterov"), guarded_value(group, "maximize")
            hyper: dict = {}
            for p in self._params_with_grad(group):
                h = self._hyper(group, ("lr", "momentum", "dampening", "weight_decay"), p, hyper)
                g = self.dense_grad(p, weight_decay, "add(sparse, dense) is not supported. Use add(dense, sparse) "
                                    "instead.")
                g = O.neg(g) if maximize else g
                if weight_decay != 0:
                    g = O.muladd(p, h["weight_decay"], g)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = O.clone(g).detach()
                    else:
                        damped = 1 - h["dampening"]
                        O.muladd_(buf.mul_(h["momentum"]), g, damped)
                    g = O.muladd(buf, h["momentum"], g) if nesterov else buf
                O.muladd_(p, g, -h["lr"])
