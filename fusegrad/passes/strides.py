"""Views of stored values as strided layouts: a chain of transposes, slices, broadcasts and
reshapes over a row-major buffer reads it at ``offset + sum(index[d] * strides[d])`` (in
elements) as long as every reshape keeps the layout strided (NumPy's rule for reshaping
without a copy). Library calls that take strided operands (BLAS's leading dimensions) read
such a view in place instead of a copy."""
from __future__ import annotations

from typing import Optional

from ..ir import prims as P
from ..ir.graph import Var


def row_major(shape: tuple) -> list:
    """The strides of a C-contiguous array of ``shape``."""
    strides, st = [], 1
    for s in reversed(shape):
        strides.append(st)
        st *= s
    return strides[::-1]


def strided_view(aliases: dict, v: Var) -> Optional[tuple]:
    """(base, offset, strides) of alias ``v`` over the stored value ``base`` it views, or
    None when ``v`` is no alias or some view in its chain needs a copy (a flip, a reshape
    that merges dims the chain has moved apart)."""
    chain = []
    while v.id in aliases:
        e = aliases[v.id]
        if not isinstance(e.inputs[0], Var):
            return None
        chain.append(e)
        v = e.inputs[0]
    if not chain or 0 in v.shape:
        return None
    shape, strides, off = tuple(v.shape), row_major(v.shape), 0
    for e in reversed(chain):
        if e.prim is P.transpose:
            perm = e.params["perm"]
            shape, strides = tuple(shape[p] for p in perm), [strides[p] for p in perm]
        elif e.prim is P.broadcast_to:
            lead = e.out.ndim - len(shape)
            strides = [0] * lead + [0 if s == 1 and t != 1 else st
                                    for s, t, st in zip(shape, e.out.shape[lead:], strides)]
            shape = tuple(e.out.shape)
        elif e.prim is P.slice_:
            shape, strides, off = _sliced(e.params["key"], shape, strides, off)
        elif e.prim is P.reshape:
            strides = _reshaped(shape, strides, tuple(e.out.shape))
            if strides is None:
                return None
            shape = tuple(e.out.shape)
        else:
            return None
        if shape != tuple(e.out.shape):
            return None
    return v, off, tuple(strides)


def _sliced(key: tuple, shape: tuple, strides: list, off: int) -> tuple:
    """A normalized slice key (``layout.normalize_key``: (start, stop, step) with a positive
    step, a non-negative int, None for a new dim) applied to a strided layout."""
    out_shape, out_strides, d = [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        if isinstance(k, tuple):
            start, stop, step = k
            off += start * strides[d]
            out_shape.append(len(range(start, stop, step)))
            out_strides.append(step * strides[d])
        else:
            off += k * strides[d]
        d += 1
    return tuple(out_shape) + tuple(shape[d:]), out_strides + list(strides[d:]), off


def _reshaped(shape: tuple, strides: list, new: tuple) -> Optional[list]:
    """The strides of ``new`` viewing the layout (``shape``, ``strides``) without a copy, or
    None: each run of dims that merges or splits must be contiguous within itself."""
    old = [(s, st) for s, st in zip(shape, strides) if s != 1]
    dims = [d for d, s in enumerate(new) if s != 1]
    res = [0] * len(new)
    i = j = 0
    while i < len(old) and j < len(dims):
        oi, nj = i + 1, j + 1
        osize, nsize = old[i][0], new[dims[j]]
        while osize != nsize:
            if osize < nsize:
                if oi == len(old):
                    return None
                osize *= old[oi][0]
                oi += 1
            else:
                if nj == len(dims):
                    return None
                nsize *= new[dims[nj]]
                nj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(i, oi - 1)):
            return None
        st = old[oi - 1][1]
        for k in range(nj - 1, j - 1, -1):
            res[dims[k]] = st
            st *= new[dims[k]]
        i, j = oi, nj
    if i != len(old) or j != len(dims):
        return None
    return res
