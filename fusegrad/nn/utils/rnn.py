"""``nn.utils.rnn``: padded and packed variable-length sequences, as PyTorch's.

``PackedSequence`` holds the time-major concatenation of a batch of sequences sorted by decreasing
length: ``data`` has the ``batch_sizes[t]`` still-running sequences' elements of step ``t`` one after the
other, and ``batch_sizes`` (a CPU ``int64`` tensor) says how many run at each step. ``sorted_indices``
and ``unsorted_indices`` (``None`` when the batch was given sorted) map between the caller's batch order
and the sorted one. Packing, padding and unpacking are ``index_select``/``narrow``/``cat`` compositions,
so gradients flow through them; the recurrent layers (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``) take and
return ``PackedSequence`` s.
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ...ir import dtypes
from ...ir.dtypes import int64
from ...runtime import ops as O
from ...runtime.factory import tensor as _tensor
from ...runtime.tensor import Tensor
from .. import functional as F

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]

_SORT_HINT = ("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
              "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
              "if you do not need ONNX exportability.")


def _int64(values, device=None) -> Tensor:
    return _tensor(np.asarray(values, dtype=np.int64), dtype=int64, device=device)


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor]
    unsorted_indices: Optional[Tensor]


def _bind(value, fn):
    return None if value is None else fn(value)


class PackedSequence(PackedSequence_):
    """A packed batch of variable-length sequences (fields ``data``, ``batch_sizes``, ``sorted_indices``,
    ``unsorted_indices``); made by :func:`pack_padded_sequence` or :func:`pack_sequence`.

    ``PackedSequence(data, batch_sizes, sorted_indices=None, unsorted_indices=None)`` (or
    ``PackedSequence((data, batch_sizes), ...)``) computes ``unsorted_indices`` when it is not given.
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif getattr(getattr(batch_sizes, "device", None), "type", "cpu") != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never be "
                             "created manually. They should be instantiated by functions like pack_sequence and "
                             "pack_padded_sequences in nn.utils.rnn.")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        """``data.to(...)``; the index tensors follow ``data`` to its device, ``batch_sizes`` stays on the
        CPU. Returns ``self`` when ``data`` is unchanged."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: t.to(data.device)  # noqa: E731
        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, move),
                          _bind(self.unsorted_indices, move))

    def cuda(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        data = self.data.cuda(*args, **kwargs)
        return self if data is self.data else self.to(data.device)

    def cpu(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        return self.to("cpu")

    def _as(self, name: str) -> "PackedSequence":
        return self.to(dtype=getattr(dtypes, name))

    def double(self) -> "PackedSequence":
        return self._as("float64")

    def float(self) -> "PackedSequence":
        return self._as("float32")

    def half(self) -> "PackedSequence":
        return self._as("float16")

    def long(self) -> "PackedSequence":
        return self._as("int64")

    def int(self) -> "PackedSequence":
        return self._as("int32")

    def short(self) -> "PackedSequence":
        return self._as("int16")

    def char(self) -> "PackedSequence":
        return self._as("int8")

    def byte(self) -> "PackedSequence":
        return self._as("uint8")

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Optional[Tensor]) -> Optional[Tensor]:
    """The inverse of a 1-D permutation tensor (``None`` for ``None``)."""
    if permutation is None:
        return None
    perm = np.asarray(permutation.tolist(), dtype=np.int64)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=np.int64)
    return _int64(inv, permutation.device)


def _lengths_list(lengths) -> List[int]:
    if isinstance(lengths, Tensor):
        if lengths.device.type != "cpu" or lengths.ndim != 1:
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.ndim}D {lengths.device} {lengths.dtype} tensor")
        return [int(v) for v in lengths.tolist()]
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {arr.ndim}D lengths")
    return [int(v) for v in arr.tolist()]


def _batch_sizes_list(batch_sizes) -> List[int]:
    return [int(b) for b in (batch_sizes.tolist() if isinstance(batch_sizes, Tensor) else batch_sizes)]


def pack_padded_sequence(input: Tensor, lengths: Union[Tensor, Sequence[int]], batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded ``T x B x *`` (``B x T x *`` when ``batch_first``) batch whose sequence ``b`` has
    ``lengths[b]`` valid steps. With ``enforce_sorted`` the lengths must decrease; otherwise the batch is
    sorted here and the permutation kept in ``sorted_indices``/``unsorted_indices``."""
    lens = _lengths_list(lengths)
    if input.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{max(input.ndim, 1)}, "
                         f"{max(input.ndim, 1) - 1}], but got 1)")
    batch_dim, time_dim = (0, 1) if batch_first else (1, 0)
    batch, steps = input.shape[batch_dim], input.shape[time_dim]
    sorted_indices = None
    if not enforce_sorted:
        order = sorted(range(len(lens)), key=lambda b: -lens[b])  # stable, as fusegrad's sort
        lens = [lens[b] for b in order]
        sorted_indices = _int64(order, input.device)
        if len(order) == batch:
            input = O.index_select(input, batch_dim, sorted_indices)
    if len(lens) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} "
                           f"(batch_size={batch})")
    if any(n <= 0 for n in lens):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError(_SORT_HINT)
    if not lens:
        raise RuntimeError("pack_padded_sequence: cannot pack an empty batch")
    if lens[0] > steps:
        raise RuntimeError(f"pack_padded_sequence: a length ({lens[0]}) exceeds the padded sequence length "
                           f"({steps})")
    batch_sizes = (np.asarray(lens)[None, :] > np.arange(lens[0])[:, None]).sum(1).tolist()
    idx = np.concatenate([np.arange(bs, dtype=np.int64) * (steps if batch_first else 1)
                          + t * (1 if batch_first else batch) for t, bs in enumerate(batch_sizes)])
    flat = O.reshape(input, (batch * steps,) + tuple(input.shape[2:]))
    data = O.index_select(flat, 0, _int64(idx, input.device))
    return PackedSequence(data, _int64(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """Pad a ``PackedSequence`` back to ``T x B x *`` (``B x T x *`` when ``batch_first``), in the
    caller's original batch order; returns ``(padded, lengths)`` with ``lengths`` a CPU ``int64`` tensor.
    ``total_length`` pads to that many steps (at least the longest sequence)."""
    data = sequence.data
    batch_sizes = _batch_sizes_list(sequence.batch_sizes)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    batch = batch_sizes[0] if batch_sizes else 0
    n = data.shape[0]
    # index n is one padding row appended to the data
    idx = np.full((steps, batch), n, dtype=np.int64)
    offset = 0
    for t, bs in enumerate(batch_sizes):
        idx[t, :bs] = np.arange(offset, offset + bs)
        offset += bs
    if batch_first:
        idx = idx.T
    widths = [0, 0] * (data.ndim - 1) + [0, 1]
    extended = F.pad(data, widths, value=padding_value)
    padded = O.index_select(extended, 0, _int64(idx.reshape(-1), data.device))
    padded = O.reshape(padded, tuple(idx.shape) + tuple(data.shape[1:]))
    lengths = (np.asarray(batch_sizes, dtype=np.int64)[None, :] > np.arange(batch)[:, None]).sum(1)
    if sequence.unsorted_indices is not None:
        unsorted = sequence.unsorted_indices
        padded = O.index_select(padded, 0 if batch_first else 1, unsorted)
        lengths = lengths[np.asarray(unsorted.tolist(), dtype=np.int64)]
    return padded, _int64(lengths)


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Pad ``L_i x *`` tensors to the longest length and stack them: ``(L, B, *)``, or ``(B, L, *)`` when
    ``batch_first``; ``padding_side`` ``"left"`` pads before the data."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if any(s.ndim == 0 for s in sequences):
        raise RuntimeError("ArrayRef: invalid slice, N = 1; size = 0")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    dt = sequences[0].dtype  # (the result has the first sequence's dtype, as PyTorch's copies into it)
    for s in sequences:
        s = s if s.dtype == dt else O.to(s, dt)
        extra = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([extra, 0] if padding_side == "left" else [0, extra])
        padded.append(F.pad(s, widths, value=padding_value) if extra else s)
    return O.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Union[Tensor, Sequence[int]],
                   batch_first: bool = False) -> List[Tensor]:
    """Split a padded batch into its ``lengths[b] x *`` sequences (the inverse of :func:`pad_sequence`).
    Unlike PyTorch's, it does not transpose ``padded_sequences`` in place."""
    lens = _lengths_list(lengths)
    batch_dim, time_dim = (0, 1) if batch_first else (1, 0)
    if len(lens) != padded_sequences.shape[batch_dim]:
        raise ValueError(f"unpad_sequence: got {len(lens)} lengths for a batch of "
                         f"{padded_sequences.shape[batch_dim]}")
    out = []
    for b, n in enumerate(lens):
        seq = O.select(padded_sequences, batch_dim, b)
        out.append(O.narrow(seq, 0, 0, n))
    return out


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of ``L_i x *`` tensors (``pad_sequence`` then ``pack_padded_sequence``)."""
    sequences = list(sequences)
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> List[Tensor]:
    """The list of sequences in a ``PackedSequence``, in the original batch order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
