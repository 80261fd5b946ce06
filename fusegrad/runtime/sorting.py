"""Sorting, selection and counting ops with PyTorch's signatures: ``sort``, ``argsort``,
``msort``, ``topk``, ``kthvalue``, ``cummax``, ``cummin``, ``mode``, ``nanmedian``,
``searchsorted``, ``bucketize``, ``unique``, ``unique_consecutive`` and ``multinomial``.
Indices come from the ``argsort``/``searchsorted`` primitives or from scans composed of
elementwise ops; values are ``gather``s of the input at those indices, so their gradient
is gather's (a scatter-add of the incoming gradient to the positions the values came
from, as PyTorch's ``cummaxmin_backward`` and ``value_selecting_reduction_backward``)."""
from __future__ import annotations


import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from .exports import op
from .ops import (_axes, _return_type, as_t, cat, clamp, cumsum, div, eq, isnan, log, logical_and, logical_not,
                  logical_or, maximum, minimum, named, narrow, neg, refuse_kinds, reshape, sub, where)
from .devices import move
from .factory import arange
from .tensor import Tensor, wrap


sort_type = _return_type("sort", ("values", "indices"))
topk_type = _return_type("topk", ("values", "indices"))
kthvalue_type = _return_type("kthvalue", ("values", "indices"))
cummax_type = _return_type("cummax", ("values", "indices"))
cummin_type = _return_type("cummin", ("values", "indices"))
mode_type = _return_type("mode", ("values", "indices"))
nanmedian_type = _return_type("nanmedian", ("values", "indices"))


def _sorted_along(x: Tensor, dim, descending: bool, what: str):
    """(values, indices, axis) of ``x`` sorted along ``dim``; a 0-d tensor is one element."""
    if x._data.ndim == 0:
        if dim is not None and not -1 <= int(dim) <= 0:
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        v, i, _ = _sorted_along(reshape(x, (1,)), 0, descending, what)
        return reshape(v, ()), reshape(i, ()), 0
    ax = _axes(x, dim)[0]
    idx = P.argsort(x, axis=ax, descending=bool(descending))
    return P.gather(x, idx, axis=ax), idx, ax


@op
def sort(input, dim=-1, descending=False, stable=False):
    """Values sorted along ``dim`` and the indices they came from. Always stable (ties keep
    their order), which ``stable=False`` permits."""
    v, i, _ = _sorted_along(as_t(input), dim, descending, "sort")
    return sort_type(named(v, "SortBackward0"), i)


@op
def argsort(input, dim=-1, descending=False, stable=False):
    return _sorted_along(as_t(input), dim, descending, "argsort")[1]


@op
def msort(input):
    return sort(input, dim=0).values


