"""Compiled code around graph breaks.

A signature whose whole-function trace breaks (``.item()``, ``.tolist()``, ``print(t)``,
``if t:``, a reseed...) is run segment by segment: every call runs the Python function
again under a ``SegmentTrace``, which records the operations into a graph instead of
computing them. At a break (``Trace.graph_break``) the graph recorded so far is one
segment: its outputs are the tensors it made that are still alive and the tensors it
updated in place; it is compiled once per (IR fingerprint, which inputs require grad,
call-time constants) and cached on the compiled function, run, and its results become
the tensors' values, with one ``CompiledFunctionBackward`` node per segment when outputs
require grad. The breaking operation then runs eagerly on the concrete values and
recording resumes after it, so Python control flow on a tensor's value picks the segment
that follows. The last segment runs when the function returns."""
from __future__ import annotations

import contextlib
import weakref

import numpy as np

from ..codegen.backend import Unsupported
from ..func.pytree import flatten
from ..ir.fingerprint import fingerprint
from ..ir import prims as P
from ..ir.graph import Var
from ..tracer.capture import CaptureTrace
from ..tracer.live import CallTimeConst, LiveNumber
from ..tracer.rng import RngKey
from ..tracer.trace import _STACK, GraphBreak, outside_traces
from .engine import RUNNING
from .grad_mode import enable_grad
from .interpreter import run_tensors
from .nodes import PrimNode
from .ops import _writable
from .tensor import Tensor, wrap

SEGMENT_LIMIT = 32  # compiled segments per compiled function; further ones run op by op
#: compiled segments that differ only in float literals (a number from ``.item()`` used in
#: arithmetic: a new value at every call); further ones run op by op instead of compiling
LITERAL_VARIANTS = 2
#: Recording every call's operations costs several times eager dispatch per operation, plus
#: a lookup per segment; fused loops win that back only on large operands. A signature whose
#: first call's segments average fewer elements per operation than this (BLAS calls, the same
#: either way, not counted) runs eagerly from then on; that call runs op by op. 0: always
#: segments (the tests' setting, so small examples exercise them).
SEGMENT_MIN_WORK = 1 << 16


