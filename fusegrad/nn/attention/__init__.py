"""Attention as a composition of primitives: ``scaled_dot_product_attention`` and the multi-head forward.

Everything here is matmuls, ``where`` and ``softmax``, so it runs in eager mode, under autograd
(``create_graph`` included), under ``fusegrad.func`` transforms and inside ``compile`` with no new primitive.
As ``torch.nn.attention``, it also holds ``SDPBackend`` and ``sdpa_kernel``, which choose among
implementations where PyTorch has several (this one serves those PyTorch has for the CPU).
"""
from __future__ import annotations

import contextlib
import enum
import math
import warnings
from typing import Iterator, Optional, Sequence, Tuple, Union

from ...backends import cuda as _sdp_flags
from ...backends.cuda import flash_sdp_enabled, math_sdp_enabled
from ...ir import dtypes as D
from ...runtime import ops as O
from ...runtime.autocast_state import lower_precision
from ...runtime.factory import ones, zeros
from ...runtime.tensor import Tensor
from .. import functional as F

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward", "SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """PyTorch's scaled-dot-product-attention implementations, by its numbers."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends: Union[SDPBackend, Sequence[SDPBackend]], set_priority: bool = False) -> Iterator[None]:
    """Inside the block only ``backends`` are enabled (``torch.backends.cuda``'s ``*_sdp_enabled``
    flags say so); ``set_priority`` orders them in PyTorch. The one implementation here runs
    for the math or flash backend (PyTorch's CPU kernels); with neither, attention raises as there."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not all(isinstance(b, SDPBackend) for b in backends):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances")
    with _sdp_flags.sdp_kernel(enable_flash=SDPBackend.FLASH_ATTENTION in backends,
                               enable_math=SDPBackend.MATH in backends,
                               enable_mem_efficient=SDPBackend.EFFICIENT_ATTENTION in backends,
                               enable_cudnn=SDPBackend.CUDNN_ATTENTION in backends):
        yield


def _causal_keep(L: int, S: int) -> Tensor:
    """The ``(L, S)`` boolean mask that keeps key ``j <= i`` for query ``i`` (top-left aligned, as PyTorch)."""
    return O.tril(ones((L, S), dtype=D.bool_))


def _additive(mask: Tensor, dtype, keep_when_true: bool) -> Tensor:
    """A float mask to add to attention scores: ``-inf`` where a boolean mask forbids, the float mask as is."""
    if mask.dtype == D.bool_:
        forbid = mask if not keep_when_true else O.logical_not(mask)
        return O.masked_fill(zeros(tuple(mask.shape), dtype=dtype), forbid, -math.inf)
    return mask.to(dtype)


def _scores(q: Tensor, k: Tensor, bias: Optional[Tensor], scale: float) -> Tensor:
    """``q k^T * scale + bias``."""
    s = O.mul(O.matmul(q, O.transpose(k, -2, -1)), scale)
    return s if bias is None else O.add(s, bias)


def _attend(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor], dropout_p: float, scale: float,
            safe: bool) -> Tuple[Tensor, Tensor]:
    """``softmax(q k^T * scale + bias) v``, returning the output and the (post-dropout) weights.

    ``safe`` gives rows whose every key is masked zero weights (PyTorch's ``_safe_softmax``) instead of NaN.
    """
    scores = _scores(q, k, bias, scale)
    if safe:
        # a row is dead when its largest score is -inf (amax traces; all() needs concrete values)
        dead = O.eq(O.amax(scores.detach(), -1, keepdim=True), -math.inf)
        # replaced before the softmax as well, so no NaN reaches the backward pass of dead rows
        weights = O.where(dead, 0.0, O.softmax(O.where(dead, 0.0, scores), -1))
    else:
        weights = O.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p, training=True)
    return O.matmul(weights, v), weights


