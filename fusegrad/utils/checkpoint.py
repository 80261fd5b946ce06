"""Activation checkpointing: keep a function's inputs instead of its intermediate values
and recompute them during backward.

``use_reentrant=True`` follows PyTorch's reentrant variant: the forward runs under
no_grad and backward recomputes, then runs a nested ``backward`` that accumulates into
every leaf the function used. ``use_reentrant=False`` follows the non-reentrant one: the
forward runs with grad enabled so that the outputs know every tensor they depend on,
including parameters the function closes over; its graph is dropped at once, and the
checkpoint node has edges to the inputs and to those parameters, so that hooks,
``autograd.grad`` and ``backward(inputs=...)`` treat them as without checkpointing.
A closed-over tensor that is itself the result of differentiable ops (not a leaf) is
differentiated through its own graph during the recomputation, so that graph must still
be alive when the checkpoint's backward runs."""
from __future__ import annotations

import contextlib
import enum
import warnings
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

from ..autograd.function import Function
from ..ir.graph import Var
from ..autograd.functions import backward as _backward, grad as _grad
from ..func.pytree import flatten
from ..runtime.autocast_state import STATE as AUTOCAST
from ..runtime.dispatch import _edge
from ..runtime.engine import RUNNING
from ..runtime.factory import get_rng_state, set_rng_state
from ..runtime.grad_mode import STATE, enable_grad, no_grad
from ..runtime.nodes import AccumulateGrad, FunctionNode, node_class
from ..runtime.tensor import Tensor, wrap
from ..torch_ops import OpOverload, OpOverloadPacket
from ..tracer.trace import capturing, current_traces

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext", "checkpoint", "checkpoint_sequential",
           "create_selective_checkpoint_contexts", "noop_context_fn"]


@contextlib.contextmanager
def _autocast_as(dtype) -> Iterator[None]:
    """Run the block under the autocast state the forward ran under (its low dtype or None)."""
    prev, AUTOCAST.dtype = AUTOCAST.dtype, dtype
    try:
        yield
    finally:
        AUTOCAST.dtype = prev


@contextlib.contextmanager
def _rng_state(state: Optional[Tensor]) -> Iterator[None]:
    """Run the block with the generator at ``state``, then restore the current state."""
    if state is None:
        yield
        return
    current = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(current)


def _detach(args: Sequence) -> list:
    """Tensors detached from the graph, requiring grad as the originals do."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a.detach()
            if a._rg:
                d.requires_grad_(True)
            a = d
        out.append(a)
    return out


class CheckpointFunction(Function):
    """The reentrant checkpoint: one node whose backward reruns the function."""

    @staticmethod
    def forward(ctx, run_function: Callable, preserve_rng_state: bool, *args):
        ctx.run_function = run_function
        ctx.fwd_rng_state = get_rng_state() if preserve_rng_state else None
        ctx.autocast = AUTOCAST.dtype
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_indices))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if RUNNING.partial:  # (its nested backward would accumulate into every leaf's .grad)
            raise RuntimeError("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                               "passing an `inputs` parameter to .backward(). To resolve this error, you can either "
                               "set use_reentrant=False, or call .backward() without passing the `inputs` argument.")
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        with _rng_state(ctx.fwd_rng_state), _autocast_as(ctx.autocast):
            detached = _detach(inputs)
            with enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(d.grad if isinstance(d, Tensor) else None for d in detached)


@contextlib.contextmanager
def _hooks_muted(leaves: List[Tensor]) -> Iterator[None]:
    """Hold back the leaves' tensor hooks during the nested pass: they run once, when the
    outer backward delivers the gradients that pass computes."""
    accs = [t._accumulator() for t in leaves]
    saved = [a.pre_hooks for a in accs]
    for a in accs:
        a.pre_hooks = None
    try:
        yield
    finally:
        for a, h in zip(accs, saved):
            a.pre_hooks = h


def _closure_leaves(outputs: List[Tensor], own: List[Tensor]) -> List[Tensor]:
    """Leaves requiring grad that the graph of ``outputs`` reaches, other than ``own``."""
    own_ids = {id(t) for t in own}
    found: dict = {}
    seen = set()
    stack = []
    for o in outputs:
        if o._grad_fn is not None:
            stack.append(o._grad_fn)
        elif id(o) not in own_ids:
            found.setdefault(id(o), o)
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if type(node) is AccumulateGrad:
            v = node.variable
            if v is not None and id(v) not in own_ids:
                found.setdefault(id(v), v)
        else:
            stack.extend(e[0] for e in node.edges if e is not None)
    return list(found.values())


def _tensor_slots(out: Any) -> List[Any]:
    """The output as a list of slots (a single tensor is one slot)."""
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return list(out)
    return []


def _checkpoint_non_reentrant(function: Callable, preserve_rng_state: bool, args: tuple, kwargs: dict,
                              context_fn: Callable) -> Any:
    rng = get_rng_state() if preserve_rng_state else None
    low = AUTOCAST.dtype
    detached = _detach(args)
    forward_context, recompute_context = context_fn()
    with forward_context:
        out = function(*detached, **kwargs)
    slots = _tensor_slots(out)
    diff = [i for i, o in enumerate(slots) if isinstance(o, Tensor) and o._rg]
    if not diff:
        return out
    own = [d for d in detached if isinstance(d, Tensor) and d._rg]
    leaves = _closure_leaves([slots[i] for i in diff], own)
    input_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a._rg]
    meta = tuple((slots[i]._data.shape, slots[i]._data.dtype) for i in diff)

    def backward_fn(*grads):
        create_graph = STATE.enabled  # the engine runs nodes with grad mode = create_graph
        with _rng_state(rng), _autocast_as(low):
            # for higher-order gradients the recomputed graph must reach the real inputs
            inputs = list(args) if create_graph else _detach(args)
            with enable_grad(), recompute_context:
                again = _tensor_slots(function(*inputs, **kwargs))
        outs = [again[i] for i in diff]
        wrt = [inputs[i] for i in input_pos] + leaves
        with _hooks_muted([t for t in wrt if t._grad_fn is None]):
            return _grad(outs, wrt, list(grads), retain_graph=True, create_graph=create_graph, allow_unused=True)

    cls = node_class("CheckpointFunctionBackward", FunctionNode)
    node = cls.__new__(cls)
    node._init(tuple(_edge(args[i]) for i in input_pos) + tuple(_edge(t) for t in leaves))
    node.ctx = None
    node.n_out = len(diff)
    node.out_meta = meta
    node.backward_fn = backward_fn
    for k, i in enumerate(diff):
        r = wrap(slots[i]._data)
        r._grad_fn, r._out_nr, r._rg = node, k, True
        slots[i] = r
    if isinstance(out, Tensor):
        return slots[0]
    return type(out)(*slots) if hasattr(out, "_fields") else type(out)(slots)


def _checkpoint_traced(function: Callable, args: tuple, kwargs: dict) -> Any:
    """Under compile the traced graph is differentiated whole; the values computed inside
    the region are marked for recomputation, so the partitioner keeps the region's inputs
    and recomputes the rest in the backward (a remat hint, as torch.compile treats it).
    Every active trace is marked: an op records into the trace of its operands, which may be
    passed positionally, by keyword or reached through the function's closure, so any of
    them may hold the region's equations."""
    starts = [(tr, len(tr.graph.eqns)) for tr in current_traces()]
    out = function(*args, **kwargs)
    outs = [t._data for t in flatten(out)[0] if isinstance(t, Tensor) and type(t._data) is Var]
    for tr, since in starts:
        tr.mark_recompute(since, outs)
    return out


