"""Layout primitives: broadcast, reshape, transpose, basic slicing, flip, concatenate, pad.

Eagerly they return NumPy views where NumPy can (``view`` marks the ones that alias their
input, so the runtime shares the version counter)."""
from __future__ import annotations

import functools

import numpy as np

from ..primitive import Primitive
from .batchdims import batch_size, broadcast_batch, example_axis, to_front
from .elementwise import sum_to
from .shapes import shape_of

__all__ = ["broadcast_to", "reshape", "transpose", "slice_", "embed", "flip", "concatenate", "pad",
           "decode_key", "encode_key"]


def _bcast_vjp(g, ins, out, needs, shape):
    return (sum_to(g, shape_of(ins[0])),)


broadcast_to = Primitive("broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
                         abstract=lambda a, p: (tuple(p["shape"]), a[0][1]), vjp=_bcast_vjp,
                         jvp=lambda ts, ins, out, shape: None if ts[0] is None else broadcast_to(ts[0], shape=shape),
                         kind="layout", node_name="ExpandBackward0")


def _reshape_impl(x, shape):
    return np.reshape(x, shape)


reshape = Primitive("reshape", _reshape_impl, abstract=lambda a, p: (tuple(p["shape"]), a[0][1]),
                    vjp=lambda g, ins, out, needs, shape: (reshape(g, shape=shape_of(ins[0])),),
                    jvp=lambda ts, ins, out, shape: None if ts[0] is None else reshape(ts[0], shape=shape),
                    kind="layout", node_name="ViewBackward0")


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


transpose = Primitive("transpose", lambda x, perm: np.transpose(x, perm),
                      abstract=lambda a, p: (tuple(a[0][0][i] for i in p["perm"]), a[0][1]),
                      vjp=lambda g, ins, out, needs, perm: (transpose(g, perm=_inverse(perm)),),
                      jvp=lambda ts, ins, out, perm: None if ts[0] is None else transpose(ts[0], perm=perm),
                      kind="layout", node_name="PermuteBackward0")


# A basic-indexing key is a tuple of ints, None (new axis) and (start, stop, step) triples,
# so that it hashes (IR params are hashable) and states the view exactly.
def encode_key(key, shape) -> tuple:
    """Normalize a basic index (ints, slices, None, Ellipsis) against ``shape``."""
    if not isinstance(key, tuple):
        key = (key,)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    out, dim = [], 0
    for k in key:
        if k is Ellipsis:
            for _ in range(len(shape) - n_real):
                out.append((0, shape[dim], 1))
                dim += 1
        elif k is None:
            out.append(None)
        elif isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            out.append(k.indices(shape[dim]))
            dim += 1
        else:
            k = int(k)
            if not -shape[dim] <= k < shape[dim]:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {shape[dim]}")
            out.append(k % shape[dim])
            dim += 1
    while dim < len(shape):
        out.append((0, shape[dim], 1))
        dim += 1
    return tuple(out)


@functools.lru_cache(maxsize=4096)  # keys repeat (one per indexing site): decode once
def decode_key(key) -> tuple:
    return tuple(slice(*k) if isinstance(k, tuple) else k for k in key)


def _slice_vjp(g, ins, out, needs, key):
    return (embed(g, key=key, shape=shape_of(ins[0])),)


def _embed_impl(g, key, shape):
    out = np.zeros(shape, dtype=g.dtype)
    out[decode_key(key)] = g
    return out


embed = Primitive("embed", _embed_impl, abstract=lambda a, p: (tuple(p["shape"]), a[0][1]),
                  vjp=lambda g, ins, out, needs, key, shape: (slice_(g, key=key),),
                  jvp=lambda ts, ins, out, key, shape: None if ts[0] is None else embed(ts[0], key=key, shape=shape),
                  kind="scatter", node_name="SliceBackwardBackward0")


def _slice_impl(x, key):
    # the trailing Ellipsis keeps an all-integer index a 0-d view of x's memory (NumPy would
    # return a scalar copy, and an in-place update of x[0] would then be lost)
    return x[decode_key(key) + (Ellipsis,)]


slice_ = Primitive("slice", _slice_impl, vjp=_slice_vjp,
                   jvp=lambda ts, ins, out, key: None if ts[0] is None else slice_(ts[0], key=key),
                   kind="layout", node_name="SliceBackward0")


