"""Reducing scatters and the ``*_scatter`` embeddings: ``scatter_reduce`` (sum, prod, mean,
amax, amin; ``include_self``), ``index_reduce``, ``masked_scatter``, ``select_scatter``,
``slice_scatter`` and ``diagonal_scatter``.

A float ``scatter_reduce`` sum or mean is a composition of ``scatter_add`` (traceable).
The other reductions of ``scatter_reduce`` and ``index_reduce`` compute their values in
NumPy, eagerly (a graph break while tracing), and give them PyTorch's first-order gradient as a linear surrogate:
``R + grad_only(c_self * input) + scatter_add(grad_only(c_src * src))``, whose value is
exactly ``R`` (``ops.grad_only`` is zero even where a term is infinite: that term then
passes no gradient) and whose derivative is the coefficients ``c`` (for amax/amin
the gradient is shared evenly among the elements equal to the result, for prod it is the
product of the other elements, exact where there are zeros). The ``*_scatter`` ops are
``index_put`` and ``where`` compositions (traceable)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .exports import op
from .factory import full_like
from .grad_mode import STATE
from .tensor import Tensor, wrap

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce: str, dtype: np.dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    return -big if reduce == "amax" else big


def _reduce_np(x: np.ndarray, flat: np.ndarray, vals: np.ndarray, reduce: str, include_self: bool):
    """The reduced values (x's shape, flattened) and the gradient coefficients of x and of vals."""
    n = x.size
    xs = x.reshape(-1)
    counts = np.bincount(flat, minlength=n)
    touched = counts > 0
    member = include_self | ~touched  # whether self takes part at each position
    f = np.float64
    if reduce in ("sum", "mean"):
        acc = np.where(member, xs, 0).astype(x.dtype)
        np.add.at(acc, flat, vals)
        if reduce == "sum":
            return acc, member.astype(f), np.ones(vals.shape, f)
        k = counts + member
        r = acc // np.maximum(k, 1) if x.dtype.kind in "iub" else acc / np.maximum(k, 1)
        r = np.where(touched, r, xs).astype(x.dtype)
        return r, member / np.maximum(k, 1), 1.0 / k[flat]
    if reduce in ("amax", "amin"):
        acc = np.where(member, xs, _identity(reduce, x.dtype)).astype(x.dtype)
        (np.maximum if reduce == "amax" else np.minimum).at(acc, flat, vals)
        eq_self = member & (xs == acc)
        eq_src = vals == acc[flat]
        k = eq_self + np.bincount(flat, weights=eq_src, minlength=n)
        return acc, eq_self / np.maximum(k, 1), eq_src / k[flat]
    # prod: the coefficient of a member is the product of the others
    self_v = np.where(member, xs, 1).astype(f)
    zeros = (self_v == 0) + np.bincount(flat, weights=(vals == 0), minlength=n)
    nonzero = np.where(self_v == 0, 1.0, self_v)
    np.multiply.at(nonzero, flat, np.where(vals == 0, 1.0, vals.astype(f)))
    acc = np.where(member, xs, 1).astype(x.dtype)
    np.multiply.at(acc, flat, vals)

    def coef(v, z, p):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(v != 0, np.where(z == 0, p / np.where(v == 0, 1, v), 0.0), np.where(z == 1, p, 0.0))
    c_self = np.where(member, coef(self_v, zeros, nonzero), 0.0)
    return acc, c_self, coef(vals.astype(f), zeros[flat], nonzero[flat])


def _surrogate(r: Tensor, t: Tensor, coef: np.ndarray) -> Tensor:
    return O.grad_only(O.mul(t, O._const(coef.astype(t._data.dtype), t)))


@op(inplace="method")
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> Tensor:
    """``input`` with each ``src[i][j]...`` reduced (``reduce``: sum, prod, mean, amax, amin)
    into the position ``index[i][j]...`` names along ``dim``; ``include_self``: whether
    ``input``'s own values at the scattered positions take part."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if index.dtype.np.kind not in "iu":
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if input.dtype != src.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    ax = O._axes(input, dim)[0]
    if index.ndim != input.ndim or src.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    shape = tuple(index.shape)
    src_part = src[tuple(slice(0, s) for s in shape)]
    if reduce in ("sum", "mean") and input.dtype.is_floating_point:
        return O.named(_sum_or_mean(input, ax, index, src_part, reduce, include_self), "ScatterReduceBackward0")
    x = input._concrete("scatter_reduce")
    idx = index._concrete("scatter_reduce").astype(np.int64)
    if idx.size and (idx.min() < -input.shape[ax] or idx.max() >= input.shape[ax]):
        raise RuntimeError(f"index {int(idx.max())} is out of bounds for dimension {ax} with size {input.shape[ax]}")
    coords = list(np.indices(shape, dtype=np.int64))
    coords[ax] = idx % input.shape[ax]
    flat = np.ravel_multi_index(tuple(coords), x.shape).reshape(-1)
    vals = src_part._concrete("scatter_reduce").reshape(-1)
    r, c_self, c_src = _reduce_np(x, flat, vals, reduce, include_self)
    from .factory import tensor
    out = tensor(r.reshape(x.shape), dtype=input.dtype, device=input.device)
    if STATE.enabled and (input._rg or src._rg) and input.dtype.is_floating_point:
        out = O.add(out, _surrogate(out, input, c_self.reshape(x.shape)))
        grid = wrap(np.stack(np.unravel_index(flat, x.shape)))
        contrib = O.reshape(_surrogate(out, src_part, c_src.reshape(shape)), (-1,))
        out = O.index_put(out, tuple(grid[a] for a in range(len(x.shape))), contrib, accumulate=True)
        out = O.named(out, "ScatterReduceBackward0")
    return out


def _sum_or_mean(input: Tensor, ax: int, index: Tensor, src: Tensor, reduce: str, include_self: bool) -> Tensor:
    """A float scatter_reduce "sum" or "mean" in scatter_adds (traced, no graph break),
    its gradient from theirs: 0 to ``input`` where ``include_self`` is False and an index
    names the position, 1 / count for a mean."""
    count = O.scatter_add(full_like(input, 0), ax, index, full_like(src, 1))
    touched = O.gt(count, 0)
    acc = O.scatter_add(input if include_self else O.where(touched, 0.0, input), ax, index, src)
    if reduce == "sum":
        return acc
    k = O.add(count, 1.0) if include_self else O.where(touched, count, 1.0)
    return O.where(touched, O.div(acc, k), input)


@op(inplace="method")
def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,  # noqa: A002
                 include_self: bool = True) -> Tensor:
    """``source``'s slices along ``dim`` reduced (prod, mean, amax, amin) into ``input``'s
    slices at ``index``."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    ax = O._axes(input, dim)[0]
    if index.ndim > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    view = [1] * source.ndim
    view[ax] = -1
    full = O.expand(O.reshape(index, tuple(view)), tuple(source.shape))
    return scatter_reduce(input, ax, full, source, reduce, include_self=include_self)


@op(inplace="method")
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """``input`` with the positions where ``mask`` (broadcast to it) is true filled, in
    row-major order, with ``source``'s leading elements."""
    if mask.dtype.np.kind != "b":
        raise RuntimeError("masked_scatter_: expected BoolTensor for mask")
    m = O.broadcast_to(mask, tuple(input.shape))
    flat = O.reshape(m, (-1,))
    pos = O.sub(O.cumsum(O.to(flat, D.int64), 0), 1)
    n = source.numel()
    if n == 0:
        return O.clone(input)
    from .extra_ops import take
    taken = take(source, O.clamp(pos, 0, n - 1))
    return O.named(O.where(m, O.reshape(taken, tuple(input.shape)), input), "MaskedScatterBackward0")


def _put_along(input: Tensor, ax: int, positions: np.ndarray, values: Tensor) -> Tensor:
    """``input`` with its slices along ``ax`` at ``positions`` replaced by ``values``' (``ax`` leading)."""
    moved = O.movedim(input, ax, 0)
    out = O.index_put(moved, (O._const(positions, input),), O.to(values, input.dtype))
    return O.movedim(out, 0, ax)


@op
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    ax = O._axes(input, dim)[0]
    expect = tuple(s for a, s in enumerate(input.shape) if a != ax)
    if tuple(src.shape) != expect:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expect)}")
    i = index + input.shape[ax] if index < 0 else index
    return O.named(_put_along(input, ax, np.array([i]), O.unsqueeze(src, 0)), "SelectScatterBackward0")


