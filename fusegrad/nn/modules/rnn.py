"""Recurrent layers: ``RNNCell``, ``LSTMCell``, ``GRUCell`` and the multi-layer ``RNN``, ``LSTM``, ``GRU``.

Parameter names, shapes, gate order and initialization (``U(-1/sqrt(hidden), 1/sqrt(hidden))``) are
PyTorch's, so a PyTorch ``state_dict`` loads. The time loop is Python over primitive ops, so compiling
a recurrent model unrolls it into one graph.

The layers also take a ``nn.utils.rnn.PackedSequence`` (and return one): step ``t`` then updates only the
``batch_sizes[t]`` sequences still running, so each sequence's final state is taken at its own last step
and the reverse direction starts at its own last element, as PyTorch's.
"""
from __future__ import annotations

import math
import warnings
from typing import List, Optional, Tuple

from ...runtime.autocast_state import STATE as AUTOCAST, in_low_precision
from ...runtime import ops as O
from ...runtime.factory import empty, zeros
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ..recurrent import gru_step, lstm_step, rnn_relu_step, rnn_tanh_step

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_STEPS = {"RNN_TANH": rnn_tanh_step, "RNN_RELU": rnn_relu_step, "GRU": gru_step}


def _rnn_mode(nonlinearity: str) -> str:
    if nonlinearity == "tanh":
        return "RNN_TANH"
    if nonlinearity == "relu":
        return "RNN_RELU"
    raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")


# ---------------------------------------------------------------- cells
class RNNCellBase(Module):
    """Parameters of one recurrent step: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), dtype=dtype))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's: every parameter ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input: Tensor, hx: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor], bool]:
        """Batch an unbatched input (and state), checking shapes; returns ``(input, hx, batched)``."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected "
                               f"{self.input_size}")
        if hx is not None and hx.ndim != input.ndim:
            raise ValueError(f"{name}: Expected hidden to be {input.ndim}D, got {hx.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = O.unsqueeze(input, 0)
            hx = O.unsqueeze(hx, 0) if hx is not None else None
        return input, hx, batched

    def _zeros(self, input: Tensor) -> Tensor:
        return zeros((input.shape[0], self.hidden_size), dtype=input.dtype)


class RNNCell(RNNCellBase):
    """``h' = tanh(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)`` (or ``relu``)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        self._step = _STEPS[_rnn_mode(nonlinearity)]
        super().__init__(input_size, hidden_size, bias, 1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        input, hx, batched = self._prepare(input, hx)
        hx = self._zeros(input) if hx is None else hx
        h = self._step(F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh)
        return h if batched else O.squeeze(h, 0)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c))`` returns ``(h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, dtype=dtype)

    def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
        h0, c0 = (None, None) if hx is None else hx
        input, h0, batched = self._prepare(input, h0)
        if c0 is not None and not batched:
            c0 = O.unsqueeze(c0, 0)
        h0 = self._zeros(input) if h0 is None else h0
        c0 = self._zeros(input) if c0 is None else c0
        h, c = lstm_step(F.linear(input, self.weight_ih, self.bias_ih), h0, c0, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (O.squeeze(h, 0), O.squeeze(c, 0))


class GRUCell(RNNCellBase):
    """One GRU step (gates ``r, z, n`` as PyTorch)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, dtype=dtype)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        input, hx, batched = self._prepare(input, hx)
        hx = self._zeros(input) if hx is None else hx
        h = gru_step(F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh)
        return h if batched else O.squeeze(h, 0)


