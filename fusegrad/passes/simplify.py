"""Algebraic simplification: arithmetic identities and folding of layout chains.

Rules (each only where the result keeps the equation's shape and dtype):
``x*1``, ``1*x``, ``x+0``, ``0+x``, ``x-0``, ``x/1`` -> x; ``neg(neg(x))`` -> x;
``x + neg(y)``, ``neg(y) + x`` -> ``x - y`` and ``x - neg(y)`` -> ``x + y`` (exact: IEEE
defines ``x - y`` as ``x + (-y)``);
reshape/broadcast_to to the same shape, cast to the same dtype, identity transpose -> x;
reshape of reshape -> one reshape; transpose of transpose -> one transpose (or x)."""
from __future__ import annotations

from typing import Optional

from ..ir.graph import Eqn, Graph, Var
from ..ir import prims as P
from .rewrite import rebuild, rewrite_eqn

# primitive -> (literal that is an identity, operand positions where it may stand)
_IDENTITY = {P.mul: (1, (0, 1)), P.add: (0, (0, 1)), P.sub: (0, (1,)), P.div: (1, (1,))}
_SAME_SHAPE_NOOPS = (P.reshape, P.broadcast_to, P.cast, P.transpose)  # identity when shape/dtype/perm match


def _is_literal(a, value) -> bool:
    return not isinstance(a, Var) and not isinstance(a, bool) and a == value


def _passthrough(e: Eqn, x) -> Optional[Var]:
    """``x`` if it can stand for ``e.out`` (same shape and dtype)."""
    if isinstance(x, Var) and x.shape == e.out.shape and x.dtype == e.out.dtype:
        return x
    return None


def _arith(e: Eqn) -> Optional[Var]:
    rule = _IDENTITY.get(e.prim)
    if rule is None or len(e.inputs) != 2:
        return None
    value, positions = rule
    for pos in positions:
        if _is_literal(e.inputs[pos], value):
            return _passthrough(e, e.inputs[1 - pos])
    return None


def _negated(a, producer: dict):
    """``y`` when operand ``a`` is ``neg(y)``, else None."""
    src = producer.get(a.id) if isinstance(a, Var) else None
    return src.inputs[0] if src is not None and src.prim is P.neg else None


def _absorb_neg(e: Eqn, producer: dict) -> Optional[Eqn]:
    """``add``/``sub`` with a negated operand as one ``sub``/``add`` without the neg."""
    x, y = e.inputs
    ny = _negated(y, producer)
    if ny is not None:
        return Eqn(P.sub if e.prim is P.add else P.add, (x, ny), {}, e.out, e.where)
    nx = _negated(x, producer) if e.prim is P.add else None
    return Eqn(P.sub, (y, nx), {}, e.out, e.where) if nx is not None else None


def _simplify_one(e: Eqn, producer: dict):
    """A replacement for ``e``: a Var (``e.out`` is that value), a new Eqn, or None."""
    prim = e.prim
    x = e.inputs[0] if e.inputs else None
    src = producer.get(x.id) if isinstance(x, Var) else None
    if prim in _IDENTITY:
        same = _arith(e)
        if same is None and prim in (P.add, P.sub) and len(e.inputs) == 2:
            return _absorb_neg(e, producer)
        return same
    if prim is P.neg and src is not None and src.prim is P.neg:
        return _passthrough(e, src.inputs[0])
    if prim in _SAME_SHAPE_NOOPS:
        same = _passthrough(e, x)
        if same is not None and (prim is not P.transpose or e.params["perm"] == tuple(range(x.ndim))):
            return same
    if prim is P.reshape and src is not None and src.prim is P.reshape:
        return Eqn(e.prim, (src.inputs[0],), e.params, e.out, e.where)
    if prim is P.transpose and src is not None and src.prim is P.transpose:
        inner, outer = src.params["perm"], e.params["perm"]
        perm = tuple(inner[i] for i in outer)
        base = src.inputs[0]
        if perm == tuple(range(len(perm))):
            return _passthrough(e, base)
        return Eqn(e.prim, (base,), {"perm": perm}, e.out, e.where)
    return None


def simplify(graph: Graph) -> Graph:
    """Apply the rules once over the graph (chains collapse as they are visited in order)."""
    subst: dict = {}
    producer: dict = {}
    eqns = []
    for e in graph.eqns:
        e = rewrite_eqn(e, subst)
        r = _simplify_one(e, producer)
        if isinstance(r, Var):
            subst[e.out.id] = r
            continue
        if isinstance(r, Eqn):
            e = r
        producer[e.out.id] = e
        eqns.append(e)
    return rebuild(graph, eqns, subst)
