"""SparseAdam: Adam for sparse gradients (a sparse embedding's), updating only the rows
that have an entry (their moments too), as PyTorch's lazy variant does."""
from __future__ import annotations

import math
from typing import Tuple

from ..runtime import ops as O
from ..runtime.factory import tensor, zeros_like
from ..runtime.grad_mode import no_grad
from .optimizer import Optimizer, ParamsT


class SparseAdam(Optimizer):
    """PyTorch's SparseAdam: for the rows of a coalesced sparse gradient ``g`` only,
    ``m += (1 - beta1) (g - m)``, ``v += (1 - beta2) (g^2 - v)`` and
    ``p -= lr sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps)``; every other row and
    its moments stay as they are. Dense gradients are refused."""

    supports_sparse = True

    def __init__(self, params: ParamsT, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    @no_grad()
    def _update(self) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in self._params_with_grad(group):
                g = p.grad
                if not getattr(g, "is_sparse", False):
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                state = self.state[p]
                if not state:
                    state["step"] = tensor(0.0)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                step = self._count(state["step"])
                g = g.coalesce()
                rows = g.indices()[0]
                values = O.neg(g.values()) if group["maximize"] else g.values()
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                m_old, v_old = exp_avg[rows], exp_avg_sq[rows]
                m = O.add(m_old, O.mul(O.sub(values, m_old), 1 - beta1))
                v = O.add(v_old, O.mul(O.sub(O.mul(values, values), v_old), 1 - beta2))
                exp_avg[rows], exp_avg_sq[rows] = m, v
                step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
                p[rows] = O.sub(p[rows], O.mul(O.div(m, O.add(O.sqrt(v), group["eps"])), step_size))