@lower_precision
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(Q K^T / sqrt(E) + mask) V`` over the last two dims, as ``torch.nn.functional``'s.

    A boolean ``attn_mask`` marks the pairs that may attend (``True`` = keep); a float mask is added to the
    scores. ``is_causal`` keeps key ``j <= i`` (and ``attn_mask`` applies too). Rows with no key left get zeros.
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(f"scaled_dot_product_attention: query, key and value must have at least 2 dims, got "
                           f"{list(query.shape)}, {list(key.shape)} and {list(value.shape)}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: query {list(query.shape)}, key {list(key.shape)} and "
                           f"value {list(value.shape)} disagree (query and key need the same last dim, key and "
                           "value the same sequence length)")
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        from .bias import CausalBias
        if isinstance(attn_mask, CausalBias):  # (torch.nn.attention.bias's)
            attn_mask = attn_mask._materialize(query.device)
    if attn_mask is not None and attn_mask.dtype not in (D.bool_, D.float32, query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {O.cpp_scalar_name(attn_mask)} and  query.dtype: "
                           f"{O.cpp_scalar_name(query)} instead.")
    if is_causal and attn_mask is not None and attn_mask.requires_grad:  # (torch allows a constant one only)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not (math_sdp_enabled() or flash_sdp_enabled()):  # (the kernels PyTorch has for the CPU)
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due to "
                           "turning off both the math kernel and the fused kernels.")
    if enable_gqa and query.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = _repeat_heads(key, groups)
        value = _repeat_heads(value, groups)
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    bias = None
    if is_causal:
        bias = _additive(_causal_keep(L, S), query.dtype, keep_when_true=True)
    if attn_mask is not None:  # (with is_causal too: both apply, as PyTorch's CPU kernels do)
        mask = _additive(attn_mask, query.dtype, keep_when_true=True)
        bias = mask if bias is None else O.add(bias, mask)
    low = query.dtype if query.dtype in (D.float16, D.bfloat16) else None
    if low is not None and dropout_p == 0.0:
        return O.laid_out_like(_attend_low(query, key, value, bias, scale, attn_mask is not None), query)
    if low is not None:  # scores and weights in float32, the output rounded once
        query, key, value = (O.to(t, D.float32) for t in (query, key, value))
    out, _ = _attend(query, key, value, bias, dropout_p, scale, safe=attn_mask is not None)
    if low is not None:
        out = O.to(out, low)
    return O.laid_out_like(out, query)


def _attend_low(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor], scale: float, safe: bool) -> Tensor:
    """Half-precision attention as PyTorch's CPU flash kernel computes it: scores and their
    row maxima and sums in float32, the unnormalized weights ``exp(s - max)`` rounded to the
    half dtype for the product with ``v`` (accumulated in float32), then divided by the
    float32 row sums and rounded once."""
    low = q.dtype
    q, k, v = (O.to(t, D.float32) for t in (q, k, v))
    s = _scores(q, k, bias, scale)
    top = O.amax(s.detach(), -1, keepdim=True)
    dead = O.eq(top, -math.inf)  # (rows with every key masked: zeros, as PyTorch's safe softmax)
    e = O.exp(O.sub(s, O.where(dead, 0.0, top)))
    out = O.div(O.matmul(O.to(O.to(e, low), D.float32), v), O.sum(e, -1, keepdim=True))
    if safe:
        out = O.where(dead, 0.0, out)
    return O.to(out, low)


