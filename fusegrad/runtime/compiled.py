"""``fusegrad.compile``: trace a function per input signature, optimize the IR, compile it
with a backend and cache the result; fall back to eager where tracing breaks.

One call with a new signature runs: trace (define-by-run, recording autograd so that a
``backward()`` inside the function traces too) -> optimize -> backend.compile. When the
outputs require grad, the VJP of the optimized graph is partitioned (``remat`` policy)
into a forward executable that also returns residuals and a backward executable run by
one ``CompiledFunctionBackward`` node."""
from __future__ import annotations

import contextlib
import copy
import functools
import gc
import itertools
import sys
import threading
import types
import weakref
from collections import OrderedDict
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..codegen.backend import Unsupported, get_backend, register_backend
from ..codegen.cpu import CpuExecutable
from ..func.pytree import flatten, unflatten
from ..ir.dtypes import get_default_dtype
from ..ir.graph import Graph, Var, symbolic_sizes
from ..passes.autodiff import vjp_graph
from ..passes.fusion import Fused, fuse
from ..passes.partition import REMAT_POLICIES, partition
from ..passes.pipeline import optimize
from ..tracer.capture import Captured, CaptureTrace, Variants, capture, members, read_references
from ..tracer import dynamic_float
from ..tracer.dynamic_float import ArgBox, DynamicFloat, FloatUsed
from ..tracer.guards import flatten_call, grad_bits, module_key, signature
from ..tracer.live import CallTimeConst, LiveTensor
from ..tracer.trace import _STACK, GraphBreak, Trace, current_traces
from .blas_threads import TunedBlas, tuned
from .debug import Dumper, log
from .dispatch import INFERENCE_SAVED, _edge, replay_view
from .overlap import overlapping
from . import forward_state, staged_backward
from .autocast_state import STATE as AUTOCAST
from .forward_state import STATE as FORWARD
from .grad_mode import STATE
from .interpreter import run_tensors
from .nodes import _FREED_MSG, FunctionNode, PrimNode, check_versions, node_class
from .ops import _snapshot
from .segments import run_segmented
from . import speculation
from .speculation import Speculative
from ..tracer import speculate
from .._dynamo import exc as _dynamo_exc
from .stance import STANCE
from ..compiler import _marked_dynamic, _static_dims
from .._dynamo import config as dynamo_config
from . import devices
from .tensor import Tensor, wrap, zeros_like_meta

#: compiles per value of int or float arguments that the code uses as numbers (a slice bound,
#: a size), sizes aside: past it, new values run eagerly (a decoding position or a step
#: counter is new at every call, and each value would compile)
VALUE_LIMIT = 2
SIZED_LIMIT = 64  # per-size plans kept per symbolic function (least recently used dropped)
# new sizes in a row (no call of a size seen before in between) after which further new sizes
# run eagerly: a decode step whose KV cache grows at every call would trace and plan anew each
# time (the kernels are shared, the per-size plan is not), many times eager's cost
NEW_SIZES_LIMIT = 32
_BackwardNode = node_class("CompiledFunctionBackward", FunctionNode)


# ------------------------------------------------------------------ tracing
def _read(holder: Tensor) -> np.ndarray:
    """A const's value at call time (random keys draw fresh numbers, live numbers are read)."""
    return holder.draw() if isinstance(holder, CallTimeConst) else holder._data


class _Traced(Captured):
    """The result of tracing one call: the graph, where outputs go, what to write back;
    reusable while it ``holds()``."""
    arg_grads = False  # whether the traced code read or accumulated into an argument's .grad

    def __init__(self, graph, out_spec, out_slots, diff_outputs, writebacks, spent=(), guards=None, views=(),
                 attrs=()):
        super().__init__(graph, guards, with_grad=bool(writebacks))
        self.out_spec = out_spec
        # per output leaf: ("t", graph output index), ("n", graph output index) for a Python
        # number (a returned item()), ("a", k) the k-th tensor argument itself, or ("v", value)
        self.out_slots = out_slots
        # (graph output index, base, view chain, requires grad) per output that views a tensor
        # argument, a captured tensor or another output: made again at each call from its
        # base ("in", argument position; "obj", the tensor; "out", graph output index), so it
        # shares memory with it as eager's does (see _outer_base, _inner_bases)
        self.views = list(views)
        # (module, its buffers dict or None, name, graph output index) per traced tensor the
        # function assigned to a module attribute: assigned the computed value after each call
        self.attrs = list(attrs)
        self.diff_outputs = diff_outputs  # graph output indices that carry grad_fn
        self.writebacks = writebacks  # (kind "data"/"grad", holder) per extra graph output
        # (graph output index, grad_fn class name) of outputs that require grad but whose graph
        # a backward() inside the function already freed (a whole training step's loss): eager
        # raises on a second backward, so no compiled backward (nor its residuals) is needed
        self.spent = list(spent)
        # (values read, guards, why later calls cannot replay it) of a trace that read
        # traced values (tracer.speculate), else None
        self.speculation: Optional[tuple] = None


def _trace(fn: Callable, leaves: list, spec, speculating: bool = False, backend_name: str = "eager",
           floats: Optional[_Floats] = None, live_names: frozenset = frozenset(), one_graph: bool = False) -> _Traced:
    """Trace ``fn`` on ``leaves``; ``speculating``: ``item()`` and ``bool()`` of traced values
    are computed and guarded (tracer.speculate) rather than graph breaks; for the cpu backend
    a primitive it cannot lower is a graph break. ``floats``: the leaves that are float
    arguments read at each call, here 0-d tensors, which ``fn`` gets as DynamicFloats.
    ``one_graph`` (fullgraph=True): nothing may break the graph, and a guarded read of a
    value (a branch on it) is a GraphBreak."""
    with capture(fn, leaves, keep_requires_grad=True, breaks_on_print=True, live_names=live_names) as (tr, tleaves):
        tr.unlowered_breaks = backend_name == "cpu"
        tr.one_graph = one_graph
        tr.attribute_stores = {}
        tr.rebound_use = ""  # (a GAN step's D used again after its optimizer step: see _finish_trace)
        args, kwargs = unflatten(spec, floats.traced(tleaves) if floats is not None else tleaves)
        inputs = [(t, t._data) for t in tleaves if isinstance(t, Tensor)]
        from ..optim.optimizer import guard_plain_hyperparameters
        optimizers = _reachable_optimizers(fn, leaves)
        for opt in optimizers:
            guard_plain_hyperparameters(opt)
        if speculating:
            speculate.start(tr, leaves)
            hyper = _hyperparameters(optimizers)
        out = None
        before = _shallow(args, kwargs)
        try:
            out = fn(*args, **kwargs)
        finally:
            escaped = speculate.finish(tr, out) if speculating else ""
        if _shallow(args, kwargs) != before:  # (the trace's copies: a replay would not fill the caller's)
            tr.graph_break(f"{getattr(fn, '__name__', 'the function')} changes a list or dict it is given "
                           "(filling a metrics dict, appending to a list)")
        traced = _finish_trace(tr, out, inputs)
        _read_names_live(traced)
        if speculating and tr.speculated:
            if not escaped and _hyperparameters(optimizers) != hyper:
                escaped = "the function changes an optimizer's hyperparameters"
            if escaped or tr.speculation_guards:  # (else every read value is used in the graph alone)
                if one_graph:
                    tr.graph_break(escaped or speculate.branching(tr))
                traced.speculation = (tr.speculated, tr.speculation_guards, escaped)
    return traced.seal()


def _shallow(args: tuple, kwargs: dict) -> list:
    """What the lists and dicts among the arguments hold, by identity, down their nesting."""
    out: list = []

    def visit(x) -> None:
        if isinstance(x, dict):
            out.append((id(x), tuple((k, id(v)) for k, v in x.items())))
            for v in x.values():
                visit(v)
        elif isinstance(x, list):
            out.append((id(x), tuple(map(id, x))))
            for v in x:
                visit(v)
        elif isinstance(x, tuple):
            for v in x:
                visit(v)
    visit(tuple(args) + tuple(kwargs.values()))
    return out


def _hyperparameters(optimizers: list) -> list:
    """The numbers in the param_groups of ``optimizers`` (those the function reaches): a
    function that reads traced values and changes these must run its Python at every call."""
    return [{k: v for k, v in g.items() if isinstance(v, (int, float))} for opt in optimizers for g in opt.param_groups]


def _holds_traced(x, tr, depth: int = 3) -> bool:
    """Whether object ``x`` holds (in its attributes, a few containers deep) a tensor trace
    ``tr`` computed: returned as it is, later calls would hand back the first call's object."""
    if isinstance(x, Tensor):
        return type(x._data) is Var and x._data.trace is tr
    if depth == 0:
        return False
    if isinstance(x, (list, tuple)):
        return any(_holds_traced(v, tr, depth - 1) for v in x)
    if isinstance(x, dict):
        return any(_holds_traced(v, tr, depth - 1) for v in x.values())
    attrs = getattr(x, "__dict__", None)  # (a module's updates are replayed as its side effects)
    return type(attrs) is dict and not isinstance(x, type) and "_parameters" not in attrs and any(
        _holds_traced(v, tr, depth - 1) for v in attrs.values())


