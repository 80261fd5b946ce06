"""Transformer encoder/decoder layers and stacks, composed of ``MultiheadAttention``, ``Linear`` and ``LayerNorm``.

Names, defaults and parameter layout follow ``torch.nn.Transformer*`` so a PyTorch ``state_dict`` loads.
"""
from __future__ import annotations

import copy
import math
import warnings
from typing import Callable, Optional, Union

from ...ir import dtypes as D
from ...runtime import ops as O
from ...runtime.factory import ones, zeros
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

Activation = Union[str, Callable[[Tensor], Tensor]]


def _activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    """The ``(sz, sz)`` float causal mask: ``-inf`` above the diagonal, ``0`` elsewhere."""
    keep = O.tril(ones((sz, sz), dtype=D.bool_))
    return O.masked_fill(zeros((sz, sz), dtype=dtype), O.logical_not(keep), -math.inf)


class _TransformerLayer(Module):
    """What encoder and decoder layers share: self-attention, the feed-forward block, norms and dropouts."""

    def __init__(self, d_model: int, nhead: int, dropout: float, bias: bool, batch_first: bool, dtype) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            dtype=dtype)

    def _add_feedforward_and_norms(self, n: int, d_model: int, dim_feedforward: int, dropout: float,
                                   activation: Activation, layer_norm_eps: float, bias: bool, dtype) -> None:
        """Registers linear1, dropout, linear2, norm1..n, dropout1..n and the activation, in PyTorch's order
        (after the attention modules), so printed forms and ``state_dict`` keys match."""
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        for i in range(1, n + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for i in range(1, n + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _sa_block(self, x: Tensor, attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor],
                  is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with dropout, a residual and a LayerNorm."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Activation = "relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(d_model, nhead, dropout, bias, batch_first, dtype)
        self.norm_first = norm_first
        self._add_feedforward_and_norms(2, d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias,
                                        dtype)
        act = self.activation  # (PyTorch's flag for its fused fast path, which TransformerEncoder reads)
        self.activation_relu_or_gelu = (1 if act is F.relu or type(act).__name__ == "ReLU" else
                                        2 if act is F.gelu or type(act).__name__ == "GELU" else 0)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _fast_path(self, src: Tensor) -> bool:
        """Whether PyTorch's forward takes its fused inference kernel (its conditions)."""
        from ...amp.autocast_mode import is_autocast_enabled
        from ...runtime.grad_mode import is_grad_enabled
        attn = self.self_attn
        if (src.dim() != 3 or self.training or not attn.batch_first or attn.in_proj_bias is None
                or not attn._qkv_same_embed_dim or not self.activation_relu_or_gelu or self.norm1.eps != self.norm2.eps
                or attn.num_heads % 2 == 1 or is_autocast_enabled()
                or any(m._forward_hooks or m._forward_pre_hooks for m in self.modules())):
            return False
        return not (is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in self.parameters())))

    def forward(self, src: Tensor, src_mask: Optional[Tensor] = None, src_key_padding_mask: Optional[Tensor] = None,
                is_causal: bool = False) -> Tensor:
        if src_key_padding_mask is not None and src_mask is None and src_key_padding_mask.dtype.is_floating_point \
                and self._fast_path(src):
            # PyTorch's fused inference kernel reads a float padding mask as boolean (non-zero: padded)
            src_key_padding_mask = O.ne(src_key_padding_mask, 0)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention to the encoder's memory, then a feed-forward block (residuals, LayerNorms)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Activation = "relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(d_model, nhead, dropout, bias, batch_first, dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.norm_first = norm_first
        self._add_feedforward_and_norms(3, d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias,
                                        dtype)

    def _mha_block(self, x: Tensor, mem: Tensor, attn_mask, key_padding_mask, is_causal: bool) -> Tensor:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, tgt_key_padding_mask: Optional[Tensor] = None,
                memory_key_padding_mask: Optional[Tensor] = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer, then an optional final norm."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Optional[Module] = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}",
                          stacklevel=2)
        self.use_nested_tensor = enable_nested_tensor and not why

    def forward(self, src: Tensor, mask: Optional[Tensor] = None, src_key_padding_mask: Optional[Tensor] = None,
                is_causal: Optional[bool] = None) -> Tensor:
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self._nested(src, mask, src_key_padding_mask):
            # PyTorch runs these layers on a nested tensor of the unpadded rows and pads its
            # result with zeros: the rows of padding leave as 0 (the others are the same)
            pad = src_key_padding_mask if src_key_padding_mask.dtype == D.bool_ else O.ne(src_key_padding_mask, 0)
            out = O.masked_fill(out, O.unsqueeze(pad, -1), 0.0)
        return self.norm(out) if self.norm is not None else out

    def _nested(self, src: Tensor, mask: Optional[Tensor], padding: Optional[Tensor]) -> bool:
        """Whether PyTorch's forward takes its nested-tensor path (its conditions, in its order)."""
        from ...amp.autocast_mode import is_autocast_enabled
        from ...compiler import is_compiling
        from ...runtime.grad_mode import is_grad_enabled
        first = self.layers[0]
        if (not getattr(self, "use_nested_tensor", False) or first.training or src.dim() != 3 or padding is None
                or mask is not None):
            return False
        if self.mask_check and (is_compiling() or not _left_aligned(padding)):
            return False
        if is_autocast_enabled():  # (as PyTorch asks: CUDA's)
            return False
        attn = first.self_attn
        weights = (src, attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight, attn.out_proj.bias,
                   first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
                   first.linear1.weight, first.linear1.bias, first.linear2.weight, first.linear2.bias)
        return not (is_grad_enabled() and any(w is not None and w.requires_grad for w in weights))


def _why_not_nested(layer) -> str:
    """Why PyTorch's TransformerEncoder would not use nested tensors for ``layer`` ('' if it would)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return f"{name}.self_attn.batch_first was not True(use batch_first for better inference performance)"
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


def _left_aligned(padding: Tensor) -> bool:
    """Whether every row of the key padding mask pads only at its end (PyTorch's mask_check)."""
    pad = padding if padding.dtype == D.bool_ else O.ne(padding, 0)
    return not bool(O.any(O.logical_and(pad[:, :-1], O.logical_not(pad[:, 1:]))))


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer, then an optional final norm."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Optional[Module] = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Optional[Tensor] = None,
                memory_mask: Optional[Tensor] = None, tgt_key_padding_mask: Optional[Tensor] = None,
                memory_key_padding_mask: Optional[Tensor] = None, tgt_is_causal: Optional[bool] = None,
                memory_is_causal: bool = False) -> Tensor:
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=bool(tgt_is_causal),
                        memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """An encoder-decoder transformer, each stack ending in a LayerNorm; matrices xavier-uniform initialized."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Activation = "relu", custom_encoder: Optional[Module] = None,
                 custom_decoder: Optional[Module] = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                  dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Optional[Tensor] = None,
                tgt_mask: Optional[Tensor] = None, memory_mask: Optional[Tensor] = None,
                src_key_padding_mask: Optional[Tensor] = None, tgt_key_padding_mask: Optional[Tensor] = None,
                memory_key_padding_mask: Optional[Tensor] = None, src_is_causal: Optional[bool] = None,
                tgt_is_causal: Optional[bool] = None, memory_is_causal: bool = False) -> Tensor:
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)
