"""Splitting a joint forward+backward graph (from ``vjp_graph``) into a forward graph that
also returns saved residuals, and a backward graph that takes residuals and cotangents.

What is saved versus recomputed in the backward is the ``remat`` policy:
- ``"none"``: save every forward value the backward reads;
- ``"max"``: recompute every cheap op (elementwise, layout, fills) from the nearest
  inputs or expensive results (matmul, reductions, gathers, scans, random);
- ``"auto"``: a minimum cut over the forward values the backward needs, cost = bytes
  kept alive, with expensive results never recomputed (as AOTAutograd does).
Under every policy, values marked ``recompute`` (computed inside a ``checkpoint`` region)
are never saved, expensive or not: the backward recomputes them from the region's inputs."""
from __future__ import annotations

from ..ir import prims as P
from ..ir.graph import Graph, Var
from .dce import dce
from .mincut import INF, FlowGraph

RECOMPUTABLE = frozenset({"elementwise", "view", "layout", "creation"})
REMAT_POLICIES = ("none", "max", "auto")
EXACT_TESTS = frozenset({P.eq, P.ne})


def _cheap(e) -> bool:
    return e.prim.kind in RECOMPUTABLE and not e.prim.effect


def _bytes(v: Var) -> int:
    return v.size * v.dtype.itemsize + 1  # +1: of equal-size choices, save fewer values


def _saved_mincut(producer: dict, primals: dict, needed: list, hinted: set) -> set:
    """Ids of the values to save: a minimum cut (in bytes) between what must exist in
    the forward (primals, expensive results) and what the backward reads. Each value is
    split into an in-node and an out-node joined by an edge of its size: cutting that
    edge means saving the value; everything past the cut is recomputed. ``hinted``
    values cannot be cut (saved) and may be recomputed even when expensive."""
    fg = FlowGraph()
    src, sink = ("source",), ("sink",)
    seen: set = set()
    stack = list(needed)
    while stack:  # the ancestors of what the backward needs
        v = stack.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        fg.add_edge((v.id, "in"), (v.id, "out"), INF if v.id in hinted else _bytes(v))
        e = producer.get(v.id)
        if e is None or not (_cheap(e) or v.id in hinted):  # primals, expensive results exist in the forward
            fg.add_edge(src, (v.id, "in"), INF)
            if e is None:
                continue
        for a in e.inputs:
            if isinstance(a, Var) and (a.id in producer or a.id in primals):
                fg.add_edge((a.id, "out"), (v.id, "in"), INF)
                stack.append(a)
    for v in needed:
        fg.add_edge((v.id, "out"), sink, INF)
    side = fg.min_cut(src, sink)
    return {vid for vid in seen if (vid, "in") in side and (vid, "out") not in side}


def _hinted(fwd_eqns: list, fwd_outputs: list) -> set:
    """Ids of the forward values to recompute by ``checkpoint`` hints: those marked, and
    those the VJP rules derived from them for the backward only (``1 - tanh(x)**2``, a
    transpose), which belong to the region's backward as they do in eager checkpointing."""
    live = {o.id for o in fwd_outputs if isinstance(o, Var)}
    for e in reversed(fwd_eqns):  # the values the forward outputs depend on
        if e.out.id in live:
            live.update(a.id for a in e.inputs if isinstance(a, Var))
    hinted: set = set()
    for e in fwd_eqns:
        if e.out.recompute or (e.out.id not in live and any(isinstance(a, Var) and a.id in hinted
                                                            for a in e.inputs)):
            hinted.add(e.out.id)
    return hinted


def _recomputed(producer: dict, kept: set, needed: dict, free: set) -> tuple[set, dict]:
    """The forward values the backward recomputes (reached from ``needed`` without passing a
    kept value) and the kept values it reads (the residuals)."""
    recompute, stack, residuals = set(), list(needed.values()), {}
    while stack:
        v = stack.pop()
        if v.id in kept:
            residuals[v.id] = v
        elif v.id not in recompute:
            recompute.add(v.id)
            stack.extend(a for a in producer[v.id].inputs if isinstance(a, Var) and a.id not in free)
    return recompute, residuals


def partition(joint: Graph, n_primals: int, n_outputs: int, remat: str = "auto") -> tuple[Graph, Graph]:
    """Split ``joint`` (inputs: ``n_primals`` primals then cotangents; outputs: the first
    ``n_outputs`` forward outputs then gradients) into
    ``forward``: primals -> forward outputs + residuals, and
    ``backward``: residuals + cotangents -> gradients. Both keep joint's consts they use."""
    if remat not in REMAT_POLICIES:
        raise ValueError(f"remat must be one of {REMAT_POLICIES}, got {remat!r}")
    primals, cots = joint.inputs[:n_primals], joint.inputs[n_primals:]
    free = {v.id for v, _ in joint.consts}  # consts are readable by both sides
    on_bwd = {v.id for v in cots}
    fwd_eqns, bwd_eqns = [], []
    for e in joint.eqns:
        if any(isinstance(a, Var) and a.id in on_bwd for a in e.inputs):
            on_bwd.add(e.out.id)
            bwd_eqns.append(e)
        else:
            fwd_eqns.append(e)
    producer = {e.out.id: e for e in fwd_eqns}
    primal_ids = {v.id for v in primals}
    needed: dict[int, Var] = {}  # forward values the backward reads
    for x in [a for e in bwd_eqns for a in e.inputs] + joint.outputs[n_outputs:]:
        if isinstance(x, Var) and x.id not in on_bwd and x.id not in free:
            needed[x.id] = x
    hinted = _hinted(fwd_eqns, joint.outputs[:n_outputs])
    if remat == "none":
        saved = set(needed) - hinted
    elif remat == "max":
        saved = ({vid for vid, e in producer.items() if not _cheap(e)} | primal_ids) - hinted
    else:
        saved = _saved_mincut(producer, {v.id: v for v in primals}, list(needed.values()), hinted)

    recompute, residuals = _recomputed(producer, saved | primal_ids, needed, free)
    if remat == "none" and hinted:  # recompute only the checkpointed values: save what feeds them
        saved |= recompute - hinted
        recompute, residuals = _recomputed(producer, saved | primal_ids, needed, free)
    # An equality test needs the forward's exact bits (max/min VJPs test x == max(x) with
    # max saved): x recomputed by arithmetic in another kernel under fastmath can differ in
    # the last bit and drop a gradient. The arithmetic operands of eq/ne are saved instead.
    while True:
        exact = set()
        for e in bwd_eqns + [producer[i] for i in recompute]:
            if e.prim in EXACT_TESTS:
                for a in e.inputs:
                    while isinstance(a, Var) and a.id in recompute and producer[a.id].prim.kind == "view":
                        a = producer[a.id].inputs[0]  # views move bits, they do not round
                    if isinstance(a, Var) and a.id in recompute:
                        exact.add(a.id)
        if not exact:
            break
        saved |= exact
        recompute, residuals = _recomputed(producer, saved | primal_ids, needed, free)
    res = sorted(residuals.values(), key=lambda v: v.id)

    fwd = Graph()
    fwd.inputs = list(primals)
    fwd.consts = list(joint.consts)
    fwd.eqns = fwd_eqns
    fwd.outputs = list(joint.outputs[:n_outputs]) + res
    bwd = Graph()
    bwd.inputs = res + list(cots)
    bwd.consts = list(joint.consts)
    bwd.eqns = [e for e in fwd_eqns if e.out.id in recompute] + bwd_eqns
    bwd.outputs = list(joint.outputs[n_outputs:])
    return dce(fwd), dce(bwd)
