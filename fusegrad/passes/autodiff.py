"""Differentiation as graph transforms: the VJP and JVP of a Graph, built by replaying it
in a new Trace and applying each primitive's rule to traced Tensors.

Both transforms return a *closed* graph: the source graph's inputs and then its consts
become plain inputs (the "primals", in the calling order of an executable), followed by
the cotangents (VJP) or tangents (JVP). Positions in ``wrt`` count over those primals."""
from __future__ import annotations

from typing import Optional, Sequence

from ..ir import dtypes as D
from ..ir.graph import Graph, Var
from ..ir.prims import full
from ..runtime.grad_mode import no_grad
from ..runtime.interpreter import eval_tensors
from ..runtime.tensor import Tensor, wrap
from ..tracer.trace import Trace


def _differentiable(v) -> bool:
    return isinstance(v, Var) and D.np_differentiable(v.dtype)


def active(graph: Graph, seeds: set) -> set:
    """Ids of values that depend differentiably on the Var ids in ``seeds``."""
    act = set(seeds)
    for e in graph.eqns:
        if not e.prim.nondiff and _differentiable(e.out) and any(
                isinstance(a, Var) and a.id in act for a in e.inputs):
            act.add(e.out.id)
    return act


def filled(tr: Trace, v: Var, value: float) -> Tensor:
    """A tensor traced in ``tr``, of ``v``'s shape and dtype, with every element ``value``:
    a fill that folding turns into a literal (seeds, zero gradients). A segmented trace
    computes it at a break, as every tensor it makes (backward's seed when a break follows)."""
    t = wrap(tr.emit(full, (), {"shape": v.shape, "value": value, "dtype": v.dtype}))
    if tr.tracks:
        tr.track(t)
    return t


def _replay(graph: Graph, tr: Trace) -> tuple[list, dict]:
    """New inputs of ``tr`` for the primals, and the replayed env (source Var id -> Tensor)."""
    primals = [wrap(tr.new_input(v.shape, v.dtype)) for v in graph.arguments()]
    env = eval_tensors(graph, primals)
    for e in graph.eqns:  # carry checkpoint hints over to the replayed values
        if e.out.recompute and type(env[e.out.id]._data) is Var:
            env[e.out.id]._data.recompute = True
    return primals, env


def _finish(tr: Trace, outs: list) -> Graph:
    g = tr.graph
    g.outputs = [tr.lift(t) for t in outs]  # a value computed outside the trace becomes a const
    return g


def vjp_graph(graph: Graph, wrt: Sequence[int], cotangent_outputs: Optional[Sequence[int]] = None,
              unit_cotangents: bool = False) -> Graph:
    """The joint forward+backward graph of ``graph``.

    Inputs: primals, then one cotangent per output listed in ``cotangent_outputs``
    (default: every floating output). Outputs: the source graph's outputs, then the
    gradient of each primal in ``wrt`` (zeros where it does not reach an output).
    ``unit_cotangents``: those cotangents are ones (``grad``'s seed), filled inside the
    graph instead of taken as inputs, so folding removes the multiplications by one."""
    pv = graph.arguments()
    if cotangent_outputs is None:
        cotangent_outputs = [i for i, o in enumerate(graph.outputs) if _differentiable(o)]
    with Trace(stop_under_no_grad=False) as tr, no_grad():
        primals, env = _replay(graph, tr)
        act = active(graph, {pv[i].id for i in wrt})
        ct: dict[int, Tensor] = {}

        def add_ct(v: Var, g: Tensor) -> None:
            prev = ct.get(v.id)
            ct[v.id] = g if prev is None else prev + g

        for i in cotangent_outputs:
            o = graph.outputs[i]
            c = filled(tr, o, 1.0) if unit_cotangents else wrap(tr.new_input(o.shape, o.dtype))
            if o.id in act:
                add_ct(o, c)
        for e in reversed(graph.eqns):
            g = ct.pop(e.out.id, None)
            if g is None or e.prim.vjp is None:
                continue
            needs = tuple(isinstance(a, Var) and a.id in act for a in e.inputs)
            if not any(needs):
                continue
            ins = tuple(env[a.id] if isinstance(a, Var) else a for a in e.inputs)
            grads = e.prim.vjp(g, ins, env[e.out.id], needs, **e.params)
            for a, n, gi in zip(e.inputs, needs, grads):
                if n and gi is not None:
                    add_ct(a, gi)
        grads = [ct.get(pv[i].id) for i in wrt]
        grads = [g if g is not None else filled(tr, pv[i], 0.0) for g, i in zip(grads, wrt)]
        return _finish(tr, [env[o.id] for o in graph.outputs] + grads)


def jvp_graph(graph: Graph, wrt: Sequence[int]) -> Graph:
    """The forward-mode graph of ``graph``. Inputs: primals, then one tangent per primal in
    ``wrt``. Outputs: the source graph's outputs, then their tangents (zeros for outputs
    that do not depend on ``wrt``; integer outputs get zero tangents of their dtype)."""
    pv = graph.arguments()
    with Trace(stop_under_no_grad=False) as tr, no_grad():
        primals, env = _replay(graph, tr)
        tan: dict[int, Tensor] = {pv[i].id: wrap(tr.new_input(pv[i].shape, pv[i].dtype)) for i in wrt}
        act = active(graph, set(tan))
        for e in graph.eqns:
            if e.out.id not in act or e.prim.jvp is None:
                continue
            ts = tuple(tan.get(a.id) if isinstance(a, Var) else None for a in e.inputs)
            ins = tuple(env[a.id] if isinstance(a, Var) else a for a in e.inputs)
            t = e.prim.jvp(ts, ins, env[e.out.id], **e.params)
            if t is not None:
                tan[e.out.id] = t
        outs = [env[o.id] for o in graph.outputs]
        touts = [tan[o.id] if o.id in tan else filled(tr, o, 0.0) for o in graph.outputs]
        return _finish(tr, outs + touts)
