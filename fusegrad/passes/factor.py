"""Contractions of outer products, factored: ``Σ_ij (p1[r,i] q1[r,j]) (p2[s,i] q2[s,j])`` is
``(Σ_i p1[r,i] p2[s,i]) · (Σ_j q1[r,j] q2[s,j])``.

A matmul ``A @ B`` whose operands are reshapes (rows merged, columns merged) of broadcast
products ``p * q``, where along the contracted (column) axes ``p`` varies only over some
axes I and ``q`` only over the others J, the same for both operands, becomes two small
matmuls (contracting over I and over J) and an elementwise product. Per-example weight
Jacobians (a backpropagated signal times an input activation) contracted with each other, as
in a neural tangent kernel, are such products: the pass turns the ``|I|·|J|`` contraction
into ``|I| + |J|`` and the Jacobians themselves become dead code. The value is the same sum
taken in another order (as ``fastmath``'s reassociation)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Graph, Var
from .rewrite import rebuild


def _rows_cols(shape: tuple, rows: int, cols: int) -> Optional[int]:
    """The split ``s`` with prod(shape[:s]) == rows and prod(shape[s:]) == cols (the split
    that leaves the fewest axes on the row side), or None."""
    for s in range(len(shape) + 1):
        if int(np.prod(shape[:s], dtype=np.int64)) == rows and int(np.prod(shape[s:], dtype=np.int64)) == cols:
            return s
    return None


def _operand(v, producer: dict, transposed: bool) -> Optional[tuple]:
    """For a matmul operand ``v`` (rows x cols after swapping when ``transposed``), with only
    leading 1s before its last two axes: (p, q, full shape, split) when it is a reshape of a
    product ``p * q`` (each of at most the product's rank); else None."""
    if not isinstance(v, Var) or v.ndim < 2 or any(n != 1 for n in v.shape[:-2]):
        return None
    e = producer.get(v.id)
    if transposed:
        if e is None or e.prim is not P.transpose or tuple(e.params["perm"][-2:]) != (v.ndim - 1, v.ndim - 2):
            return None
        v = e.inputs[0]
        e = producer.get(v.id)
    rows, cols = v.shape[-2], v.shape[-1]
    if e is None or e.prim is not P.reshape:
        return None
    x = e.inputs[0]
    m = producer.get(x.id) if isinstance(x, Var) else None
    if m is None or m.prim is not P.mul or not all(isinstance(a, Var) and a.ndim <= x.ndim for a in m.inputs):
        return None
    s = _rows_cols(x.shape, rows, cols)
    return None if s is None else (m.inputs[0], m.inputs[1], x.shape, s)


def _split(p: Var, q: Var, shape: tuple, s: int) -> Optional[tuple]:
    """(I, J): the column axes (counted from the first column axis) where only ``p`` varies
    and those where only ``q`` does (an axis of size 1 goes to I); None when some column
    axis varies in both."""
    ii, jj = [], []
    ps, qs = _padded(p.shape, len(shape)), _padded(q.shape, len(shape))
    for k in range(s, len(shape)):
        if qs[k] == 1:
            ii.append(k - s)
        elif ps[k] == 1:
            jj.append(k - s)
        else:
            return None
    return ii, jj


def _padded(shape: tuple, rank: int) -> tuple:
    """``shape`` with leading 1s up to ``rank`` (how broadcasting aligns it)."""
    return (1,) * (rank - len(shape)) + tuple(shape)


class _Builder:
    """Emits the new equations."""

    def __init__(self, where):
        self.eqns: list = []
        self.where = where

    def add(self, prim, ins: tuple, params: dict, shape: tuple, dtype) -> Var:
        out = Var(shape, dtype)
        self.eqns.append(Eqn(prim, ins, params, out, self.where))
        return out

    def matrix(self, f: Var, shape: tuple, s: int, axes: list) -> Var:
        """``f`` broadcast over the row axes and its ``axes`` (other column axes size 1) and
        reshaped to (rows, prod of those axes)."""
        full = tuple(shape[:s]) + tuple(n if k in axes else 1 for k, n in enumerate(shape[s:]))
        if f.ndim < len(full):
            padded = _padded(f.shape, len(full))
            f = self.add(P.reshape, (f,), {"shape": padded}, padded, f.dtype)
        if f.shape != full:
            f = self.add(P.broadcast_to, (f,), {"shape": full}, full, f.dtype)
        rows = int(np.prod(shape[:s], dtype=np.int64))
        cols = int(np.prod([shape[s + k] for k in axes], dtype=np.int64))
        return self.add(P.reshape, (f,), {"shape": (rows, cols)}, (rows, cols), f.dtype)


def _factored(e: Eqn, producer: dict) -> Optional[list]:
    a, b = e.inputs
    lhs, rhs = _operand(a, producer, False), _operand(b, producer, True)
    if lhs is None or rhs is None:
        return None
    (p1, q1, shape1, s1), (p2, q2, shape2, s2) = lhs, rhs
    if shape1[s1:] != shape2[s2:] or any(f.dtype != e.out.dtype for f in (p1, q1, p2, q2)):
        return None
    sp1, sp2 = _split(p1, q1, shape1, s1), _split(p2, q2, shape2, s2)
    if sp1 is not None and sp2 is not None and sp2 == sp1[::-1]:
        p2, q2, sp2 = q2, p2, sp1  # the second product's factors written the other way round
    if sp1 is None or sp1 != sp2:
        return None
    ii, jj = sp1
    cols = shape1[s1:]
    if int(np.prod([cols[k] for k in ii], dtype=np.int64)) < 2 or int(np.prod([cols[k] for k in jj], dtype=np.int64)) < 2:
        return None  # nothing to gain
    bld = _Builder(e.where)
    r1, r2 = a.shape[-2], b.shape[-1]
    dt = e.out.dtype
    parts = []
    for f1, f2, axes in ((p1, p2, ii), (q1, q2, jj)):
        m1 = bld.matrix(f1, shape1, s1, axes)
        m2 = bld.matrix(f2, shape2, s2, axes)
        m2t = bld.add(P.transpose, (m2,), {"perm": (1, 0)}, (m2.shape[1], r2), dt)
        parts.append(bld.add(P.matmul, (m1, m2t), {}, (r1, r2), dt))
    prod = bld.add(P.mul, tuple(parts), {}, (r1, r2), dt)
    bld.eqns.append(Eqn(P.reshape, (prod,), {"shape": e.out.shape}, e.out, e.where))
    return bld.eqns


def factor_contractions(graph: Graph) -> Graph:
    """Rewrite every matmul of two factorable outer products (see the module docstring)."""
    producer: dict = {}
    eqns: list = []
    changed = False
    for e in graph.eqns:
        new = _factored(e, producer) if e.prim is P.matmul and not e.params else None
        if new is not None:
            changed = True
            for n in new:
                producer[n.out.id] = n
            eqns += new
            continue
        producer[e.out.id] = e
        eqns.append(e)
    return rebuild(graph, eqns, {}) if changed else graph
