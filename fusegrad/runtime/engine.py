"""The backward engine: runs grad_fn nodes in dependency order (each node once, after
every consumer of its outputs has contributed), summing gradients of shared values."""
from __future__ import annotations

import threading
import warnings
from collections import deque
from typing import Optional, Sequence

import numpy as np

from ..ir import dtypes as D
from ..ir.graph import Var
from ..ir.prims.layout import decode_key, slice_
from ..tracer.live import live_grad
from . import devices
from .grad_mode import STATE
from .nodes import AccumulateGrad, Node


def _edge_of(t):
    if not t._rg:
        return None
    if t._grad_fn is not None:
        return (t._grad_fn, t._out_nr)
    return (t._accumulator(), 0)


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _slice_into(node, g, buffers: dict, owned: dict) -> bool:
    """Add ``g``, the gradient of a slice, into the slice of its input's gradient, where the
    engine owns that sum: a sequence loop's ``unbind``/``select`` gradients then cost their
    own size, not a zero-embedded copy of the whole input each (a 2000-step LSTM's backward
    was quadratic: 2.6 s). False (nothing done) where the slice's VJP must run instead."""
    e, ins = node.edges[0], node.ins
    if e is None or g is None or type(getattr(g, "_data", None)) is not np.ndarray or type(ins) is not tuple:
        return False
    shape = tuple(ins[0].shape)
    c, nr = e
    buf = buffers.get(c)
    if buf is None:
        buf = buffers[c] = [None] * c.n_outputs
    b = buf[nr]
    if b is not None and owned.get(id(b)) is b and b._data.dtype == g._data.dtype:
        dest = b
    elif b is None or (type(getattr(b, "_data", None)) is np.ndarray and tuple(b.shape) == shape
                       and b._data.dtype == g._data.dtype):
        from .tensor import wrap
        dest = wrap(np.zeros(shape, g._data.dtype) if b is None else np.array(b._data, order="C"))
        buf[nr] = dest
        owned[id(dest)] = dest
    else:
        return False
    dest._data[decode_key(node.params["key"])] += g._data
    return True


def _run_pre_hooks(hooks, gs):
    """Tensor hooks (and retain_grad) on a node's outputs; a hook may replace the grad."""
    for h in list(hooks):
        if getattr(h, "_per_output", False):
            gs = h(gs)
        elif gs[0] is not None:
            r = h(gs[0])
            if r is not None:
                if hasattr(r, "_data") and r._data.dtype != gs[0]._data.dtype:
                    raise RuntimeError(f"hook '{getattr(h, '__name__', h)}' has changed the type of value (was "
                                       f"{gs[0].type()} got {r.type()})")
                gs = [r] + list(gs[1:])
    return gs


class _Running(threading.local):
    """The backward running in this thread: ``graph`` is (the nodes it reaches, those it
    runs or None for all of them), or None; a new tuple per backward (multi-grad hooks).
    ``partial``: it was given ``inputs`` (``autograd.grad``, ``backward(inputs=...)``)."""
    graph: Optional[tuple] = None
    partial = False


RUNNING = _Running()


def will_run(graph: tuple, node) -> bool:
    """Whether the backward of ``graph`` (``RUNNING.graph``) runs ``node``."""
    return node in graph[0] and (graph[1] is None or node in graph[1])


def _sum(a, b, node, k):
    if not hasattr(b, "_data") or not hasattr(a, "_data"):  # (a tensor's slot: anything else is rare)
        if getattr(b, "is_sparse", False) or getattr(a, "is_sparse", False):  # (a sparse embedding's gradient)
            return _sparse_sum(a, b)
        raise TypeError(f"{node.name()} returned {type(b).__name__} as gradient {k}; expected a Tensor or None")
    return a + b


def _sparse_sum(a, b):
    """Sparse gradients add up as sparse (their entries together), with a dense one as dense."""
    if getattr(a, "is_sparse", False) and getattr(b, "is_sparse", False):
        return a + b
    dense, sparse = (b, a) if getattr(a, "is_sparse", False) else (a, b)
    return dense + sparse.to_dense()


