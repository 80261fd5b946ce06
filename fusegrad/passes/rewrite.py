"""Shared machinery of the rewriting passes: rebuild a graph from new equations and a
substitution of values (Var -> Var or literal), and the value-number key of an operand."""
from __future__ import annotations

from ..ir.graph import Eqn, Graph, Var


def resolve(a, subst: dict):
    """Follow ``subst`` (keyed by Var id) from operand ``a`` to its final replacement."""
    while isinstance(a, Var) and a.id in subst:
        a = subst[a.id]
    return a


def use_counts(graph: Graph, output_weight: int = 1) -> dict:
    """Var id -> how many times equations read it, plus ``output_weight`` per time the graph
    returns it (a weight of 2 keeps a returned value from passing as singly read)."""
    uses: dict = {}
    for e in graph.eqns:
        for a in e.inputs:
            if isinstance(a, Var):
                uses[a.id] = uses.get(a.id, 0) + 1
    for o in graph.outputs:
        if isinstance(o, Var):
            uses[o.id] = uses.get(o.id, 0) + output_weight
    return uses


def rewrite_eqn(e: Eqn, subst: dict) -> Eqn:
    """``e`` with its operands substituted (the same object when nothing changes)."""
    if not any(isinstance(a, Var) and a.id in subst for a in e.inputs):  # the common case, cheaply
        return e
    return Eqn(e.prim, tuple(resolve(a, subst) for a in e.inputs), e.params, e.out, e.where)


def rebuild(graph: Graph, eqns: list, subst: dict) -> Graph:
    """A new graph with ``eqns`` and ``graph``'s inputs and consts; outputs substituted
    where they map to a Var (an output replaced by a literal keeps its defining eqn)."""
    g = Graph()
    g.inputs = list(graph.inputs)
    g.consts = list(graph.consts)
    g.eqns = [rewrite_eqn(e, subst) for e in eqns] if subst else list(eqns)
    outs = []
    for o in graph.outputs:
        r = resolve(o, subst)
        outs.append(r if isinstance(r, Var) else o)
    g.outputs = outs
    return g


def operand_key(a) -> tuple:
    """Hashable identity of an operand: Vars by id, literals by type and repr (so -0.0,
    0.0, nan and True/1 stay distinct)."""
    if isinstance(a, Var):
        return ("v", a.id)
    return (type(a).__name__, repr(a))
