"""Dead-code elimination: drop equations and consts that no output depends on."""
from __future__ import annotations

from ..ir.graph import Graph, Var


def dce(graph: Graph) -> Graph:
    """Remove equations (and captured consts) no output needs. Inputs always stay: they
    are the calling convention. Random ops are pure functions of their key, so an unused
    one is dead too; its key const stays, as any const whose reading at call time has an
    effect (``advances``: it takes the generator's next key, so the stream advances as
    the eager code's does)."""
    live = {o.id for o in graph.outputs if isinstance(o, Var)}
    kept = []
    for e in reversed(graph.eqns):
        if e.out.id in live:
            kept.append(e)
            live.update(a.id for a in e.inputs if isinstance(a, Var))
    g = Graph()
    g.inputs = list(graph.inputs)
    g.consts = [(v, h) for v, h in graph.consts if v.id in live or getattr(h, "advances", False)]
    g.eqns = kept[::-1]
    g.outputs = list(graph.outputs)
    return g
