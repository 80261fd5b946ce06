"""Indexed updates and counts with PyTorch's signatures, composed from indexing ops so
their gradients are those ops': ``index_fill``, ``index_add``, ``index_copy``, ``scatter``
(each with its in-place method), the sliding windows of ``Tensor.unfold``, ``repeat_interleave``,
``argwhere`` and ``bincount``."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .autocast_state import promote
from .exports import op
from .factory import arange
from .tensor import Tensor, wrap
from .tensor_queries import storage_offset, storage_view


def _index(index) -> Tensor:
    index = O.as_t(index)
    if index._data.dtype.kind not in "iu" or index.ndim > 1:
        raise IndexError(f"index_*(): Expected a long tensor with at most one dimension for index, "
                         f"got {index.dtype} of {index.ndim} dimensions")
    return O.reshape(index, (-1,))


@op(inplace="method")
def index_fill(x, dim, index, value):
    """``x`` with the entries at ``index`` along ``dim`` set to ``value``."""
    x = O.as_t(x)
    if isinstance(index, Tensor) and index._data.dtype != np.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    out = O.clone(x)
    O.setitem(out, (slice(None),) * O._axes(x, dim)[0] + (_index(index),), value)
    return out


def _along(x: Tensor, dim, index, source, accumulate: bool) -> Tensor:
    """``x`` with ``source``'s slices along ``dim`` put (or added) at ``index``."""
    ax = O._axes(x, dim)[0]
    if not accumulate and isinstance(index, Tensor) and index._data.dtype != np.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {O.scalar_name(index)}")
    if accumulate and isinstance(index, Tensor) and index._data.dtype.kind not in "iu":
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {O.scalar_name(index)}")
    index, source = _index(index), O.as_t(source)
    if source.dtype != x.dtype:
        raise RuntimeError(f"index_add_(): self ({O.scalar_name(x)}) and source ({O.scalar_name(source)}) must have "
                           "the same scalar type" if accumulate else "index_copy_(): self and source expected to "
                           f"have the same dtype, but got (self) {O.scalar_name(x)} and (source) {O.scalar_name(source)}")
    if source.ndim != x.ndim or source.shape[ax] != index.shape[0]:
        raise RuntimeError(f"index_{'add' if accumulate else 'copy'}_(): source {list(source.shape)} must have "
                           f"the shape of self {list(x.shape)} with {index.shape[0]} entries along dim {dim}")
    if accumulate and x.ndim > 1 and D.np_half(x._data.dtype):
        # (PyTorch adds whole half-precision slices in float32, rounding once; single elements,
        # as index_put's, one at a time)
        return O.to(_along(O.to(x, D.float32), ax, index, O.to(source, D.float32), True), x.dtype)
    try:
        moved = O.index_put(O.movedim(x, ax, 0), (index,), O.movedim(source, ax, 0), accumulate)
    except IndexError as e:  # (as PyTorch's: index_add_ of a 1-d tensor names no index)
        msg = str(e).replace("dimension 0", f"dimension {ax}")
        if not accumulate:
            raise IndexError(f"index_copy_(): {msg}") from None
        raise (IndexError("index out of range in self") if x.ndim == 1 else RuntimeError(msg)) from None
    return O.movedim(moved, 0, ax)


@op(inplace="method")
def index_add(x, dim, index, source, *, alpha=1):
    """``x`` plus ``alpha * source``'s slices along ``dim``, each added at its index
    (repeated indices add up)."""
    x = O.as_t(x)
    return _along(x, dim, index, O.mul(source, alpha) if alpha != 1 else source, True)


@op(inplace="method")
@promote
def index_copy(x, dim, index, source):
    """``x`` with its slices along ``dim`` at ``index`` replaced by ``source``'s."""
    return _along(O.as_t(x), dim, index, source, False)


@op(inplace="method")
def scatter(x, dim, index, src=None, *, value=None, reduce=None):
    """``x`` with ``src[i][j]...`` (or the number ``value``) written at the position that
    ``index[i][j]...`` names along ``dim`` (the other coordinates its own); ``reduce="add"``
    adds instead. Where an index repeats, one of the values is kept (PyTorch leaves which
    unspecified)."""
    x, index = O.as_t(x), O.as_t(index)
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    if isinstance(src, Tensor) and src.dtype != x.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    ax = O._axes(x, dim)[0]
    if index.ndim == 0:  # (a single position, as PyTorch takes it)
        index = O.reshape(index, (1,) * x.ndim)
    if reduce == "multiply":  # (PyTorch's older spelling of scatter_reduce(..., "prod"))
        from .scatter_ops import scatter_reduce
        from .factory import full
        src = src if isinstance(src, Tensor) else full(tuple(index.shape), src, dtype=x.dtype, device=x.device)
        return scatter_reduce(x, ax, index, src, "prod")
    if index._data.dtype.kind not in "iu" or index.ndim != x.ndim:
        raise RuntimeError(f"scatter(): Expected index to be an int64 tensor with as many dimensions as self "
                           f"({x.ndim}), got {index.dtype} with {index.ndim}")
    shape = tuple(index.shape)
    if any(s > (x.shape[a] if a != ax else s) for a, s in enumerate(shape)):
        raise RuntimeError(f"Expected index {list(shape)} to be smaller than self {list(x.shape)} apart from "
                           f"dimension {ax}")
    try:  # (PyTorch's scatter reports a position out of range as a RuntimeError, indexing as an IndexError)
        O._check_bounds(index, x.shape[ax], ax)
    except IndexError as e:
        raise RuntimeError(str(e)) from None
    grids = [index if a == ax else O.reshape(arange(n, device=x.device), (n,) + (1,) * (len(shape) - a - 1))
             for a, n in enumerate(shape)]
    grids = [O.expand(g, shape) for g in grids]
    if isinstance(src, Tensor):
        if any(s > n for s, n in zip(shape, src.shape)) or src.ndim != x.ndim:
            raise RuntimeError(f"Expected index {list(shape)} to be smaller than src {list(src.shape)}")
        src = src[tuple(slice(0, s) for s in shape)]
    out = O.index_put(x, tuple(grids), src, accumulate=reduce == "add")
    return O.named(out, "ScatterBackward0" if isinstance(src, Tensor) else "ScatterBackward1")


