"""Adam (and, with decoupled weight decay, AdamW)."""
from __future__ import annotations

import math
from typing import Optional, Tuple

from ..ir import dtypes as D
from ..ir.graph import Var
from ..runtime import ops as O
from ..runtime.factory import tensor, zeros_like
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from ..tracer.live import guarded_value
from .optimizer import Optimizer, ParamsT


class Adam(Optimizer):
    """PyTorch's Adam: moments ``m = lerp(m, g, 1 - beta1)``,
    ``v = beta2 * v + (1 - beta2) * g * g`` (with amsgrad, the running max of ``v``), then
    ``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``. Weight decay is
    added to the gradient, or with ``decoupled_weight_decay`` (AdamW) applied as
    ``p *= 1 - lr * weight_decay``. A complex parameter is updated as pairs of real numbers."""

    supports_complex = True
    sparse_refusal = "Adam does not support sparse gradients, please consider SparseAdam instead"

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: Optional[bool] = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: Optional[bool] = None,
                 decoupled_weight_decay: bool = False) -> None:
        if not 0.0 <= float(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (all(isinstance(b, float) for b in betas[:2]) or all(isinstance(b, Tensor) for b in betas[:2])):
            raise ValueError("betas must be either both floats or both Tensors")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            weight_decay = group["weight_decay"]  # branched on: its live number guards zero-ness
            amsgrad, maximize, decoupled = (guarded_value(group, k) for k in ("amsgrad", "maximize",
                                                                              "decoupled_weight_decay"))
            hyper: dict = {}
            for p in self._params_with_grad(group):
                h = self._hyper(group, ("lr", "beta1", "beta2", "eps", "weight_decay"), p, hyper)
                lr, beta1, beta2, eps = h["lr"], h["beta1"], h["beta2"], h["eps"]
                state = self.state[p]
                if not state:
                    state["step"] = tensor(0.0, dtype=D.float64 if D.get_default_dtype() == D.float64 else D.float32)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = zeros_like(p)
                g = O.neg(p.grad) if maximize else p.grad
                step_t = state["step"]
                step_t += 1
                if weight_decay != 0:
                    if decoupled:
                        p.mul_(1 - lr * h["weight_decay"])
                    else:
                        g = O.muladd(p, h["weight_decay"], g)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                max_sq = state["max_exp_avg_sq"] if amsgrad else exp_avg_sq
                if p._data.dtype.kind == "c":
                    p, g, exp_avg, exp_avg_sq, max_sq = self.as_real(p, g, exp_avg, exp_avg_sq, max_sq)
                exp_avg.lerp_(g, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                if amsgrad:
                    second = max_sq.copy_(O.maximum(max_sq, exp_avg_sq))
                else:
                    second = exp_avg_sq
                if type(step_t._data) is Var:  # inside fusegrad.compile: keep the step in the graph
                    bc1 = O.rsub(O.pow(beta1, step_t), 1)
                    bc2_sqrt = O.sqrt(O.rsub(O.pow(beta2, step_t), 1))
                    denom = O.add(O.div(O.sqrt(second), bc2_sqrt), eps)
                    p.sub_(O.div(O.mul(O.div(exp_avg, denom), lr), bc1))
                    continue
                step = step_t.item()
                step_size = lr / (1 - beta1 ** step)
                bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
                denom = O.add(O.div(O.sqrt(second), bias_correction2_sqrt), eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