def run_backward(roots: Sequence, grads: Sequence, retain_graph: bool, create_graph: bool,
                 inputs: Optional[Sequence] = None, accumulate: bool = True,
                 allow_unused: bool = False) -> Optional[list]:
    """Backpropagate ``grads`` from ``roots``. With ``accumulate`` the leaves' ``.grad``
    accumulate (``inputs`` restricts which); otherwise the gradients of ``inputs`` are
    returned (autograd.grad)."""
    buffers: dict = {}
    root_nodes = []
    for i, (t, g) in enumerate(zip(roots, grads)):
        e = _edge_of(t)
        if e is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        node, nr = e
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * node.n_outputs
            root_nodes.append(node)
        buf[nr] = _add(buf[nr], g)

    # dependency counts over the reachable graph
    deps: dict = {}
    seen = set(root_nodes)
    stack = list(root_nodes)
    while stack:
        n = stack.pop()
        for e in n.edges:
            if e is not None:
                c = e[0]
                deps[c] = deps.get(c, 0) + 1
                if c not in seen:
                    seen.add(c)
                    stack.append(c)

    targets = None  # (node, output_nr) -> position in inputs
    if inputs is not None:
        targets = {}
        for i, t in enumerate(inputs):
            e = _edge_of(t)
            if e is None:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            targets.setdefault(e, []).append(i)
        tnodes = {e[0] for e in targets}
        leaves = [n for n in seen if type(n) is AccumulateGrad]
        if all(type(n) is AccumulateGrad for n in tnodes) and all(n in tnodes for n in leaves):
            needed = None  # every path ends at a target leaf: nothing to prune
        else:
            needed = _needed(seen, tnodes)
    else:
        needed = None
    captured = [None] * (len(inputs) if inputs is not None else 0)

    ready = deque(n for n in root_nodes if deps.get(n, 0) == 0)
    target_nodes = {e[0] for e in targets} if targets is not None else ()
    anomaly = STATE.anomaly
    owned: dict = {}  # gradient sums this backward allocated itself (safe to update in place)
    prev_enabled, prev_graph, prev_partial = STATE.enabled, RUNNING.graph, RUNNING.partial
    STATE.enabled = create_graph
    RUNNING.graph, RUNNING.partial = (seen, needed), inputs is not None
    # fills in VJP rules (primitives without tensor operands) are made where the gradients flow
    devices.DEFAULT.append(roots[0].device if roots else devices.DEFAULT[-1])
    try:
        while ready:
            node = ready.popleft()
            gs = buffers.pop(node, None) or [None] * node.n_outputs
            if owned:  # once handed to a node a sum may be returned as is: no longer ours
                for g in gs:
                    if g is not None:
                        owned.pop(id(g), None)
            if node.pre_hooks:
                gs = _run_pre_hooks(node.pre_hooks, gs)
            if node in target_nodes:
                for nr in range(len(gs)):
                    for i in targets.get((node, nr), ()):
                        captured[i] = gs[nr]
            if type(node) is AccumulateGrad:
                if accumulate and gs[0] is not None and (targets is None or node in target_nodes):
                    leaf = node.variable
                    _accumulate(leaf, gs[0], create_graph, node.grad_into)
                    if node.post_acc_hooks and leaf is not None:
                        for h in list(node.post_acc_hooks):
                            h(leaf)
                continue
            run = (gs[0] is not None if len(gs) == 1 else any(g is not None for g in gs)) and (
                needed is None or node in needed)
            if run and getattr(node, "prim", None) is slice_ and not (create_graph or anomaly or node.post_hooks) \
                    and _slice_into(node, gs[0], buffers, owned):
                run, outs = False, ()  # (added into its input's gradient: the edges below only count down)
            else:
                outs = node.apply(gs) if run else ()
            if run:
                if node.post_hooks:
                    for h in node.post_hooks:  # a hook may return gradients to use instead, as PyTorch's
                        r = h(tuple(outs), tuple(gs))
                        if r is not None:
                            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                            if len(r) != len(outs):
                                raise RuntimeError(f"hook '{getattr(h, '__name__', h)}' has returned an incorrect "
                                                   f"number of values (got {len(r)}, but expected {len(outs)})")
                            outs = r
                if anomaly:
                    _check_nan(node, outs)
            if not retain_graph:
                node.release()
            n_outs = len(outs)
            for k, e in enumerate(node.edges):
                if e is None:
                    continue
                c, nr = e
                g = outs[k] if k < n_outs else None
                if g is not None:
                    buf = buffers.get(c)
                    if buf is None:
                        buf = buffers[c] = [None] * c.n_outputs
                    b = buf[nr]
                    if b is None:
                        buf[nr] = g
                    elif owned.get(id(b)) is b and hasattr(g, "_data"):  # a sum the engine made itself: add in place
                        np.add(b._data, g._data, out=b._data)
                    else:
                        buf[nr] = s = _sum(b, g, node, k)
                        # traced sums (IR values under compile) cannot be updated in place
                        # (b may be a sparse gradient, whose sum with a dense one is a new dense tensor)
                        if not create_graph and type(getattr(s, "_data", None)) is np.ndarray and \
                                tuple(s._data.shape) == tuple(b.shape):
                            owned[id(s)] = s
                d = deps[c] - 1
                deps[c] = d
                if d == 0:
                    ready.append(c)
    finally:
        STATE.enabled, RUNNING.graph, RUNNING.partial = prev_enabled, prev_graph, prev_partial
        devices.DEFAULT.pop()
    if inputs is None:
        return None
    if accumulate:  # backward(inputs=...): a non-leaf among them accumulates its gradient too, as PyTorch's
        for t, g in zip(inputs, captured):  # (one that retains its grad has had it from its hook already)
            if g is not None and t._grad_fn is not None and not t._retains:
                t._grad = g if t._grad is None else t._grad + g
        return None
    for i, g in enumerate(captured):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
            continue
        d = g._data
        if type(d) is np.ndarray and not d.flags.c_contiguous and 0 not in d.strides:
            # a composite's gradient in a transposed layout (a convolution's input gradient):
            # PyTorch's backward kernels give C order, and code calls view() on it (a WGAN's penalty)
            captured[i] = g.contiguous()
    return captured