@op
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim``, in sorted order."""
    x = as_t(input)
    n = 1 if x._data.ndim == 0 else x._data.shape[_axes(x, dim)[0]]
    if not 0 <= int(k) <= n:
        raise RuntimeError(f"topk(): selected index k={k} out of range for dimension {dim} of size {n} "
                           f"(input shape {list(x.shape)})")
    v, i, ax = _sorted_along(x, dim, largest, "topk")
    if x._data.ndim:  # (new tensors, contiguous as PyTorch's, not views of the sorted ones)
        v, i = narrow(v, ax, 0, int(k)).contiguous(), narrow(i, ax, 0, int(k)).contiguous()
    return topk_type(named(v, "TopkBackward0"), i)


@op
def kthvalue(input, k, dim=-1, keepdim=False):
    """The ``k``-th smallest element along ``dim`` and its index (among equal elements, the
    one a stable sort puts there)."""
    x = as_t(input)
    v, i, ax = _sorted_along(x, dim, False, "kthvalue")
    n = 1 if x._data.ndim == 0 else x._data.shape[ax]
    if n == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {ax} to have non-zero size.")
    if not 1 <= int(k) <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {ax}")
    if x._data.ndim:
        v, i = narrow(v, ax, int(k) - 1, 1), narrow(i, ax, int(k) - 1, 1)
        if not keepdim:
            shape = tuple(s for a, s in enumerate(v._data.shape) if a != ax)
            v, i = reshape(v, shape), reshape(i, shape)
    return kthvalue_type(named(v, "KthvalueBackward0"), i)


# ---------------------------------------------------------------- scans and counting selections
def _positions(x: Tensor, ax: int) -> Tensor:
    """0, 1, ..., n-1 along axis ``ax`` of ``x`` (int64, broadcastable against ``x``)."""
    shape = tuple(s if a == ax else 1 for a, s in enumerate(x._data.shape))
    return reshape(arange(x._data.shape[ax], dtype=np.int64, device=x.device), shape)


def _scan(a: Tensor, ax: int, combine) -> Tensor:
    """The inclusive scan of ``a`` along ``ax`` under the idempotent ``combine`` (maximum,
    minimum): ceil(log2 n) steps each combining every element with the one ``2**k``
    before it (itself near the start, which idempotence leaves unchanged). Made of
    slices, a concatenation and elementwise ops, so it batches and compiles as they do."""
    n, step = a._data.shape[ax], 1
    while step < n:
        a = combine(a, cat([narrow(a, ax, 0, step), narrow(a, ax, 0, n - step)], ax))
        step *= 2
    return a


def _wide(x: Tensor) -> Tensor:
    """``x`` detached, as float64 (a float) or int64 (an integer or bool): the same order,
    and the scans below then keep one 8-byte dtype."""
    d = x.detach()
    work = np.dtype(np.float64 if d._data.dtype.kind == "f" or d.dtype.is_floating_point else np.int64)
    return d if d._data.dtype == work else P.cast(d, dtype=work)


def _scalar_dim(x: Tensor, dim, name: str):
    if not -1 <= int(dim) <= 0:
        raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got {dim}")


def _cumextreme(input, dim, largest: bool, name: str, result):
    x = as_t(input)
    if x._data.ndim == 0:
        _scalar_dim(x, dim, name)
        v, i = _cumextreme(reshape(x, (1,)), 0, largest, name, result)
        return result(reshape(v, ()), reshape(i, ()))
    refuse_kinds(x, f"{name}_cpu")
    ax = _axes(x, dim)[0]
    d = _wide(x)
    m = _scan(d, ax, maximum if largest else minimum)  # the running extreme; NaN from the first NaN on
    # PyTorch moves the index to every element reaching the running extreme (so ties take the
    # last one) and to every NaN
    hit = logical_or(eq(d, m), isnan(d))
    idx = _scan(where(hit, _positions(x, ax), 0), ax, maximum)
    return result(named(P.gather(x, idx, axis=ax), name.capitalize() + "Backward0"), idx)


@op
def cummax(input, dim):
    """The running maximum along ``dim`` and the index of the last element that reached it
    (a NaN, once one is met)."""
    return _cumextreme(input, dim, True, "cummax", cummax_type)


@op
def cummin(input, dim):
    """The running minimum along ``dim`` and the index of the last element that reached it
    (a NaN, once one is met)."""
    return _cumextreme(input, dim, False, "cummin", cummin_type)


def _reduced(v: Tensor, i: Tensor, ax: int, keepdim: bool):
    if not keepdim:
        shape = tuple(s for a, s in enumerate(v._data.shape) if a != ax)
        v, i = reshape(v, shape), reshape(i, shape)
    return v, i


@op
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and the
    index of its last occurrence (PyTorch's CPU kernel names that one for rows up to 16
    long; for longer rows its choice among the occurrences is unspecified). NaNs count as
    one value, larger than every number (PyTorch's result is unspecified there)."""
    x = as_t(input)
    if x._data.ndim == 0:
        _scalar_dim(x, dim, "mode")
        v, i = mode(reshape(x, (1,)), 0, True)
        return mode_type(reshape(v, ()), reshape(i, ()))
    ax = _axes(x, dim)[0]
    n = x._data.shape[ax]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {ax} to have non-zero size.")
    d = _wide(x)
    order = P.argsort(d, axis=ax, descending=False)  # stable: equal values keep their order
    s = P.gather(d, order, axis=ax)
    pos = _positions(x, ax)

    def differs(other):  # NaNs count as equal
        return logical_not(logical_or(eq(s, other), logical_and(isnan(s), isnan(other))))
    # where the runs of equal sorted values start and end
    start = logical_or(eq(pos, 0), differs(cat([narrow(s, ax, 0, 1), narrow(s, ax, 0, n - 1)], ax)))
    end = logical_or(eq(pos, n - 1), differs(cat([narrow(s, ax, 1, n - 1), narrow(s, ax, n - 1, 1)], ax)))
    count = sub(pos, _scan(where(start, pos, 0), ax, maximum)) + 1  # the position within its run, from 1
    best = P.argmax(where(end, count, 0), axis=ax, keepdims=True)  # the first longest run: the smallest value
    idx = P.gather(order, best, axis=ax)
    v, i = _reduced(P.gather(x, idx, axis=ax), idx, ax, keepdim)
    return mode_type(named(v, "ModeBackward0"), i)


