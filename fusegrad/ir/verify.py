"""The IR verifier: SSA form, shapes and dtypes, defined outputs. Passes run it after
every step in tests (and when ``FUSEGRAD_VERIFY=1``)."""
from __future__ import annotations

import numpy as np

from .graph import Graph, Var


class VerifyError(AssertionError):
    """The graph is malformed; the message names the offending equation."""


def verify(graph: Graph) -> Graph:
    """Check ``graph``; return it unchanged or raise VerifyError."""
    defined: set[int] = set()

    def define(v, what: str) -> None:
        if not isinstance(v, Var):
            raise VerifyError(f"{what} is {v!r}, not a Var")
        if v.id in defined:
            raise VerifyError(f"{v!r} is defined twice (again as {what})")
        defined.add(v.id)

    for v in graph.inputs:
        define(v, "an input")
    for v, _ in graph.consts:
        define(v, "a const")
    for i, e in enumerate(graph.eqns):
        where = f"eqn {i} `{e!r}`"
        for a in e.inputs:
            if isinstance(a, Var):
                if a.id not in defined:
                    raise VerifyError(f"{where} uses {a!r} before it is defined")
            elif not isinstance(a, (bool, int, float)):
                raise VerifyError(f"{where} has a literal of type {type(a).__name__}")
        avals = [(a.shape, a.dtype) if isinstance(a, Var) else a for a in e.inputs]
        try:
            shape, dtype = e.prim.abstract(avals, e.params)
        except Exception as exc:  # noqa: BLE001 - any failure of the rule means a malformed eqn
            raise VerifyError(f"{where}: shape rule of {e.prim.name} fails: {exc}") from exc
        if tuple(shape) != e.out.shape or np.dtype(dtype) != e.out.dtype:
            raise VerifyError(f"{where}: result is {e.out.type_str()} but {e.prim.name} gives "
                              f"{np.dtype(dtype).name}{list(shape)}")
        define(e.out, where)
    for o in graph.outputs:
        if not isinstance(o, Var) or o.id not in defined:
            raise VerifyError(f"output {o!r} is not defined in the graph")
    return graph