@op(function=False)
def unfold(x, dimension, size, step):
    """The windows of ``size`` elements along ``dimension``, one every ``step``, as a new last
    dim (that dimension then counts the windows). Eagerly, a view of ``x``'s memory, as
    PyTorch's; differentiated, and traced, as a gather."""
    x = O.as_t(x)
    if x.ndim == 0:
        return O.reshape(x, (1,))
    ax = O._axes(x, dimension)[0]
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size > x.shape[ax] or size < 0:
        raise RuntimeError(f"maximum size for tensor at dimension {ax} is {x.shape[ax]} but size is {size}")
    n = (x.shape[ax] - size) // step + 1
    starts = np.arange(n, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)[None, :]
    y = O.index_select(x, ax, O._const(starts.reshape(-1), x))
    y = O.reshape(y, tuple(x.shape[:ax]) + (n, size) + tuple(x.shape[ax + 1:]))
    y = O.named(O.movedim(y, ax + 1, -1), "UnfoldBackward0")
    d = x._data
    if type(d) is not np.ndarray:
        return O.storage_alias(y, x, None)
    st = x.stride()
    return O.storage_alias(y, x, storage_view(d, storage_offset(x), tuple(y.shape),
                                              st[:ax] + (st[ax] * step,) + st[ax + 1:] + (st[ax],)))


@op
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    """Each element (slice along ``dim``; of the flattened ``x`` without one) repeated
    ``repeats`` times (an int, or a tensor: one count per slice). With only a tensor of
    counts: the indices ``0, 1, ...`` repeated by them."""
    x = O.as_t(x)
    if repeats is None:  # repeat_interleave(counts)
        counts = x._concrete("repeat_interleave() (data-dependent output shape)", host=True)
        if (counts < 0).any():
            raise RuntimeError("repeats can not be negative")
        return wrap(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    if dim is None:
        x, dim = O.reshape(x, (-1,)), 0
    ax = O._axes(x, dim)[0]
    n = x.shape[ax]
    if isinstance(repeats, Tensor) and repeats.ndim > 0:
        counts = repeats._concrete("repeat_interleave() (data-dependent output shape)", host=True)
        if counts.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if counts.shape not in ((1,), (n,)):
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{counts.shape[0]} and input.size({ax}) = {n}")
        counts = np.broadcast_to(counts, (n,))
        if (counts < 0).any():
            raise RuntimeError("repeats can not be negative")
        return O.index_select(x, ax, wrap(np.repeat(np.arange(n, dtype=np.int64), counts)))
    r = int(repeats)
    if r < 0:
        raise RuntimeError("repeats can not be negative")
    shp = list(x.shape)
    tiled = O.expand(O.unsqueeze(x, ax + 1), *(shp[:ax + 1] + [r] + shp[ax + 1:]))
    return O.reshape(tiled, tuple(shp[:ax]) + (n * r,) + tuple(shp[ax + 1:]))


@op
def argwhere(x):
    """The indices of the nonzero elements, one row each (``nonzero``)."""
    return O.nonzero(x)


@op
def bincount(x, weights=None, minlength=0):
    """How often each value ``0 .. max(x)`` occurs in the 1-d non-negative int tensor ``x``
    (the sum of ``weights`` at its occurrences, with weights); at least ``minlength`` bins."""
    x = O.as_t(x)
    if x._data.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{O.scalar_name(x)}'")
    if x.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if int(minlength) < 0:
        raise RuntimeError("minlength should be >= 0")
    a = x._concrete("bincount() (data-dependent output shape)", host=True)
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return wrap(np.bincount(a, minlength=int(minlength)).astype(np.int64))
    w = O.as_t(weights)
    size = max(int(minlength), int(a.max()) + 1 if a.size else 0)
    dt = D.float32 if w.dtype == D.float32 else D.float64  # (half weights too: torch's, summed in float64)
    from .factory import zeros
    return index_add(zeros(size, dtype=dt), 0, x, O.to(w, dt))
