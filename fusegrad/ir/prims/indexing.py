"""Indexing primitives: advanced indexing (``index``), writes into an index (``index_put``,
the transpose of both basic and advanced indexing), ``gather``/``scatter_add`` along an
axis (torch.gather and its transpose) and ``scatter_reduce``, which combines by max, min
or product instead of adding.

An index key is a tuple like a basic key (see layout.encode_key) in which the string "T"
marks where the next index-array operand goes."""
from __future__ import annotations

import numpy as np

from ..dtypes import np_half
from ..primitive import Primitive
from .batchdims import batch_size, broadcast_batch, example_axis, to_front
from .elementwise import cast, div, eq, mul, sum_to, where
from .shapes import shape_of

__all__ = ["index", "index_put", "gather", "scatter_add", "scatter_reduce", "numpy_key"]


def numpy_key(key, idx) -> tuple:
    """The NumPy index of ``key`` with its index arrays ``idx`` in place of the "T" marks."""
    it = iter(idx)
    return tuple(next(it) if k == "T" else (slice(*k) if isinstance(k, tuple) else k) for k in key)


def _along_axis(key, idx, shape):
    """The axis when ``key`` indexes one axis with one integer array and takes every other
    dim whole, else None."""
    if len(idx) != 1 or idx[0].dtype.kind not in "iu" or key.count("T") != 1 or len(key) != len(shape):
        return None  # (a None in the key adds a dimension)
    axis = key.index("T")
    if any(k != (0, n, 1) for i, (k, n) in enumerate(zip(key, shape)) if i != axis):
        return None
    return axis


def _index_impl(x, *idx, key):
    axis = _along_axis(key, idx, x.shape)
    if axis is not None:  # (np.take: several times faster than the fancy index, e.g. a convolution's windows)
        return np.take(x, idx[0], axis=axis)
    return x[numpy_key(key, idx)]


def _index_vjp(g, ins, out, needs, key):
    from .creation import full
    x, idx = ins[0], ins[1:]
    z = full(shape=shape_of(x), value=0.0, dtype=g.dtype.np)
    return (index_put(z, g, *idx, key=key, accumulate=True),) + (None,) * len(idx)


index = Primitive("index", _index_impl, vjp=_index_vjp,
                  jvp=lambda ts, ins, out, key: None if ts[0] is None else index(ts[0], *ins[1:], key=key),
                  saves="in", kind="gather", node_name="IndexBackward0", checked=slice(1, None))


def _index_put_impl(x, v, *idx, key, accumulate):
    out = np.array(x, copy=True)
    k = numpy_key(key, idx)
    if accumulate:
        if np_half(x.dtype):  # (PyTorch's CPU kernel adds one value at a time, each sum rounded to the dtype)
            np.add.at(out, k, np.asarray(v).astype(x.dtype, copy=False))
        elif not _add_along_axis(out, key, idx, v):
            np.add.at(out, k, v)
    else:
        out[k] = v
    return out


def _add_along_axis(out, key, idx, v) -> bool:
    """``out[..., i, ...] += v`` for one index array along one axis (the others whole), as
    segment sums over the sorted indices: ~10x faster than ``np.add.at`` for the
    scatter-adds that gathers of windows (convolution, pooling) have as their gradient.
    Returns False when the key has another form."""
    axis = _along_axis(key, idx, out.shape)
    if axis is None or idx[0].size == 0 or out.dtype.kind not in "fc":
        return False
    n = out.shape[axis]
    flat = idx[0].reshape(-1).astype(np.int64, copy=False)
    flat = np.where(flat < 0, flat + n, flat)
    lead, tail = out.shape[:axis], out.shape[axis + 1:]
    vals = np.broadcast_to(v, lead + idx[0].shape + tail).reshape(lead + (flat.size,) + tail)
    order = np.argsort(flat, kind="stable")
    sorted_idx = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
    sums = np.add.reduceat(np.take(vals, order, axis=axis), starts, axis=axis)
    out[(slice(None),) * axis + (sorted_idx[starts],)] += sums.astype(out.dtype, copy=False)
    return True


def _index_put_vjp(g, ins, out, needs, key, accumulate):
    v, idx = ins[1], ins[2:]
    gx = gv = None
    if needs[0]:
        gx = g if accumulate else index_put(g, 0.0, *idx, key=key, accumulate=False)
    if needs[1]:
        gv = sum_to(index(g, *idx, key=key), shape_of(v))
    return (gx, gv) + (None,) * len(idx)


