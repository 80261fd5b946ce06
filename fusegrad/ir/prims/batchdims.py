"""Helpers for batching rules (vmap), which each family registers on its primitives as
``prim.batch``.

A rule is ``rule(args, bdims, **params) -> (out, out_bdim)`` or None (then vmap loops over
the batch): ``args`` are tensors or Python scalars, ``bdims`` the batch axis of each (None =
unbatched, and at least one is batched). Rules call primitives, so they run eagerly,
record autograd and trace into an enclosing trace. Elementwise primitives need no rule:
``elementwise_rule`` serves every primitive of kind ``"elementwise"``."""
from __future__ import annotations

from typing import Optional, Sequence

from .shapes import shape_of


def move_bdim(x, src: int, dst: int):
    """``x`` with axis ``src`` moved to position ``dst``."""
    from .layout import transpose
    nd = len(shape_of(x))
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm=tuple(perm))


def to_front(x, bdim: Optional[int]):
    return x if bdim is None else move_bdim(x, bdim, 0)


def batch_size(args: Sequence, bdims: Sequence) -> int:
    return next(shape_of(a)[d] for a, d in zip(args, bdims) if d is not None)


def broadcast_batch(x, bdim: Optional[int], size: int):
    """``x`` with its batch at axis 0, materialised (as a broadcast view) when unbatched."""
    from .layout import broadcast_to, reshape
    if bdim is None:
        s = shape_of(x)
        return broadcast_to(reshape(x, shape=(1,) + s), shape=(size,) + s)
    return to_front(x, bdim)


def example_axis(axis: int, x) -> int:
    """A per-example axis as an axis of the batched ``x`` (batch at 0)."""
    return axis % max(len(shape_of(x)) - 1, 1) + 1


def align(args: Sequence, bdims: Sequence) -> list:
    """Operands for a per-example broadcasting primitive (elementwise, matmul): batched
    tensors get their batch at axis 0 and size-1 axes after it up to ``1 + max example
    rank``; unbatched ones stay as they are, since NumPy's right-aligned broadcasting then
    applies per example."""
    from .layout import reshape
    r = max(len(shape_of(a)) - (d is not None) for a, d in zip(args, bdims))
    out = []
    for a, d in zip(args, bdims):
        if d is None:
            out.append(a)
            continue
        a = to_front(a, d)
        shp = shape_of(a)
        out.append(a if len(shp) == r + 1 else reshape(a, shape=shp[:1] + (1,) * (r + 1 - len(shp)) + shp[1:]))
    return out


def elementwise_rule(prim, args: Sequence, bdims: Sequence, params: dict) -> tuple:
    """The batching rule of every elementwise primitive."""
    return prim(*align(args, bdims), **params), 0
