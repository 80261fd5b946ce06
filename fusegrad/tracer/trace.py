"""Tracing: Tensors whose payload is an IR ``Var`` instead of an array.

While a trace is active, every primitive bound on a traced tensor appends an equation to
that trace's graph (see runtime.dispatch). Traces nest (a transform inside a traced
function); a Var of an outer trace used inside an inner one is captured as an input of
the inner graph."""
from __future__ import annotations

import contextlib
import sys
import sysconfig
import threading
from typing import Callable, Optional, Sequence

import numpy as np

from ..ir.graph import Eqn, Graph, Var


class GraphBreak(Exception):
    """Raised while tracing at something the compiler cannot capture; ``reason`` names
    the construct and the user's source line."""

    def __init__(self, reason: str, data_dependent: bool = False):
        super().__init__(reason)
        self.reason = reason
        # a tensor's value read as data (a data-dependent size: nonzero, bincount, a mask's
        # selection, .numpy()), which torch.compile(fullgraph=True) captures symbolically
        self.data_dependent = data_dependent


class _Stack(threading.local):
    def __init__(self):
        self.traces: list = []


_STACK = _Stack()


def current_traces() -> list:
    return _STACK.traces


@contextlib.contextmanager
def outside_traces():
    """No trace active inside: operations compute on concrete tensors, recorded by none."""
    traces, _STACK.traces[:] = list(_STACK.traces), []
    try:
        yield
    finally:
        _STACK.traces[:] = traces


def escaped(var) -> RuntimeError:
    """The error for using ``var`` after its trace ended: a traced tensor the function
    stored outside itself (a global, a list, an object's attribute)."""
    return RuntimeError(f"a tensor traced inside a compiled or transformed function was used after the "
                        f"trace ended ({list(var.shape)} {var.dtype}) at {user_frame()}: it was stored "
                        "outside the function (a global, a list, an attribute); return it instead")


def capture_trace():
    """The innermost ``fusegrad.compile`` trace on the stack, or None."""
    for t in reversed(_STACK.traces):
        if t.captures_state:
            return t
    return None


def capturing() -> bool:
    """True inside ``fusegrad.compile``'s trace (at any depth): a graph that is cached and
    replayed, so the tensors the traced code reads or creates must become part of it rather
    than values fixed at trace time."""
    return capture_trace() is not None


_PACKAGE = __file__.rsplit("/tracer/", 1)[0]
_STDLIB = sysconfig.get_paths()["stdlib"]
_SITE = (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])


def _not_users(filename: str) -> bool:
    """fusegrad's own code or Python's standard library (a contextlib wrapper, functools)."""
    return filename.startswith(_PACKAGE) or (filename.startswith(_STDLIB) and not filename.startswith(_SITE))


def _user(f) -> tuple:
    """(the innermost frame from ``f`` out that is outside fusegrad and the standard library,
    or None; how many frames out it is)."""
    level = 0
    while f is not None and _not_users(f.f_code.co_filename):
        f, level = f.f_back, level + 1
    return f, level


def user_frame() -> str:
    """'file:line' of the innermost frame outside the fusegrad package and the standard library."""
    f = _user(sys._getframe(1))[0]
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "<unknown>"


def user_stacklevel() -> int:
    """The ``stacklevel`` at which the caller's ``warnings.warn`` names the innermost frame
    outside fusegrad (whatever wrappers, keyword or autocast, lie between)."""
    return _user(sys._getframe(1))[1] + 1