class SegmentTrace(CaptureTrace):
    """compile's trace of one call of a function with graph breaks (see module doc)."""

    breaks_on_print = True
    tracks = True
    follows_requires_grad = True
    records_compiled_backward = True
    # a segment runs at the next break of the same call: a number read from Python (an
    # optimizer's learning rate) is its input as read then, not at the segment's run
    runs_in_call = True

    def __init__(self, owner, probe: bool = False):
        super().__init__()
        self.owner = owner  # the CompiledFunction: segment cache, stats, backend
        # a probing call runs its segments op by op, counting their operations and the
        # elements those make (see SEGMENT_MIN_WORK)
        self.probe, self.ops, self.work = probe, 0, 0
        self.unlowered_breaks = owner.backend_name == "cpu"
        self.resumed = False  # whether a break ran on (then the call cannot start over)
        self._reset()

    def _reset(self) -> None:
        from ..ir.graph import Graph
        self.graph = Graph()
        self.snaps, self._snapped, self._captured, self._keep = [], set(), {}, []
        self.operands: list = []  # the concrete tensors the segment reads: its inputs, in order
        self._tracked: list = []  # weak references to the tensors it made
        self.recorded: list = []  # weak references to the autograd nodes its operations recorded
        self.forget_updates()

    def track(self, t: Tensor) -> None:
        self._tracked.append(weakref.ref(t))

    def _lift(self, x):
        """Concrete tensors become inputs of the segment (read at each run, whatever object
        holds them then); call-time constants (random keys, learning rates) stay consts."""
        if isinstance(x, Tensor) and not isinstance(x, CallTimeConst):
            d = x._data
            if type(d) is not Var:
                v = self._captured.get(id(x))
                if v is None:
                    self.touch(x)
                    v = self._captured[id(x)] = self.new_input(d.shape, d.dtype)
                    self._keep.append(x)
                    self.operands.append(x)
                return v
        return super()._lift(x)

    def graph_break(self, reason: str, data_dependent: bool = False) -> None:
        self.owner._note_break(reason)
        self.flush()
        self.resumed = True

    @contextlib.contextmanager
    def eagerly(self, reason: str):
        self.graph_break(reason)
        at = _STACK.traces.index(self)
        del _STACK.traces[at:]  # (nothing nests inside the segmented trace at a break)
        self.active = False
        try:
            yield
        finally:
            _STACK.traces.append(self)
            self.active = True

    # -------------------------------------------------------------- running a segment
    def flush(self) -> None:
        """Run what was recorded since the last break and give its tensors their values."""
        if self._updates:  # views of what was updated in place leave with their current value
            views = [r() for r in self._tracked] + [s[0] for s in self.snaps if type(s[0]._data) is Var]
            for t in views:
                if t is not None and t._base is not None:
                    self._refresh(t)
        saved = self._cut_recorded_nodes()
        live, seen = [t for _, t in saved], set()
        for r in self._tracked:
            t = r()
            if t is not None and type(t._data) is Var and t._data.trace is self and id(t) not in seen:
                seen.add(id(t))
                live.append(t)
        # tensors updated in place (rebound to a value of this trace): their arrays take the result
        updated = [s for s in self.snaps if type(s[0]._data) is Var and s[0]._data.trace is self]
        grads = [s for s in self.snaps if s[0]._grad is not s[2] and s[0]._grad is not None
                 and type(s[0]._grad._data) is Var and id(s[0]._grad) not in seen]
        for s in grads:
            seen.add(id(s[0]._grad))
            live.append(s[0]._grad)
        outs = live + [s[0] for s in updated]
        if outs:
            self._run(outs, len(live), updated)
        for n, t in saved:
            n.out_data = t._data
        self._reset()

    def _cut_recorded_nodes(self) -> list:
        """The autograd nodes recorded on this segment's values hold its intermediate
        tensors; the segment's own node replaces them, so they are cut first, leaving alive
        only the tensors something else refers to: those are the segment's outputs.

        A break inside a backward (a custom Function's backward that breaks) cuts nothing:
        the running engine may still apply those nodes. Their saved outputs then leave the
        segment too; returned as (node, tensor) pairs, the node to take the tensor's value."""
        keep = RUNNING.graph is not None
        saved = []
        # (only its own: a node of an earlier segment or of eager code may read a tensor this
        # segment traces now, a leaf it updated in place)
        for r in self.recorded:
            n = r()
            if n is None or type(n).__mro__[1] is not PrimNode or not n.ins:
                continue
            # (a node of concrete inputs may still save its traced output: exp of a parameter)
            if not (type(n.out_data) is Var and n.out_data.trace is self) and not any(
                    isinstance(a, Tensor) and type(a._data) is Var and a._data.trace is self for a in n.ins):
                continue
            if not keep:
                n.ins, n.versions, n.out_data, n.out_box = None, (), None, None
            elif type(n.out_data) is Var and n.out_data.trace is self:
                saved.append((n, wrap(n.out_data)))
        return saved

    def _run(self, outs: list, n_live: int, updated: list) -> None:
        g = self.graph
        g.outputs = [t._data for t in outs]
        diff, spent = [], []
        for i, t in enumerate(outs):  # (whatever the grad mode at the break: the ops recorded it)
            if t._rg and t._grad_fn is not None:  # (a leaf, updated through .data or under no_grad: no history)
                (spent if _spent(t) else diff).append(i)
        # the tensors updated in place get back their arrays and their autograd state before
        # the segment: the segment's node takes its edges from there
        for h, data, grad, fn, nr, rg in reversed(updated):
            h._data, h._grad_fn, h._out_nr, h._rg = data, fn, nr, rg
        operands = self.operands
        # an in-place update of a segment input may be computed straight into its array
        pos = {id(t): k for k, t in enumerate(operands)}
        donate = {n_live + j: pos[id(u[0])] for j, u in enumerate(updated) if id(u[0]) in pos}
        if self.probe:
            self.ops += len(g.eqns)
            self.work += sum(e.out.size for e in g.eqns if e.prim is not P.matmul)
            # an operand the segment updates in place is read through a copy: the nodes the ops
            # record save its value from before, which the update then overwrites (as eager's)
            from .ops import _snapshot
            written = {id(u[0]) for u in updated}
            values = _op_by_op(g, [_snapshot(o) if id(o) in written else o for o in operands])
        else:
            values = self._compiled(outs, operands, diff, spent, donate)
        self._give(values, outs, n_live, updated)

    def _compiled(self, outs: list, operands: list, diff: list, spent: list, donate: dict) -> list:
        """The segment's values, from its compiled plan (compiled on first use, cached by its
        IR) or op by op where it cannot compile."""
        from .compiled import _call_plan, _Traced, plan_of
        g = self.graph
        try:
            key = (fingerprint(g), tuple(o._rg for o in operands), tuple(diff),
                   tuple(_const_key(h) for _, h in g.consts), tuple(donate.items()))
        except TypeError:  # a param with no exact fingerprint: computed op by op
            key = None
        owner = self.owner
        plan = owner._segments.get(key) if key is not None else None
        if plan is None and key is not None and len(owner._segments) >= SEGMENT_LIMIT:
            key = None
            owner._note(f"segment limit ({SEGMENT_LIMIT}) reached for {owner.__name__}: new segments run op by op")
        if plan is None and key is not None:
            form = (fingerprint(g, float_literals=False),) + key[1:]
            variants = owner._segment_forms.setdefault(form, 0)
            if variants >= LITERAL_VARIANTS:
                key = None
                owner._note(f"a segment of {owner.__name__} changes only in its float constants from call to "
                            "call (a number read with .item() used in arithmetic, say): it runs op by op")
            else:
                owner._segment_forms[form] = variants + 1
        if plan is None and key is not None:
            traced = _Traced(g, flatten(list(outs))[1], [("t", i) for i in range(len(outs))], diff, [],
                             [(i, type(outs[i]._grad_fn).__name__) for i in spent])
            try:
                # segments alternate with eager code and with each other: once one of them
                # calls BLAS, the others keep to one thread beside it (see passes.fusion)
                owner._segments_blas = owner._segments_blas or any(e.prim is P.matmul for e in g.eqns)
                plan = plan_of(traced, [o._rg for o in operands], owner.backend_name, owner.remat,
                               f"{owner.__name__}:segment", donate=donate, blas_nearby=owner._segments_blas)
            except Unsupported as e:
                owner._note(f"a segment of {owner.__name__} runs op by op: {e.reason}")
                plan = None
            if plan is not None:
                owner._segments[key] = plan
                with owner._lock:
                    owner._stats["segments"] += 1
        return _op_by_op(g, operands) if plan is None else _call_plan(plan, operands)

    def _give(self, values: list, outs: list, n_live: int, updated: list) -> None:
        """The segment's tensors take its results: values, autograd nodes, in-place updates."""
        from .compiled import _Ctx, _same_array
        g = self.graph
        for t, v in zip(outs[:n_live], values):
            t._data = v._data
            if t._grad_fn is not None or not t._rg:  # (a leaf made here keeps requiring grad)
                t._grad_fn, t._out_nr, t._rg = v._grad_fn, v._out_nr, v._rg
        # (the compiled plans' contexts; a segment run op by op gives other nodes, composites')
        ctxs = {id(c): c for c in (getattr(v._grad_fn, "ctx", None) for v in values) if type(c) is _Ctx}
        if ctxs:
            used = {id(a) for e in g.eqns for a in e.inputs if type(a) is Var}
            inside = frozenset(v._out_nr for v, o in zip(values[:n_live], g.outputs) if id(o) in used)
            for ctx in ctxs.values():
                ctx.used_inside = inside
                if updated:  # the segment's backward keeps what it saved of the tensors updated below
                    ctx.keep_apart([data for _, data, *_ in updated])
        for (h, data, *_), v in zip(updated, values[n_live:]):
            if data.shape != v._data.shape or data.dtype != v._data.dtype:
                h._data = v._data  # (``.data =`` a value of another dtype or shape: Module.double())
            elif not _same_array(data, v._data):
                (_writable(data) if type(data) is np.ndarray and not data.flags.writeable else data)[...] = v._data
            h._bump()
            if v._rg:
                h._regraft(v._grad_fn, v._out_nr)
                h._rg = True
        for t in outs[:n_live]:
            if t._base is not None:
                _alias(t)


