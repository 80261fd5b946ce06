"""``nn.MultiheadAttention`` with PyTorch's parameter names, shapes and initialization."""
from __future__ import annotations

from typing import Optional, Tuple

from ...runtime import ops as O
from ...runtime.factory import empty
from ...runtime.tensor import Tensor
from .. import init
from ..attention import heads_attention
from ..module import Module
from ..parameter import Parameter
from .linear import Linear


class NonDynamicallyQuantizableLinear(Linear):
    """The output projection's class in PyTorch (a plain ``Linear``); the name keeps printed modules alike."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features each.

    Parameters as PyTorch's: ``in_proj_weight`` ``(3E, E)`` (or ``q_proj_weight``/``k_proj_weight``/
    ``v_proj_weight`` when ``kdim``/``vdim`` differ from ``embed_dim``), ``in_proj_bias`` ``(3E,)``,
    ``out_proj`` (a ``Linear``), optional ``bias_k``/``bias_v``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: Optional[int] = None,
                 vdim: Optional[int] = None, batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), dtype=dtype))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), dtype=dtype))
            self.bias_v = Parameter(empty((1, 1, embed_dim), dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's: xavier-uniform projections, zero biases, xavier-normal ``bias_k``/``bias_v``."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _projections(self) -> Tuple[Tensor, Tensor, Tensor]:
        if self._qkv_same_embed_dim:
            return tuple(O.chunk(self.in_proj_weight, 3, 0))
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _native(self, query: Tensor, key: Tensor, value: Tensor) -> bool:
        """Whether PyTorch's forward takes its fused inference path (its conditions), whose
        rows with every key masked come out NaN (its other paths give them zeros or NaN by
        ``need_weights``: see ``heads_attention``)."""
        from ...amp.autocast_mode import is_autocast_enabled
        from ...runtime.grad_mode import is_grad_enabled
        if (query.ndim != 3 or query is not key or key is not value or self.training or self.num_heads % 2
                or not self.batch_first or self.bias_k is not None or self.add_zero_attn
                or not self._qkv_same_embed_dim or self.in_proj_bias is None
                or query.dtype != self.in_proj_weight.dtype or is_autocast_enabled()):
            return False
        weights = (query, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight, self.out_proj.bias)
        return not (is_grad_enabled() and any(w is not None and w.requires_grad for w in weights))

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = True, attn_mask: Optional[Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """Attend ``query`` to ``key``/``value``; returns ``(output, weights or None)`` as PyTorch's."""
        batched = query.ndim == 3
        native = self._native(query, key, value)
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                                 f"{query.ndim}-D query, {key.ndim}-D key and {value.ndim}-D value")
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got "
                                 f"{query.shape[-1]}")
        if not batched:
            query, key, value = (O.unsqueeze(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = O.unsqueeze(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = (O.transpose(t, 0, 1) for t in (query, key, value))
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        wq, wk, wv = self._projections()
        bq = bk = bv = None
        if self.in_proj_bias is not None:
            bq, bk, bv = O.chunk(self.in_proj_bias, 3, 0)
        out, weights = heads_attention(
            query, key, value, self.num_heads, wq, wk, wv, bq, bk, bv, self.out_proj.weight, self.out_proj.bias,
            self.dropout if self.training else 0.0, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
            need_weights=need_weights, average_attn_weights=average_attn_weights, is_causal=is_causal,
            bias_k=self.bias_k, bias_v=self.bias_v, add_zero_attn=self.add_zero_attn, native=native)
        if not batched:
            out = O.squeeze(out, 1)
            weights = O.squeeze(weights, 0) if weights is not None else None
        elif self.batch_first:
            out = O.transpose(out, 0, 1)
        return out, weights
