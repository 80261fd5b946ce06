"""FlexAttention as ``torch.nn.attention.flex_attention``: attention whose scores pass through a
user's ``score_mod(score, b, h, q_idx, kv_idx)`` and whose pairs are kept by a
``mask_mod(b, h, q_idx, kv_idx)`` (carried by a ``BlockMask``).

Computed as PyTorch's CPU implementation computes it (its "math" reference): the scores in
float32 (float64 for float64 inputs), the mods applied to the whole score matrix at once,
a softmax whose rows with every key masked give zeros, the weights rounded to the input dtype
before the product with the values. PyTorch calls the mods on scalars under ``vmap``; here
they get index tensors shaped to broadcast against the ``(B, H, L, S)`` scores, which is the
same for every mod made of tensor operations. Everything is primitives, so gradients (which
PyTorch's CPU kernel refuses), ``fusegrad.func`` and ``compile`` work through it.

A ``BlockMask`` also holds PyTorch's block-sparsity bookkeeping (which ``BLOCK_SIZE`` tiles
are partly or fully kept), so ``sparsity()``, ``to_dense()`` and printing read as PyTorch's.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import math
import operator
from typing import Callable, NamedTuple, Optional, Tuple, Union

import numpy as np

from ...ir import dtypes as D
from ...runtime import ops as O
from ...runtime.factory import arange, tensor, zeros
from ...runtime.tensor import Tensor
from . import _repeat_heads

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions", "create_block_mask",
           "create_mask", "or_masks", "and_masks", "noop_mask"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
FlexKernelOptions = dict  # (PyTorch's TypedDict of Triton options: accepted, nothing to tune here)


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention`` returns beside the output."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """The auxiliary outputs asked for (``None`` where not asked)."""
    lse: Optional[Tensor] = None
    max_scores: Optional[Tensor] = None


def noop_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """The mask_mod that keeps every pair."""
    return tensor(True)


def _sliced_mask_mod_error(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    """The mask_mod of a sliced BlockMask: its indices no longer match the mask's."""
    raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")


