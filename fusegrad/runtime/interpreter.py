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
    primitive, so the ops record autograd nodes or trace like user code; inside compile's
    trace, where binding would record the same equations and nothing else, they are
    recorded at once (``_recorded``)."""
    outs = _recorded(graph, values)
    if outs is not None:
        return outs
    env = eval_tensors(graph, values)
    return [env[o.id] for o in graph.outputs]


def _recorded(graph: Graph, values: Sequence) -> Optional[list]:
    """``graph``'s outputs appended to compile's innermost trace in one step
    (``Trace.splice``: no dispatch or shape rule per equation), or None where binding op by
    op does more: under another trace (a transform's computes ops on concrete tensors, a
    segmented one tracks every tensor), under no_grad (each op gets a stop_gradient), with
    an operand that requires grad (autograd records each op), under forward-mode AD, with an
    operand of another trace, or where an output is a view of an argument or shares its base
    with another output (binding makes the outputs views of those tensors)."""
    from ..tracer.trace import current_traces
    from .forward_state import STATE as FORWARD
    from .grad_mode import STATE
    from .tensor import Tensor, wrap
    traces = current_traces()
    if not traces or not STATE.enabled or FORWARD.level is not None:
        return None
    tr = traces[-1]
    if not tr.captures_state or tr.tracks or any(
            isinstance(t, Tensor) and (t._rg or (type(t._data) is Var and t._data.trace is not tr)) for t in values):
        return None
    args = {v.id: t for v, t in zip(graph.arguments(), values)}
    if not _views_apart(graph, args):
        return None
    made: dict = {}
    outs = []
    for o, v in zip(graph.outputs, tr.splice(graph, values)):
        if o.id in args:  # an argument passed through: the tensor itself, as binding returns it
            outs.append(args[o.id])
        else:
            t = made.get(id(v))
            outs.append(t if t is not None else made.setdefault(id(v), wrap(v)))
    return outs


def _views_apart(graph: Graph, args: dict) -> bool:
    """Whether no output of ``graph`` is a view (through aliasing primitives) of an argument
    and no two outputs are views of one base."""
    base = graph.view_roots()
    seen: dict = {}
    for o in graph.outputs:
        b = base.get(o.id, o.id)
        if (o.id in base and b in args) or seen.setdefault(b, o.id) != o.id:
            return False
    return True


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
            tr = current_traces()[-1]
            env[e.out.id] = t = wrap(tr.emit(e.prim, args, e.params))
            if tr.tracks:  # (a segmented trace computes it at a break)
                tr.track(t)
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

    def compile(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False,
                blas_nearby: bool = False) -> EagerExecutable:
        return EagerExecutable(graph)  # a reference: never writes its arguments; any size is symbolic