class Trace:
    """Builds one Graph. ``level`` orders nested traces."""

    captures_state = False  # see capturing()
    active = False  # on the stack: its Vars may be used
    breaks_on_print = False  # printing a traced tensor needs its value (compile's traces)
    tracks = False  # told of every tensor it makes (``track``): runtime.segments
    # compile's traces for the cpu backend: a primitive with no kernel lowering (argsort, a
    # solver) is a graph break, so it runs eagerly between compiled segments rather than
    # the whole call running eagerly
    unlowered_breaks = False
    one_graph = False  # compile's trace under fullgraph=True: nothing may break it
    # compile's whole-function trace: (id(module), name) -> (module, its buffers dict or None,
    # name, tensor) of traced tensors the code assigned to module attributes (nn.module)
    attribute_stores: Optional[dict] = None
    # compile's traces: requires_grad says which values are differentiated (else, as in a
    # func transform, the IR may differentiate any value, whatever its requires_grad)
    follows_requires_grad = False
    # a compiled function's backward run under it is recorded as the equations of its
    # backward graph, so the code around it compiles with it (runtime.segments)
    records_compiled_backward = False
    # item() and bool() of its values are computed and guarded (tracer.speculate), not breaks
    speculates = False

    def __init__(self, stop_under_no_grad: bool = True):
        # User code traced under no_grad() gets stop_gradient marks (see runtime.dispatch);
        # the autodiff passes build their graphs under no_grad and must not.
        self.stop_under_no_grad = stop_under_no_grad
        self.graph = Graph()
        self.level = len(_STACK.traces)
        # capture key (``capture_key``) of an outer Var / concrete array -> input Var
        self._captured: dict = {}
        self._keep: list = []  # keeps captured objects alive so their ids stay unique
        # ids of leaves that require grad whose value an update without gradient (no_grad,
        # .data) replaced here: a differentiable use of one is a graph break (runtime.dispatch),
        # or, where ``rebound_use`` is not None (compile's whole-function trace), noted there:
        # a backward inside the trace reaches the leaf itself, and only differentiating the
        # graph's outputs (which would go through the update) needs the break
        self.rebound_leaves: dict = {}  # (id -> the leaf: kept alive, so that no other tensor takes its id)
        self.rebound_use: Optional[str] = None
        self.forget_updates()

    def __enter__(self) -> "Trace":
        _STACK.traces.append(self)
        self.active = True
        return self

    def __exit__(self, *exc) -> bool:
        _STACK.traces.remove(self)
        self.active = False
        return False

    def graph_break(self, reason: str, data_dependent: bool = False) -> None:
        """Something the compiler cannot capture (``reason`` names it and the user's line):
        raises GraphBreak; compile's segmented trace (runtime.segments) instead runs what
        it recorded so far and returns, so the operation runs on concrete values."""
        raise GraphBreak(reason, data_dependent)

    @contextlib.contextmanager
    def eagerly(self, reason: str):
        """A graph break around an operation that must run untraced (a custom
        autograd.Function, an in-place update of a view): the segmented trace runs what it
        recorded and steps off the stack for the block; other traces raise GraphBreak."""
        raise GraphBreak(reason)
        yield  # noqa: unreachable - the generator form makes this a context manager

    def rebind(self, x, data) -> None:
        """Give tensor ``x`` the value ``data`` (an update traced code makes to a tensor it
        did not create; compile's trace also writes it back after each call)."""
        x._data = data

    def forget_updates(self) -> None:
        """Start over the record of in-place updates that views must follow (``updated``)."""
        self._updates: dict = {}  # id of a view base updated in place -> (base, number of updates)
        self._derived: dict = {}  # id of a view -> (view, the number of its base's updates it shows)

    def updated(self, base, target) -> None:
        """The traced code updated tensor ``base`` in place (rebinding its value) through
        ``target`` (``base`` or a full alias of it, given the same new value): the other
        views of it, which in eager share its memory, are derived from it again when next used."""
        n = self._updates.get(id(base), (None, 0))[1] + 1
        self._updates[id(base)] = (base, n)
        if target is not base:
            self._derived[id(target)] = (target, n)

    def _refresh(self, view) -> None:
        """Give ``view`` its base's current value through its chain of view primitives, if
        the base was updated since (see ``updated``). A view kept out of differentiation
        (a detached alias, a view made under no_grad: its value a stop_gradient here, or a
        concrete one that does not require grad of a base that does) stays out."""
        entry = self._updates.get(id(view._base))
        if entry is None or self._derived.get(id(view), (None, 0))[1] == entry[1]:
            return
        if view._view_fn is None:  # (no view primitives make it: eager's shares the base's memory)
            raise GraphBreak(f"a strided view (unfold, as_strided) read at {user_frame()} after its base was "
                             "updated in place: the call runs eagerly")
        self._derived[id(view)] = (view, entry[1])
        from ..ir.prims.elementwise import stop_gradient
        from ..runtime.dispatch import bind, replay_view
        from ..runtime.grad_mode import set_grad_enabled
        old = view._data
        with set_grad_enabled(True):  # (under no_grad each step would be a stop_gradient)
            t = replay_view(view._base, view._view_fn)
            stopped = t._rg and not view._rg  # (a detached alias shares its base's Var)
            if type(old) is Var and old.trace is self and not (stopped and self.follows_requires_grad):
                # (() : a detached alias itself; a leaf's view is no detached one because the
                # leaf's value came from an update without gradient: its gradient is the leaf's)
                stopped = view._view_fn == () or (self._detached(old) and id(view._base) not in self.rebound_leaves)
            if stopped:
                self._derived[id(t)] = (t, entry[1])  # (made from the current base: binding it derives nothing)
                t = bind(stop_gradient, (t,), {})
        self.rebind(view, t._data)
        if view._rg:
            view._grad_fn, view._out_nr = t._grad_fn, t._out_nr

    def _detached(self, v: Var) -> bool:
        """Whether traced value ``v`` is a stop_gradient, or a view (through view
        primitives) of one: a detached alias, or a view taken of it."""
        from ..ir.prims.elementwise import stop_gradient
        producer = {id(e.out): e for e in self.graph.eqns}
        e = producer.get(id(v))
        while e is not None:
            if e.prim is stop_gradient:
                return True
            if e.prim.kind != "view" or type(e.inputs[0]) is not Var:
                return False
            e = producer.get(id(e.inputs[0]))
        return False

    def new_input(self, shape, dtype) -> Var:
        v = Var(shape, dtype, self)
        self.graph.inputs.append(v)
        return v

    def lift(self, x):
        """The IR operand for ``x``: a Var of this graph, a literal, or a captured input; a
        view whose base the traced code updated in place is derived from it again first."""
        if self._updates and getattr(x, "_base", None) is not None:
            self._refresh(x)
        return self._lift(x)

    def _lift(self, x):
        from ..runtime.tensor import Tensor
        if isinstance(x, Tensor):
            d = x._data
            if type(d) is Var and d.trace is self:
                return d
            key = self.capture_key(x)
            v = self._captured.get(key)
            if v is None:
                v = self._lift_broadcast(x, d)
                if v is None:
                    v = Var(d.shape, d.dtype, self)
                    self.graph.consts.append((v, x))
                self._captured[key] = v
                self._keep.append((v, d))
            return v
        if isinstance(x, (bool, int, float, np.number, np.bool_)):
            return x.item() if isinstance(x, (np.number, np.bool_)) else x
        from .speculate import Speculated
        if type(x) is Speculated:
            x._used("an operand of a tensor op")
            return x.value
        from .dynamic_float import DynamicFloat, FloatUsed
        if type(x) is DynamicFloat:
            raise FloatUsed("a primitive's operand", x.sources)
        raise TypeError(f"cannot use {type(x).__name__} as an operand of a traced op")

    def captured_arrays(self) -> list:
        """(input Var, array) of the concrete arrays this trace captured."""
        return [e for e in self._keep if type(e) is tuple and isinstance(e[1], np.ndarray)]

    def capture_key(self, x):
        """What identifies a captured tensor's value: its array, and, where the trace follows
        requires_grad, whether the holder requires grad: a parameter and its ``detach()`` or
        ``.data`` share the array, but only the parameter's uses are differentiated."""
        return (id(x._data), bool(x._rg)) if self.follows_requires_grad else id(x._data)

    def _lift_broadcast(self, x, d):
        """A captured array that is a broadcast view (zero strides, e.g. the ones seed that
        eager autograd broadcasts over a summed value) becomes its compact base (a view of the
        same memory, so still read at call time) plus a broadcast_to in the graph: the kernel
        reads one element instead of the runtime materializing and streaming the full array
        every call (W1's gradient: 16 MiB). None when ``d`` is not such a view."""
        from ..ir.prims.layout import broadcast_to
        from ..runtime.tensor import Tensor, wrap
        if (type(x) is not Tensor or x._rg or not isinstance(d, np.ndarray) or d.size <= 1
                or not any(st == 0 and n > 1 for st, n in zip(d.strides, d.shape))):
            return None
        small = d[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(d.strides, d.shape))]
        holder = wrap(small)
        base = Var(small.shape, small.dtype, self)
        self._keep.append((base, holder))
        self.graph.consts.append((base, holder))
        out = Var(d.shape, d.dtype, self)
        self.graph.eqns.append(Eqn(broadcast_to, (base,), {"shape": tuple(d.shape)}, out))
        return out

    def mark_recompute(self, since: int, keep: Sequence[Var]) -> None:
        """Mark the values of equations ``since`` onwards, except ``keep`` (a region's
        outputs), as rematerialization hints: what ``checkpoint`` asks for under compile."""
        kept = {v.id for v in keep}
        for e in self.graph.eqns[since:]:
            if e.out.id not in kept:
                e.out.recompute = True

    def splice(self, graph: Graph, operands: Sequence) -> list:
        """Append ``graph``'s equations, its arguments (inputs then consts) bound to
        ``operands`` (tensors or literals, lifted like an op's), and return the Vars of its
        outputs: a closed graph recorded at once, without binding its primitives one by one
        (their shape rules held when it was built)."""
        env = {v.id: self.lift(x) for v, x in zip(graph.arguments(), operands)}
        eqns = self.graph.eqns
        for e in graph.eqns:
            out = env[e.out.id] = Var(e.out.shape, e.out.dtype, self)
            eqns.append(Eqn(e.prim, tuple([env[a.id] if type(a) is Var else a for a in e.inputs]), e.params, out,
                            e.where))
        return [env[o.id] if type(o) is Var else o for o in graph.outputs]

    def emit(self, prim, args: Sequence, params: dict) -> Var:
        ins = tuple(self.lift(a) for a in args)
        avals = [(v.shape, v.dtype) if isinstance(v, Var) else v for v in ins]
        shape, dtype = prim.abstract(avals, params)
        out = Var(shape, dtype, self)
        self.graph.eqns.append(Eqn(prim, ins, params, out))
        return out


def trace_function(fn: Callable, args: Sequence) -> tuple:
    """Trace ``fn`` on tensors shaped like ``args`` (Tensors; others pass through).
    Returns (trace, traced args, raw outputs)."""
    from ..runtime.tensor import Tensor, wrap
    with Trace() as tr:
        targs = []
        for a in args:
            if isinstance(a, Tensor):
                t = wrap(tr.new_input(a.shape, a._data.dtype))
                targs.append(t)
            else:
                targs.append(a)
        out = fn(*targs)
    return tr, targs, out