def _alias(view: Tensor) -> None:
    """Make a view the segment computed share its base's memory again, as eager's does: a
    kernel computes it into a new array, but a later in-place update of the base (in the
    next segment) must show through it. Rebuilt from the base's array with the view's chain
    of view primitives, which NumPy runs as views."""
    a = view._base._data
    # (a base still traced, or on a device, or a strided view, unfold's: left as computed)
    if type(a) is not np.ndarray or view._view_fn is None:
        return
    for prim, params in view._view_fn:
        a = prim.impl(a, **params)
    if a.shape == view._data.shape and a.dtype == view._data.dtype:
        view._data = a
    if view._vbox is None:  # (a traced detached alias has none yet) it counts its base's versions
        base = view._base
        if base._vbox is None:
            base._vbox = [0]
        view._vbox, view._vver = base._vbox, base._vbox[0]


def _spent(x: Tensor) -> bool:
    from .compiled import _spent as spent
    return spent(x)


def _const_key(h) -> tuple:
    """What a call-time constant reads: a cached segment's holder reads the same."""
    if isinstance(h, RngKey):
        return ("rng", id(h.generator), h.count)
    if isinstance(h, LiveNumber):
        return ("live", id(h.source), h.path)
    return ("const", id(h))


def _op_by_op(g, operands: list) -> list:
    """The segment evaluated op by op on tensors (eager autograd records it, whatever the grad
    mode at the break: what ran under no_grad was traced with a stop_gradient per op)."""
    values = list(operands) + [wrap(h.draw()) if isinstance(h, CallTimeConst) else h for _, h in g.consts]
    with outside_traces(), enable_grad():
        return run_tensors(g, values)


