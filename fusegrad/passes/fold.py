"""Constant folding, limited to values fixed at trace time.

Captured consts are read at call time (they are parameters that training changes), so
they are never folded. What folds: fills (``full``) and literal-only equations with one
element, which become Python-scalar literals in the elementwise ops that consume them
when that leaves the consumer's result type unchanged; a reshape, broadcast, transpose,
slice or flip of a fill, and an elementwise op (stop_gradient included) on fills and
literals alone, become fills themselves (``grad``'s and ``backward``'s seed reach the elementwise
ops through such chains, e.g. ``mean``'s division). Simplification then removes
identities such as ``x * 1`` that this exposes."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.graph import Eqn, Graph, Var
from ..ir import prims as P
from .rewrite import rebuild

_PY = {"f": float, "i": int, "u": int, "b": bool}
# layout primitives whose every output element is an element of their one input
# (stop_gradient of a fill is elementwise: it folds as an op on fills alone)
_MOVES = frozenset({P.broadcast_to, P.reshape, P.transpose, P.slice_, P.flip})


def _scalar_of(e: Eqn) -> Optional[object]:
    """The Python scalar every element of ``e.out`` equals, if fixed at trace time."""
    if e.prim.effect or any(isinstance(a, Var) for a in e.inputs):
        return None
    if e.prim is P.full:
        value = e.params["value"]
    elif e.out.ndim == 0:
        value = np.asarray(e.prim.impl(*e.inputs, **e.params)).item()
    else:
        return None
    if not isinstance(value, (bool, int, float, np.number, np.bool_)):
        return None
    py = _PY.get(e.out.dtype.kind)
    return py(np.asarray(value, dtype=e.out.dtype).item()) if py else None


def _same_result(e: Eqn, ins: tuple) -> bool:
    """Whether ``e`` with operands ``ins`` still has ``e.out``'s shape and dtype, by the
    shape rule and by NumPy's own promotion on one element (the impl is the reference)."""
    avals = [(a.shape, a.dtype) if isinstance(a, Var) else a for a in ins]
    shape, dtype = e.prim.abstract(avals, e.params)
    if tuple(shape) != e.out.shape or np.dtype(dtype) != e.out.dtype:
        return False
    probe = [np.ones((), a.dtype) if isinstance(a, Var) else a for a in ins]
    with np.errstate(all="ignore"):
        return np.asarray(e.prim.impl(*probe, **e.params)).dtype == e.out.dtype


def _fill(e: Eqn, value) -> Eqn:
    return Eqn(P.full, (), {"shape": e.out.shape, "value": value, "dtype": e.out.dtype}, e.out, e.where)


def _folded(e: Eqn, scalars: dict) -> Eqn:
    """``e`` with the fills among its operands folded in."""
    if not any(isinstance(a, Var) and a.id in scalars for a in e.inputs):
        return e
    if e.prim in _MOVES:
        return _fill(e, scalars[e.inputs[0].id])
    if e.prim.kind != "elementwise":
        return e
    ins = tuple(scalars[a.id] if isinstance(a, Var) and a.id in scalars else a for a in e.inputs)
    if any(isinstance(a, Var) for a in ins):
        return Eqn(e.prim, ins, e.params, e.out, e.where) if _same_result(e, ins) else e
    if e.prim.effect:
        return e
    # every operand is fixed: evaluate once, on one element of each fill's own dtype
    typed = [np.full((), scalars[a.id], a.dtype) if isinstance(a, Var) else a for a in e.inputs]
    with np.errstate(all="ignore"):
        value = np.asarray(e.prim.impl(*typed, **e.params))
    return _fill(e, value.item()) if value.dtype == e.out.dtype and value.ndim == 0 else e


def fold(graph: Graph) -> Graph:
    """Turn trace-time-constant fills into literals inside elementwise consumers, moves of
    fills and elementwise ops on fills alone into fills."""
    scalars: dict[int, object] = {}
    eqns = []
    for e in graph.eqns:
        e = _folded(e, scalars)
        s = _scalar_of(e)
        if s is not None:
            scalars[e.out.id] = s
        eqns.append(e)
    return rebuild(graph, eqns, {})