def _index_put_jvp(ts, ins, out, key, accumulate):
    from .creation import full
    if ts[0] is None and ts[1] is None:
        return None
    tx = ts[0] if ts[0] is not None else full(shape=shape_of(out), value=0.0, dtype=out.dtype.np)
    tv = ts[1] if ts[1] is not None else 0.0
    return index_put(tx, tv, *ins[2:], key=key, accumulate=accumulate)


index_put = Primitive("index_put", _index_put_impl, abstract=lambda a, p: a[0], vjp=_index_put_vjp,
                      jvp=_index_put_jvp, saves="in", kind="scatter", node_name="IndexPutBackward0",
                      checked=slice(2, None))


def _check_idx(x, idx, axis, what):
    if idx.size and (idx.min() < -x.shape[axis] or idx.max() >= x.shape[axis]):  # (PyTorch: a RuntimeError)
        raise RuntimeError(f"{what}(): index {int(idx.max() if idx.max() >= x.shape[axis] else idx.min())} "
                         f"is out of bounds for dimension {axis} with size {x.shape[axis]}")


def _gather_impl(x, idx, axis):
    _check_idx(x, idx, axis, "gather")
    if idx.ndim != x.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if any(i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != axis):
        raise RuntimeError(f"Size does not match at a dimension other than {axis}: index {tuple(idx.shape)} "
                           f"vs input {tuple(x.shape)}")
    # torch.gather allows an index smaller than the input in the other dimensions
    x = x[tuple(slice(None) if d == axis else slice(0, i) for d, i in enumerate(idx.shape))]
    return np.take_along_axis(x, idx, axis=axis)


def _gather_vjp(g, ins, out, needs, axis):
    from .creation import full
    x, idx = ins
    z = full(shape=shape_of(x), value=0.0, dtype=g.dtype.np)
    return scatter_add(z, idx, g, axis=axis), None


gather = Primitive("gather", _gather_impl, abstract=lambda a, p: (a[1][0], a[0][1]), vjp=_gather_vjp,
                   jvp=lambda ts, ins, out, axis: None if ts[0] is None else gather(ts[0], ins[1], axis=axis),
                   saves="in", kind="gather", node_name="GatherBackward0", checked=slice(1, 2), mask_vjp=True)


def _scatter_at(ufunc, base, idx, src, axis, what):
    """``base`` with each ``src[p]`` (p over the index's extent) combined by ``ufunc`` into
    the position that ``idx[p]`` names along ``axis``."""
    _check_idx(base, idx, axis, what)
    if np_half(base.dtype):  # (combines in float32)
        f32 = np.float32
        return _scatter_at(ufunc, base.astype(f32), idx, src.astype(f32), axis, what).astype(base.dtype)
    out = np.array(base, copy=True)
    grids = list(np.indices(idx.shape, sparse=True))
    grids[axis] = idx
    ufunc.at(out, tuple(grids), src[tuple(slice(0, s) for s in idx.shape)])
    return out


def _linear_scatter(tb, idx, ts, out, src, axis):
    """``scatter_add`` of tangents ``tb`` (of the base) and ``ts`` (of src), None for zero."""
    from .creation import full
    if tb is None and ts is None:
        return None
    tb = tb if tb is not None else full(shape=shape_of(out), value=0.0, dtype=out.dtype.np)
    ts = ts if ts is not None else full(shape=shape_of(src), value=0.0, dtype=out.dtype.np)
    return scatter_add(tb, idx, ts, axis=axis)


def _scatter_add_vjp(g, ins, out, needs, axis):
    base, idx, src = ins
    gs = None
    if needs[2]:
        gs = gather(g, idx, axis=axis)
        src_shape, idx_shape = shape_of(src), shape_of(idx)
        if src_shape != idx_shape:  # src elements beyond the index's extent are unused: zero grads
            from .layout import pad
            gs = pad(gs, widths=tuple((0, s - i) for s, i in zip(src_shape, idx_shape)), value=0.0)
    return (g if needs[0] else None), None, gs


scatter_add = Primitive("scatter_add", lambda base, idx, src, axis: _scatter_at(np.add, base, idx, src, axis,
                                                                                 "scatter_add"),
                        abstract=lambda a, p: a[0], vjp=_scatter_add_vjp,
                        jvp=lambda ts, ins, out, axis: _linear_scatter(ts[0], ins[1], ts[2], out, ins[2], axis),
                        saves="in", kind="scatter", node_name="ScatterAddBackward0", checked=slice(1, 2))

_REDUCE_UFUNCS = {"amax": np.maximum, "amin": np.minimum, "prod": np.multiply}


