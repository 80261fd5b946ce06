"""torch.nn.attention.bias: causal masks that say how a block of queries lines up with its
keys, for ``scaled_dot_product_attention``'s ``attn_mask`` (a chunk of new tokens attending
to a longer KV cache wants the lower-right alignment)."""
from __future__ import annotations

import enum
from typing import Optional

from ...ir import dtypes as D
from ...runtime import ops as O
from ...runtime.factory import ones
from ...runtime.tensor import Tensor

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]


class CausalVariant(enum.IntEnum):
    """UPPER_LEFT: query ``i`` sees keys ``j <= i``; LOWER_RIGHT: the last query sees every
    key, query ``i`` keys ``j <= i + seq_len_kv - seq_len_q``."""
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask of ``seq_len_q`` queries by ``seq_len_kv`` keys, materialized when
    attention uses it."""

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        self.variant, self.seq_len_q, self.seq_len_kv = CausalVariant(variant), int(seq_len_q), int(seq_len_kv)

    def _upper_left(self, device=None) -> Tensor:
        return O.tril(ones(self.seq_len_q, self.seq_len_kv, dtype=D.bool_, device=device))

    def _lower_right(self, device=None) -> Tensor:
        diagonal = self.seq_len_kv - self.seq_len_q
        return O.tril(ones(self.seq_len_q, self.seq_len_kv, dtype=D.bool_, device=device), diagonal)

    def _materialize(self, device: Optional[object] = None) -> Tensor:
        """The boolean mask (True: may attend)."""
        if self.variant is CausalVariant.UPPER_LEFT:
            return self._upper_left(device)
        return self._lower_right(device)

    def __repr__(self) -> str:
        return repr(self._materialize())


def _sizes(size: tuple, name: str) -> tuple:
    if len(size) != 2:
        raise AssertionError(f"{name} only supports 2D tensors")
    return size


def causal_upper_left(*size) -> CausalBias:
    """The mask of ``size`` (queries, keys) aligned at the upper left (``is_causal=True``'s)."""
    return CausalBias(CausalVariant.UPPER_LEFT, *_sizes(size, "causal_upper_left"))


def causal_lower_right(*size) -> CausalBias:
    """The mask of ``size`` (queries, keys) aligned at the lower right: the last query sees
    every key."""
    return CausalBias(CausalVariant.LOWER_RIGHT, *_sizes(size, "causal_lower_right"))
