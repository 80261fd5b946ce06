"""Compiled functions that read traced values (``if loss.item() > t:``): the values first,
then the rest, with no Python in between.

A trace that speculated (tracer.speculate) gives a graph and guards on some of its values.
``split`` cuts it in two: the check (the equations those values depend on; its outputs are
the values, then each of its results the rest uses) and the body (the other equations, the
check's results as extra inputs). ``Speculative`` runs a check, tests its guards and runs
the body when they hold: a variant per outcome, traced on the first call that takes it.

A graph with outputs that carry a backward is not cut (their derivative goes through the
check's equations too). When none of its operations can raise or draw random numbers (so
running it for another outcome is harmless) it runs whole, the values read as extra
outputs, and its guards are tested before any result is written or returned
(``Checked``); otherwise the check computes the values and the body everything."""
from __future__ import annotations

from typing import Any

from ..ir.graph import Graph, Var
from ..tracer.speculate import guard_holds
from . import compiled  # (its names are read at call time: it imports this module)
from .tensor import Tensor

VARIANT_LIMIT = 4  # variants (outcomes of the guards) per signature; other calls run in segments


class Variant:
    """One outcome: the check's plan, the guards on its outputs, the body's plan."""

    __slots__ = ("check", "guards", "body", "n_read", "copies")

    def __init__(self, check, guards: list, body, n_read: int, copies: list):
        self.check = check
        self.guards = guards
        self.body = body
        self.n_read = n_read  # the check's outputs before the body's extra inputs
        self.copies = copies  # positions of the check's outputs that may view an argument

    @property
    def plans(self) -> tuple:
        return self.check, self.body

    def run(self, tensors: list, arrays: list) -> Any:
        """The function's result for a call on ``tensors`` (their ``arrays``), or MISS when
        a guard does not hold (nothing was written then)."""
        check = self.check
        values = check.run(*arrays, *[compiled._read(h) for h in check.holders]) if check.holders \
            else check.run(*arrays)
        for g in self.guards:
            if not guard_holds(g, values):
                return MISS
        cut = list(values[self.n_read:])
        for k in self.copies:  # (the body may compute an update into that argument's array)
            cut[k - self.n_read] = cut[k - self.n_read].copy()
        return compiled._run_plan(self.body, tensors, arrays + cut)


MISS = object()


class Checked:
    """One outcome of a graph run whole: the values read are outputs ``first`` on, tested by
    the guards after the run and before its results are written back or wrapped."""

    __slots__ = ("body", "guards", "first", "end")

    def __init__(self, body, guards: list, first: int, n_read: int):
        self.body = body
        self.guards = guards
        self.first, self.end = first, first + n_read

    @property
    def plans(self) -> tuple:
        return (self.body,)

    def run(self, tensors: list, arrays: list) -> Any:
        return compiled._run_plan(self.body, tensors, arrays, accept=self._holds)

    def _holds(self, res: tuple) -> bool:
        values = res[self.first:self.end]
        for g in self.guards:
            if not guard_holds(g, values):
                return False
        return True


class Speculative:
    """A signature whose trace read traced values: its variants, most recently run first.
    ``traced`` and ``written_args`` (the cache's checks) are the first body's."""

    def __init__(self, variant: Variant, escaped: str = ""):
        self.variants = [variant]
        self.traced = variant.body.traced
        self.written_args = variant.body.written_args
        self.escaped = escaped  # why later calls cannot replay it (then they run in segments)
        self.fallback = None  # the entry calls whose outcome has no variant run (see CompiledFunction)

    def run(self, leaves: list) -> Any:
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        arrays = [t._data for t in tensors]
        for i, v in enumerate(self.variants):
            out = v.run(tensors, arrays)
            if out is not MISS:
                if i:
                    self.variants.insert(0, self.variants.pop(i))
                return out
        return MISS


def split(traced) -> tuple:
    """(check graph, number of read values, body graph) of a traced graph that speculated."""
    g = traced.graph
    read = [v for v, _, _ in traced.speculation[0]]
    need = {v.id for v in read}
    for e in reversed(g.eqns):
        if e.out.id in need:
            need.update(a.id for a in e.inputs if type(a) is Var)
    check = Graph()
    check.inputs, check.consts = list(g.inputs), list(g.consts)
    check.eqns = [e for e in g.eqns if e.out.id in need]
    if traced.diff_outputs:
        check.outputs = read
        return check, len(read), g
    body = Graph()
    body.eqns = [e for e in g.eqns if e.out.id not in need]
    used = {a.id for e in body.eqns for a in e.inputs if type(a) is Var}
    used.update(o.id for o in g.outputs if type(o) is Var)
    cut = [e.out for e in check.eqns if e.out.id in used]
    check.outputs = read + cut
    body.inputs, body.consts, body.outputs = list(g.inputs) + cut, list(g.consts), list(g.outputs)
    return check, len(read), body


def copies(check: Graph, n_read: int) -> list:
    """Positions of the check's extra outputs that view one of its arguments."""
    roots = check.view_roots()
    args = {v.id for v in check.arguments()}
    return [n_read + j for j, o in enumerate(check.outputs[n_read:]) if roots.get(o.id) in args]


# operations that cannot raise or draw random numbers at run time (not indexing, library
# solvers, random draws): a graph of these may run for an outcome it was not traced for
_HARMLESS = frozenset({"elementwise", "reduce", "scan", "view", "layout", "matmul", "creation"})


def build(traced, input_rg: list, compile_plan) -> Speculative:
    """The Speculative entry of a traced graph that speculated; ``compile_plan(traced,
    input_rg, suffix, donate)`` optimizes and compiles one of its graphs (compiled.plan_of)."""
    read, guards, escaped = traced.speculation
    g = traced.graph
    if traced.diff_outputs and all(e.prim.kind in _HARMLESS for e in g.eqns):
        first = len(g.outputs) - len(traced.writebacks)
        g.outputs[first:first] = [v for v, _, _ in read]  # (not returned: no out slot names them)
        plan = compile_plan(traced, list(input_rg), "", {})  # (nothing computed into an argument's array)
        return Speculative(Checked(plan, list(guards), first, len(read)), escaped)
    check_graph, n_read, body_graph = split(traced)
    check = compiled._Traced(check_graph, None, [("t", i) for i in range(len(check_graph.outputs))], [], [])
    check.seal()
    n_cut = len(body_graph.inputs) - len(traced.graph.inputs)
    traced.graph = body_graph
    check_plan = compile_plan(check, list(input_rg), ":check", None)
    body_plan = compile_plan(traced, list(input_rg) + [False] * n_cut, "", None)
    return Speculative(Variant(check_plan, list(guards), body_plan, n_read, copies(check_graph, n_read)), escaped)