@op
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: Optional[int] = None,  # noqa: A002
                  end: Optional[int] = None, step: int = 1) -> Tensor:
    """``input`` with ``input[..., start:end:step, ...]`` (along ``dim``) replaced by ``src``."""
    ax = O._axes(input, dim)[0]
    positions = np.arange(input.shape[ax])[slice(start, end, step)]
    expect = tuple(len(positions) if a == ax else s for a, s in enumerate(input.shape))
    if tuple(src.shape) != expect:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expect)}")
    return O.named(_put_along(input, ax, positions, O.movedim(src, ax, 0)), "SliceScatterBackward0")


@op
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    a1, a2 = O._axes(input, dim1)[0], O._axes(input, dim2)[0]
    n1, n2 = input.shape[a1], input.shape[a2]
    rows = np.arange(max(0, -offset), max(0, min(n1, n2 - offset)))
    expect = tuple(s for a, s in enumerate(input.shape) if a not in (a1, a2)) + (len(rows),)
    if tuple(src.shape) != expect:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(expect)}")
    moved = O.movedim(input, (a1, a2), (0, 1))
    out = O.index_put(moved, (O._const(rows, input), O._const(rows + offset, input)),
                      O.to(O.movedim(src, -1, 0), input.dtype))
    return O.named(O.movedim(out, (0, 1), (a1, a2)), "DiagonalScatterBackward0")