def run_segmented(owner, args: tuple, kwargs: dict, entry):
    """One call of ``owner.fn`` run as compiled segments around its graph breaks. Code that
    raises GraphBreak itself (a collective, DDP) before any break ran on makes the call, and
    the signature's later calls (``entry.eager``), run eagerly."""
    # (a backend people write is handed every segment, however small, as torch.compile's is)
    probe = entry.small is None and SEGMENT_MIN_WORK > 0 and not owner.user_backend
    tr = SegmentTrace(owner, probe)
    try:
        with tr:
            try:
                out = owner.fn(*args, **kwargs)
            except BaseException:
                tr.restore()  # what the unfinished segment updated in place
                raise
            tr.flush()
    except GraphBreak as e:
        if tr.resumed:
            raise
        owner._note_break(e.reason)
        entry.eager = True
        return owner._run_eagerly(args, kwargs)
    if probe:
        entry.small = entry.eager = tr.work < SEGMENT_MIN_WORK * max(tr.ops, 1)
        if entry.small:
            owner._note(f"{owner.__name__} runs eagerly: its segments average {tr.work // max(tr.ops, 1)} "
                        f"elements per operation, too few to pay for recording each call "
                        f"(segments.SEGMENT_MIN_WORK = {SEGMENT_MIN_WORK})")
    return out
