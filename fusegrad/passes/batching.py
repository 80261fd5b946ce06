"""Batching rules: how each primitive maps over a batch dimension (the engine of vmap).

A rule is ``rule(args, bdims, **params) -> (out, out_bdim)``: ``args`` are Tensors or
Python scalars, ``bdims`` the batch axis of each (None = unbatched). Rules call primitives,
so they run eagerly, record autograd, and trace into an enclosing trace (vmap inside
compile or inside another vmap). ``batch_eqn`` applies the rule for one primitive, or the
generic fallback (loop over the batch and stack) when it has none."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..ir import prims as P
from ..ir.primitive import PRIMS
from ..ir.prims.elementwise import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from ..runtime.tensor import Tensor

Rule = Callable[..., tuple]
RULES: dict[str, Rule] = {}
STATS = {"fallback": 0}  # equations batched by the generic loop (read by tests)


def _rule(*names: str):
    def deco(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return deco


# ---------------------------------------------------------------- helpers
def move_bdim(x: Tensor, src: int, dst: int) -> Tensor:
    """``x`` with axis ``src`` moved to position ``dst``."""
    nd = x._data.ndim
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return P.transpose(x, perm=tuple(perm))


def to_front(x: Tensor, bdim: Optional[int]) -> Tensor:
    return x if bdim is None else move_bdim(x, bdim, 0)


def batch_size(args: Sequence, bdims: Sequence) -> int:
    return next(a._data.shape[d] for a, d in zip(args, bdims) if d is not None)


def broadcast_batch(x: Tensor, bdim: Optional[int], size: int) -> Tensor:
    """``x`` with its batch at axis 0, materialised (as a broadcast view) when unbatched."""
    if bdim is None:
        return P.broadcast_to(P.reshape(x, shape=(1,) + x._data.shape), shape=(size,) + x._data.shape)
    return to_front(x, bdim)


def _axis(axis: int, x: Tensor) -> int:
    """A per-example axis as an axis of the batched ``x`` (batch at 0)."""
    return axis % max(x._data.ndim - 1, 1) + 1


def _example_ndim(a, d) -> int:
    return a._data.ndim - (d is not None) if isinstance(a, Tensor) else 0


def align(args: Sequence, bdims: Sequence) -> list:
    """Operands for a per-example broadcasting primitive (elementwise, matmul): batched
    tensors get their batch at axis 0 and size-1 axes after it up to ``1 + max example
    rank``; unbatched ones stay as they are, since NumPy's right-aligned broadcasting then
    applies per example."""
    r = max(_example_ndim(a, d) for a, d in zip(args, bdims))
    out = []
    for a, d in zip(args, bdims):
        if not isinstance(a, Tensor) or d is None:
            out.append(a)
            continue
        a = to_front(a, d)
        shp = a._data.shape
        out.append(a if len(shp) == r + 1 else P.reshape(a, shape=shp[:1] + (1,) * (r + 1 - len(shp)) + shp[1:]))
    return out


# ---------------------------------------------------------------- rules
_ELEMENTWISE = [p.name for p in ELEMENTWISE_UNARY + ELEMENTWISE_BINARY] + [
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan",
    "stop_gradient", "where", "cast"]


def _elementwise(prim):
    def rule(args, bdims, **params):
        return prim(*align(args, bdims), **params), 0
    return rule


for _name in _ELEMENTWISE:
    RULES[_name] = _elementwise(PRIMS[_name])

_mm_broadcast = _elementwise(P.matmul)


@_rule("matmul")
def _matmul(args, bdims):
    """A batched matrix times an unbatched 2-D one is one GEMM, not a loop of batched
    small products: the batch folds into the free dimension (the cotangent batch of
    jacrev through ``W @ x`` becomes one (B, k) x (k, m) product)."""
    (a, b), (da, db) = args, bdims
    if da is None and db is not None and a._data.ndim == 2 and b._data.ndim == 3:
        bf = to_front(b, db)
        n_b, k, n = bf._data.shape
        m = a._data.shape[0]
        if n == 1:
            r = P.matmul(P.reshape(bf, shape=(n_b, k)), P.transpose(a, perm=(1, 0)))
            return P.reshape(r, shape=(n_b, m, 1)), 0
        t = P.reshape(P.transpose(bf, perm=(1, 0, 2)), shape=(k, n_b * n))
        return P.reshape(P.matmul(a, t), shape=(m, n_b, n)), 1
    if db is None and da is not None and b._data.ndim == 2 and a._data.ndim == 3:
        af = to_front(a, da)
        n_b, m, k = af._data.shape
        r = P.matmul(P.reshape(af, shape=(n_b * m, k)), b)
        return P.reshape(r, shape=(n_b, m, b._data.shape[1])), 0
    return _mm_broadcast(args, bdims)


def _reducer(prim):
    def rule(args, bdims, axes, keepdims):
        x = to_front(args[0], bdims[0])
        return prim(x, axes=tuple(a + 1 for a in axes), keepdims=keepdims), 0
    return rule


def _arg_reducer(prim):
    def rule(args, bdims, axis, keepdims):
        x = to_front(args[0], bdims[0])
        return prim(x, axis=_axis(axis, x), keepdims=keepdims), 0
    return rule


for _p in (P.reduce_sum, P.reduce_max, P.reduce_min, P.reduce_prod):
    RULES[_p.name] = _reducer(_p)
for _p in (P.argmax, P.argmin):
    RULES[_p.name] = _arg_reducer(_p)


@_rule("cumsum")
def _cumsum(args, bdims, axis):
    x = to_front(args[0], bdims[0])
    return P.cumsum(x, axis=_axis(axis, x)), 0


@_rule("reshape")
def _reshape(args, bdims, shape):
    x = to_front(args[0], bdims[0])
    return P.reshape(x, shape=(x._data.shape[0],) + tuple(shape)), 0


@_rule("transpose")
def _transpose(args, bdims, perm):
    x = to_front(args[0], bdims[0])
    return P.transpose(x, perm=(0,) + tuple(p + 1 for p in perm)), 0


@_rule("broadcast_to")
def _broadcast_to(args, bdims, shape):
    x = to_front(args[0], bdims[0])
    r = len(shape) + 1 - x._data.ndim
    x = P.reshape(x, shape=x._data.shape[:1] + (1,) * r + x._data.shape[1:]) if r > 0 else x
    return P.broadcast_to(x, shape=x._data.shape[:1] + tuple(shape)), 0


@_rule("slice")
def _slice(args, bdims, key):
    x = to_front(args[0], bdims[0])
    return P.slice_(x, key=((0, x._data.shape[0], 1),) + tuple(key)), 0


@_rule("embed")
def _embed(args, bdims, key, shape):
    g = to_front(args[0], bdims[0])
    n = g._data.shape[0]
    return P.embed(g, key=((0, n, 1),) + tuple(key), shape=(n,) + tuple(shape)), 0


@_rule("flip")
def _flip(args, bdims, axes):
    x = to_front(args[0], bdims[0])
    return P.flip(x, axes=tuple(_axis(a, x) for a in axes)), 0


@_rule("concatenate")
def _concatenate(args, bdims, axis):
    n = batch_size(args, bdims)
    xs = [broadcast_batch(a, d, n) for a, d in zip(args, bdims)]
    return P.concatenate(*xs, axis=_axis(axis, xs[0])), 0


@_rule("pad")
def _pad(args, bdims, widths, value):
    x = to_front(args[0], bdims[0])
    return P.pad(x, widths=((0, 0),) + tuple(tuple(w) for w in widths), value=value), 0


@_rule("gather")
def _gather(args, bdims, axis):
    n = batch_size(args, bdims)
    x, idx = (broadcast_batch(a, d, n) for a, d in zip(args, bdims))
    return P.gather(x, idx, axis=_axis(axis, x)), 0


@_rule("scatter_add")
def _scatter_add(args, bdims, axis):
    n = batch_size(args, bdims)
    base, idx, src = (broadcast_batch(a, d, n) for a, d in zip(args, bdims))
    return P.scatter_add(base, idx, src, axis=_axis(axis, base)), 0


@_rule("index")
def _index(args, bdims, key):
    """Only the indexed tensor batched, and its integer/array indices adjacent (so NumPy
    keeps the indexed axes in place); other cases take the fallback."""
    pos = [i for i, k in enumerate(key) if not isinstance(k, tuple) and k is not None]
    if any(d is not None for d in bdims[1:]) or (pos and pos[-1] - pos[0] + 1 != len(pos)):
        return None
    x = to_front(args[0], bdims[0])
    return P.index(x, *args[1:], key=((0, x._data.shape[0], 1),) + tuple(key)), 0


# ---------------------------------------------------------------- applying
def fallback(prim, args: Sequence, bdims: Sequence, params: dict) -> tuple:
    """Apply ``prim`` example by example and stack the results along axis 0."""
    from ..runtime import ops as O
    STATS["fallback"] += 1
    n = batch_size(args, bdims)
    outs = [prim(*[O.select(a, d, b) if d is not None else a for a, d in zip(args, bdims)], **params)
            for b in range(n)]
    return O.stack(outs, 0), 0


def batch_eqn(prim, args: Sequence, bdims: Sequence, params: dict, randomness: str = "error") -> tuple:
    """``(out, out_bdim)`` for ``prim(*args, **params)`` mapped over the batched args."""
    if prim.effect and randomness == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                           "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                           "out of vmap")
    if prim.effect and randomness == "different":
        raise NotImplementedError("vmap: randomness='different' is not supported yet; use 'same'")
    if all(d is None for d in bdims):
        return prim(*args, **params), None
    rule = RULES.get(prim.name)
    res = rule(args, bdims, **params) if rule is not None else None
    return res if res is not None else fallback(prim, args, bdims, params)
