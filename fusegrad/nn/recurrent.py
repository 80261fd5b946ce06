"""One step of the Elman, LSTM and GRU recurrences, as compositions of primitives.

Gate layouts follow PyTorch (LSTM ``i, f, g, o``; GRU ``r, z, n``), so PyTorch weights load unchanged.
``gates_x`` is the input projection ``x @ w_ih.T + b_ih``: the layers compute it for all time steps in one
matmul before the recurrence, the cells per call.
"""
from __future__ import annotations

from typing import Optional, Tuple

from ..runtime import ops as O
from ..runtime.tensor import Tensor
from . import functional as F

__all__ = ["rnn_tanh_step", "rnn_relu_step", "lstm_step", "gru_step"]


def _hidden(h: Tensor, w_hh: Tensor, b_hh: Optional[Tensor]) -> Tensor:
    return F.linear(h, w_hh, b_hh)


def rnn_tanh_step(gates_x: Tensor, h: Tensor, w_hh: Tensor, b_hh: Optional[Tensor]) -> Tensor:
    """``tanh(gates_x + h @ w_hh.T + b_hh)``."""
    return O.tanh(O.add(gates_x, _hidden(h, w_hh, b_hh)))


def rnn_relu_step(gates_x: Tensor, h: Tensor, w_hh: Tensor, b_hh: Optional[Tensor]) -> Tensor:
    """``relu(gates_x + h @ w_hh.T + b_hh)``."""
    return O.relu(O.add(gates_x, _hidden(h, w_hh, b_hh)))


def lstm_step(gates_x: Tensor, h: Tensor, c: Tensor, w_hh: Tensor,
              b_hh: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """The LSTM update: returns ``(h', c')``."""
    i, f, g, o = O.chunk(O.add(gates_x, _hidden(h, w_hh, b_hh)), 4, -1)
    c = O.add(O.mul(O.sigmoid(f), c), O.mul(O.sigmoid(i), O.tanh(g)))
    return O.mul(O.sigmoid(o), O.tanh(c)), c


def gru_step(gates_x: Tensor, h: Tensor, w_hh: Tensor, b_hh: Optional[Tensor]) -> Tensor:
    """The GRU update ``(1 - z) * n + z * h`` with ``n = tanh(x_n + r * (h @ w_hn.T + b_hn))``."""
    xr, xz, xn = O.chunk(gates_x, 3, -1)
    hr, hz, hn = O.chunk(_hidden(h, w_hh, b_hh), 3, -1)
    r = O.sigmoid(O.add(xr, hr))
    z = O.sigmoid(O.add(xz, hz))
    n = O.tanh(O.add(xn, O.mul(r, hn)))
    return O.add(n, O.mul(z, O.sub(h, n)))
