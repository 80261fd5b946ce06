"""Sorting primitives: ``argsort`` (the permutation that sorts along an axis) and
``searchsorted`` (insertion points into sorted rows). Both give integer indices, so
neither has a gradient; differentiable sorts (sort, topk) gather their values with these
indices, and ``gather``'s VJP scatters the gradient back. Their cpu lowerings are library
calls per row (codegen.cpu_index)."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive, refuse_complex
from .batchdims import broadcast_batch, example_axis, to_front
from .shapes import shape_of

__all__ = ["argsort", "searchsorted"]

def _argsort_impl(x, axis, descending):
    """Stable in both directions (equal elements keep their order, as torch's stable=True);
    NaN sorts above every number, as in PyTorch (bfloat16, which NumPy sorts without
    placing NaN, is sorted as float32: the same order)."""
    if x.dtype.kind == "V":
        x = x.astype(np.float32)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    # sort the reversed row ascending and reverse back: ties keep their original order
    n = x.shape[axis]
    r = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (n - 1 - np.flip(r, axis)).astype(np.int64, copy=False)


def _argsort_batch(args, bdims, axis, descending):
    x = to_front(args[0], bdims[0])
    return argsort(x, axis=example_axis(axis, x), descending=descending), 0


argsort = Primitive("argsort", _argsort_impl, abstract=lambda a, p: (a[0][0], np.dtype(np.int64)),
                    nondiff=True, batch=_argsort_batch)
refuse_complex(argsort, lambda t: RuntimeError("Sort does not support complex dtypes on CPU"))


def _bisect(rows_s: np.ndarray, rows_v: np.ndarray, right: bool) -> np.ndarray:
    """PyTorch's binary search, vectorized over the values (rows of ``rows_s`` against the same
    rows of ``rows_v``): move right while ``!(mid >= v)`` (``right``: ``!(mid > v)``). Where the
    sequence holds NaN, which no order places, this is what defines the result."""
    lo = np.zeros(rows_v.shape, np.int64)
    hi = np.full(rows_v.shape, rows_s.shape[-1], np.int64)
    while (lo < hi).any():
        live = lo < hi
        mid = lo + ((hi - lo) >> 1)
        at = np.take_along_axis(rows_s, np.minimum(mid, rows_s.shape[-1] - 1), -1)
        onward = ~(at > rows_v) if right else ~(at >= rows_v)
        lo = np.where(live & onward, mid + 1, lo)
        hi = np.where(live & ~onward, mid, hi)
    return lo


def _searchsorted_impl(seq, v, right, dtype):
    side = "right" if right else "left"
    if seq.dtype.kind == "V" or v.dtype.kind == "V":  # (bfloat16: searched as float32, which orders NaN)
        seq, v = seq.astype(np.float32), v.astype(np.float32)
    if seq.dtype.kind == "f" and seq.size and np.isnan(seq).any():
        rows_s = seq.reshape(-1, seq.shape[-1])
        rows_v = v.reshape(1, -1) if seq.ndim == 1 else v.reshape(-1, v.shape[-1])
        return _bisect(rows_s, rows_v, right).astype(dtype, copy=False).reshape(v.shape)
    if seq.ndim == 1:
        return np.searchsorted(seq, v, side=side).astype(dtype, copy=False)
    rows_s = seq.reshape(-1, seq.shape[-1])
    rows_v = v.reshape(-1, v.shape[-1])
    out = np.empty(rows_v.shape, dtype)
    for i in range(rows_s.shape[0]):
        out[i] = np.searchsorted(rows_s[i], rows_v[i], side=side)
    return out.reshape(v.shape)


def _searchsorted_batch(args, bdims, right, dtype):
    seq, v = args
    if bdims[0] is None and len(shape_of(seq)) == 1:  # one sorted row for every example
        return searchsorted(seq, v, right=right, dtype=dtype), bdims[1]
    if len(shape_of(seq)) - (bdims[0] is not None) == 1 and len(shape_of(v)) - (bdims[1] is not None) != 1:
        return None  # a 1-D row per example against N-D values: loop over the batch
    n = next(shape_of(a)[d] for a, d in zip(args, bdims) if d is not None)
    return searchsorted(broadcast_batch(seq, bdims[0], n), broadcast_batch(v, bdims[1], n),
                        right=right, dtype=dtype), 0


searchsorted = Primitive("searchsorted", _searchsorted_impl,
                         abstract=lambda a, p: (a[1][0], np.dtype(p["dtype"])),
                         nondiff=True, batch=_searchsorted_batch)
refuse_complex(searchsorted, lambda t: NotImplementedError(f"\"searchsorted_out_cpu\" not implemented for '{t}'"))