def _finish_trace(tr: CaptureTrace, out, inputs: list) -> _Traced:
    g = tr.graph
    out_leaves, out_spec = flatten(out)
    slots, diff, spent, views = [], [], [], []
    position = {id(t): i for i, (t, _) in enumerate(inputs)}
    inner = _inner_bases(out_leaves, position)
    index: dict = {}  # id of a returned tensor -> its graph output

    differentiable: dict = {}  # output position -> its tensor, for those in diff

    def output(x: Tensor) -> int:
        k = index[id(x)] = len(g.outputs)
        if x._rg and STATE.enabled:
            if _spent(x):
                spent.append((k, type(x._grad_fn).__name__))
            else:
                diff.append(k)
                differentiable[k] = x
        g.outputs.append(tr.lift(x))
        return k

    captured = {id(h) for h, *_ in tr.snaps}
    for x in out_leaves:
        number = speculate.returned(tr, x) if tr.speculates else None
        if number is not None:  # a number item() gave: the graph's value, a Python number at each call
            slots.append(("n", len(g.outputs)))
            g.outputs.append(number)
        elif isinstance(x, Tensor) and id(x) in position:  # an argument itself: the caller's tensor, as
            slots.append(("a", position[id(x)]))  # eager returns it (after its in-place updates)
        elif isinstance(x, Tensor) and (type(x._data) is not Var or id(x) in captured):
            slots.append(("v", x))  # a captured tensor itself (a parameter, a buffer updated in place)
        elif isinstance(x, Tensor):
            base = _outer_base(x, position) or (("out", x._base) if id(x._base) in inner else None)
            if x._view_fn is None:  # a strided view (unfold, as_strided; ops.storage_alias): its computed value
                base = None
            if base is not None:  # made again from its base at each call, its gradient flowing through that view
                views.append((len(g.outputs), base, tuple(x._view_fn or ()), bool(x._rg)))
                slots.append(("t", len(g.outputs)))
                g.outputs.append(tr.lift(x))
            else:  # (the same tensor returned twice is one tensor, as eagerly)
                slots.append(("t", index[id(x)] if id(x) in index else output(x)))
        else:
            if _holds_traced(x, tr):
                raise GraphBreak(f"the function returns a {type(x).__name__} holding tensors it computed (objects "
                                 "other than tuples, lists, dicts, mappings and dataclasses are not rebuilt at each "
                                 "call)")
            slots.append(("v", x))
    for b in inner.values():  # a base only its views return: an output no slot names
        if id(b) not in index:
            output(b)
    if diff and tr.rebound_use:  # the outputs' gradients would flow through an update without gradient
        for k in [k for k in diff if _spent_below(differentiable[k])]:  # (losses already backpropagated)
            diff.remove(k)
            spent.append((k, type(differentiable[k]._grad_fn).__name__))
        if diff:
            raise GraphBreak(tr.rebound_use)
    views = [(i, ("out", index[id(b[1])]) if b[0] == "out" else b, chain, rg) for i, b, chain, rg in views]
    attrs = [(m, store, name, output(t)) for m, store, name, t in (tr.attribute_stores or {}).values()]
    writebacks = []
    final: dict = {}  # id of a written array -> its new value: aliases (detach, .data) share it
    for h, data, grad, *_ in list(tr.snaps):
        if h._data is not data and final.get(id(data)) is not h._data:
            final[id(data)] = h._data
            owner = tr.grad_owner(h)  # (a leaf's .grad read in the trace: the one it holds at the call)
            writebacks.append(("data", h) if owner is None else ("grad", owner))
            g.outputs.append(tr.lift(h))
        if h._grad is not grad and h._grad is not None:
            writebacks.append(("grad", h))
            g.outputs.append(tr.lift(h._grad))
    # tensor arguments updated in place (an SGD step on parameters passed in) or left with
    # a .grad: written into the caller's tensors; an int holder is the argument's position
    for i, (t, var) in enumerate(inputs):
        if t._data is not var:
            if t._grad_fn is not None:  # (a write-back carries no autograd history: eager's gives it one)
                raise GraphBreak(f"an argument ({list(t.shape)} {t.dtype}) updated in place with a value that "
                                 "requires grad (a buffer filled step by step, outputs[t] = h)")
            writebacks.append(("data", i))
            g.outputs.append(tr.lift(t))
        if t._grad is not None:
            writebacks.append(("grad", i))
            g.outputs.append(tr.lift(t._grad))
    traced = _Traced(g, out_spec, slots, diff, writebacks, spent, tr.guards, views, attrs)
    traced.arg_grads = tr.arg_grads
    return traced


def _tensor_meta(t) -> Optional[tuple]:
    return (type(t._data), t._data.shape, t._data.dtype, t._rg) if type(t) is Tensor else None


def _changed_numbers(variants: list) -> set:
    """The keys of the globals and closure cells holding an int or float whose value a
    guard of ``variants`` recorded and which now hold another."""
    out = set()
    for entry in variants:
        traced = getattr(entry, "traced", None)
        for key, (read, value, identity) in getattr(traced, "guard_map", {}).items():
            if not identity and type(key) is tuple and key[0] in ("global", "cell") and len(key) <= 3 \
                    and type(value) in (int, float) and read() != value:
                out.add(key)
    return out


def _read_names_live(traced: _Traced) -> None:
    """A tensor the function names (a global, a closure cell) that the graph only reads and
    that does not require grad is read from the name at every call, guarded on its shape,
    dtype and requires_grad rather than on its identity, as torch.compile lifts such
    tensors: rebinding the name (a mask made anew for each batch) does not trace again."""
    kept = {id(h) for _, h in traced.writebacks if not isinstance(h, int)}
    kept |= {id(s[1]) for s in traced.out_slots if s[0] == "v"} | {id(b[1]) for _, b, *_ in traced.views}
    names = {}
    for key, (read, value, identity) in traced.guard_map.items():
        if identity and type(key) is tuple and key[0] in ("global", "cell") and type(value) is Tensor \
                and not value._rg and value._base is None and type(value._data) is np.ndarray and id(value) not in kept:
            names[id(value)] = (key, read)
    if not names:
        return
    consts = traced.graph.consts
    for k, (v, h) in enumerate(consts):
        if id(h) in names:
            key, read = names.pop(id(h))
            live = wrap(h._data, LiveTensor)
            live.read = read
            consts[k] = (v, live)
            traced.guard_map[key] = (lambda read=read: _tensor_meta(read()), _tensor_meta(h), False)
    traced.guards = list(traced.guard_map.values())


def _inner_bases(leaves: list, position: dict) -> dict:
    """id -> tensor of each value the function computed that a returned view shares memory
    with another returned tensor through: the value itself is returned, or several returned
    views share it. Those views are made again from it at each call, so they alias as in
    eager (a view of a computed value returned alone is its own copy)."""
    tensors = [x for x in leaves if isinstance(x, Tensor)]
    returned = {id(x) for x in tensors}
    seen: dict = {}
    inner = {}
    for x in tensors:
        b = x._base
        if b is None or _outer_base(x, position) is not None:
            continue
        if id(b) in returned or id(b) in seen:
            inner[id(b)] = b
        seen[id(b)] = b
    return inner


def _outer_base(x: Tensor, position: dict) -> Optional[tuple]:
    """The base of an output that views a tensor argument, ("in", its position), or a
    captured tensor, ("obj", the tensor); None for any other output (for views of computed
    values see _inner_bases)."""
    b = x._base
    if b is None:
        return None
    if id(b) in position:
        return "in", position[id(b)]
    return ("obj", b) if type(b._data) is not Var else None


def _spent(x: Tensor) -> bool:
    """True if backward through ``x`` raises in eager: its grad_fn was released by a backward
    without retain_graph and needs the saved values it dropped."""
    return _freed(x._grad_fn)


def _freed(n) -> bool:
    return isinstance(n, PrimNode) and bool(getattr(n, "freed", False)) and (n.prim.saves_in or n.prim.saves_out)


def _spent_below(x: Tensor) -> bool:
    """True if backward through ``x`` raises in eager somewhere down its graph: a loss the
    traced code already backpropagated (``_spent`` looks at its own node only)."""
    stack, seen = [x._grad_fn], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if _freed(n):
            return True
        stack.extend(e[0] for e in n.edges if e is not None)
    return False


def _raise_freed(*grads):
    raise RuntimeError(_FREED_MSG)


# ------------------------------------------------------------------ compiled plans
class _Plan:
    """One compiled signature: executables and everything needed to call them."""

    def __init__(self, traced: _Traced, stages: dict):
        self.traced = traced
        self.stages = stages  # stage name -> IR (printed when asked for: str() of a Graph or Fused)
        self.holders: list = []  # consts fed to the forward after the inputs
        self.forward = None
        self.backward = None
        self.joint: Optional[Graph] = None
        self.wrt: list = []  # primal positions that get gradients
        self.reaches: list = []  # per position of wrt: whether a differentiable output depends on it
        self.n_primal_consts = 0
        self.n_out = len(traced.graph.outputs)
        self.n_user = self.n_out - len(traced.writebacks)  # outputs the function returns
        self.single = traced.out_spec is None and traced.out_slots == [("t", 0)]  # returns one tensor
        # ... and nothing else: no const read, no write-back, no grad_fn (set once compiled)
        self.plain = False
        self.merged: list = []  # returned positions that copy an earlier one's array (_merged_outputs)
        self.run = None  # the forward as called on a signature's arrays (see _guarded_entry)
        self.symbols: dict = {}  # size -> name of the symbolic dimensions (listings print them)
        self.bwd_holders: list = []
        self.res_args: list = []  # per residual: the forward argument it is (see _residuals), or None
        # tensor arguments the call writes (data or .grad): traced as distinct from the
        # others, so a call where one shares memory with another argument runs eagerly
        self.written_args = sorted({h for _, h in traced.writebacks if isinstance(h, int)})
        # (graph output index, grad_fn class) per spent output: the class looked up once here,
        # not on every call
        self.spent = [(i, node_class(name, FunctionNode)) for i, name in traced.spent]
        self.build: Optional[Callable[[Graph], Any]] = None  # compiles a piece of the backward
        self.staged: dict = {}  # gradient groups -> compiled stages (runtime.staged_backward)
        self.needed: dict = {}  # which gradients are missing -> residuals read (_needed_residuals)

    def read_bwd_holders(self) -> list:
        return [_read(h) for h in self.bwd_holders]

    def kernel_source(self) -> str:
        src = self.forward.kernel_source()
        if self.backward is not None:
            src += "\n\n# ---- backward ----\n" + self.backward.kernel_source()
        return src


