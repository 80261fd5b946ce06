"""A graph's fingerprint: a digest of everything a backend compiles from it (structure,
shapes, dtypes, primitives, params and literals), with values numbered in the order they
appear, so the same computation traced again (in this process or another) has the same
fingerprint although its Var ids differ. Source locations and remat hints are left out:
they do not change what is compiled."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .graph import Graph, Var


_EXACT_REPR = (bool, int, float, complex, str, bytes, type(None), slice, type(Ellipsis), np.generic)


_SCALAR_TYPES = frozenset(t for t in _EXACT_REPR if t is not np.generic)


def _value(x: Any) -> str:
    """A literal or param, exactly: arrays by content (repr would elide), containers item by
    item, scalars by type and repr (so 1, 1.0, True and np.float32(1) differ). Anything else
    raises TypeError: a repr may hold an address, which a different object can reuse."""
    t = type(x)
    if t in _SCALAR_TYPES:  # (the common cases first: this runs for every equation's params)
        return f"{t.__name__}:{x!r}"
    if isinstance(x, (tuple, list)):
        return f"{t.__name__}({','.join(map(_value, x))})"
    if isinstance(x, dict):
        return "dict(" + ",".join(sorted(f"{_value(k)}:{_value(v)}" for k, v in x.items())) + ")"
    if isinstance(x, np.ndarray) and x.dtype.kind != "O":
        return f"array({x.dtype.str},{x.shape},{hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()})"
    if isinstance(x, np.dtype):
        return f"dtype({x.str})"
    if isinstance(x, _EXACT_REPR):
        return f"{type(x).__name__}:{x!r}"
    raise TypeError(f"no exact fingerprint for a {type(x).__name__}")


def fingerprint(graph: Graph, float_literals: bool = True) -> str:
    """The hex digest of ``graph`` (see the module docstring); TypeError when a param or
    literal has no exact spelling (see ``_value``). With ``float_literals=False``, graphs
    that differ only in the values of float operands (not params) have one digest."""
    num: dict = {}
    types: dict = {}  # (shape, dtype) -> its spelling, formatted once per graph

    def name(v: Var) -> str:
        return f"%{num.setdefault(v.id, len(num))}"

    def operand(a: Any) -> str:
        if type(a) is Var:
            return f"%{num[a.id]}"
        if not float_literals and isinstance(a, (float, np.floating)):
            return f"{type(a).__name__}:?"
        return _value(a)

    def typed(v: Var) -> str:
        key = (v.shape, v.dtype)
        s = types.get(key)
        if s is None:
            s = types[key] = v.type_str()
        return s

    lines = [f"in {name(v)} {typed(v)}" for v in graph.inputs]
    lines += [f"const {name(v)} {typed(v)}" for v, _ in graph.consts]
    for e in graph.eqns:
        args = ",".join([operand(a) for a in e.inputs])
        lines.append(f"{name(e.out)} {typed(e.out)} = {e.prim.name}({args}) {_value(e.params)}")
    lines.append("out " + ",".join(operand(o) for o in graph.outputs))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