# ---------------------------------------------------------------- multi-layer
class RNNBase(Module):
    """The stacked, optionally bidirectional recurrence shared by ``RNN``, ``LSTM`` and ``GRU``.

    Parameters per layer ``k`` and direction (suffix ``_reverse`` for the backward one):
    ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (and ``weight_hr_l{k}``
    for an LSTM with ``proj_size``).
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: List[str] = []
        for layer in range(num_layers):
            for direction in range(self.num_directions):
                layer_input = input_size if layer == 0 else real_hidden * self.num_directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(empty(shape, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def reset_parameters(self) -> None:
        """PyTorch's: every parameter ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """PyTorch compacts the weights into one cuDNN buffer here; off cuDNN (as here, where
        each weight is its own parameter on every backend) it does nothing."""

    @property
    def all_weights(self) -> List[List[Tensor]]:
        per = len(self._flat_weights_names) // (self.num_layers * self.num_directions)
        ws = [getattr(self, n) for n in self._flat_weights_names]
        return [ws[i:i + per] for i in range(0, len(ws), per)]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _weights(self, layer: int, direction: int):
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _check_input(self, input: Tensor) -> bool:
        """Check the input's rank and features; returns whether it is batched."""
        if not isinstance(input, Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor or PackedSequence input, "
                            f"got {type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.ndim}D tensor "
                             "instead")
        self._check_dtype(input)
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")
        return input.ndim == 3

    def _check_dtype(self, input: Tensor) -> None:
        w = next((p for p in self._parameters.values() if p is not None), None)
        if w is not None and input.dtype != w.dtype and (AUTOCAST.dtype is None or not input.is_floating_point()):
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). Convert "
                             f"input: input.to({w.dtype}), or convert model: model.to({input.dtype})")

    def _check_hidden(self, hx: Tensor, expected: Tuple[int, ...], what: str) -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(hx.shape)}")

    def _run(self, x: Tensor, states: List[Tuple[Tensor, ...]]) -> Tuple[Tensor, List[Tuple[Tensor, ...]]]:
        """Run all layers over sequence-first ``x`` ``(L, N, F)``; ``states`` holds one tuple per layer and
        direction. Returns the last layer's output and the final states."""
        finals: List[Tuple[Tensor, ...]] = []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(self.num_directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                steps = O.unbind(F.linear(x, w_ih, b_ih), 0)
                order = range(len(steps) - 1, -1, -1) if direction == 1 else range(len(steps))
                state = states[layer * self.num_directions + direction]
                hs: List[Optional[Tensor]] = [None] * len(steps)
                for t in order:
                    state = self._step(steps[t], state, w_hh, b_hh, w_hr)
                    hs[t] = state[0]
                finals.append(state)
                outs.append(O.stack(hs, 0))
            x = outs[0] if len(outs) == 1 else O.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        return x, finals

    def _step(self, gates_x: Tensor, state: Tuple[Tensor, ...], w_hh: Tensor, b_hh: Optional[Tensor],
              w_hr: Optional[Tensor]) -> Tuple[Tensor, ...]:
        if self.mode == "LSTM":
            h, c = lstm_step(gates_x, state[0], state[1], w_hh, b_hh)
            return (F.linear(h, w_hr) if w_hr is not None else h), c
        return (_STEPS[self.mode](gates_x, state[0], w_hh, b_hh),)

    def _run_packed(self, x: Tensor, batch_sizes: List[int], states: List[Tuple[Tensor, ...]]
                    ) -> Tuple[Tensor, List[Tuple[Tensor, ...]]]:
        """``_run`` over packed ``x`` ``(sum(batch_sizes), F)``: step ``t`` updates only the first
        ``batch_sizes[t]`` rows (the sequences sorted by decreasing length), so each sequence's final state
        is the one at its own last step, and the reverse direction starts at its own last element from its
        initial state. Returns the last layer's packed output and the final states."""
        offsets = [0]
        for bs in batch_sizes:
            offsets.append(offsets[-1] + bs)
        steps = len(batch_sizes)
        finals: List[Tuple[Tensor, ...]] = []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(self.num_directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                gates = F.linear(x, w_ih, b_ih)
                state0 = states[layer * self.num_directions + direction]
                hs: List[Optional[Tensor]] = [None] * steps
                if direction == 0:
                    done: List[Tuple[Tensor, ...]] = []  # rows of sequences that have ended, bottom first
                    state = state0
                    for t in range(steps):
                        bs, rows = batch_sizes[t], state[0].shape[0]
                        if bs < rows:
                            done.append(tuple(O.narrow(s, 0, bs, rows - bs) for s in state))
                            state = tuple(O.narrow(s, 0, 0, bs) for s in state)
                        state = self._step(O.narrow(gates, 0, offsets[t], bs), state, w_hh, b_hh, w_hr)
                        hs[t] = state[0]
                    done.append(state)
                    done.reverse()
                    finals.append(state if len(done) == 1 else
                                  tuple(O.cat([d[j] for d in done], 0) for j in range(len(state))))
                else:
                    state = None
                    for t in range(steps - 1, -1, -1):
                        bs = batch_sizes[t]
                        if state is None:
                            state = tuple(O.narrow(s, 0, 0, bs) for s in state0)
                        elif bs > state[0].shape[0]:
                            rows = state[0].shape[0]
                            state = tuple(O.cat([s, O.narrow(s0, 0, rows, bs - rows)], 0)
                                          for s, s0 in zip(state, state0))
                        state = self._step(O.narrow(gates, 0, offsets[t], bs), state, w_hh, b_hh, w_hr)
                        hs[t] = state[0]
                    finals.append(state)
                outs.append(hs[0] if steps == 1 else O.cat(hs, 0))
            x = outs[0] if len(outs) == 1 else O.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, training=True)
        return x, finals

    def _forward_packed(self, packed, hx: Optional[Tuple[Tensor, ...]]):
        """``_forward`` for a ``PackedSequence``: ``hx`` is in the caller's batch order (permuted by
        ``sorted_indices`` here, the final states back by ``unsorted_indices``)."""
        from ..utils.rnn import PackedSequence, _batch_sizes_list
        data, sorted_indices, unsorted_indices = packed.data, packed.sorted_indices, packed.unsorted_indices
        if not isinstance(data, Tensor):
            raise TypeError(f"{type(self).__name__}: expected PackedSequence data to be a Tensor, got "
                            f"{type(data).__name__}")
        if data.ndim != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.ndim}")
        self._check_dtype(data)
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{data.shape[-1]}")
        batch_sizes = _batch_sizes_list(packed.batch_sizes)
        if not batch_sizes:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if any(a < b for a, b in zip(batch_sizes, batch_sizes[1:])) or batch_sizes[-1] <= 0 \
                or sum(batch_sizes) != data.shape[0]:
            raise RuntimeError(f"{type(self).__name__}: invalid PackedSequence (batch_sizes {batch_sizes} for "
                               f"{data.shape[0]} packed rows)")
        n = batch_sizes[0]
        layers = self.num_layers * self.num_directions
        out_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        sizes = (out_size, self.hidden_size) if self.mode == "LSTM" else (out_size,)
        if hx is None:
            hx = tuple(zeros((layers, n, s), dtype=data.dtype, device=data.device) for s in sizes)
        else:
            if any(h.ndim != 3 for h in hx):
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{[h.ndim for h in hx]}-D tensor")
            for h, s, what in zip(hx, sizes, ("hidden", "cell")):
                self._check_hidden(h, (layers, n, s), what if self.mode == "LSTM" else "hidden")
            if sorted_indices is not None:
                hx = tuple(O.index_select(h, 1, sorted_indices) for h in hx)
        per_layer = [tuple(h[i] for h in hx) for i in range(layers)]
        out, finals = self._run_packed(data, batch_sizes, per_layer)
        final = tuple(O.stack([f[j] for f in finals], 0) for j in range(len(sizes)))
        if unsorted_indices is not None:
            final = tuple(O.index_select(f, 1, unsorted_indices) for f in final)
        return PackedSequence(out, packed.batch_sizes, sorted_indices, unsorted_indices), final

    def _forward(self, input: Tensor, hx: Optional[Tuple[Tensor, ...]]) -> Tuple[Tensor, Tuple[Tensor, ...]]:
        from ..utils.rnn import PackedSequence
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        batched = self._check_input(input)
        x = input if batched else O.unsqueeze(input, 1)
        if batched and self.batch_first:
            x = O.transpose(x, 0, 1)
        if x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        n = x.shape[1]
        layers = self.num_layers * self.num_directions
        out_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        sizes = (out_size, self.hidden_size) if self.mode == "LSTM" else (out_size,)
        if hx is None:
            hx = tuple(zeros((layers, n, s), dtype=input.dtype) for s in sizes)
        else:
            if not batched:
                for h in hx:
                    if h.ndim != 2:
                        raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {h.ndim}-D "
                                           "tensor")
                hx = tuple(O.unsqueeze(h, 1) for h in hx)
            elif any(h.ndim != 3 for h in hx):
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{[h.ndim for h in hx]}-D tensor")
            for h, s, what in zip(hx, sizes, ("hidden", "cell")):
                self._check_hidden(h, (layers, n, s), what if self.mode == "LSTM" else "hidden")
        if self.mode == "LSTM" and not self.proj_size:
            # (PyTorch's CPU LSTM is oneDNN's, an op of autocast's low-precision list)
            x, *hx = in_low_precision(x, *hx)
        per_layer = [tuple(h[i] for h in hx) for i in range(layers)]
        out, finals = self._run(x, per_layer)
        final = tuple(O.stack([f[j] for f in finals], 0) for j in range(len(sizes)))
        if batched and self.batch_first:
            out = O.transpose(out, 0, 1)
        if not batched:
            out = O.squeeze(out, 1)
            final = tuple(O.squeeze(f, 1) for f in final)
        return out, final