class _Ctx:
    """What the compiled backward keeps: residual arrays and, for create_graph, the primal
    tensors (the real inputs and consts, so eager re-evaluation connects to them)."""
    # the backward sees which outputs got no gradient (see _backward); out_meta fills them
    materialize_grads = False

    def __init__(self, residuals, primals, refs: list):
        self.residuals = residuals
        self.primals = primals
        self.out_meta: tuple = ()  # (shape, dtype) per differentiable output
        # (residual position, tensor, its version) per residual that is an argument's own
        # array: the backward reads it as it is then, so an in-place update since is an error
        self.refs = refs
        self.freed = False
        self.reached: set = set()  # the outputs a backward got a gradient for (see _release)
        # out_nr of the outputs a segment also used itself (runtime.segments): a hook on one
        # of them would miss the gradient of those uses, which the compiled backward computes
        self.used_inside: frozenset = frozenset()

    def _release(self):
        """Drop the saved values after a backward without retain_graph, once every output
        got a gradient: as eager autograd frees only the nodes it traversed, a backward
        from one output (a GAN's D loss on ``fake.detach()``) leaves what another output's
        backward (``fake``'s, through G) still needs."""
        if len(self.reached) < len(self.out_meta):
            return
        self.residuals = self.primals = None
        self.refs = []
        self.freed = True

    def keep_apart(self, targets: list) -> None:
        """Copy each residual that shares memory with an array of ``targets``, which an
        in-place update of the same call is about to overwrite: the backward needs the
        value from before it (as PyTorch saves the original of an in-place op's input)."""
        if self.residuals is not None:
            kept = [type(r) is np.ndarray and any(type(t) is np.ndarray and np.may_share_memory(r, t)
                                                  for t in targets) for r in self.residuals]
            self.residuals = [r.copy() if k else r for r, k in zip(self.residuals, kept)]
            self.refs = [ref for ref in self.refs if not kept[ref[0]]]
        if self.primals is not None:  # (create_graph reruns the joint graph on them: spectral_norm's u)
            ids = {id(t) for t in targets}
            self.primals = [_snapshot(p) if isinstance(p, Tensor) and id(p._data) in ids else p
                            for p in self.primals]

    def check(self, needed: Optional[frozenset] = None) -> None:
        """Raise as eager autograd would for a backward through this call: its values were
        freed, or an argument it reads (of residual positions ``needed``, all if None) was
        updated in place since."""
        if self.freed:
            raise RuntimeError(_FREED_MSG)
        refs = self.refs if needed is None else [r for r in self.refs if r[0] in needed]
        if refs:
            check_versions([(t, v) for _, t, v in refs], _BackwardNode.__name__)


def _needed_residuals(plan: _Plan, n_res: int, missing: tuple) -> frozenset:
    """The residual positions the backward reads for the gradients that are present: eager
    autograd never visits the ops behind an output without a gradient, so an argument
    only they saved may have been updated in place since (a GAN's D weights, stepped after
    D's loss, while G's backward runs through ``fake`` of the same compiled call)."""
    key = (n_res, missing)
    got = plan.needed.get(key)
    if got is None:
        bwd = plan.stages["backward"]
        live = {bwd.inputs[n_res + k].id for k, m in enumerate(missing) if not m}
        for e in bwd.eqns:  # the values computed from a present gradient ...
            if any(type(a) is Var and a.id in live for a in e.inputs):
                live.add(e.out.id)
        need = set()
        for e in reversed(bwd.eqns):  # ... and everything they are computed from
            if e.out.id in live or e.out.id in need:
                need.update(a.id for a in e.inputs if type(a) is Var)
        got = plan.needed[key] = frozenset(k for k, v in enumerate(bwd.inputs[:n_res]) if v.id in need)
    return got


def _backward(plan: _Plan, ctx: _Ctx, *grads):
    missing = tuple(g is None for g in grads)
    ctx.check(_needed_residuals(plan, len(ctx.residuals), missing) if True in missing and ctx.refs else None)
    ctx.reached.update(k for k, m in enumerate(missing) if not m)
    if True in missing:
        grads = [zeros_like_meta(m) if g is None else g for g, m in zip(grads, ctx.out_meta)]
    if STATE.enabled:  # create_graph: run the joint graph on tensors so the grads are differentiable
        vals = list(ctx.primals) + list(grads) + [h for _, h in plan.joint.consts]
        return tuple(run_tensors(plan.joint, vals)[plan.n_out:])
    traces = current_traces()
    if traces and traces[-1].records_compiled_backward:  # compiled with the code that follows it
        return _recorded_backward(traces[-1], plan, ctx, grads)
    if any(type(g._data) is Var for g in grads):  # traced by a transform or a compiled caller
        bwd = plan.stages["backward"]
        vals = [wrap(r) for r in ctx.residuals] + list(grads) + [wrap(_read(h)) for h in plan.bwd_holders]
        return tuple(run_tensors(bwd, vals))
    arrays = list(ctx.residuals) + [g._data for g in grads] + plan.read_bwd_holders()
    res = tuple(wrap(a) for a in plan.backward(*arrays))
    if True in missing and not all(_finite(r._data) for r in res):
        return _unvisited(plan, ctx, grads, missing)
    return res


def _finite(a) -> bool:
    return type(a) is not np.ndarray or a.dtype.kind not in "fc" or bool(np.isfinite(a.sum()))


def _unvisited(plan: _Plan, ctx: _Ctx, grads: list, missing: list) -> tuple:
    """The gradients from only the outputs that got one, as eager autograd computes them,
    which never visits the others' backward. The compiled backward takes zeros for those,
    and a zero times an infinite derivative (an unused perplexity exp(loss) that overflows,
    a cross entropy with every target ignored) is NaN: where its result is not finite, the
    call's joint graph runs again eagerly on the primals and autograd backpropagates."""
    from .engine import run_backward
    from .grad_mode import enable_grad
    with enable_grad(), np.errstate(all="ignore"):  # (its backward half runs too: on the zeros)
        vals = list(ctx.primals) + list(grads) + [h for _, h in plan.joint.consts]
        outs = run_tensors(plan.joint, vals)[:plan.n_out]
    diff = plan.traced.diff_outputs
    roots = [(outs[diff[k]], g) for k, g in enumerate(grads) if not missing[k] and outs[diff[k]]._rg]
    wrt = [i for i, r in zip(plan.wrt, plan.reaches) if r and ctx.primals[i]._rg]
    got = run_backward([t for t, _ in roots], [g for _, g in roots], False, False,
                       inputs=[ctx.primals[i] for i in wrt], accumulate=False, allow_unused=True) if roots and wrt else []
    by = dict(zip(wrt, got))
    return tuple(by.get(i) for i in plan.wrt)


def _recorded_backward(tr: Trace, plan: _Plan, ctx: _Ctx, grads: tuple) -> tuple:
    """The backward graph spliced into ``tr`` (a later segment of compiled code), on the
    residuals as arrays it reads; its gradients are constants to any later derivative, as
    an eager backward's are (create_graph takes the joint graph instead)."""
    from ..ir.prims.elementwise import stop_gradient
    bwd = plan.stages["backward"]
    own = {k: t for k, t, _ in ctx.refs}  # (the argument itself: the segment reads it as one input)
    vals = [own[k] if k in own else wrap(r) for k, r in enumerate(ctx.residuals)]
    vals += list(grads) + [wrap(_read(h)) for h in plan.bwd_holders]
    outs = []
    for v in tr.splice(bwd, vals):
        t = wrap(tr.emit(stop_gradient, (wrap(v),), {}))
        tr.track(t)
        outs.append(t)
    return tuple(outs)


_DUAL = "calls with forward-mode AD dual tensors run eagerly (tangents propagate op by op)"
_ALIASED = ("a tensor argument the function updates in place shares memory with another "
            "argument: that call ran eagerly")


def _aliased(written: list, leaves: list) -> bool:
    """True when a tensor argument at a position in ``written`` shares memory with another."""
    return bool(overlapping([x._data for x in leaves if isinstance(x, Tensor)], written))


def _call_plan(plan: _Plan, leaves: list, groups: Optional[tuple] = None) -> Any:
    """Run ``plan`` on ``leaves``; ``groups`` (id -> group, number of groups): the backward
    runs in stages handing over each group's gradients in turn (runtime.staged_backward)."""
    tensors = [x for x in leaves if isinstance(x, Tensor)]
    return _run_plan(plan, tensors, [t._data for t in tensors], groups)


