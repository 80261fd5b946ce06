"""Running a Graph op by op: on arrays with each primitive's NumPy impl (the "eager"
backend, the reference for codegen), or on Tensors through the dispatcher (so autograd
records every op: the create_graph path of compiled backward)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..ir.graph import Graph, Var


def run_arrays(graph: Graph, arrays: Sequence) -> tuple:
    """Evaluate ``graph`` on arrays ordered inputs then consts; one array per output, each
    in memory of its own as a compiled kernel's are (an argument passed through, or a
    NumPy view of one or of an earlier result, is copied: an in-place update of the result
    must not reach it)."""
    env: dict[Var, object] = dict(zip(graph.arguments(), arrays))
    for e in graph.eqns:
        args = [env[a] if isinstance(a, Var) else a for a in e.inputs]
        env[e.out] = e.prim.impl(*args, **e.params)
    seen = [a for a in arrays if isinstance(a, np.ndarray)]
    outs = []
    for o in graph.outputs:
        o = np.asarray(env[o])
        if any(np.may_share_memory(o, a) for a in seen):  # (a residual viewing a result, too)
            o = o.copy()
        outs.append(o)
        seen.append(o)
    return tuple(outs)


def run_tensors(graph: Graph, values: Sequence) -> list:
    """Evaluate ``graph`` on Tensors (ordered inputs then consts) by binding each
    primitive, so the ops record autograd nodes or trace like user code."""
    env = eval_tensors(graph, values)
    return [env[o.id] for o in graph.outputs]


def eval_tensors(graph: Graph, values: Sequence) -> dict:
    """Like ``run_tensors`` but returns every value: Var id -> Tensor."""
    from ..tracer.trace import current_traces
    from .tensor import wrap
    env = {v.id: t for v, t in zip(graph.arguments(), values)}
    for e in graph.eqns:
        args = [env[a.id] if isinstance(a, Var) else a for a in e.inputs]
        if any(isinstance(a, Var) for a in e.inputs):
            env[e.out.id] = e.prim(*args, **e.params)
        elif current_traces():  # literal-only (creation) under a trace: record it, don't bake an array
            env[e.out.id] = wrap(current_traces()[-1].emit(e.prim, args, e.params))
        else:
            env[e.out.id] = wrap(np.asarray(e.prim.impl(*args, **e.params)))
    return env


class EagerExecutable:
    """The optimized graph, interpreted with NumPy."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.stages = {}

    def __call__(self, *arrays) -> tuple:
        return run_arrays(self.graph, arrays)

    def kernel_source(self) -> str:
        return "# backend 'eager': no generated code; the graph runs op by op\n" + str(self.graph)


class EagerBackend:
    """Backend ``"eager"``: runs the optimized IR op by op (for debugging and reference)."""
    name = "eager"

    def compile(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False) -> EagerExecutable:
        return EagerExecutable(graph)  # a reference: never writes its arguments; any size is symbolic
