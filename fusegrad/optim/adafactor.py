"""Adafactor: Adam-like steps with a factored (row x column) second moment for matrices."""
from __future__ import annotations

from typing import Optional, Tuple

from ..runtime import ops as O
from ..runtime.factory import zeros, zeros_like
from ..runtime.grad_mode import no_grad
from ..runtime.type_info import finfo
from .optimizer import Optimizer, ParamsT


class Adafactor(Optimizer):
    """PyTorch's Adafactor: ``beta2_t = 1 - t^beta2_decay``; a matrix's second moment is the
    outer product of running row and column means of ``g^2`` (over the last two dims), a
    vector's a running mean; the step ``g / sqrt(v)`` is clipped to RMS ``d`` and scaled by
    ``max(eps2, RMS(p)) * min(lr, 1 / sqrt(t))``. Weight decay is decoupled."""

    def __init__(self, params: ParamsT, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: Tuple[Optional[float], float] = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: Optional[bool] = None, maximize: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _state(self, p):
        """The step count and, for a matrix, the row and column variances (last dim and
        second-to-last dim reduced to 1), else a full variance."""
        state = self.state[p]
        if not state:
            state["step"] = zeros(())
            if p.grad.ndim > 1:
                state["row_var"] = zeros(tuple(p.grad.shape[:-1]) + (1,), dtype=p.grad.dtype)
                state["col_var"] = zeros(tuple(p.grad.shape[:-2]) + (1, p.grad.shape[-1]), dtype=p.grad.dtype)
            else:
                state["variance"] = zeros_like(p.grad)
        return state

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            lr, d, wd, decay = float(group["lr"]), group["d"], group["weight_decay"], group["beta2_decay"]
            eps1, eps2 = group["eps"]
            for p in self._params_with_grad(group):
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                grad = O.neg(p.grad) if group["maximize"] else p.grad
                state = self._state(p)
                step = self._count(state["step"])
                e1 = finfo(p.dtype).eps if eps1 is None else eps1
                one_minus_beta2 = step ** decay
                alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * min(lr, 1 / (step ** 0.5))
                if wd != 0:
                    p.mul_(1 - lr * wd)
                if grad.ndim > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    row_var.lerp_(O.mean(O.mul(grad, grad), -1, keepdim=True), one_minus_beta2)
                    col_var.lerp_(O.mean(O.mul(grad, grad), -2, keepdim=True), one_minus_beta2)
                    var = O.div(O.matmul(row_var, col_var), O.clamp_min(O.mean(row_var, -2, keepdim=True), e1))
                else:
                    state["variance"].lerp_(O.mul(grad, grad), one_minus_beta2)
                    var = state["variance"]
                update = O.mul(O.rsqrt(O.clamp_min(var, e1 * e1)), grad)
                denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))
                p.add_(update, alpha=-alpha / denom)