def _run_plan(plan: _Plan, tensors: list, arrays: list, groups: Optional[tuple] = None,
              accept: Optional[Callable[[tuple], bool]] = None) -> Any:
    """``_call_plan`` on the tensor arguments and their arrays, which match the plan's
    signature (shapes and dtypes checked by the cache lookup, hence ``plan.run``);
    speculation.MISS, with nothing written, when ``accept(results)`` is false."""
    consts = [_read(h) for h in plan.holders] if plan.holders else ()
    if consts:
        arrays = arrays + consts
    res = plan.run(*arrays)
    if accept is not None and not accept(res):
        return speculation.MISS
    if plan.plain:
        return wrap(res[0])
    tr = plan.traced
    n_user = plan.n_user
    outs = [wrap(a) for a in res[:n_user]]
    for k in plan.merged:
        outs[k] = wrap(devices.copy(outs[k]._data))
    for i, cls in plan.spent:
        node = cls.__new__(cls)
        node._init(())
        node.ctx, node.n_out = None, 1
        node.out_meta = ((outs[i]._data.shape, outs[i]._data.dtype),)
        node.backward_fn = _raise_freed
        outs[i]._grad_fn, outs[i]._out_nr, outs[i]._rg = node, 0, True
    if plan.backward is not None:  # (list comprehensions, not generators: this runs per call)
        primals = list(tensors)
        if plan.n_primal_consts:
            primals += [h if not isinstance(h, CallTimeConst) else wrap(a)
                        for h, a in zip(plan.holders[:plan.n_primal_consts], consts)]
        ctx = _residuals(plan, res, tensors, arrays, primals)
        edges = tuple([_edge(primals[i]) if r else None for i, r in zip(plan.wrt, plan.reaches)])
        out_meta = tuple([(outs[i]._data.shape, outs[i]._data.dtype) for i in tr.diff_outputs])
        stages = groups and staged_backward.stages_for(plan, staged_backward.assignment(plan, primals, *groups))
        if stages:
            node = staged_backward.attach(_BackwardNode, plan, ctx, stages, functools.partial(_backward, plan, ctx),
                                          edges, out_meta)
        else:
            node = _BackwardNode.__new__(_BackwardNode)
            node._init(edges)
            node.ctx = ctx
            node.n_out = len(tr.diff_outputs)
            node.out_meta = ctx.out_meta = out_meta
            node.backward_fn = functools.partial(_backward, plan, ctx)
        for k, i in enumerate(tr.diff_outputs):
            outs[i]._grad_fn, outs[i]._out_nr, outs[i]._rg = node, k, True
    if tr.writebacks:
        holders = [tensors[h] if isinstance(h, int) else h for _, h in tr.writebacks]
        if plan.backward is not None:
            ctx.keep_apart([h._data for (kind, _), h in zip(tr.writebacks, holders) if kind == "data"])
        for (kind, _), h, a in zip(tr.writebacks, holders, res[n_user:plan.n_out]):
            _write_back(kind, h, a)
    for i, (kind, base), chain, rg in tr.views:
        src = tensors[base] if kind == "in" else outs[base] if kind == "out" else base
        v = replay_view(src, chain) if chain else src.detach()
        outs[i] = v if v._rg == rg else v.detach()  # (a view of a detached alias is detached too)
    for m, store, name, i in tr.attrs:
        if store is None:
            object.__setattr__(m, name, outs[i])
        else:
            store[name] = outs[i]
    if plan.single:
        return outs[0]
    return unflatten(tr.out_spec, [outs[s[1]] if s[0] == "t" else outs[s[1]]._data.item() if s[0] == "n"
                                   else tensors[s[1]] if s[0] == "a" else s[1] for s in tr.out_slots])


def _residuals(plan: _Plan, res: tuple, tensors: list, arrays: list, primals: list) -> _Ctx:
    """The backward's context of one call: the residuals the forward returned, and those that
    are arguments (tensors, then consts: ``arrays``). A leaf's array is read as it is at the
    backward (a parameter, a batch: PyTorch saves those too, and refuses the backward if they
    were updated in place since); anything else is copied, since the compiled backward may
    read a value that PyTorch's ops do not save (recomputing from it), which may then be
    updated in place legally."""
    if not plan.res_args:
        return _Ctx(res[plan.n_out:], primals, [])
    made = iter(res[plan.n_out:])
    residuals, refs = [], []
    for k, a in enumerate(plan.res_args):
        if a is None:
            residuals.append(next(made))
            continue
        src = tensors[a] if a < len(tensors) else plan.holders[a - len(tensors)]
        if src._inf:  # (saved for the backward, as eager refuses: dispatch.record)
            raise RuntimeError(INFERENCE_SAVED)
        if isinstance(src, CallTimeConst):  # a draw of this call's own
            residuals.append(arrays[a])
        elif src._grad_fn is None and src._base is None:
            residuals.append(arrays[a])
            refs.append((k, src, src._version))
        else:
            residuals.append(devices.copy(arrays[a]))
    return _Ctx(residuals, primals, refs)


def _donations(traced: _Traced, opt) -> dict:
    """Output position -> argument position for each value written back over a tensor's
    data: the backend may compute it straight into that tensor's array."""
    n_user = len(opt.outputs) - len(traced.writebacks)
    const_pos = {id(h): len(opt.inputs) + k for k, (_, h) in enumerate(opt.consts)}
    res = {}
    for j, (kind, h) in enumerate(traced.writebacks):
        pos = h if isinstance(h, int) else const_pos.get(id(h))
        if kind == "data" and pos is not None:
            res[n_user + j] = pos
    return res


def _same_array(a, b) -> bool:
    """Whether host or device arrays ``a`` and ``b`` are the same memory and layout."""
    return a is b or (type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype and a.strides == b.strides
                      and devices.data_pointer(a) == devices.data_pointer(b))


def _copy_into(dst, src) -> None:
    if type(dst) is np.ndarray:
        np.copyto(dst, src, casting="unsafe")
    else:  # a CUDA tensor's array: written on its device
        devices.write(dst, src)


def _write_back(kind: str, holder: Tensor, a) -> None:
    """Apply an in-place update the traced code made to a captured tensor (already done
    when the executable computed it into the tensor's own array)."""
    if kind == "data":
        if not _same_array(holder._data, a):
            _copy_into(holder._data, a)
        holder._bump()
    elif holder._grad is not None and holder._grad._data.shape == a.shape:
        _copy_into(holder._grad._data, a)
        holder._grad._bump()
    else:
        holder._grad = wrap(devices.copy(a))


# ------------------------------------------------------------------ the compiled function
class _Eager:
    """A cached decision to run a signature eagerly."""

    def __init__(self, reason: str):
        self.reason = reason


_STATIC = "static"  # a float-free signature whose floats compile per value (CompiledFunction._dynamic_floats)


class _FloatPlan:
    """A plan whose float arguments (at leaf ``positions``) are 0-d float64 inputs, for
    the float-free signature ``family`` and the values ``fixed`` of the number arguments
    it compiled as constants (``_fixed_numbers``)."""
    __slots__ = ("plan", "positions", "family", "fixed")

    def __init__(self, plan: "_Plan", positions: tuple, family, fixed: tuple):
        self.plan, self.positions, self.family, self.fixed = plan, positions, family, fixed


class _Floats:
    """The float arguments of a trace that reads them at each call (tracer.dynamic_float):
    0-d float64 tensors among the leaves, DynamicFloats for the traced function."""

    def __init__(self, positions: tuple, leaves: list, box: ArgBox):
        self.positions = positions
        self.made: list = []  # the trace's DynamicFloats: these, and arithmetic on them
        self.proxies = {i: DynamicFloat.argument(leaves[i], box, i, self.made) for i in positions}

    @staticmethod
    def as_tensors(positions: tuple, leaves: list) -> list:
        out = list(leaves)
        for i in positions:
            out[i] = wrap(np.asarray(leaves[i], np.float64))
        return out

    def tensors(self, leaves: list) -> list:
        return self.as_tensors(self.positions, leaves)

    def traced(self, tleaves: list) -> list:
        """The traced leaves with each float's traced tensor handed to its DynamicFloat."""
        out = list(tleaves)
        for i, proxy in self.proxies.items():
            proxy.tensor = tleaves[i]
            out[i] = proxy
        return out

    def kept(self) -> bool:
        """Whether the traced code kept a DynamicFloat after returning (in its result, a list,
        an attribute): it would stand for that call's value. (An argument's proxy is also
        held by ``proxies``.)"""
        return dynamic_float.kept(self.made, frozenset(id(p) for p in self.proxies.values()))


class _Segmented:
    """A cached decision to run a signature as compiled segments around its graph breaks
    (runtime.segments); ``reason`` is the first break."""

    def __init__(self, reason: str, first: Optional[Speculative] = None):
        self.reason = reason
        self.eager = False  # set when code raised GraphBreak before any break ran on, or when small
        self.small: Optional[bool] = None  # whether its segments are too small to pay (runtime.segments)
        # the compiled trace that ran the Python of the call that made this decision: that
        # call runs it (running the Python again would repeat its side effects)
        self.first = first


def _layout(args: tuple) -> Optional[tuple]:
    """Per positional argument, None for a tensor or (type, length) for a list or tuple of
    tensors; None when some argument is anything else (the fast path's calls)."""
    layout = []
    for a in args:
        if isinstance(a, Tensor):
            layout.append(None)
        elif type(a) in (list, tuple) and all(isinstance(t, Tensor) for t in a):
            layout.append((type(a), len(a)))
        else:
            return None
    return tuple(layout)