def _repeat_heads(t: Tensor, groups: int) -> Tensor:
    """Each head of ``t`` (dim -3) repeated ``groups`` times in place, for grouped-query attention."""
    shape = tuple(t.shape)
    t = O.expand(O.unsqueeze(t, -3), *shape[:-2], groups, *shape[-2:])
    return O.reshape(t, *shape[:-3], shape[-3] * groups, *shape[-2:])


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Optional[Tensor], in_proj_bias: Optional[Tensor],
                                 bias_k: Optional[Tensor], bias_v: Optional[Tensor], add_zero_attn: bool,
                                 dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Optional[Tensor],
                                 training: bool = True, key_padding_mask: Optional[Tensor] = None,
                                 need_weights: bool = True, attn_mask: Optional[Tensor] = None,
                                 use_separate_proj_weight: bool = False, q_proj_weight: Optional[Tensor] = None,
                                 k_proj_weight: Optional[Tensor] = None, v_proj_weight: Optional[Tensor] = None,
                                 static_k: Optional[Tensor] = None, static_v: Optional[Tensor] = None,
                                 average_attn_weights: bool = True,
                                 is_causal: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
    """PyTorch's functional multi-head attention: ``(L, N, E)`` query and ``(S, N, E)``
    key/value (sequence first) or unbatched ``(L, E)``, projected by ``in_proj_weight``'s
    three blocks of rows (or the separate ``q/k/v_proj_weight``); see ``heads_attention``."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not supported")
    if query.shape[-1] != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {query.shape[-1]}")
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = (O.unsqueeze(t, 1) for t in (query, key, value))
        key_padding_mask = O.unsqueeze(key_padding_mask, 0) if key_padding_mask is not None else None
    if use_separate_proj_weight:
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        wq, wk, wv = O.chunk(in_proj_weight, 3, 0)
    bq, bk, bv = O.chunk(in_proj_bias, 3, 0) if in_proj_bias is not None else (None, None, None)
    out, weights = heads_attention(query, key, value, num_heads, wq, wk, wv, bq, bk, bv, out_proj_weight,
                                   out_proj_bias, dropout_p if training else 0.0, key_padding_mask, attn_mask,
                                   need_weights, average_attn_weights, is_causal, bias_k, bias_v, add_zero_attn)
    if unbatched:
        out = O.squeeze(out, 1)
        weights = O.squeeze(weights, 0) if weights is not None else None
    return out, weights


def heads_attention(query: Tensor, key: Tensor, value: Tensor, num_heads: int,
                    q_weight: Tensor, k_weight: Tensor, v_weight: Tensor,
                    q_bias: Optional[Tensor], k_bias: Optional[Tensor], v_bias: Optional[Tensor],
                    out_weight: Tensor, out_bias: Optional[Tensor], dropout_p: float,
                    key_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None,
                    need_weights: bool = True, average_attn_weights: bool = True,
                    is_causal: bool = False, bias_k: Optional[Tensor] = None,
                    bias_v: Optional[Tensor] = None, add_zero_attn: bool = False,
                    native: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
    """Multi-head attention on ``(L, N, E)`` query and ``(S, N, E)`` key/value (sequence first).

    Masks follow ``nn.MultiheadAttention``: boolean ``True`` = not allowed; float masks are added.
    ``attn_mask`` is ``(L, S)`` or ``(N * num_heads, L, S)``; ``key_padding_mask`` is ``(N, S)``.
    Returns the ``(L, N, E)`` output and, when ``need_weights``, the attention weights
    ``(N, L, S)`` averaged over heads (or ``(N, num_heads, L, S)``).
    """
    if key.shape[:-1] != value.shape[:-1]:  # (PyTorch's assertion: its AssertionError, not a failed matmul's)
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
    for name, mask in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
        if mask is not None and not (mask.dtype == D.bool_ or mask.dtype.is_floating_point):
            raise AssertionError(f"only bool and floating types of {name} are supported")  # (an int mask: not added)
    if key_padding_mask is not None and attn_mask is not None and key_padding_mask.dtype != attn_mask.dtype:
        warnings.warn("Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type for both "
                      "instead.", stacklevel=3)
    L, N, E = query.shape
    head_dim = E // num_heads
    if is_causal and key_padding_mask is None and not need_weights:
        # PyTorch's: the causal hint replaces attn_mask, over the keys bias_k and the zero key
        # extend too (top-left aligned: only the rows past the sequence's end see them)
        attn_mask = None
    q = F.linear(query, q_weight, q_bias)
    k = F.linear(key, k_weight, k_bias)
    v = F.linear(value, v_weight, v_bias)
    if bias_k is not None:
        k = O.cat([k, O.expand(O.reshape(bias_k, 1, 1, E), 1, N, E)], 0)
        v = O.cat([v, O.expand(O.reshape(bias_v, 1, 1, E), 1, N, E)], 0)
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    if add_zero_attn:
        k = O.cat([k, zeros((1, N, E), dtype=k.dtype)], 0)
        v = O.cat([v, zeros((1, N, E), dtype=v.dtype)], 0)
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    S = k.shape[0]
    # (T, N, E) -> (N, H, T, head_dim)
    q, k, v = (O.permute(O.reshape(t, t.shape[0], N, num_heads, head_dim), 1, 2, 0, 3) for t in (q, k, v))
    bias = None
    if is_causal and attn_mask is None:
        bias = _additive(_causal_keep(L, S), q.dtype, keep_when_true=True)
    if attn_mask is not None:
        bias = _additive(attn_mask, q.dtype, keep_when_true=False)
        bias = O.reshape(bias, N, num_heads, L, S) if bias.ndim == 3 else bias
    if key_padding_mask is not None:
        for i, want in enumerate((N, S)):
            if key_padding_mask.shape[i] != want:
                raise AssertionError(f"Expected key_padded_mask.shape[{i}] to be {want}, but got "
                                     f"{key_padding_mask.shape[i]}")
        pad = O.reshape(_additive(key_padding_mask, q.dtype, keep_when_true=False), N, 1, 1, S)
        bias = pad if bias is None else O.add(bias, pad)
    # (without weights PyTorch calls scaled_dot_product_attention, whose fully masked rows are
    # zeros; with them, or on its fused inference path (``native``), a plain softmax: NaN there)
    out, weights = _attend(q, k, v, bias, dropout_p, 1.0 / math.sqrt(head_dim), safe=not (need_weights or native))
    out = O.reshape(O.permute(out, 2, 0, 1, 3), L, N, E)
    out = F.linear(out, out_weight, out_bias)
    if not need_weights:
        return out, None
    return out, (O.mean(weights, 1) if average_attn_weights else weights)


def _pad_last(mask: Optional[Tensor]) -> Optional[Tensor]:
    """``mask`` with one more key column that everyone may attend (for ``bias_k`` / ``add_zero_attn``)."""
    if mask is None:
        return None
    return F.pad(mask, (0, 1), value=False if mask.dtype == D.bool_ else 0.0)
