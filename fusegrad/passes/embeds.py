"""Sums of row embeds become one concatenate.

The gradient of a loop over ``W[i]`` is ``embed(g_0, key=(0,)) + embed(g_1, key=(1,)) + ...``:
n zero-filled copies of W's shape added one by one, O(n^2) work, and, worse for the CPU
backend, two library calls per step that cut the elementwise chain around them into
hundreds of small loop groups (W3's gradient, W5). When every leaf of an add tree (whose
inner sums have no other use) embeds a whole row ``k`` of the same shape, at distinct rows,
the tree is ``concatenate([g_0[None], ..., g_{n-1}[None]])`` with zero rows for the rows no
leaf writes; the embeds and adds then die (DCE)."""
from __future__ import annotations

from ..ir.graph import Eqn, Graph, Var
from ..ir.prims.creation import full
from ..ir.prims.elementwise import add
from ..ir.prims.layout import concatenate, embed, reshape
from .rewrite import rebuild

MIN_LEAVES = 3  # below this the adds cost nothing worth a rewrite


def _row(e: Eqn, shape: tuple):
    """Row index written by embed ``e`` when it writes one whole row of ``shape``, else None."""
    if e.prim is not embed or tuple(e.params["shape"]) != shape or not shape:
        return None
    key = e.params["key"]
    if len(key) != len(shape) or not isinstance(key[0], int) or isinstance(key[0], bool):
        return None
    if any(k != (0, s, 1) for k, s in zip(key[1:], shape[1:])):
        return None
    g = e.inputs[0]
    if not isinstance(g, Var) or g.shape != shape[1:] or g.dtype != e.out.dtype:
        return None
    return key[0]


def gather_embeds(graph: Graph) -> Graph:
    uses: dict = {}
    producer: dict = {}
    for e in graph.eqns:
        producer[e.out.id] = e
        for a in e.inputs:
            if isinstance(a, Var):
                uses[a.id] = uses.get(a.id, 0) + 1
    for o in graph.outputs:
        if isinstance(o, Var):
            uses[o.id] = uses.get(o.id, 0) + 2  # an output is never an inner sum

    def inner(a, shape) -> bool:
        p = producer.get(a.id) if isinstance(a, Var) else None
        return p is not None and p.prim is add and uses.get(a.id, 0) == 1 and a.shape == shape

    consumed_by_add: set = set()
    for e in graph.eqns:
        if e.prim is add:
            for a in e.inputs:
                if inner(a, e.out.shape):
                    consumed_by_add.add(a.id)

    # Each row's reshape goes right after the row's definition, so the backend fuses it
    # into the loop group computing the row (a view of a value already in memory would
    # need a copy of its own).
    after: dict = {}  # var id (or None: before everything) -> eqns to emit after its definition
    roots: dict = {}  # root add's out id -> concatenate eqn
    for e in graph.eqns:
        if e.prim is not add or e.out.id in consumed_by_add:
            continue
        shape, leaves, stack = e.out.shape, [], list(e.inputs)
        while stack:
            a = stack.pop()
            if inner(a, shape):
                stack.extend(producer[a.id].inputs)
            else:
                leaves.append(a)
        rows: dict = {}
        for a in leaves:
            p = producer.get(a.id) if isinstance(a, Var) else None
            k = _row(p, shape) if p is not None else None
            if k is None or k in rows:
                rows = {}
                break
            rows[k] = p.inputs[0]
        if len(rows) < MIN_LEAVES:
            continue
        one = (1,) + shape[1:]
        parts = []
        for k in range(shape[0]):
            v = Var(one, e.out.dtype)
            if k in rows:
                g = rows[k]
                at = g.id if g.id in producer else None
                after.setdefault(at, []).append(Eqn(reshape, (g,), {"shape": one}, v, e.where))
            else:
                after.setdefault(None, []).append(
                    Eqn(full, (), {"shape": one, "value": 0, "dtype": e.out.dtype}, v, e.where))
            parts.append(v)
        roots[e.out.id] = Eqn(concatenate, tuple(parts), {"axis": 0}, e.out, e.where)
    if not roots:
        return graph
    eqns = list(after.get(None, ()))
    for e in graph.eqns:
        eqns.append(roots.get(e.out.id, e))
        eqns.extend(after.get(e.out.id, ()))
    return rebuild(graph, eqns, {})
