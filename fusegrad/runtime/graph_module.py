"""Backends people write: ``compile(fn, backend=my_backend)`` hands each graph the compiler
makes to ``my_backend(gm, example_inputs)``, as torch.compile hands its FX graphs, and runs
what that returns in the graph's place.

``gm`` is a ``GraphModule`` over the IR graph: ``gm.graph`` shows it as FX shows its graphs
(``nodes`` with ``op``/``name``/``target``/``args``, ``print_tabular()``, ``str`` the IR
listing), ``gm.code`` is the listing and ``gm(*tensors)`` (``gm.forward``) runs it op by op.
The backend sees forward graphs only, as torch.compile's backends do: where the function's
result requires grad the graph is the forward half of the compiler's joint graph (its extra
outputs are what the backward reads), and the backward half runs op by op. The example
inputs are zeros of the graph's arguments' shapes and dtypes (the call's tensors, then the
captured ones, parameters and buffers, as torch.compile lifts them)."""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .._dynamo.exc import BackendCompilerFailed
from ..ir.graph import Graph, Var, numbering
from ..nn.module import Module
from ..tracer.trace import outside_traces
from .grad_mode import no_grad
from .interpreter import EagerBackend, run_tensors
from .tensor import Tensor, wrap


class Node:
    """One FX-style node of a graph: ``op`` is "placeholder", "call_function" or "output"."""
    __slots__ = ("op", "name", "target", "args", "kwargs")

    def __init__(self, op: str, name: str, target: Any, args: tuple, kwargs: dict):
        self.op, self.name, self.target, self.args, self.kwargs = op, name, target, args, kwargs

    def __repr__(self) -> str:
        return self.name


class FxGraph:
    """An IR graph as torch.fx's ``Graph`` presents one (see the module docstring)."""

    def __init__(self, graph: Graph):
        self._graph = graph

    @property
    def nodes(self) -> list:
        g = self._graph
        with numbering(g.defined()):
            nodes: dict = {}
            for i, v in enumerate(g.arguments()):
                nodes[v.id] = Node("placeholder", f"arg{i}", f"arg{i}", (), {})
            for e in g.eqns:
                args = tuple(nodes[a.id] if isinstance(a, Var) else a for a in e.inputs)
                nodes[e.out.id] = Node("call_function", f"v{repr(e.out)[1:]}", e.prim, args, dict(e.params))
            out = list(nodes.values())
            out.append(Node("output", "output", "output",
                            (tuple(nodes.get(o.id) if isinstance(o, Var) else o for o in g.outputs),), {}))
        return out

    def print_tabular(self) -> None:
        """Print the nodes as a table: opcode, name, target, args, kwargs."""
        rows = [("opcode", "name", "target", "args", "kwargs")]
        for n in self.nodes:
            target = getattr(n.target, "name", n.target)
            rows.append((n.op, n.name, str(target), repr(n.args), repr(n.kwargs)))
        widths = [max(len(r[c]) for r in rows) for c in range(5)]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        print("\n".join(lines))

    def __str__(self) -> str:
        return str(self._graph)

    __repr__ = __str__


class GraphModule(Module):
    """A graph the compiler made, as a module: ``forward`` runs it op by op on tensors ordered
    as the graph's arguments and returns a tuple, one tensor per output."""

    def __init__(self, graph: Graph):
        super().__init__()
        self._ir = graph
        self.graph = FxGraph(graph)

    def forward(self, *args) -> tuple:
        return tuple(run_tensors(self._ir, list(args)))

    @property
    def code(self) -> str:
        return str(self._ir)

    def print_readable(self, print_output: bool = True) -> str:
        text = f"class GraphModule(fusegrad.nn.Module):\n{self.code}"
        if print_output:
            print(text)
        return text


class _UserExecutable:
    """What the user's backend returned, called with the graph's arrays as tensors."""

    def __init__(self, graph: Graph, compiled: Callable, name: str):
        self.graph, self.compiled, self.name, self.stages = graph, compiled, name, {}

    def __call__(self, *arrays) -> tuple:
        with outside_traces(), no_grad():  # (a segment's plan runs inside its trace)
            outs = self.compiled(*[wrap(a) for a in arrays])
        if isinstance(outs, Tensor):
            outs = (outs,)
        outs = [np.asarray(o._data if isinstance(o, Tensor) else o) for o in outs]
        if len(outs) != len(self.graph.outputs):
            raise RuntimeError(f"compile: backend {self.name} returned a callable that gave {len(outs)} outputs "
                               f"for a graph of {len(self.graph.outputs)}")
        seen = [a for a in arrays if isinstance(a, np.ndarray)]  # (results in memory of their own, as kernels')
        for i, o in enumerate(outs):
            if any(np.may_share_memory(o, a) for a in seen):
                outs[i] = o = o.copy()
            seen.append(o)
        return tuple(outs)

    def kernel_source(self) -> str:
        return f"# backend {self.name}: the callable it returned for this graph\n{self.graph}"


class UserBackend:
    """The Backend of ``compile(backend=callable)`` (see the module docstring)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.title = getattr(fn, "__name__", type(fn).__name__)
        self.name = f"{self.title}@{id(fn):x}"  # (its name in the registry: one per callable)

    def compile(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False,
                blas_nearby: bool = False) -> _UserExecutable:
        examples = [wrap(np.zeros(v.shape, v.dtype)) for v in graph.arguments()]
        try:
            compiled = self.fn(GraphModule(graph), examples)
            if not callable(compiled):
                raise TypeError(f"the backend returned {type(compiled).__name__}, not a callable")
        except Exception as e:  # noqa: BLE001 - reported as PyTorch reports a backend's failure
            raise BackendCompilerFailed(f"backend='{self.title}' raised:\n{type(e).__name__}: {e}") from e
        return _UserExecutable(graph, compiled, self.title)

    def compile_backward(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False,
                         blas_nearby: bool = False):
        return EagerBackend().compile(graph)