class _FastPath:
    """The plan the last call of positional tensors (or lists of them) ran, and what a call
    must match to run it without the signature lookup: as many tensors, in the same layout
    of arguments, of the same shapes, dtypes and requires_grad, the same grad mode and
    autocast dtype and default dtype, outside any trace and forward-mode AD, while the plan's guards hold and
    no written argument aliases another. Anything else takes the full lookup, which makes
    the plan it finds the next fast path. A compiled Module's calls also match its part of
    the key (``guards.module_key``: training flag, parameters', buffers' and submodules'
    identities)."""

    __slots__ = ("metas", "grad_bits", "layout", "nested", "grad", "autocast", "default", "plan", "holds", "hits",
                 "owner", "owner_key")

    def __init__(self, owner: "CompiledFunction", tensors: list, layout: tuple, plan: _Plan):
        self.metas = tuple((t._data.shape, t._data.dtype, bool(t._rg)) for t in tensors)
        # (a plan whose trace read an argument's .grad holds while each has one or not as then)
        self.grad_bits = grad_bits(tensors) if getattr(plan.traced, "arg_grads", False) else None
        self.layout = layout
        self.nested = any(layout)  # some argument is a list or tuple of tensors
        self.grad = STATE.enabled
        self.autocast = AUTOCAST.dtype
        self.default = get_default_dtype()
        self.plan = plan
        tr = plan.traced
        self.holds = tr.holds if tr.graph.consts or tr.guards else None
        self.hits = owner._fast_hits
        self.owner = owner._owner
        self.owner_key = module_key(self.owner)

    def run(self, args: tuple) -> Any:
        """The plan's result for ``args``, or ``_MISS`` when they do not match."""
        layout = self.layout
        if len(args) != len(layout) or STATE.enabled is not self.grad or AUTOCAST.dtype is not self.autocast \
                or FORWARD.level is not None or _STACK.traces or get_default_dtype() is not self.default:
            return _MISS
        if self.nested:
            leaves = []
            for a, kind in zip(args, layout):
                if kind is None:
                    leaves.append(a)
                elif type(a) is kind[0] and len(a) == kind[1]:
                    leaves.extend(a)
                else:
                    return _MISS
        else:
            leaves = args
        arrays = []
        for a, (shape, dtype, rg) in zip(leaves, self.metas):
            if not isinstance(a, Tensor):
                return _MISS
            d = a._data
            if d.shape != shape or d.dtype is not dtype or a._rg is not rg:
                return _MISS
            arrays.append(d)
        if self.grad_bits is not None and grad_bits(leaves) != self.grad_bits:
            return _MISS
        if self.owner is not None and module_key(self.owner) != self.owner_key:
            return _MISS
        plan = self.plan
        if (self.holds is not None and not self.holds()) or \
                (plan.written_args and _aliased(plan.written_args, list(leaves))):
            return _MISS
        next(self.hits)
        if plan.plain:
            return wrap(plan.run(*arrays)[0])
        return _run_plan(plan, leaves, arrays)


_MISS = object()


#: the compiled functions alive, whose caches ``fusegrad.compiler.reset`` empties
LIVE: "weakref.WeakSet[CompiledFunction]" = weakref.WeakSet()


