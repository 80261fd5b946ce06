"""One autograd node for an op that PyTorch records as one (``MseLossBackward0``,
``MeanBackward0``) but fusegrad composes of several primitives.

``one_node(name, fn, *inputs)`` runs ``fn`` (on float16 or bfloat16 inputs in float32, its
result rounded once, as PyTorch's CPU kernel for the op computes), then gives its result a single node
named ``name`` whose ``next_functions`` are the inputs' (what a program walking
``loss.grad_fn.next_functions`` finds in PyTorch). The composite's own nodes stay behind it:
its backward runs them in an order fixed when it was made. Under ``create_graph`` the
gradient's graph also reaches them directly, through the values they saved, so a later
backward may run one both inside and outside the composite (each with its share of the
gradient, which sums as it would through one node): from then on they are pinned, kept
until the graphs holding them go. Traced, forward-mode AD and no-grad calls run ``fn`` as
it is."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..ir.graph import Var
from . import forward_state
from .dispatch import INFERENCE_SAVED, rederive
from .grad_mode import STATE
from .nodes import AccumulateGrad, FunctionNode, PrimNode, node_class
from .tensor import Tensor, wrap


class CompositeNode(FunctionNode):
    """A composite's nodes run as one; see the module docstring."""
    __slots__ = ()

    def __getattr__(self, name: str):  # grad_fn._saved_result (softmax's): the output, from the first node
        from .saved_attrs import SAVED, _value
        if name == "_saved_result" and SAVED.get(type(self).__name__, {}).get("result") == "result":
            return _value(self.ctx.order[0], "result")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def one_node(name: str, fn: Callable[..., Tensor], *inputs, half_backward: Optional[Callable] = None) -> Tensor:
    """``fn(*inputs)`` recorded as one node named ``name`` (``inputs``: tensors or other
    values, passed through; a tensor ``fn`` reads that requires grad and is not among them
    leaves its nodes as they are). ``half_backward(g, out)``: for float16 or bfloat16 inputs,
    the inputs' gradients (a tuple) as PyTorch's kernel computes them from the rounded result
    (outside ``create_graph``, which differentiates the float32 graph)."""
    low = _low_precision(inputs)
    if low is not None:
        fn = _in_float32(fn, low)
    grads = [isinstance(x, Tensor) and x._rg for x in inputs]
    if not STATE.enabled or not any(grads) or forward_state.STATE.level is not None or any(
            isinstance(x, Tensor) and type(x._data) is Var for x in inputs):
        return fn(*inputs)
    edges = []
    for x, g in zip(inputs, grads):
        if isinstance(x, Tensor) and x._inf:  # (PyTorch's kernel saves its inputs)
            raise RuntimeError(INFERENCE_SAVED)
        if g and x._base is not None and x._view_fn and x._vver != x._vbox[0]:
            rederive(x)  # a view whose base changed in place: its grad_fn made again (dispatch.record)
        edges.append(((x._grad_fn, x._out_nr) if x._grad_fn is not None else (x._accumulator(), 0)) if g else None)
    inner = fn(*inputs)
    if inner._grad_fn is None or type(inner._data) is Var:  # (recorded by a trace: a segment's own inputs)
        return inner
    plan = _plan(inner._grad_fn, {(id(e[0]), e[1]): k for k, e in enumerate(edges) if e is not None})
    if plan is None:
        return inner
    out = wrap(inner._data)
    if inner._vbox is None:
        inner._vbox = [0]
    out._vbox = inner._vbox  # an in-place update of the result is seen by the nodes that saved it
    node = object.__new__(node_class(name, CompositeNode))
    node._init(tuple(edges))
    node.ctx = _Release([n for n, _ in plan])
    node.backward_fn = _backward(plan, len(inputs), node.ctx)
    if low is not None and half_backward is not None:
        node.backward_fn = _from_rounded(node.backward_fn, half_backward, out)
    node.n_out = 1
    node.out_meta = [(tuple(inner.shape), inner._data.dtype)]
    out._grad_fn, out._rg = node, True
    return out