@op
def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the non-NaN elements (NaN where all are NaN); along ``dim`` also
    its index (the first NaN's in an all-NaN row)."""
    x = as_t(input)
    if dim is None:
        flat = reshape(x, (-1,))
        if flat._data.shape[0] == 0:
            return reshape(div(P.reduce_sum(flat, axes=(0,), keepdims=True), 0), ())  # NaN, as PyTorch
        m = reshape(nanmedian(flat.detach(), 0, True).values, ())
        if not D.np_floating(flat._data.dtype):
            return m
        # the gradient is shared evenly by the elements equal to the median (the NaNs, when it is
        # NaN), as PyTorch's evenly_distribute_backward: m - sum(m - x over them) / their count,
        # which is m itself (-0.0 included)
        d = flat.detach()
        mask = logical_or(eq(d, m), logical_and(isnan(d), isnan(m)))
        cnt = P.reduce_sum(P.cast(mask, dtype=flat._data.dtype), axes=(0,), keepdims=False)
        share = div(P.reduce_sum(where(mask, sub(m, flat), 0), axes=(0,), keepdims=False), cnt)
        return named(sub(m, share), "NanmedianBackward0")
    if x._data.ndim == 0:
        _scalar_dim(x, dim, "nanmedian")
        v, i = nanmedian(reshape(x, (1,)), 0, True)
        return nanmedian_type(reshape(v, ()), reshape(i, ()))
    ax = _axes(x, dim)[0]
    if x._data.shape[ax] == 0:
        raise IndexError(f"median(): Expected reduction dim {ax} to have non-zero size.")
    v, i, _ = _sorted_along(x, ax, False, "nanmedian")  # NaNs sort last
    if not D.np_floating(x._data.dtype):  # no NaN: the median
        k = (x._data.shape[ax] - 1) // 2
        v, i = _reduced(narrow(v, ax, k, 1), narrow(i, ax, k, 1), ax, keepdim)
        return nanmedian_type(named(v, "NanmedianBackward1"), i)
    c = P.reduce_sum(P.cast(logical_not(isnan(x)), dtype=np.dtype(np.int64)), axes=(ax,), keepdims=True)
    k = div(clamp(sub(c, 1), min=0), 2, rounding_mode="floor")  # the lower middle of the numbers (0 if none)
    i = P.gather(i, k, axis=ax)
    v, i = _reduced(P.gather(x, i, axis=ax), i, ax, keepdim)
    return nanmedian_type(named(v, "NanmedianBackward1"), i)


@op(method=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Indices at which ``input`` would be inserted into the innermost rows of
    ``sorted_sequence`` to keep them sorted (``right``/``side="right"``: after equal entries)."""
    seq = as_t(sorted_sequence)
    scalar = not isinstance(input, Tensor)
    v = as_t(input, dtype=seq.dtype if scalar else None)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    if seq._data.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension, "
                           "but got 0 dimension")
    if seq._data.ndim > 1 and (v._data.ndim != seq._data.ndim or tuple(seq.shape[:-1]) != tuple(v.shape[:-1])):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           f"of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(seq.shape)} and input value tensor {list(v.shape)}")
    if sorter is not None:
        if tuple(as_t(sorter).shape) != tuple(seq.shape):
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                               f"tensor {list(seq.shape)}and got sorter tensor {list(as_t(sorter).shape)}")
        seq = P.gather(seq, as_t(sorter), axis=seq._data.ndim - 1)
    return P.searchsorted(seq, v, right=bool(right), dtype=np.dtype(np.int32 if out_int32 else np.int64))


@op(method=False)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    b = as_t(boundaries)
    if b._data.ndim != 1:
        raise RuntimeError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim({b._data.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right)


# ---------------------------------------------------------------- unique (data-dependent shapes: eager)
def _unique_result(values, inverse, counts, return_inverse, return_counts, dtype, dev):
    """The results on device ``dev`` (a CUDA tensor's unique is computed on a host copy: its
    output shape depends on the values, and PyTorch synchronizes there too)."""
    out = wrap(move(np.ascontiguousarray(values).astype(dtype, copy=False), dev))
    extra = ([wrap(move(inverse.astype(np.int64), dev))] if return_inverse else []) + \
            ([wrap(move(counts.astype(np.int64), dev))] if return_counts else [])
    return (out, *extra) if extra else out


def _slices(a: np.ndarray, ax: int) -> np.ndarray:
    """``a``'s slices along ``ax`` as the rows of a 2-D array (for comparing them whole)."""
    if a.size == 0 and a.shape[ax] != 0:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    return np.moveaxis(a, ax, 0).reshape(a.shape[ax], int(np.prod(a.shape)) // max(a.shape[ax], 1))


@op
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements (``dim``: the distinct slices along ``dim``), in ascending
    order, optionally with each element's index into them and each one's count. Runs
    eagerly: its output shape depends on the values."""
    x = as_t(input)
    refuse_kinds(x, "unique")
    a, dev = x._concrete("unique() (data-dependent output shape)", host=True), x.device
    if dim is None:
        flat = a.reshape(-1)  # (bfloat16 as float32: NumPy orders its NaN among the numbers)
        vals, inv, cnt = np.unique(flat.astype(np.float32) if a.dtype.kind == "V" else flat, return_inverse=True,
                                   return_counts=True, equal_nan=False)
        return _unique_result(vals.astype(a.dtype, copy=False), inv.reshape(a.shape), cnt, return_inverse,
                              return_counts, a.dtype, dev)
    ax = _axes(x, dim)[0]
    moved = _slices(a, ax)
    if a.shape[ax] == 0:
        return _unique_result(a, np.zeros(0, np.int64), np.zeros(0, np.int64), return_inverse, return_counts, a.dtype, dev)
    # slices ordered lexicographically, as torch.unique(dim=) orders them
    order = np.lexsort(moved.T[::-1])
    srt = moved[order]
    new = np.ones(len(srt), bool)
    new[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    group = np.cumsum(new) - 1
    inv = np.empty(len(srt), np.int64)
    inv[order] = group
    first = order[new]
    vals = np.take(a, first, axis=ax)
    return _unique_result(vals, inv, np.bincount(group), return_inverse, return_counts, a.dtype, dev)


@op
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapses each run of equal consecutive elements (``dim``: slices) to one."""
    x = as_t(input)
    a, dev = x._concrete("unique_consecutive() (data-dependent output shape)", host=True), x.device
    ax = None if dim is None else _axes(x, dim)[0]
    rows = a.reshape(-1, 1) if ax is None else _slices(a, ax)
    new = np.ones(len(rows), bool)
    new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    vals = a.reshape(-1)[starts] if ax is None else np.take(a, starts, axis=ax)
    inv = group.reshape(a.shape) if ax is None else group
    return _unique_result(vals, inv, np.diff(np.append(starts, len(rows))), return_inverse, return_counts, a.dtype, dev)


# ---------------------------------------------------------------- multinomial
@op
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """``num_samples`` category indices per row of the (unnormalised) probabilities
    ``input``: with replacement by inverting each row's cumulative sum at uniform draws,
    without by the exponential-race trick (the ``num_samples`` largest ``p_i / E_i`` with
    ``E_i`` standard exponential are a draw without replacement)."""
    from .factory import rand
    p = as_t(input)
    if p._data.ndim not in (1, 2):
        raise RuntimeError(f"multinomial(): prob_dist must be 1 or 2 dim, got shape {list(p.shape)}")
    if not p.dtype.is_floating_point:
        raise RuntimeError(f"multinomial(): probabilities must be a floating point tensor, got {p.dtype}")
    n = p._data.shape[-1]
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise RuntimeError(f"multinomial(): cannot sample n_sample <= 0 samples, got {num_samples}")
    if not replacement and num_samples > n:
        raise RuntimeError(f"multinomial(): cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (n_sample={num_samples}, size {n})")
    if isinstance(p._data, np.ndarray) and (np.any(p._data < 0) or not np.all(np.isfinite(p._data))):
        raise RuntimeError("multinomial(): probability tensor contains either `inf`, `nan` or element < 0")
    if isinstance(p._data, np.ndarray) and n and np.any(p._data.sum(-1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    p = p.detach()
    rows = p._data.shape[:-1]
    if replacement:
        cdf = cumsum(p, -1)
        u = rand(rows + (num_samples,), dtype=p.dtype, generator=generator) * narrow(cdf, -1, n - 1, 1)
        return clamp(P.searchsorted(cdf, u, right=True, dtype=np.dtype(np.int64)), max=n - 1)
    e = neg(log(rand(p.shape, dtype=p.dtype, generator=generator)))
    keys = where(p > 0, div(p, e), -1.0)  # a zero-probability category is never drawn first
    return topk(keys, num_samples, dim=-1).indices
