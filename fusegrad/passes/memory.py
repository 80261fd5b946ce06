"""Memory planning for a fused program: which buffer each materialized intermediate uses.

Intermediates (group outputs that are not graph outputs) share buffers: when a group
starts, the buffers of values whose last reader has run are free, and a new value takes a
free buffer of the same element count and dtype. A loop group without reductions may write
a value in place over an operand that dies in that group when every read of the operand
is at the very element being written (same shape and index map, no view in between).

Donations: a graph output that the caller copies over an argument afterwards (an SGD
update of a parameter) may be computed straight into that argument's array when nothing
reads the argument after the group that writes the output, under the same rule, or as
the accumulator of a GEMM epilogue (``C = alpha * A @ B + C``)."""
from __future__ import annotations

from typing import Iterable

from ..ir import prims as P
from ..ir.graph import Var
from .fusion import CallGroup, Fused, LoopGroup


def _base(f: Fused, v):
    """The value a view (alias) reads, through chains of views."""
    while isinstance(v, Var) and v.id in f.aliases:
        v = f.aliases[v.id].inputs[0]
    return v


def _last_reads(f: Fused) -> dict:
    """var id -> index of the last group that reads it (through aliases too)."""
    last: dict = {}
    for gi, g in enumerate(f.groups):
        for e in (g.eqns if isinstance(g, LoopGroup) else [g.eqn]):
            for a in e.inputs:
                if isinstance(a, Var):
                    last[_base(f, a).id] = gi
    return last


def _in_place_ok(f: Fused, g: LoopGroup, out: Var, src: Var) -> bool:
    """Every read of ``src`` in ``g`` is a direct operand of an elementwise op at ``out``'s
    own index (a transpose member or a read through an alias is at another element)."""
    if g.red_axes or src.shape != out.shape or src.dtype != out.dtype:
        return False
    for e in g.eqns:
        for a in e.inputs:
            b = _base(f, a)
            if isinstance(b, Var) and b.id == src.id:
                if a is not b or e.prim.kind != "elementwise" or a.ndim != e.out.ndim \
                        or g.maps[e.out.id] != g.maps[out.id]:
                    return False
    return True


def plan(f: Fused, unplanned: Iterable = ()) -> dict:
    """Map each intermediate var id to the id of the buffer it occupies (a buffer is named
    by the first var stored in it). Graph inputs, consts, outputs and the vars of
    ``unplanned`` (a backend places them itself: concatenations whose parts are computed
    into them, which stay in use as long as those parts) are not planned."""
    keep = {v.id for v in f.outputs if isinstance(v, Var)} | set(unplanned)
    keep.update(v.id for v in f.graph.inputs)
    keep.update(v.id for v, _ in f.graph.consts)
    last = _last_reads(f)
    slot: dict = {}  # var id -> buffer id
    meta: dict = {}  # buffer id -> (size, dtype)
    live: dict = {}  # buffer id -> var whose value it holds
    free: list = []  # buffer ids whose contents are dead
    for gi, g in enumerate(f.groups):
        dying = {b: v for b, v in live.items() if last.get(v.id, -1) <= gi}
        for v in f.outputs_of(gi):
            if v.id in keep:
                continue
            b = next((b for b in free if meta[b] == (v.size, v.dtype)), None)
            if b is not None:
                free.remove(b)
            elif isinstance(g, LoopGroup):
                b = next((b for b, w in dying.items() if live.get(b) is w and _in_place_ok(f, g, v, w)), None)
            if b is None:
                b = v.id
                meta[b] = (v.size, v.dtype)
            slot[v.id] = b
            live[b] = v
        for b, w in dying.items():
            if live.get(b) is w:
                del live[b]
                free.append(b)
    return slot


def donations(f: Fused, donate: dict) -> dict:
    """Output var id -> argument var id for the pairs of ``donate`` (output position ->
    argument position, arguments being graph inputs then consts) that may share a buffer."""
    args = f.graph.arguments()
    outs = [v for v in f.outputs if isinstance(v, Var)]
    last = _last_reads(f)
    res: dict = {}
    for oi, ai in donate.items():
        o, x = f.outputs[oi], args[ai]
        if (not isinstance(o, Var) or (o.shape, o.dtype) != (x.shape, x.dtype) or x.id in res.values()
                or any(v.id == x.id for v in outs) or sum(v.id == o.id for v in outs) != 1
                or any(a.id == o.id for a in args)):
            continue
        gi = f.owner.get(o.id)
        if gi is None or last.get(x.id, -1) > gi:
            continue
        g = f.groups[gi]
        if isinstance(g, LoopGroup):
            ok = _in_place_ok(f, g, o, x)
        else:
            e = g.eqn
            ok = (isinstance(g, CallGroup) and e.prim is P.matmul and len(e.inputs) == 3
                  and e.inputs[2] is x and all(_base(f, a) is not x for a in e.inputs[:2]))
        if ok:
            res[o.id] = x.id
    return res