class CompiledFunction:
    """The object ``fusegrad.compile`` returns: call it like the original function."""

    def __init__(self, fn: Callable, backend: Union[str, Callable], fullgraph: bool, remat: str,
                 dynamic: Optional[bool] = None):
        if remat not in REMAT_POLICIES:
            raise ValueError(f"remat must be one of {REMAT_POLICIES}, got {remat!r}")
        self.fn = fn
        self._backend = backend  # (as given: a deep copy compiles with it too)
        #: a backend people write (called with each graph: runtime.graph_module), by the name registered
        self.user_backend = callable(backend)
        if self.user_backend:
            from .graph_module import UserBackend
            user = UserBackend(backend)
            register_backend(user.name, lambda: user)
            backend = user.name
        self.backend_name = backend
        self.fullgraph = fullgraph
        self.remat = remat
        self.dynamic = dynamic
        self._owner = fn if hasattr(fn, "named_parameters") else None
        self._lock = threading.Lock()
        self._grad_groups: Optional[tuple] = None  # see _set_gradient_groups
        self._reset()
        functools.update_wrapper(self, fn, updated=())
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        LIVE.add(self)

    def _reset(self) -> None:
        """Forget every compiled entry and count (``fusegrad.compiler.reset``): the next call
        traces and compiles again (kernels come back from the kernel caches)."""
        # dynamic shapes: size-free signature -> the signatures compiled with static sizes, or
        # True once compiled symbolically; the per-size plans of symbolic families (LRU)
        self._families: dict = {}
        self._sized: "OrderedDict[Any, Any]" = OrderedDict()
        self._new_sizes = 0  # sizes built in a row without a call of a known size (NEW_SIZES_LIMIT)
        # per signature, one variant per set of guard values; an eager decision always applies
        self._cache = Variants(dynamo_config.recompile_limit,
                               lambda e: type(e) not in (_Plan, Speculative) or e.traced.holds())
        self._warmed: set = set()
        self._segments: dict = {}  # (IR fingerprint, ...) -> compiled segment (runtime.segments)
        self._segment_forms: dict = {}  # the same keys with float literals left out -> segments compiled
        self._segments_blas = False  # whether a compiled segment calls BLAS (runtime.segments)
        self._float_plans: dict = {}  # float-and-size-free signature -> [_FloatPlan] or _STATIC (_dynamic_floats)
        self._float_box = ArgBox()  # this call's float arguments, which those plans' guards read
        self._fixed_numbers: dict = {}  # that signature -> positions of number arguments used as numbers
        self._grad_keyed: set = set()  # signatures whose trace read an argument's .grad (guards.grad_bits)
        self._per_value: dict = {}  # number-and-size-free signature -> compiles per value (VALUE_LIMIT)
        # the globals and closure cells holding numbers that changed between calls: traced as
        # values read at each call (live), or per value where the code needs the number (static)
        self._live_names: set = set()
        self._static_names: set = set()
        self._fast: Optional[_FastPath] = None  # the last plan run on positional tensors
        self._fast_hits = itertools.count()  # its hits (next() is atomic: no lock on that path)
        self._stats = {"compiles": 0, "hits": 0, "misses": 0, "fallbacks": 0, "recompiles": 0,
                       "warmups": 0, "segments": 0, "symbolic_sizes": 0, "graph_breaks": [], "notes": []}

    def __getattr__(self, name):  # a compiled Module still exposes parameters(), train(), ...
        if name.startswith("__") or "fn" not in self.__dict__:
            raise AttributeError(name)
        if name == "forward" and self._owner is not None:  # as torch.compile's module: the compiled call
            return self.__call__
        if name == "_orig_mod" and self._owner is not None:  # torch.compile's OptimizedModule's
            return self._owner
        return getattr(self.__dict__["fn"], name)

    def __deepcopy__(self, memo: dict) -> "CompiledFunction":
        """A compiled copy of a deep copy of the function (an EMA or best-model snapshot of a
        compiled model, AveragedModel's copy): its own caches, compiled again on first call."""
        return CompiledFunction(copy.deepcopy(self.fn, memo), self._backend, self.fullgraph, self.remat,
                                self.dynamic)

    def cache_info(self) -> dict:
        """Counters: compiles, hits, misses, fallbacks (eager calls), recompiles, graph_breaks
        (reasons naming file:line, each once), segments (compiled segments of functions that
        break), symbolic_sizes (sizes served by a shape-symbolic graph family: traced again,
        no kernel compiled), notes (e.g. backend substitutions), entries."""
        with self._lock:
            info = {k: (list(v) if isinstance(v, list) else v) for k, v in self._stats.items()}
            info["hits"] += int(repr(self._fast_hits)[len("count("):-1])  # count(N): N taken so far
            info["entries"] = len(self._cache)
            return info

    def __get__(self, obj, objtype=None):
        """As a decorator on a method (``@compile def forward(self, x)``): bound to ``obj``."""
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        if STANCE.force_eager:
            return self.fn(*args, **kwargs)
        fast = self._fast
        if fast is not None and not kwargs:
            out = fast.run(args)
            if out is not _MISS:
                return out
        if current_traces():  # inside an outer trace or transform: trace through inline
            return self.fn(*args, **kwargs)
        leaves, spec, spec_key = flatten_call(args, kwargs)
        if forward_state.STATE.level is not None and any(
                isinstance(x, Tensor) and forward_state.get_tangent(x) is not None for x in leaves):
            with self._lock:  # dual tensors (forward-mode AD): eager ops carry their tangents
                self._stats["fallbacks"] += 1
                if _DUAL not in self._stats["notes"]:
                    self._stats["notes"].append(_DUAL)
            return self.fn(*args, **kwargs)
        return self._dispatch(self._entry(leaves, spec, spec_key), leaves, spec, args, kwargs)

    def _dispatch(self, entry, leaves: list, spec, args: tuple, kwargs: dict) -> Any:
        """Run one call as the cache ``entry`` of its signature says."""
        if type(entry) is _Segmented:
            first = entry.first
            if first is not None:
                entry.first = None
                out = first.run(leaves)
                if out is not speculation.MISS:
                    return out
            if entry.eager:
                return self._run_eagerly(args, kwargs)
            return run_segmented(self, args, kwargs, entry)
        if isinstance(entry, _Eager):
            if not entry.reason.startswith("warm-up"):
                with self._lock:
                    self._stats["fallbacks"] += 1
            return self.fn(*args, **kwargs)
        if type(entry) is _FloatPlan:
            leaves, entry = _Floats.as_tensors(entry.positions, leaves), entry.plan
        if entry.written_args and _aliased(entry.written_args, leaves):
            with self._lock:
                self._stats["fallbacks"] += 1
                if _ALIASED not in self._stats["notes"]:
                    self._stats["notes"].append(_ALIASED)
            return self.fn(*args, **kwargs)
        if type(entry) is Speculative:
            return self._speculate(entry, leaves, spec, args, kwargs)
        layout = _layout(args) if self._grad_groups is None and not kwargs else None
        if layout is not None:
            self._fast = _FastPath(self, leaves, layout, entry)
        return _call_plan(entry, leaves, self._grad_groups)

    def _speculate(self, entry: Speculative, leaves: list, spec, args: tuple, kwargs: dict) -> Any:
        """A call of a signature whose trace read traced values: the variant whose guards
        hold; else one traced on this call, while there are fewer than VARIANT_LIMIT (a
        trace that does not give one makes such calls run as it decides)."""
        out = entry.run(leaves)
        if out is not speculation.MISS:
            return out
        if entry.fallback is None:
            if len(entry.variants) >= speculation.VARIANT_LIMIT:
                entry.fallback = _Segmented(f"{self.__name__}: more than {speculation.VARIANT_LIMIT} outcomes "
                                            "of its guarded values")
                self._note(entry.fallback.reason)
            else:
                with self._lock:
                    new = self._build(leaves, spec)
                if type(new) is Speculative:
                    entry.variants.insert(0, new.variants[0])
                    return self._dispatch(entry, leaves, spec, args, kwargs)
                entry.fallback = new
        return self._dispatch(entry.fallback, leaves, spec, args, kwargs)

    def _set_gradient_groups(self, groups: Optional[Sequence[Sequence[Tensor]]]) -> None:
        """Run the compiled backward in stages: the gradients of ``groups[0]`` (tensors the
        function reads: parameters, inputs) reach autograd first, then those of
        ``groups[1]``, ..., each group as soon as computed (runtime.staged_backward);
        None: one backward call (the default)."""
        self._grad_groups = None if groups is None else (staged_backward.group_index(groups), len(groups))
        self._fast = None  # (the fast path runs plans without stages)

    def lower(self, *args, **kwargs) -> "Lowered":
        """Compile (or fetch) the executable for this signature without running it."""
        entry = self._entry(*flatten_call(args, kwargs))
        if isinstance(entry, (_Eager, _Segmented)):
            raise RuntimeError(f"this signature {'runs eagerly' if isinstance(entry, _Eager) else 'breaks'}: "
                               f"{entry.reason}")
        if type(entry) is Speculative:  # the code after the values it reads; .check: the code computing
            # them (None for a graph run whole, its values checked after it: speculation.Checked)
            v = entry.variants[0]
            lowered = Lowered(v.body)
            lowered.check = Lowered(v.check) if len(v.plans) > 1 else None
            return lowered
        return Lowered(entry)

    # -------------------------------------------------------------- cache
    def _refuse_recompile(self):
        """What a recompile meets first: the fail_on_recompile stance (a plain RuntimeError, as
        PyTorch's) or ``config.error_on_recompile`` raise, eager_on_recompile runs the call
        eagerly (returned), else None."""
        if STANCE.name == "fail_on_recompile":
            raise RuntimeError("Detected recompile when torch.compile stance is "
                               f"'fail_on_recompile'. function name: {self.__name__}")
        if STANCE.name == "eager_on_recompile":
            return _Eager("eager_on_recompile stance: a new signature runs eagerly")
        if dynamo_config.error_on_recompile:
            raise _dynamo_exc.RecompileError(f"Recompiling function {self.__name__}: a new signature "
                                             "(torch._dynamo.config.error_on_recompile is set)")
        return None

    def _entry(self, leaves, spec, spec_key):
        base = signature(leaves, spec_key, self._owner)
        key = base + (grad_bits(leaves),) if base in self._grad_keyed else base
        with self._lock:
            entry = self._cache.find(key)
            if entry is None:
                entry = self._sized.get(key)
                if entry is not None and type(entry) in (_Plan, Speculative) and not entry.traced.holds():
                    entry = None
                if entry is not None:
                    self._new_sizes = 0
            if entry is not None:
                self._stats["hits"] += 1
                return entry
            floats = self._float_family(key)
            values = None
            if floats is not None:
                sizeless = self._family(floats, leaves) or floats
                entry = self._dynamic_floats(floats, sizeless, leaves, spec)
                if entry is not None:
                    return entry
                if self._float_plans.get(sizeless) is _STATIC:
                    values = sizeless
                    if self._per_value.get(values, 0) >= VALUE_LIMIT:
                        return self._give_up(f"{self.__name__}: an int or float argument used as a number took "
                                             f"{VALUE_LIMIT} values, each compiled: new values run eagerly")
            self._stats["misses"] += 1
            family = self._family(key, leaves)
            seen = self._families.get(family)
            if family is not None and (self.dynamic or seen is True or _marked_dynamic(leaves) or (
                    seen is not None and key not in seen and dynamo_config.automatic_dynamic_shapes)):
                if seen is not True and (len(self._cache) or seen):  # (going symbolic: a recompile)
                    refused = self._refuse_recompile()
                    if refused is not None:
                        return refused
                return self._build_sized(key, family, leaves, spec)
            missing = _optimizer_state_missing(self.fn, leaves)
            warm = (key, tuple(getattr(o, "_structure", 0) for o in _reachable_optimizers(self.fn, leaves)), missing)
            if missing and warm not in self._warmed:
                # warm-up: optimizer state (momentum buffers, Adam moments and step) is created
                # by an eager first call, so the trace only updates existing state in place
                self._warmed.add(warm)
                self._stats["warmups"] += 1
                log("recompiles", f"{self.__name__}: optimizer state missing; first call runs eagerly")
                return _Eager("warm-up: optimizer state created eagerly")
            if len(self._cache) >= self._cache.limit:
                if dynamo_config.fail_on_recompile_limit_hit or self.fullgraph:
                    raise _dynamo_exc.FailOnRecompileLimitHit(
                        f"{self.__name__}: recompile limit ({self._cache.limit}) reached. Hard failure due to "
                        + ("fullgraph=True" if self.fullgraph else "fail_on_recompile_limit_hit"))
                return self._give_up(f"recompile limit ({self._cache.limit}) reached for {self.__name__}; running "
                                     "eagerly")
            if len(self._cache):
                refused = self._refuse_recompile()
                if refused is not None:
                    return refused
                self._stats["recompiles"] += 1
                log("recompiles", f"{self.__name__}: " + (
                    "a captured tensor's shape, dtype or requires_grad, or a Python value the trace "
                    "depended on, changed" if self._cache.has(key) else f"new signature {key[1]}"))
            if self.dynamic is not False and self._cache.has(key):
                self._live_names |= _changed_numbers(self._cache.variants(key)) - self._static_names
            entry = self._build(leaves, spec)
            if key is base and getattr(getattr(entry, "traced", None), "arg_grads", False):
                self._grad_keyed.add(base)  # (its variants, and this one, keyed on the arguments' .grad too)
                key = base + (grad_bits(leaves),)
            self._cache.add(key, entry)
            if values is not None:
                self._per_value[values] = self._per_value.get(values, 0) + 1
            if family is not None and self._families.get(family) is not True:
                self._families.setdefault(family, set()).add(key)  # another size of it goes symbolic
            return entry

    def _give_up(self, reason: str) -> "_Eager":
        """Run this call eagerly for ``reason`` (noted once; an error under fullgraph)."""
        if reason not in self._stats["notes"]:
            self._stats["notes"].append(reason)
            log("recompiles", reason)
        if self.fullgraph:
            raise RuntimeError(reason)
        return _Eager(reason)

    def _float_family(self, key) -> Any:
        """The signature with the values of its float arguments left out, when it has some
        and this function may read them at each call (tracer.dynamic_float), else None."""
        if self.dynamic is False:
            return None
        spec_key, parts, *rest = key
        if not any(p[0] == "V" and p[1] in ("float", "int") for p in parts):
            return None
        return (spec_key, tuple(p[:2] if p[0] == "V" and p[1] in ("float", "int") else p for p in parts), *rest)

    def _dynamic_floats(self, family, sizeless, leaves: list, spec) -> Optional["_FloatPlan"]:
        """The plan of ``family`` that reads its float arguments at each call. None while
        only one set of values was seen (compiled as constants, as torch.compile first
        does) and where the traced code needs a number itself: then each value compiles.
        Both decisions are per ``sizeless`` family, so a decoding step whose position and
        cache length change together is seen to compile per value."""
        state = self._float_plans.get(sizeless)
        if state is None:
            self._float_plans[sizeless] = []
            return None
        if state is _STATIC:
            return None
        fixed = self._fixed_numbers.get(sizeless, ())
        numbers = tuple(i for i, x in enumerate(leaves) if type(x) in (float, int))
        self._float_box.values = {i: leaves[i] for i in numbers}
        for entry in state:
            if entry.family == family and entry.fixed == tuple(leaves[i] for i in fixed) \
                    and entry.plan.traced.holds():
                self._stats["hits"] += 1
                return entry
        if len(state) >= self._cache.limit:
            return None
        self._stats["misses"] += 1
        self._stats["recompiles"] += 1
        log("recompiles", f"{self.__name__}: float arguments changed; compiling them as values read at each call")
        while True:
            positions = tuple(i for i in numbers if i not in fixed)
            floats = _Floats(positions, leaves, self._float_box)
            try:
                plan = self._build(floats.tensors(leaves), spec, floats=floats)
            except FloatUsed as e:
                plan = e
                if e.sources and not e.sources.issuperset(positions):
                    # (an int used as a size or an index: that one compiles per value, the others stay read)
                    fixed = tuple(sorted({*fixed, *e.sources}))
                    self._fixed_numbers[sizeless] = fixed
                    continue
            except Exception as e:  # (code that checks for an int or float itself: a size, a factory's argument)
                plan = FloatUsed(f"{type(e).__name__}: {e}")
            break
        if type(plan) is not _Plan:
            self._float_plans[sizeless] = _STATIC
            why = plan if isinstance(plan, FloatUsed) else "its graph is not compiled whole"
            note = f"{self.__name__}: an int or float argument is used as a number ({why}): each value compiles"
            if note not in self._stats["notes"]:
                self._stats["notes"].append(note)
            return None
        entry = _FloatPlan(plan, positions, family, tuple(leaves[i] for i in fixed))
        state.insert(0, entry)
        return entry

    def _family(self, key, leaves) -> Any:
        """The size-free signature (each tensor dimension's size as 0, 1 or "more", except
        dimensions marked static) when this function may go symbolic, else None."""
        if self.dynamic is False:
            return None
        spec_key, parts, *rest = key
        static = _static_dims(leaves)
        return (spec_key, tuple(
            p if p[0] != "T" else ("T", tuple(n if (i, d) in static or n < 2 else -1 for d, n in enumerate(p[1])),
                                   *p[2:])
            for i, p in enumerate(parts)), *rest)

    def _build_sized(self, key, family, leaves, spec):
        """A plan for this size with shape-symbolic kernels (see ``compile``'s ``dynamic``);
        past NEW_SIZES_LIMIT new sizes in a row, eager (not under fullgraph=True)."""
        if self._new_sizes >= NEW_SIZES_LIMIT and not self.fullgraph:
            return self._give_up(f"{self.__name__}: {NEW_SIZES_LIMIT} new sizes in a row (a size that changes at "
                                 "every call: each would trace and plan anew); further new sizes run eagerly")
        self._new_sizes += 1
        first = self._families.get(family) is not True
        if first:
            self._stats["recompiles"] += bool(len(self._cache))
            log("recompiles", f"{self.__name__}: sizes changed ({key[1]}); compiling with symbolic sizes")
        entry = self._build(leaves, spec, symbolic=True, counted=first)
        if not first:
            self._stats["symbolic_sizes"] += 1
        self._families[family] = True
        self._sized[key] = entry
        while len(self._sized) > SIZED_LIMIT:
            self._sized.popitem(last=False)
        return entry

    def _run_eagerly(self, args, kwargs):
        with self._lock:
            self._stats["fallbacks"] += 1
        return self.fn(*args, **kwargs)

    def _note_break(self, reason: str) -> None:
        with self._lock:
            if reason not in self._stats["graph_breaks"]:
                self._stats["graph_breaks"].append(reason)
                log("graph_breaks", reason)

    def _note(self, note: str) -> None:
        with self._lock:
            if note not in self._stats["notes"]:
                self._stats["notes"].append(note)
                log("recompiles", note)

    def _build(self, leaves, spec, symbolic: bool = False, counted: bool = True, floats: Optional[_Floats] = None):
        """Trace and compile; a graph break gives a cached decision to run in segments
        around the breaks, a backend's refusal one to run eagerly; any other exception
        propagates with nothing cached."""
        try:
            with _collector_paused():
                plan = _compile(self.fn, leaves, spec, self.backend_name, self.remat, self.__name__, symbolic,
                                self.fullgraph, floats, frozenset(self._live_names))
        except FloatUsed as e:
            if floats is not None or not self._live_names:
                raise
            self._static_names |= self._live_names  # (a global's number used as a number: per value)
            self._live_names.clear()
            note = f"{self.__name__}: a number a global or closure variable holds is used as a number ({e}): " \
                   "each value compiles"
            if note not in self._stats["notes"]:  # (the caller holds the lock)
                self._stats["notes"].append(note)
            return self._build(leaves, spec, symbolic, counted)
        except (GraphBreak, Unsupported) as e:
            if symbolic and isinstance(e, Unsupported):  # no symbolic kernels for it: this size static
                return self._build(leaves, spec, False, counted)
            reason = e.reason
            if self.fullgraph and isinstance(e, Unsupported) and self.backend_name != "eager":
                # one graph the backend cannot lower (complex values, a solver): it runs on the IR interpreter
                note = f"{self.__name__}: fullgraph=True graph runs interpreted: {reason}"
                if note not in self._stats["notes"]:  # (the caller holds the lock)
                    self._stats["notes"].append(note)
                with _collector_paused():
                    plan = _compile(self.fn, leaves, spec, "eager", self.remat, self.__name__, False, True, floats,
                                    frozenset(self._live_names))
            elif self.fullgraph and not getattr(e, "data_dependent", False):
                raise _dynamo_exc.Unsupported(f"fullgraph=True: cannot compile {self.__name__}: {reason}") from e
            else:  # (under fullgraph=True a data-dependent size too: PyTorch's graph captures it, ours breaks)
                if reason not in self._stats["graph_breaks"]:
                    self._stats["graph_breaks"].append(reason)
                log("graph_breaks", reason)
                return _Segmented(reason) if isinstance(e, GraphBreak) else _Eager(reason)
        if type(plan) is Speculative:
            if plan.escaped:  # later calls run their Python in segments; this one runs the trace's code
                if plan.escaped not in self._stats["notes"]:
                    self._stats["notes"].append(plan.escaped)
                log("graph_breaks", plan.escaped)
                return _Segmented(plan.escaped, first=plan)
            self._stats["compiles"] += counted
            if symbolic:
                for p in plan.variants[0].plans:
                    p.symbols = _symbols(leaves)
            return plan
        if symbolic:
            plan.symbols = _symbols(leaves)
        self._stats["compiles"] += counted
        if plan.stages.get("note"):
            if plan.stages["note"] not in self._stats["notes"]:
                self._stats["notes"].append(plan.stages["note"])
        return plan


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector leaves alone what the process held before a trace
    and compile (``gc.freeze``): a compile allocates objects by the million, and each full
    pass of the collector in between would traverse everything the process holds. A
    process that froze objects itself (before forking workers) keeps its own freeze."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _symbols(leaves: list) -> dict:
    """size -> "s0", "s1", ... (in order of appearance) of the tensor arguments' dimensions
    a symbolic compile leaves symbolic: sizes of 2 and more not marked static. Equal sizes
    share a symbol (torch.compile's duck sizing): the listings of the traced size print
    every dimension of such a size by it."""
    static = _static_dims(leaves)
    out: dict = {}
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor):
            for d, n in enumerate(x._data.shape):
                if n >= 2 and (i, d) not in static and n not in out:
                    out[n] = f"s{len(out)}"
    return out


