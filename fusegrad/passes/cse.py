"""Common-subexpression elimination: one equation per (primitive, operands, params)."""
from __future__ import annotations

from ..ir.graph import Eqn, Graph
from .rewrite import operand_key, rebuild, rewrite_eqn


def _key(e: Eqn):
    """The value-number key of ``e``, or None when its params don't hash (then it is
    never merged)."""
    try:
        params = tuple(sorted(e.params.items()))
        hash(params)
    except TypeError:
        return None
    return (e.prim, tuple(operand_key(a) for a in e.inputs), params)


def cse(graph: Graph) -> Graph:
    """Replace each repeated computation by its first occurrence."""
    seen: dict = {}
    subst: dict = {}
    eqns = []
    for e in graph.eqns:
        e = rewrite_eqn(e, subst)
        k = _key(e)
        if k is not None:
            first = seen.get(k)
            if first is not None:
                subst[e.out.id] = first
                continue
            seen[k] = e.out
        eqns.append(e)
    return rebuild(graph, eqns, subst)