def _combine(mask_mods, start: bool, op, name: str):
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def combined(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = tensor(start)
        for m in mask_mods:
            result = op(result, m(b, h, q_idx, kv_idx))
        return result

    combined.__name__ = name
    return combined


def or_masks(*mask_mods: Callable) -> Callable:
    """A mask_mod keeping the pairs any of ``mask_mods`` keeps."""
    return _combine(mask_mods, False, O.logical_or, "or_mask")


def and_masks(*mask_mods: Callable) -> Callable:
    """A mask_mod keeping the pairs every one of ``mask_mods`` keeps."""
    return _combine(mask_mods, True, O.logical_and, "and_mask")


def _indices(B: int, H: int, L: int, S: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The batch, head, query and key indices, shaped to broadcast against ``(B, H, L, S)``."""
    return (O.reshape(arange(B), B, 1, 1, 1), O.reshape(arange(H), 1, H, 1, 1),
            O.reshape(arange(L), 1, 1, L, 1), O.reshape(arange(S), 1, 1, 1, S))


def create_mask(mod_fn: Callable, B: Optional[int], H: Optional[int], Q_LEN: int, KV_LEN: int,
                device=None) -> Tensor:
    """The dense ``(B, H, Q_LEN, KV_LEN)`` boolean mask of a mask_mod (or, for a score_mod,
    where it leaves a score finite)."""
    B, H = B or 1, H or 1
    idx = _indices(B, H, Q_LEN, KV_LEN)
    if _takes_score(mod_fn):
        out = O.ne(mod_fn(zeros((B, H, Q_LEN, KV_LEN)), *idx), -math.inf)
    else:
        out = mod_fn(*idx)
    return O.expand(O.to(out, D.bool_), B, H, Q_LEN, KV_LEN).contiguous()


def _takes_score(fn: Callable) -> bool:
    """Whether ``fn`` is a score_mod (five arguments without defaults, as PyTorch tells them apart)."""
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.default is inspect.Parameter.empty) == 5


def _ordered(dense: np.ndarray) -> Tuple[Tensor, Tensor]:
    """PyTorch's ordered form of a 0/1 block matrix: each row's count and its kept columns
    first (ascending), then the rest (ascending)."""
    counts = dense.sum(-1).astype(np.int32)
    order = np.argsort(~dense, axis=-1, kind="stable").astype(np.int32)
    return tensor(counts), tensor(order)


class BlockMask:
    """Which ``(query, key)`` pairs attention keeps: a ``mask_mod`` and, as in PyTorch, the
    tiles of ``BLOCK_SIZE`` rows and columns that are partly (``kv_num_blocks``/``kv_indices``)
    or fully (``full_kv_*``) kept. Made by ``create_block_mask``."""

    def __init__(self, partial: np.ndarray, full: Optional[np.ndarray], seq_lengths: Tuple[int, int],
                 BLOCK_SIZE: Tuple[int, int], mask_mod: Callable) -> None:
        self.seq_lengths = seq_lengths
        self.BLOCK_SIZE = BLOCK_SIZE
        self.mask_mod = mask_mod
        self.kv_num_blocks, self.kv_indices = _ordered(partial)
        self.q_num_blocks, self.q_indices = _ordered(np.swapaxes(partial, -1, -2))
        if full is None:
            self.full_kv_num_blocks = self.full_kv_indices = self.full_q_num_blocks = self.full_q_indices = None
        else:
            self.full_kv_num_blocks, self.full_kv_indices = _ordered(full)
            self.full_q_num_blocks, self.full_q_indices = _ordered(np.swapaxes(full, -1, -2))
        self._partial, self._full = partial, full
        self._dense = partial | full if full is not None else partial

    def __getitem__(self, index) -> "BlockMask":
        """The mask of the given batches, heads and query blocks (integers keep their dim, as in
        PyTorch); its mask_mod is unusable until the caller sets one (flex decoding does)."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        key = tuple(i.numpy() if isinstance(i, Tensor) else
                    (slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                    for i, n in zip(padded, self._partial.shape[:3]))
        return BlockMask(self._partial[key], None if self._full is None else self._full[key], self.seq_lengths,
                         self.BLOCK_SIZE, _sliced_mask_mod_error)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._dense.shape[:-2]) + tuple(self.seq_lengths)

    def numel(self) -> int:
        """The number of pairs the mask covers (not counting sparsity)."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """The percentage of the pairs in tiles that are skipped (PyTorch's figure: whole tiles
        count, so short sequences in large tiles give negative values)."""
        computed = int(self._dense.sum()) * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - computed / self.numel())

    def to_dense(self) -> Tensor:
        """The ``(B, H, Q blocks, KV blocks)`` int32 matrix of tiles that are computed."""
        return tensor(self._dense.astype(np.int32))

    def to_string(self, grid_size: Union[int, Tuple[int, int]] = (20, 20), limit: int = 4) -> str:
        """The tiles drawn as PyTorch draws them (full, partial or empty cells)."""
        dense = self._dense
        *batch, rows, cols = dense.shape
        max_rows, max_cols = ((grid_size, grid_size) if isinstance(grid_size, int) and grid_size != -1 else
                              (rows, cols) if grid_size == -1 else grid_size)
        row_step, col_step = max(1, -(-rows // max_rows)), max(1, -(-cols // max_cols))
        parts = []
        for n, idx in enumerate(itertools.product(*[range(i) for i in batch])):
            if n == limit:
                parts += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                          "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            vis = f"{idx}\n"
            for r in range(0, rows, row_step):
                for c in range(0, cols, col_step):
                    share = dense[idx][r:r + row_step, c:c + col_step].mean()
                    vis += ("█" if share == 1 else " " if share == 0 else "░") * 2
                vis += "\n"
            parts.append(vis)
        return "\n".join(parts)

    def __str__(self) -> str:
        return f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n{self.to_string().strip()}\n)"

    def __repr__(self) -> str:
        def shape_or_none(t):
            return t.shape if t is not None else None
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return ("BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
                f"    q_indices={shape_or_none(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_or_none(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n    mask_mod={name}\n)")

    def to(self, device) -> "BlockMask":
        """The mask itself: it lives where every tensor here lives."""
        return self


def create_block_mask(mask_mod: Callable, B: Optional[int], H: Optional[int], Q_LEN: int, KV_LEN: int,
                      device=None, BLOCK_SIZE: Union[int, Tuple[int, int]] = _DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile: bool = False, separate_full_blocks: bool = True, **_ignored) -> BlockMask:
    """A ``BlockMask`` for ``mask_mod`` over ``B`` batches and ``H`` heads (``None``: one, broadcast)
    of ``Q_LEN`` queries and ``KV_LEN`` keys, tiled in ``BLOCK_SIZE`` blocks."""
    bq, bkv = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN).numpy()
    nq, nkv = -(-Q_LEN // bq), -(-KV_LEN // bkv)
    padded = np.zeros(mask.shape[:2] + (nq * bq, nkv * bkv), dtype=bool)
    padded[..., :Q_LEN, :KV_LEN] = mask
    sums = padded.reshape(*mask.shape[:2], nq, bq, nkv, bkv).sum(axis=(3, 5))
    if separate_full_blocks:
        full = sums == bq * bkv
        partial, full = (sums > 0) & ~full, full
    else:
        partial, full = sums > 0, None
    return BlockMask(partial, full, (Q_LEN, KV_LEN), (bq, bkv), mask_mod)


def _check(query: Tensor, key: Tensor, value: Tensor, block_mask: Optional[BlockMask], enable_gqa: bool) -> None:
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"Expect query and key/value to have the same embedding dimension "
                         f"but got E={query.shape[-1]} and E={key.shape[-1]}.")
    hq, hkv = query.shape[1], key.shape[1]
    if not enable_gqa and hq != hkv:
        raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={hq} and "
                         f"Hkv={hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and hq % hkv != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got Hq={hq} "
                         f"and Hkv={hkv}.")
    if query.shape[0] != key.shape[0] and block_mask is None:
        raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, but "
                         f"got block_mask=None, Bq={query.shape[0]}, and Bkv={key.shape[0]}.")
    if block_mask is not None:
        (ql, kl), (L, S) = block_mask.seq_lengths, (query.shape[-2], key.shape[-2])
        if L > ql or S > kl:
            raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={L} "
                             f"and kv_len={S}. As the block mask was created for a smaller length than you're "
                             "using it for, you likely need to create a new block mask.")
        if (L, S) != (ql, kl):
            raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={L} "
                             f"and kv_len={S}. As the block mask was created for a larger length than you're "
                             "using it for, you can either 1. create a new block mask with the correct length, "
                             "or 2. 'adjust' the existing block mask to the correct length by calling "
                             "block_mask._adjust(q_len, kv_len). This essentially 'crops' the block mask to the "
                             "upper left corner, which does not work for all mask_mods!")


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod: Optional[Callable] = None,
                   block_mask: Optional[BlockMask] = None, scale: Optional[float] = None, enable_gqa: bool = False,
                   return_lse: bool = False, kernel_options: Optional[dict] = None, *,
                   return_aux: Optional[AuxRequest] = None):
    """``softmax(score_mod(q k^T * scale))`` over the pairs ``block_mask`` keeps, times ``value``:
    ``(B, Hq, L, E)`` queries, ``(B, Hkv, S, E)`` keys and ``(B, Hkv, S, Ev)`` values give
    ``(B, Hq, L, Ev)``; with ``return_aux=AuxRequest(lse=True, max_scores=True)`` also the rows'
    log-sum-exp and largest score (``-inf`` where every key is masked)."""
    _check(query, key, value, block_mask, enable_gqa)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True) instead.")
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key, value = _repeat_heads(key, groups), _repeat_heads(value, groups)
    B, H, L, S = query.shape[0], query.shape[1], query.shape[2], key.shape[2]
    key, value = O.expand(key, B, *key.shape[1:]), O.expand(value, B, *value.shape[1:])
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    work = D.float64 if query.dtype == D.float64 else D.float32
    scores = O.mul(O.matmul(O.to(query, work), O.transpose(O.to(key, work), -2, -1)), scale)
    idx = _indices(B, H, L, S)
    if score_mod is not None:
        scores = O.to(O.expand(score_mod(scores, *idx), B, H, L, S), work)
    if block_mask is not None:
        keep = O.expand(O.to(block_mask.mask_mod(*idx), D.bool_), B, H, L, S)
        scores = O.where(keep, scores, -math.inf)
    top = O.amax(scores, -1)
    dead = O.eq(top.detach(), -math.inf)  # (rows with every key masked: zero weights, lse -inf)
    live = O.where(O.unsqueeze(dead, -1), 0.0, scores)  # (no NaN reaches the backward of dead rows)
    weights = O.where(O.unsqueeze(dead, -1), 0.0, O.softmax(live, -1))
    out = O.matmul(O.to(weights, query.dtype), O.to(value, query.dtype))
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    lse = O.where(dead, -math.inf, O.logsumexp(live, -1)) if want_lse else None
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=top if return_aux.max_scores else None)
    return (out, lse) if return_lse else out
