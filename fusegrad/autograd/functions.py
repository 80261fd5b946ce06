"""``backward`` and ``grad``: the user-facing entry points to the engine."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.graph import Var
from ..passes.autodiff import filled
from ..runtime.devices import move
from ..runtime.engine import run_backward
from ..runtime.tensor import Tensor, wrap
from ..tracer.trace import capture_trace, user_frame


def _seq(x) -> list:
    if x is None:
        return []
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def _make_grads(outputs: list, grads: list, create_graph: bool, batched: bool = False) -> list:
    """One gradient per output (implicit ones for scalars); with ``batched`` each given
    gradient has a leading batch dimension before the output's shape."""
    out = []
    for i, t in enumerate(outputs):
        g = grads[i] if i < len(grads) else None
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not t._rg:
                raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
            if t._data.dtype.kind == "c":
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got "
                                   f"torch.{t.dtype.name}")
            d = t._data  # traced: a fill in the output's own trace, folded into a literal 1
            g = filled(d.trace, d, 1.0) if type(d) is Var else wrap(move(np.ones(d.shape, dtype=d.dtype), t.device))
        elif not isinstance(g, Tensor):
            g = wrap(move(np.full(t._data.shape, g, dtype=t._data.dtype), t.device))
        elif g._data.dtype != t._data.dtype:  # (the output's dtype, as PyTorch's engine casts it)
            g = g.to(t.dtype)
        elif batched and (g.ndim == 0 or tuple(g.shape[1:]) != tuple(t.shape)):
            raise RuntimeError(f"If `is_grads_batched=True`, we interpret the first dimension of each grad_output "
                               f"as the batch dimension. The sizes of the remaining dimensions are expected to "
                               f"match the shape of corresponding output, but a mismatch was detected: "
                               f"grad_output[{i}] has a shape of {list(g.shape)} and output[{i}] has a shape of "
                               f"{list(t.shape)}. If you only want some tensors in `grad_output` to be considered "
                               f"batched, consider using vmap.")
        elif not batched and tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and output[{i}] "
                               f"has a shape of {list(t.shape)}.")
        out.append(g)
    return out


def backward(tensors, grad_tensors=None, retain_graph: Optional[bool] = None, create_graph: bool = False,
             inputs=None) -> None:
    """Accumulate gradients of ``tensors`` into the leaves' ``.grad``."""
    outs = _seq(tensors)
    grads = _make_grads(outs, _seq(grad_tensors) if not isinstance(grad_tensors, Tensor) else [grad_tensors],
                        create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    ins = _seq(inputs) if inputs is not None else None
    if ins is not None and not ins:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    outside = _outside_graph(outs, "backward()")
    if outside is not None:
        with outside:
            return backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    run_backward(outs, grads, retain_graph, create_graph, inputs=ins, accumulate=True, allow_unused=True)


def _outside_graph(outs: list, what: str):
    """Inside compile's trace, a backward from traced values when some argument requires grad
    but is not a leaf: its graph lies outside the traced function, which would stop the
    gradient at it, so the backward runs eagerly (the trace's graph break context); else None."""
    tr = capture_trace()
    if tr is None or not tr.nonleaf_inputs or not any(isinstance(t, Tensor) and type(t._data) is Var for t in outs) \
            or not _reaches(outs, tr.nonleaf_inputs):  # (an argument the function detaches: h of truncated BPTT)
        return None
    return tr.eagerly(f"{what} in compiled code with an argument that requires grad and is not a leaf (its "
                      f"graph is outside the function) at {user_frame()}")


def _reaches(outs: list, ids: set) -> bool:
    """Whether the backward from ``outs`` reaches a leaf whose id is in ``ids`` (or starts at one)."""
    from ..runtime.nodes import AccumulateGrad
    if any(id(t) in ids for t in outs):  # (a loss passed in, differentiated inside: a GradNorm helper)
        return True
    stack = [t._grad_fn for t in outs if isinstance(t, Tensor) and t._grad_fn is not None]
    seen: set = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            if id(node.variable) in ids:
                return True
            continue
        stack += [e[0] for e in node.edges if e is not None and e[0] is not None]
    return False


def grad(outputs, inputs, grad_outputs=None, retain_graph: Optional[bool] = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: Optional[bool] = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated)."""
    outs = _seq(outputs)
    ins = _seq(inputs)
    if not ins:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    go = _seq(grad_outputs) if not isinstance(grad_outputs, Tensor) else [grad_outputs]
    grads = _make_grads(outs, go, create_graph, is_grads_batched)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    outside = _outside_graph(outs, "autograd.grad()")
    if outside is not None:
        with outside:
            return grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused,
                        is_grads_batched, materialize_grads)
    if is_grads_batched:
        res = _batched_grads(outs, ins, grads, create_graph, allow_unused)
    else:
        res = run_backward(outs, grads, retain_graph, create_graph, inputs=ins, accumulate=False,
                           allow_unused=allow_unused)
    if materialize_grads:
        from ..runtime.factory import zeros_like
        res = [r if r is not None else zeros_like(i) for r, i in zip(res, ins)]
    return tuple(res)


def _batched_grads(outs: list, ins: list, grads: list, create_graph: bool, allow_unused: bool) -> list:
    """``grad`` with ``is_grads_batched``: the backward mapped by vmap over the leading
    dimension of the gradients (as PyTorch does). The graph is always retained: vmap runs
    the backward once to trace it, or once per row where it cannot be traced."""
    from ..func.vmap import vmap
    from ..runtime.factory import zeros_like
    unused: list = []  # which inputs got no gradient (the same for every row)

    def one(*gs):
        res = run_backward(outs, list(gs), True, create_graph, inputs=ins, accumulate=False,
                           allow_unused=allow_unused)
        unused[:] = [r is None for r in res]
        return tuple(zeros_like(i) if r is None else r for r, i in zip(res, ins))
    res = vmap(one)(*grads)
    return [None if u else r for r, u in zip(res, unused)]