class RNN(RNNBase):
    """A stacked Elman RNN with ``tanh`` or ``relu``; ``forward(input, h_0=None)`` returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, proj_size: int = 0) -> None:
        super().__init__(_rnn_mode(nonlinearity), input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size=proj_size, dtype=dtype)  # (proj_size: refused, as torch's)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out, (h,) = self._forward(input, None if hx is None else (hx,))
        return out, h


class LSTM(RNNBase):
    """A stacked LSTM (optionally with ``proj_size``); ``forward(input, (h_0, c_0))`` returns
    ``(output, (h_n, c_n))``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, dtype=dtype)

    def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None
                ) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        if hx is not None:
            pair = (hx[0], hx[1])  # (indexed as PyTorch does: a lone tensor or a 1-tuple raise IndexError)
            if not isinstance(hx, Tensor) and len(hx) != 2:
                raise RuntimeError("lstm expects two hidden states")
            hx = pair
        out, (h, c) = self._forward(input, hx)
        return out, (h, c)


class GRU(RNNBase):
    """A stacked GRU; ``forward(input, h_0=None)`` returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, proj_size: int = 0) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size=proj_size, dtype=dtype)  # (proj_size: refused, as torch's)

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out, (h,) = self._forward(input, None if hx is None else (hx,))
        return out, h