def _scatter_reduce_impl(base, idx, src, axis, reduce):
    if src.shape != idx.shape:  # (the runtime passes src cut to the index's extent; the VJP relies on it)
        raise ValueError(f"scatter_reduce: src {src.shape} and index {idx.shape} differ in shape")
    return _scatter_at(_REDUCE_UFUNCS[reduce], base, idx, src, axis, "scatter_reduce")


def _scatter_reduce_derivs(ins, out, axis, reduce):
    """(d out / d base, ``of_src``) as PyTorch's scatter_reduce_backward: amax/amin share
    evenly among the members equal to the result (NaN where it is NaN); prod takes the
    product of the other members, exact with zeros (that of the non-zero others for the
    only zero, else 0). ``of_src(w)``: w[idx[p]] * d out[idx[p]] / d src[p] for a w of out's
    shape (None: ones), each position's terms combined before the gathers."""
    base, idx, src = ins
    dt = out.dtype.np
    scale = lambda w, t: t if w is None else mul(w, t)  # noqa: E731
    at_src = lambda t: gather(t, idx, axis=axis)  # noqa: E731
    if reduce in ("amax", "amin"):
        base_is = cast(eq(base, out), dtype=dt)
        src_is = cast(eq(src, at_src(out)), dtype=dt)
        share = div(1.0, scatter_add(base_is, idx, src_is, axis=axis))
        return mul(base_is, share), lambda w: mul(src_is, at_src(scale(w, share)))
    base0, src0 = eq(base, 0), eq(src, 0)
    nz_base, nz_src = where(base0, 1.0, base), where(src0, 1.0, src)
    zeros = scatter_add(cast(base0, dtype=dt), idx, cast(src0, dtype=dt), axis=axis)
    # the product of the others for the only zero at a position; 0 where there are more
    only = where(eq(zeros, 1.0), scatter_reduce(nz_base, idx, nz_src, axis=axis, reduce="prod"), 0.0)
    return where(base0, only, div(out, nz_base)), \
        lambda w: where(src0, at_src(scale(w, only)), div(at_src(scale(w, out)), nz_src))


def _scatter_reduce_vjp(g, ins, out, needs, axis, reduce):
    d_base, of_src = _scatter_reduce_derivs(ins, out, axis, reduce)
    return (mul(g, d_base) if needs[0] else None), None, (of_src(g) if needs[2] else None)


def _scatter_reduce_jvp(ts, ins, out, axis, reduce):
    if ts[0] is None and ts[2] is None:
        return None
    d_base, of_src = _scatter_reduce_derivs(ins, out, axis, reduce)
    return _linear_scatter(None if ts[0] is None else mul(ts[0], d_base), ins[1],
                           None if ts[2] is None else mul(ts[2], of_src(None)), out, ins[2], axis)


# ``reduce`` is one of _REDUCE_UFUNCS's; base takes part at every position (include_self=False
# is the runtime's: a base holding the reduction's identity where the index points)
scatter_reduce = Primitive("scatter_reduce", _scatter_reduce_impl, abstract=lambda a, p: a[0],
                           vjp=_scatter_reduce_vjp, jvp=_scatter_reduce_jvp, saves="in,out", kind="scatter",
                           node_name="ScatterReduceBackward0")


# ---------------------------------------------------------------- batching rules (vmap)
def _gather_batch(args, bdims, axis):
    n = batch_size(args, bdims)
    x, idx = (broadcast_batch(a, d, n) for a, d in zip(args, bdims))
    return gather(x, idx, axis=example_axis(axis, x)), 0


def _scatter_batch(prim):
    def rule(args, bdims, axis, **params):
        n = batch_size(args, bdims)
        base, idx, src = (broadcast_batch(a, d, n) for a, d in zip(args, bdims))
        return prim(base, idx, src, axis=example_axis(axis, base), **params), 0
    return rule


def _index_batch(args, bdims, key):
    """Only the indexed tensor batched, and its integer/array indices adjacent (so NumPy
    keeps the indexed axes in place); other cases take the fallback."""
    pos = [i for i, k in enumerate(key) if not isinstance(k, tuple) and k is not None]
    if any(d is not None for d in bdims[1:]) or (pos and pos[-1] - pos[0] + 1 != len(pos)):
        return None
    x = to_front(args[0], bdims[0])
    return index(x, *args[1:], key=((0, shape_of(x)[0], 1),) + tuple(key)), 0


gather.batch = _gather_batch
scatter_add.batch = _scatter_batch(scatter_add)
scatter_reduce.batch = _scatter_batch(scatter_reduce)
index.batch = _index_batch