def _reachable_optimizers(fn, leaves: list) -> list:
    """Optimizers ``fn`` can reach: through its closure, the globals it names, its bound
    ``self``, the call's arguments (``leaves``), and two levels of those objects' attributes
    or items (``trainer.opt``, ``cfg["opts"]["g"]``, a list of (model, optimizer) pairs); of
    the modules it names only the user's own (``torch.nn``, ``np``: thousands, none an optimizer)."""
    from ..optim.optimizer import Optimizer
    objs = [fn.__self__] if hasattr(fn, "__self__") else []
    objs += read_references(fn) + [x for x in leaves if not isinstance(x, Tensor)]
    inner = [v for o in objs if not isinstance(o, Tensor) and not _library_module(o) for v in members(o)]
    found, seen = [], set()
    for o in objs + inner + [v for o in inner if isinstance(o, (dict, list, tuple)) for v in members(o)]:
        if isinstance(o, Optimizer) and id(o) not in seen:
            seen.add(id(o))
            found.append(o)
    return found


def _library_module(o) -> bool:
    """Whether ``o`` is a module of fusegrad, the standard library or an installed package."""
    if not isinstance(o, types.ModuleType):
        return False
    path = getattr(o, "__file__", None) or ""
    return (o.__name__.partition(".")[0] in ("fusegrad", *sys.stdlib_module_names) or not path
            or "site-packages" in path or "dist-packages" in path)


def _optimizer_state_missing(fn, leaves: list) -> tuple:
    """The identities of the parameters that require grad and have no optimizer state yet
    (a step would create it): frozen ones never get any, and unfreezing them asks for a
    warm-up of their own."""
    return tuple(id(p) for opt in _reachable_optimizers(fn, leaves) for g in opt.param_groups
                 for p in g["params"] if p.requires_grad and not opt.state.get(p))


def _symbolic_runs(graph: Graph) -> bool:
    """Whether the cpu backend's symbolic executable can run ``graph``: its library calls
    run by the primitive's impl, which lacks fusion's GEMM epilogue (alpha, beta, an
    accumulator operand), so such a graph compiles with static sizes instead."""
    from ..passes.fusion import _gemm_epilogues, _without_stop_gradients
    return not _gemm_epilogues(_without_stop_gradients(graph))[1]


def _compile(fn, leaves, spec, backend_name: str, remat: str, name: str, symbolic: bool = False,
             fullgraph: bool = False, floats: Optional[_Floats] = None, live_names: frozenset = frozenset()) -> Any:
    """The plan of one signature (a Speculative one when the trace branched on traced values)."""
    traced = _trace(fn, leaves, spec, True, backend_name, floats, live_names, fullgraph)
    if floats is not None and (floats.kept() or traced.speculation is not None):
        raise FloatUsed("kept after the call" if floats.kept() else "beside a guarded read of a tensor's value")
    rg = [x._rg for x in leaves if isinstance(x, Tensor)]
    if traced.speculation is not None:
        if traced.speculation[2]:  # run for this call only: op by op, nothing compiled
            backend_name, symbolic = "eager", False
        return speculation.build(traced, rg, lambda t, r, suffix, donate: plan_of(
            t, r, backend_name, remat, name + suffix, symbolic, donate))
    return plan_of(traced, rg, backend_name, remat, name, symbolic)


