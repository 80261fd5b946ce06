"""Reducing scatters and the ``*_scatter`` embeddings: ``scatter_reduce`` (sum, prod, mean,
amax, amin; ``include_self``), ``index_reduce``, ``masked_scatter``, ``select_scatter``,
``slice_scatter`` and ``diagonal_scatter``.

All are traceable compositions of primitives: ``scatter_reduce`` of ``scatter_add`` (sum,
mean) or of the ``scatter_reduce`` primitive (prod, amax, amin), which takes the input's
value at every position: ``include_self=False`` is a ``where`` putting the reduction's
identity where the index points (so the input gets no gradient there). The ``*_scatter``
ops are ``index_put`` and ``where`` compositions."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from . import ops as O
from .exports import op
from .factory import full_like
from .tensor import Tensor

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce: str, dtype: np.dtype):
    """The value that leaves a reduction of ``dtype`` unchanged."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    lo, hi = (-np.inf, np.inf) if D.np_floating(dtype) else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    return lo if reduce == "amax" else hi


@op(inplace="method")
def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> Tensor:
    """``input`` with each ``src[i][j]...`` reduced (``reduce``: sum, prod, mean, amax, amin)
    into the position ``index[i][j]...`` names along ``dim``; ``include_self``: whether
    ``input``'s own values at the scattered positions take part."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # (PyTorch 2.13 takes these spellings too)
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if index.dtype.np.kind not in "iu":
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if input.dtype != src.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    if reduce == "mean" and input.dtype.np.kind == "b":
        raise RuntimeError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    ax = O._axes(input, dim)[0]
    if index.ndim != input.ndim or src.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    src = src[tuple(slice(0, s) for s in index.shape)]
    # how many elements of src each position receives (a bool input's: whether any), where needed
    count = touched = None
    if reduce == "mean" or not include_self:
        count = O.scatter_add(full_like(input, 0), ax, index, full_like(src, 1))
        touched = O.gt(count, 0)
    base = input
    if not include_self:  # the reduction's identity where the index points
        base = O.where(touched, full_like(input, _identity(reduce, input.dtype.np)), input)
    if reduce == "sum":
        out = O.scatter_add(base, ax, index, src)
    elif reduce == "mean":  # the sum over the number of members; an integer mean rounds down, as PyTorch's
        acc = O.scatter_add(base, ax, index, src)
        k = O.add(count, 1) if include_self else O.where(touched, count, 1)
        out = O.where(touched, O.div(acc, k) if input.dtype.is_floating_point else O.floor_divide(acc, k), input)
    else:
        out = P.scatter_reduce(base, index, src, axis=ax, reduce=reduce)
    return O.named(out, "ScatterReduceBackward0")


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
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{O.scalar_name(input)} and {O.scalar_name(source)}")
    m = O.broadcast_to(mask, tuple(input.shape))
    flat = O.reshape(m, (-1,))
    pos = O.sub(O.cumsum(O.to(flat, D.int64), 0), 1)
    n = source.numel()
    if type(m._data) is np.ndarray and np.count_nonzero(m._data) > n:  # (a traced mask is not read for it)
        raise RuntimeError("Number of elements of source < number of ones in mask")
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
