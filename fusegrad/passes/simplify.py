"""Algebraic simplification: arithmetic identities and folding of layout chains.

Rules (each only where the result keeps the equation's shape and dtype):
``x*1``, ``1*x``, ``x+0``, ``0+x``, ``x-0``, ``x/1`` -> x; ``neg(neg(x))`` -> x;
``x + neg(y)``, ``neg(y) + x`` -> ``x - y`` and ``x - neg(y)`` -> ``x + y`` (exact: IEEE
defines ``x - y`` as ``x + (-y)``);
reshape/broadcast_to to the same shape, cast to the same dtype, identity transpose -> x;
reshape of reshape -> one reshape; transpose of transpose -> one transpose (or x);
a matmul contracting a dimension of size 1 (an outer product, as the batching pass makes of
a per-example weight gradient) -> the broadcast ``mul`` it equals, an elementwise loop that
fusion merges with the layout change after it instead of a GEMM call and a copy;
a transpose of an elementwise result used only there -> the elementwise op on transposed
operands (the loop then writes its output in order instead of through a transpose, and the
operands, often small broadcasts, are read through views);
a transpose of a 2-d matmul used only there -> ``b.T @ a.T`` (a weight gradient of
``x @ W.T`` comes out of the GEMM in the weight's layout, so the optimizer's loop reads it in
order and an SGD update folds into the GEMM; BLAS reads transposed operands in place)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.graph import Eqn, Graph, Var
from ..ir import prims as P
from .rewrite import rebuild, rewrite_eqn, use_counts

# primitive -> (literal that is an identity, operand positions where it may stand)
_IDENTITY = {P.mul: (1, (0, 1)), P.add: (0, (0, 1)), P.sub: (0, (1,)), P.div: (1, (1,)), P.pow_: (1, (1,))}
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


def _simplify_one(e: Eqn, producer: dict, uses: dict):
    """A replacement for ``e``: a Var (``e.out`` is that value), a new Eqn, a list of new
    Eqns (the last defines ``e.out``), or None."""
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
    if prim is P.matmul and not e.params:
        return _outer_product(e)
    if prim is P.reshape and src is not None and src.prim is P.reshape:
        return Eqn(e.prim, (src.inputs[0],), e.params, e.out, e.where)
    if prim is P.transpose and src is not None and src.prim.kind == "elementwise" and uses.get(x.id) == 1:
        return _transpose_operands(e, src, producer, uses)
    if prim is P.transpose and src is not None and src.prim is P.matmul and not src.params \
            and uses.get(x.id) == 1 and x.ndim == 2 and all(isinstance(a, Var) and a.ndim == 2 for a in src.inputs):
        return _transposed_product(e, src, producer)
    if prim is P.transpose and src is not None and src.prim is P.transpose:
        inner, outer = src.params["perm"], e.params["perm"]
        perm = tuple(inner[i] for i in outer)
        base = src.inputs[0]
        if perm == tuple(range(len(perm))):
            return _passthrough(e, base)
        return Eqn(e.prim, (base,), {"perm": perm}, e.out, e.where)
    return None


def _outer_product(e: Eqn) -> Optional[Eqn]:
    """``a @ b`` with a (..., m, 1) and b (..., 1, n) as ``a * b`` (one product per element,
    so the same value; batch dimensions broadcast alike)."""
    a, b = e.inputs
    if not (isinstance(a, Var) and isinstance(b, Var) and a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == 1):
        return None
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None
    if shape != e.out.shape or a.dtype != e.out.dtype or b.dtype != e.out.dtype:
        return None
    return Eqn(P.mul, (a, b), {}, e.out, e.where)


def _transpose_operands(e: Eqn, src: Eqn, producer: dict, uses: dict) -> Optional[list]:
    """``transpose(op(a, b, ...), perm)`` as ``op(transpose(a, perm), ...)`` when every
    tensor operand of the elementwise ``op`` has the output's rank (literals stay); an
    operand that is itself such an op used only there takes the transpose in turn."""
    perm = e.params["perm"]
    if not all(not isinstance(a, Var) or a.ndim == len(perm) for a in src.inputs):
        return None
    new, ins = [], []
    for a in src.inputs:
        if isinstance(a, Var):
            t = Var(tuple(a.shape[i] for i in perm), a.dtype, a.trace)
            pushed = Eqn(P.transpose, (a,), {"perm": perm}, t, e.where)
            inner = producer.get(a.id)
            deeper = (_transpose_operands(pushed, inner, producer, uses)
                      if inner is not None and inner.prim.kind == "elementwise" and uses.get(a.id) == 1 else None)
            new += deeper if deeper is not None else [pushed]
            a = t
        ins.append(a)
    return new + [Eqn(src.prim, tuple(ins), src.params, e.out, src.where)]


def _transposed_product(e: Eqn, src: Eqn, producer: dict) -> list:
    """``transpose(a @ b)`` as ``transpose(b) @ transpose(a)`` (2-d); an operand that is
    itself a transpose (also under a stop_gradient, as a no_grad update's operands are) is
    read as its input."""
    ins, new = [], []
    for a in reversed(src.inputs):
        inner = producer.get(a.id)
        blocked = inner is not None and inner.prim is P.stop_gradient
        if blocked:
            inner = producer.get(inner.inputs[0].id) if isinstance(inner.inputs[0], Var) else None
        if inner is not None and inner.prim is P.transpose:  # 2-d: the perm is (1, 0)
            x = inner.inputs[0]
            if blocked:
                s = Var(x.shape, x.dtype, x.trace)
                new.append(Eqn(P.stop_gradient, (x,), {}, s, e.where))
                x = s
            ins.append(x)
            continue
        t = Var(a.shape[::-1], a.dtype, a.trace)
        new.append(Eqn(P.transpose, (a,), {"perm": (1, 0)}, t, e.where))
        ins.append(t)
    return new + [Eqn(P.matmul, tuple(ins), {}, e.out, src.where)]


def simplify(graph: Graph) -> Graph:
    """Apply the rules once over the graph (chains collapse as they are visited in order)."""
    subst: dict = {}
    producer: dict = {}
    uses = use_counts(graph)
    eqns = []
    for e in graph.eqns:
        e = rewrite_eqn(e, subst)
        r = _simplify_one(e, producer, uses)
        if isinstance(r, Var):
            subst[e.out.id] = r
            continue
        for e in (r if isinstance(r, list) else [r if isinstance(r, Eqn) else e]):
            producer[e.out.id] = e
            eqns.append(e)
    return rebuild(graph, eqns, subst)
