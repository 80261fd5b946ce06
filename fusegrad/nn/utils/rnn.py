"""``nn.utils.rnn.pad_sequence``: stack variable-length sequences into one padded tensor."""
from __future__ import annotations

from typing import Sequence

from ...runtime import ops as O
from ...runtime.tensor import Tensor
from .. import functional as F

__all__ = ["pad_sequence"]


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Pad ``L_i x *`` tensors to the longest length and stack them: ``(L, B, *)``, or ``(B, L, *)`` when
    ``batch_first``; ``padding_side`` ``"left"`` pads before the data."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        widths = [0, 0] * (s.ndim - 1) + ([extra, 0] if padding_side == "left" else [0, extra])
        padded.append(F.pad(s, widths, value=padding_value) if extra else s)
    return O.stack(padded, 0 if batch_first else 1)