flip = Primitive("flip", lambda x, axes: np.flip(x, axes).copy(), abstract=lambda a, p: a[0],
                 vjp=lambda g, ins, out, needs, axes: (flip(g, axes=axes),),
                 jvp=lambda ts, ins, out, axes: None if ts[0] is None else flip(ts[0], axes=axes),
                 kind="layout", node_name="FlipBackward0")


def _concat_abstract(avals, params):
    ax = params["axis"]
    shp = list(avals[0][0])
    shp[ax] = sum(a[0][ax] for a in avals)
    return tuple(shp), avals[0][1]


def _concat_vjp(g, ins, out, needs, axis):
    grads, start = [], 0
    nd = len(shape_of(g))
    for x, n in zip(ins, needs):
        size = shape_of(x)[axis]
        if n:
            key = tuple((start, start + size, 1) if d == axis else (0, shape_of(g)[d], 1) for d in range(nd))
            grads.append(slice_(g, key=key))
        else:
            grads.append(None)
        start += size
    return tuple(grads)


def _concat_jvp(ts, ins, out, axis):
    if all(t is None for t in ts):
        return None
    from .creation import full
    parts = [t if t is not None else full(shape=shape_of(x), value=0.0, dtype=out.dtype.np) for t, x in zip(ts, ins)]
    return concatenate(*parts, axis=axis)


concatenate = Primitive("concatenate", lambda *xs, axis: np.concatenate(xs, axis=axis),
                        abstract=_concat_abstract, vjp=_concat_vjp, jvp=_concat_jvp, kind="layout",
                        node_name="CatBackward0")


def _pad_vjp(g, ins, out, needs, widths, value):
    key = tuple((lo, lo + s, 1) for (lo, hi), s in zip(widths, shape_of(ins[0])))
    return (slice_(g, key=key),)


pad = Primitive("pad", lambda x, widths, value: np.pad(x, widths, constant_values=value),
                vjp=_pad_vjp,
                jvp=lambda ts, ins, out, widths, value: None if ts[0] is None else pad(ts[0], widths=widths, value=0.0),
                kind="layout", node_name="ConstantPadNdBackward0")

for _p in (broadcast_to, reshape, transpose, slice_, flip):  # index remaps, to fusion and lowering
    _p.kind = "view"
for _p in (broadcast_to, transpose, slice_):  # (flip copies, as PyTorch's)
    _p.aliases = True
reshape.aliases = "maybe"


# ---------------------------------------------------------------- batching rules (vmap)
def _reshape_batch(args, bdims, shape):
    x = to_front(args[0], bdims[0])
    return reshape(x, shape=shape_of(x)[:1] + tuple(shape)), 0


def _transpose_batch(args, bdims, perm):
    x = to_front(args[0], bdims[0])
    return transpose(x, perm=(0,) + tuple(p + 1 for p in perm)), 0


def _broadcast_to_batch(args, bdims, shape):
    x = to_front(args[0], bdims[0])
    s = shape_of(x)
    r = len(shape) + 1 - len(s)
    x = reshape(x, shape=s[:1] + (1,) * r + s[1:]) if r > 0 else x
    return broadcast_to(x, shape=s[:1] + tuple(shape)), 0


def _slice_batch(args, bdims, key):
    x = to_front(args[0], bdims[0])
    return slice_(x, key=((0, shape_of(x)[0], 1),) + tuple(key)), 0


def _embed_batch(args, bdims, key, shape):
    g = to_front(args[0], bdims[0])
    n = shape_of(g)[0]
    return embed(g, key=((0, n, 1),) + tuple(key), shape=(n,) + tuple(shape)), 0


def _flip_batch(args, bdims, axes):
    x = to_front(args[0], bdims[0])
    return flip(x, axes=tuple(example_axis(a, x) for a in axes)), 0


def _concatenate_batch(args, bdims, axis):
    n = batch_size(args, bdims)
    xs = [broadcast_batch(a, d, n) for a, d in zip(args, bdims)]
    return concatenate(*xs, axis=example_axis(axis, xs[0])), 0


def _pad_batch(args, bdims, widths, value):
    x = to_front(args[0], bdims[0])
    return pad(x, widths=((0, 0),) + tuple(tuple(w) for w in widths), value=value), 0


reshape.batch = _reshape_batch
transpose.batch = _transpose_batch
broadcast_to.batch = _broadcast_to_batch
slice_.batch = _slice_batch
embed.batch = _embed_batch
flip.batch = _flip_batch
concatenate.batch = _concatenate_batch
pad.batch = _pad_batch
