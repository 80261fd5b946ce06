"""Sign analysis: the values of a graph known to be <= 0, so that code generation may call
cheaper function variants valid only there (fastmath's "nonpositive" exp: ``exp(-x*x)``,
softmax's ``exp(x - max x)``).

A fact allows NaN everywhere: ``x*x`` counts as >= 0 although it is NaN for NaN x, since the
variants keep NaN. Facts flow forward through one pass over the equations:

- >= 0: ``abs``, ``exp``, ``sqrt``, ``relu``, ``sigmoid``, ``x*x``; sums and products of values
  >= 0; a maximum with one operand >= 0;
- <= 0: ``neg`` of a value >= 0 (and the reverse), ``neg(y)*y``; ``x - max(x)`` where the
  maximum reduces ``x`` itself with kept dims; products of opposite signs; sums of values <= 0;
  a minimum with one operand <= 0; ``a - b`` with a <= 0 <= b;
- layout moves, ``stop_gradient``, float casts and max/min/sum reductions keep the sign of
  their operand; a literal has its own sign.

Zeros may carry either sign (``relu(-0.0)`` is -0.0), which every rule above tolerates;
division does not (``1 / -0.0`` is -inf), so quotients get no facts."""
from __future__ import annotations

from typing import Optional

from ..ir import prims as P
from ..ir.graph import Eqn, Graph, Var

_NONNEG = frozenset({P.abs_, P.exp, P.sqrt, P.relu, P.sigmoid})
_KEEPS = frozenset({P.broadcast_to, P.reshape, P.transpose, P.slice_, P.flip, P.stop_gradient, P.reduce_max,
                    P.reduce_min, P.reduce_sum})
_VIEWS = frozenset({P.broadcast_to, P.stop_gradient})  # what may stand between max(x) and x - max(x)
POS, NEG = 1, -1  # ">= 0" and "<= 0"


def nonpositive(graph: Graph) -> set[int]:
    """Ids of the vars of ``graph`` whose every element is <= 0 or NaN."""
    signs: dict[int, set] = {}
    producer: dict[int, Eqn] = {}
    for e in graph.eqns:
        producer[e.out.id] = e
        if e.out.dtype.kind == "f":
            facts = _facts(e, signs, producer)
            if facts:
                signs[e.out.id] = facts
    return {v for v, facts in signs.items() if NEG in facts}


def _sign(a, signs: dict) -> set:
    if isinstance(a, Var):
        return signs.get(a.id, set())
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        return set()
    return {s for s, ok in ((POS, a >= 0), (NEG, a <= 0)) if ok}


def _flip(facts: set) -> set:
    return {-s for s in facts}


def _source(a, producer: dict) -> Optional[Eqn]:
    return producer.get(a.id) if isinstance(a, Var) else None


def _behind_views(a, ndim: int, producer: dict):
    """``a`` with broadcasts and stop_gradients of rank ``ndim`` peeled off (a broadcast that
    adds dims could align the reduced axes with others)."""
    e = _source(a, producer)
    while e is not None and e.prim in _VIEWS and e.inputs[0].ndim == ndim:
        a = e.inputs[0]
        e = _source(a, producer)
    return a


def _facts(e: Eqn, signs: dict, producer: dict) -> set:
    prim = e.prim
    ins = e.inputs
    if prim is P.full:
        return _sign(e.params["value"], signs)
    if prim in _NONNEG:
        return {POS}
    if prim in _KEEPS or (prim is P.cast and ins[0].dtype.kind == "f"):
        return _sign(ins[0], signs)
    if prim is P.neg:
        return _flip(_sign(ins[0], signs))
    if len(ins) != 2:
        return set()
    a, b = ins
    sa, sb = _sign(a, signs), _sign(b, signs)
    if prim is P.mul:
        if isinstance(a, Var) and isinstance(b, Var) and a.id == b.id:
            return {POS}
        if _negates(a, b, producer):
            return {NEG}
        return {s * t for s in sa for t in sb}
    if prim is P.add:
        return sa & sb
    if prim is P.sub:
        if _is_max_of(b, a, producer):
            return {NEG}
        return sa & _flip(sb)
    if prim is P.maximum:
        return ({POS} & (sa | sb)) | ({NEG} & sa & sb)
    if prim is P.minimum:
        return ({NEG} & (sa | sb)) | ({POS} & sa & sb)
    return set()


def _negates(a, b, producer: dict) -> bool:
    """True for ``neg(y), y`` or ``y, neg(y)``."""
    for x, y in ((a, b), (b, a)):
        src = _source(x, producer)
        if src is not None and src.prim is P.neg and isinstance(y, Var) and src.inputs[0].id == y.id:
            return True
    return False


def _is_max_of(m, x, producer: dict) -> bool:
    """True if ``m`` is (a same-rank broadcast of) a max reduction of ``x`` itself with kept
    dims, so that each element of ``x`` meets a maximum over a set that contains it."""
    if not isinstance(x, Var) or not isinstance(m, Var) or m.ndim != x.ndim:
        return False
    src = _source(_behind_views(m, x.ndim, producer), producer)
    return (src is not None and src.prim is P.reduce_max and src.params.get("keepdims")
            and src.inputs[0].id == x.id)