def _from_rounded(run: Callable, rule: Callable, out: Tensor) -> Callable:
    """``run`` (the composite's backward), or ``rule(g, out)`` from the rounded result ``out``
    when no graph is made of the gradient and ``out`` was not updated in place since."""
    data, box, version = out._data, out._vbox, out._vbox[0]

    def backward(g):
        if STATE.enabled or box[0] != version:
            return run(g)
        return rule(g, wrap(data))
    return backward


def _low_precision(inputs: tuple):
    """The dtype of the floating tensors among ``inputs`` when all are one low-precision
    dtype (float16, bfloat16), else None."""
    low = None
    for x in inputs:
        if isinstance(x, Tensor):
            dt = x._data.dtype
            if dt.itemsize == 2 and dt.kind in "fV":
                if low is not None and dt != low:
                    return None
                low = dt
            elif dt.kind == "f":
                return None
    return low


def _in_float32(fn: Callable, low) -> Callable:
    """``fn`` computing in float32 on its ``low`` inputs, its float32 result rounded to ``low``."""
    from .ops import to
    f32 = np.dtype(np.float32)

    def wide(*inputs):
        out = fn(*(to(x, f32) if isinstance(x, Tensor) and x._data.dtype == low else x for x in inputs))
        return to(out, low) if out._data.dtype == f32 else out
    return wide


def _plan(root, slots: dict) -> Optional[list]:
    """The composite's nodes from ``root``, each after every node feeding it a gradient, with
    where each edge's gradient goes: ("slot", k) for input k, ("node", j, nr) for the j-th
    node. None if an edge leaves the composite other than to an input."""
    seen, post = {id(root)}, []
    stack = [(root, iter(root.edges))]
    while stack:
        node, it = stack[-1]
        for e in it:
            if e is None or (id(e[0]), e[1]) in slots:
                continue
            child = e[0]
            if type(child) is AccumulateGrad:
                return None
            if id(child) not in seen:
                seen.add(id(child))
                stack.append((child, iter(child.edges)))
                break
        else:
            stack.pop()
            post.append(node)
    order = post[::-1]
    index = {id(n): j for j, n in enumerate(order)}
    plan = []
    for n in order:
        dests = []
        for e in n.edges:
            if e is None:
                dests.append(None)
            elif (id(e[0]), e[1]) in slots:
                dests.append(("slot", slots[(id(e[0]), e[1])]))
            else:
                dests.append(("node", index[id(e[0])], e[1]))
        plan.append((n, dests))
    return plan


def _backward(plan: list, n_inputs: int, release: "_Release") -> Callable:
    def run(g):
        if STATE.enabled:  # create_graph
            release.pin()
        bufs: list = [None] * len(plan)
        bufs[0] = [g]
        res = [None] * n_inputs
        for j, (node, dests) in enumerate(plan):
            gs = bufs[j]
            if gs is None:
                continue
            outs = node.apply(gs + [None] * (node.n_outputs - len(gs)))
            for k, d in enumerate(dests):
                if d is None or k >= len(outs) or outs[k] is None:
                    continue
                if d[0] == "slot":
                    res[d[1]] = outs[k] if res[d[1]] is None else res[d[1]] + outs[k]
                    continue
                buf = bufs[d[1]]
                if buf is None:
                    buf = bufs[d[1]] = [None] * plan[d[1]][0].n_outputs
                buf[d[2]] = outs[k] if buf[d[2]] is None else buf[d[2]] + outs[k]
        return tuple(res)
    return run


class _Release:
    """The merged nodes' saved values go when the composite's node is released, unless pinned."""
    __slots__ = ("order", "pinned")

    def __init__(self, order: list) -> None:
        self.order = order
        self.pinned = False

    def pin(self) -> None:
        self.pinned = True
        for node in self.order:
            if isinstance(node, PrimNode):
                node.freed = None
            elif isinstance(node, CompositeNode):
                node.ctx.pin()

    def _release(self) -> None:
        if not self.pinned:
            for node in self.order:
                node.release()