class CheckpointPolicy(enum.Enum):
    """What a selective-checkpointing policy says of an op: save its result or recompute it."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


class SelectiveCheckpointContext:
    """The ``ctx`` a policy function is given (``is_recompute``: during the recomputation)."""

    def __init__(self, *, is_recompute: bool) -> None:
        self.is_recompute = is_recompute


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation: bool = False):
    """The ``context_fn`` of selective checkpointing, for ``checkpoint(..., context_fn=...)``:
    ``policy_fn_or_list`` (ops to save, as ``torch.ops.aten.mm.default``, or a function
    ``(ctx, op, *args, **kwargs) -> CheckpointPolicy``) says which results PyTorch keeps
    rather than recomputes. fusegrad's checkpoint recomputes the whole function (the results
    and gradients are the same; only the memory kept differs)."""
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if not isinstance(op, OpOverload):
                name = f"{op.namespace}.{op.op}" if isinstance(op, OpOverloadPacket) else op
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {name} of type "
                                 f"{type(op)}. Please update the OpOverloadPacket to a specific OpOverload.For "
                                 "example, if you have `torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`.")
    elif not callable(policy_fn_or_list):
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    return contextlib.nullcontext(), contextlib.nullcontext()


def noop_context_fn() -> Tuple[contextlib.nullcontext, contextlib.nullcontext]:
    """``checkpoint``'s default ``context_fn``: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(function: Callable, *args, use_reentrant: Optional[bool] = None,
               context_fn: Callable = noop_context_fn, determinism_check: str = "default", debug: bool = False,
               early_stop: bool = True, preserve_rng_state: bool = True, **kwargs) -> Any:
    """``function(*args, **kwargs)`` without keeping its intermediate values for backward:
    they are recomputed (calling ``function`` once more) when gradients flow back. The
    random generator state is restored for the recomputation so dropout masks match.
    ``context_fn() -> (forward context, recomputation context)`` wraps each run
    (non-reentrant form); ``determinism_check``, ``debug`` and ``early_stop`` are PyTorch's
    options, checked and accepted (the recomputation runs whole, unchecked)."""
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of default, none, but got {determinism_check}")
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default "
                      "behavior, you can pass use_reentrant=True.", stacklevel=2)
        use_reentrant = True
    if use_reentrant and kwargs:  # checked before tracing too: traced and eager calls accept the same
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant and (context_fn is not noop_context_fn or debug):
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    tracing = bool(current_traces())
    # (a transform's trace differentiates its own inputs, whatever their requires_grad)
    no_inputs_grad = use_reentrant and STATE.enabled and (not tracing or capturing()) and not any(
        isinstance(a, Tensor) and a._rg for a in args)
    if no_inputs_grad:
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
    if tracing:  # (compile, a transform), whichever arguments are traced
        with context_fn()[0]:
            if no_inputs_grad:  # the reentrant form's output has no gradient then: its forward runs without
                with no_grad():
                    return _checkpoint_traced(function, args, kwargs)
            return _checkpoint_traced(function, args, kwargs)
    if use_reentrant:
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    if not STATE.enabled:
        return function(*args, **kwargs)
    return _checkpoint_non_reentrant(function, preserve_rng_state, args, kwargs, context_fn)


def checkpoint_sequential(functions, segments: int, input: Tensor, use_reentrant: Optional[bool] = None,
                          **kwargs) -> Any:
    """Run a sequence of modules/functions in ``segments`` checkpointed chunks (the last
    chunk runs normally)."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)

    def run(start: int, end: int) -> Callable:
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