def _needed(nodes, target_nodes) -> set:
    """Nodes from which some target is reachable (the rest need not run)."""
    memo: dict = {}
    for start in nodes:
        if start in memo:
            continue
        stack = [(start, iter([e[0] for e in start.edges if e is not None]))]
        memo[start] = start in target_nodes
        while stack:
            n, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                if stack and memo[n]:
                    memo[stack[-1][0]] = True
                continue
            if child in memo:
                if memo[child]:
                    memo[n] = True
                continue
            memo[child] = child in target_nodes
            stack.append((child, iter([e[0] for e in child.edges if e is not None])))
    return {n for n, v in memo.items() if v}


def _accumulate(leaf, g, create_graph: bool, into=None) -> None:
    if leaf is None:
        return
    from .tensor import wrap
    if g.shape != leaf.shape:
        raise RuntimeError(f"Function AccumulateGrad returned an invalid gradient: got shape {list(g.shape)}, "
                           f"expected {list(leaf.shape)}")
    if not hasattr(g, "_data") or (leaf._grad is not None and not hasattr(leaf._grad, "_data")):
        # sparse (.grad of a sparse embedding): kept so, summed as PyTorch sums it
        leaf._grad = g if leaf._grad is None else _sparse_sum(leaf._grad, g)
        return
    if g.dtype is not leaf.dtype:
        g = g.to(leaf.dtype)
    keep = create_graph or type(g._data) is Var  # traced grads (tracing a backward) are never copied
    if type(g._data) is Var and g._data.trace.captures_state:
        if hasattr(g._data.trace, "graded_inputs"):
            g._data.trace.check_graded_input(leaf, "accumulates into")
        g._data.trace.touch(leaf)  # compiled code writes this .grad back
    if leaf._grad is None:
        dest = into(leaf, g._data) if into is not None and not keep and type(g._data) is np.ndarray else None
        ld = leaf._data
        if dest is None and not keep and type(ld) is np.ndarray and not ld.flags.c_contiguous \
                and 0 not in ld.strides:
            dest = np.empty_like(ld)  # PyTorch's layout contract: .grad strided as its (dense) leaf
        if dest is not None:
            np.copyto(dest, g._data)
            g = wrap(dest)
        elif not keep:
            g = wrap(devices.copy(g._data))
        elif create_graph and type(g._data) is not Var:
            # as PyTorch's AccumulateGrad under grad mode: a clone (differentiable), never a view
            # of another tensor (zero_grad's detach_ refuses views) nor shared with another leaf
            from .ops import clone, named
            g = named(clone(g), "CopyBackwards")  # (PyTorch's copies into a new tensor)
        elif g._base is not None and not g._rg:
            # a traced view of a backward temporary: .grad is a tensor of its own, so that an
            # in-place update of it (clip_grad_norm_) does not write through a view
            g = wrap(g._data)
        leaf._grad = g
    elif keep or leaf._grad._rg or type(leaf._grad._data) is Var:
        held = leaf._grad
        tr = g._data.trace if type(g._data) is Var else None
        # compiled code replays this on later calls, whose .grad may be another tensor (a
        # segmented trace records every call afresh: it reads the one there now)
        if tr is not None and tr.captures_state and not tr.tracks and type(held._data) is not Var and not held._rg:
            held = live_grad(leaf, tr)
        leaf._grad = held + g
    elif type(leaf._grad._data) is not np.ndarray:  # a CUDA gradient: summed on its device, in place
        devices.write(leaf._grad._data, (leaf._grad + g)._data)
        leaf._grad._bump()
    else:
        np.add(leaf._grad._data, g._data, out=leaf._grad._data)
        leaf._grad._bump()


def _check_nan(node: Node, outs) -> None:
    for i, g in enumerate(outs):
        if g is not None and not isinstance(getattr(g, "_data", None), np.ndarray):
            continue
        if g is not None and D.np_differentiable(g._data.dtype) and np.isnan(g._data).any():
            if node.stack:  # as PyTorch: the forward's traceback is a warning, the error names the node
                warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the "
                              "error:\n" + "".join(node.stack[-4:]), UserWarning, stacklevel=2)
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