def plan_of(traced: _Traced, input_rg: list, backend_name: str, remat: str, name: str,
            symbolic: bool = False, donate: Optional[dict] = None, blas_nearby: bool = False) -> _Plan:
    """Optimize and compile a traced graph whose inputs require grad as ``input_rg`` says;
    ``symbolic``: with the backend's shape-symbolic kernels, which graphs of other sizes
    share (dynamic shapes). ``donate`` (output position -> input position) names outputs
    the backend may compute into an input's array, for a graph without a backward; by
    default those of ``traced.writebacks``. ``blas_nearby``: BLAS runs between the
    plan's calls (see passes.fusion.fuse)."""
    dump = Dumper(name)
    g = traced.graph
    dump("traced", g)
    opt = optimize(g, on_pass=dump)
    backend = get_backend(backend_name)
    stages: dict = {"traced": g, "optimized": opt}
    if backend.name != backend_name:
        stages["note"] = f"backend {backend_name!r} is not available; using {backend.name!r}"
    plan = _Plan(traced, stages)

    def build(graph: Graph, donate: Optional[dict] = None, backward: bool = False):
        if symbolic and not _symbolic_runs(graph):
            raise Unsupported("the shape-symbolic kernels do not run GEMM epilogues (X + c * A @ B) yet")
        # (a backend may compile backward graphs its own way: a user's sees forward graphs only)
        how = getattr(backend, "compile_backward", None) if backward else None
        return (how or backend.compile)(graph, donate, symbolic=symbolic, blas_nearby=blas_nearby)
    rg = list(input_rg) + [h._rg for _, h in opt.consts]
    plan.wrt = [i for i, r in enumerate(rg) if r] if traced.diff_outputs else []
    plan.reaches = _reaching(opt, plan.wrt, traced.diff_outputs)
    if not plan.wrt:
        plan.holders = [h for _, h in opt.consts]
        plan.forward = build(opt, _donations(traced, opt) if donate is None else donate)
        stages["fused"] = getattr(plan.forward, "stages", {}).get("fused", stages["optimized"])
        _kernel_stage(stages, plan.forward)
    else:
        joint = optimize(vjp_graph(opt, plan.wrt, traced.diff_outputs), on_pass=dump)
        fwd, bwd = partition(joint, len(opt.arguments()), len(opt.outputs), remat)
        plan.joint = joint
        plan.n_primal_consts = len(opt.consts)
        plan.holders = [h for _, h in opt.consts] + [h for _, h in fwd.consts]
        plan.bwd_holders = [h for _, h in bwd.consts]
        # a residual that is an argument is read from the call's arrays, not copied by the forward
        arg_pos = {v.id: i for i, v in enumerate(fwd.inputs)}
        saved = fwd.outputs[len(opt.outputs):]
        plan.res_args = [arg_pos.get(v.id) for v in saved]
        fwd.outputs = fwd.outputs[:len(opt.outputs)] + [v for v, a in zip(saved, plan.res_args) if a is None]
        plan.forward = build(fwd)  # primal consts are positional inputs here
        plan.backward = build(bwd, backward=True)
        plan.build = lambda graph: tuned(build(graph, backward=True))
        stages.update(joint=joint, forward=fwd, backward=bwd)
        stages["fused"] = getattr(plan.forward, "stages", {}).get("fused", stages["forward"])
        _kernel_stage(stages, plan.forward, plan.backward)
    plan.merged = _merged_outputs((opt if plan.backward is None else stages["forward"]).outputs[:plan.n_user])
    plan.forward = tuned(plan.forward)
    plan.run = _guarded_entry(plan.forward)
    plan.plain = plan.single and plan.n_user == plan.n_out and not plan.merged and not (
        plan.spent or plan.holders or plan.backward or traced.views or traced.attrs)
    if plan.backward is not None:
        plan.backward = tuned(plan.backward)
    for k in ("joint", "forward", "backward", "fused"):
        if k in stages:
            dump(k, stages[k])
    dump("kernel", plan.kernel_source)  # (rendered only when dumping: a symbolic plan renders every kernel)
    log("kernels", f"{name}: compiled {len(opt.eqns)} ops with backend {backend.name!r}"
        + (f" (+ backward, remat={remat!r})" if plan.backward is not None else ""))
    return plan


def _merged_outputs(outputs: list) -> list:
    """The positions of returned values that are an earlier one's: the program's distinct
    tensors (``zeros(n), zeros(n)``; ``a * 2`` twice) that the optimizer merged into one
    value, each returned as a copy so that they do not share memory (an in-place update of
    one would change the other)."""
    seen: set = set()
    merged = []
    for k, v in enumerate(outputs):
        if type(v) is Var:
            if id(v) in seen:
                merged.append(k)
            seen.add(id(v))
    return merged


def _reaching(g: Graph, wrt: list, diff_outputs: list) -> list:
    """Per primal position in ``wrt``: whether an output in ``diff_outputs`` depends on it
    differentiably. One that does not gets no autograd edge (no gradient flows to it, as in
    eager), rather than the zeros the compiled backward computes for it."""
    need = {id(g.outputs[i]) for i in diff_outputs}
    for e in reversed(g.eqns):
        if id(e.out) in need and not e.prim.nondiff:
            need.update(id(a) for a in e.inputs if isinstance(a, Var))
    args = g.arguments()
    return [id(args[i]) in need for i in wrt]


def _guarded_entry(exe) -> Callable:
    """How a plan calls ``exe`` on arrays of its signature: the cpu executable's
    ``call_guarded`` (no shape and dtype checks: the signature proved them), else ``exe``."""
    inner = exe._exe if type(exe) is TunedBlas else exe
    return exe.call_guarded if type(inner) is CpuExecutable else exe


def _kernel_stage(stages: dict, *executables) -> None:
    """``stages["kernel"]``: the kernel IR of the executables' backends that have one."""
    parts = [getattr(x, "stages", {}).get("kernel") for x in executables]
    if all(p is not None for p in parts):
        stages["kernel"] = parts[0] if len(parts) == 1 else _Joined(("forward", "backward"), parts)


class _Joined:
    """Stages printed one after the other under their names."""

    def __init__(self, names: tuple, parts: list):
        self._names, self._parts = names, parts

    def __str__(self) -> str:
        return "\n\n".join(f"# {n}\n{p}" for n, p in zip(self._names, self._parts))


class Lowered:
    """Inspection of one compiled signature: ``ir(stage)`` and ``kernel_source()``."""

    def __init__(self, plan: _Plan):
        self._plan = plan

    @property
    def stages(self) -> list:
        return [k for k in self._plan.stages if k != "note"]

    def ir(self, stage: str = "optimized") -> str:
        """IR text of ``stage``: "traced", "optimized", "fused", "kernel" (the kernel IR,
        with a codegen backend), and with gradients also "joint", "forward", "backward"."""
        if stage not in self._plan.stages or stage == "note":
            raise ValueError(f"unknown stage {stage!r}; available: {self.stages}")
        with symbolic_sizes(self._plan.symbols):
            return str(self._plan.stages[stage])

    def kernel_source(self) -> str:
        return self._plan.kernel_source()

    def fused(self) -> "Fused":
        """The partition into loop groups and library calls (a ``passes.fusion.Fused``) that
        the backend compiled: what ``ir("fused")`` prints, as objects to inspect."""
        ir = self._plan.stages["fused"]
        if isinstance(ir, Fused):
            return ir
        return fuse(ir) if isinstance(ir, Graph) else ir.make()

    def graph(self, stage: str = "fused"):
        """A ``graphviz.Digraph`` of ``stage`` (fused loop groups drawn as clusters)."""
        from ..viz import ir_dot
        stages = self._plan.stages
        if stage not in stages or stage == "note":
            raise ValueError(f"unknown stage {stage!r}; available: {self.stages}")
        ir = stages[stage]
        return ir_dot(ir if isinstance(ir, Graph) else self.fused(), name=stage)


_MODES = (None, "default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def compile(fn: Optional[Callable] = None, *, backend: str = "cpu", fullgraph: bool = False,
            remat: str = "auto", dynamic: Optional[bool] = None, mode: Optional[str] = None,
            options: Optional[dict] = None, disable: bool = False,
            model: Optional[Callable] = None):  # noqa: A001 - torch.compile's name
    """Compile ``fn`` (a function or an nn.Module); usable as ``@compile``,
    ``@compile(...)`` or ``compile(fn, ...)``. See API.md section 3. torch.compile's
    ``mode`` and ``options`` are accepted (checked as PyTorch checks them) and change nothing;
    ``disable=True`` returns ``fn`` itself; ``model`` is torch.compile's name for ``fn``.

    Dynamic shapes (``dynamic``, as torch.compile's): None compiles the first signature with
    static sizes and, once a call differs from a compiled signature only in tensor sizes,
    compiles that family with the backend's shape-symbolic kernels, which every further size
    shares (each size is traced again, no kernel is compiled again; sizes 0 and 1 specialize);
    True starts symbolic; False never. ``fusegrad.compiler.mark_dynamic``/``mark_static``
    mark a tensor's dimension.

    Whole training steps: ``fn`` may call ``loss.backward()`` and ``optimizer.step()``; they
    trace into the one graph, and in-place updates of captured tensors (parameters, ``.grad``,
    optimizer state) become write-backs replayed on every call. Optimizer state is created
    eagerly: when an optimizer reachable from ``fn`` (closure, globals it names, bound self,
    or one attribute level of those) has a parameter without state, the first call of a new
    signature runs eagerly (``cache_info()["warmups"]``) and the next call traces."""
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in _MODES if m)}")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if dynamic not in (None, True, False):
        raise TypeError(f"compile: dynamic must be None, True or False, got {dynamic!r}")
    if fn is None and model is not None:
        fn = model
    if fn is None:
        return lambda f: compile(f, backend=backend, fullgraph=fullgraph, remat=remat, dynamic=dynamic,
                                 disable=disable)
    if disable:
        return fn
    from ..nn.module import Module
    if isinstance(fn, Module):  # (a Module wrapping the original: torch.compile's OptimizedModule)
        from ..nn.optimized_module import OptimizedModule
        return OptimizedModule(fn, CompiledFunction(fn, backend, fullgraph, remat, dynamic))
    return CompiledFunction(fn, backend, fullgraph, remat, dynamic)


def make_ir(fn: Callable) -> Callable[..., Graph]:
    """``make_ir(fn)(*args)`` traces ``fn`` on arguments like ``args`` and returns the
    traced Graph (``str()`` is the listing)."""
    @functools.wraps(fn)
    def build(*args, **kwargs) -> Graph:
        leaves, spec, _ = flatten_call(args, kwargs)
        return _trace(fn, leaves, spec).graph
    return build
