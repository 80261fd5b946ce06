"""``fusegrad.compiler`` (also ``fusegrad._dynamo``): marks on tensors that steer
``compile``'s dynamic shapes (``mark_dynamic``, ``mark_static``), ``reset``, ``disable``
and ``is_compiling``, as ``torch.compiler``'s / ``torch._dynamo``'s."""
from __future__ import annotations

import functools
import weakref
from typing import Callable, NamedTuple, Optional, Union

from .runtime.stance import set_stance  # noqa: F401

__all__ = ["mark_dynamic", "mark_static", "reset", "disable", "is_compiling", "is_dynamo_compiling",
           "cudagraph_mark_step_begin", "allow_in_graph", "assume_constant_result", "graph_break", "set_stance",
           "explain", "substitute_in_graph"]


def reset() -> None:
    """Empty every compiled function's cache: their next calls trace and compile again."""
    from .runtime.compiled import LIVE
    for cf in list(LIVE):
        with cf._lock:
            cf._reset()


def is_compiling() -> bool:
    """True while ``fusegrad.compile`` traces the code calling it."""
    from .tracer.trace import capture_trace
    return capture_trace() is not None


is_dynamo_compiling = is_compiling


def allow_in_graph(fn: Callable) -> Callable:
    """``fn`` itself: fusegrad traces into every function (what it cannot capture is a graph
    break with its reason), so there is nothing to allow."""
    return fn


def assume_constant_result(fn: Callable) -> Callable:
    """``fn`` itself: compiled code calls it at every call (a result that does not change
    is only computed again, never stale)."""
    return fn


def substitute_in_graph(original_fn: Callable, *, can_constant_fold_through: bool = False,
                        skip_signature_check: bool = False, is_embedded_type: bool = False) -> Callable:
    """A decorator that registers a traceable stand-in for ``original_fn``; fusegrad traces
    ``original_fn`` itself, so the stand-in is returned as it is."""
    return lambda traceable_fn: traceable_fn


def graph_break(msg: str = "") -> None:
    """A graph break here: inside ``compile`` the code before and after it runs as separate
    compiled segments (listed, with ``msg``, in ``cache_info()["graph_breaks"]``); eagerly it
    does nothing."""
    from .tracer.trace import capture_trace, user_frame
    tr = capture_trace()
    if tr is not None:
        tr.graph_break(f"torch._dynamo.graph_break({msg!r}) at {user_frame()}")


class BreakReason(NamedTuple):
    """One graph break: its reason, naming the user's file and line."""
    reason: str
    user_stack: tuple = ()


class ExplainOutput(NamedTuple):
    """What ``explain`` found: the graphs a call compiles into and the breaks between them."""
    graph_count: int
    graph_break_count: int
    break_reasons: list

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 "Break Reasons:"]
        lines += [f"  Break Reason {i + 1}:\n    Reason: {b.reason}" for i, b in enumerate(self.break_reasons)]
        return "\n".join(lines) + "\n"


def explain(f: Callable, *extra_args, **extra_kwargs) -> Callable:
    """``explain(f)(*args)``: compile ``f`` afresh, call it on ``args`` and report its graph
    breaks (``ExplainOutput``), as ``torch._dynamo.explain``."""
    from .runtime.compiled import compile as compile_

    def inner(*args, **kwargs):
        cf = compile_(f)
        cf(*args, *extra_args, **kwargs, **extra_kwargs)
        breaks = [BreakReason(r) for r in cf.cache_info()["graph_breaks"]]
        return ExplainOutput(len(breaks) + 1, len(breaks), breaks)
    return inner


def cudagraph_mark_step_begin() -> None:
    """Where PyTorch starts a new step of CUDA-graph replays (``mode="reduce-overhead"``):
    fusegrad records no CUDA graphs, so there is nothing to mark."""


def disable(fn: Optional[Callable] = None, recursive: bool = True, *, reason: Optional[str] = None):
    """``fn`` run eagerly even inside compiled code: a call from a compiled function is a graph
    break there (its cache_info names ``reason`` or the function). Usable as a decorator."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)

    @functools.wraps(fn)
    def eagerly(*args, **kwargs):
        from .tracer.trace import capture_trace, user_frame
        tr = capture_trace()
        if tr is not None:
            why = reason or f"{getattr(fn, '__qualname__', fn)} is compiler.disable'd"
            with tr.eagerly(f"{why} at {user_frame()}"):
                return eagerly(*args, **kwargs)
        return fn(*args, **kwargs)
    return eagerly

# id(tensor) -> (dynamic dims, static dims); an entry leaves with its tensor
_MARKS: dict = {}


def _marks(t) -> tuple:
    m = _MARKS.get(id(t))
    if m is None:
        m = _MARKS[id(t)] = (set(), set())
        weakref.finalize(t, _MARKS.pop, id(t), None)
    return m


def _dims(t, dim: Union[int, list, tuple]) -> list:
    dims = [dim] if isinstance(dim, int) else list(dim)
    nd = t.dim()
    for d in dims:
        if not -nd <= d < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
    return [d % nd for d in dims]


def mark_dynamic(t, dim: Union[int, list, tuple], *, min: Optional[int] = None,  # noqa: A002 - PyTorch's names
                 max: Optional[int] = None, specialize_on=None) -> None:  # noqa: A002
    """Compile the first call with ``t`` with dimension ``dim`` symbolic (its size may vary
    without a kernel compiled again). ``min``/``max`` are PyTorch's range hints: a symbolic
    dimension here serves every size, so they change nothing."""
    dyn, static = _marks(t)
    for d in _dims(t, dim):
        dyn.add(d)
        static.discard(d)


def mark_static(t, dim: Union[int, list, tuple, None] = None) -> None:
    """Keep dimension ``dim`` of ``t`` (every dimension when None) static: a change of its size
    compiles anew (with static sizes) instead of going symbolic."""
    dyn, static = _marks(t)
    for d in _dims(t, tuple(range(t.dim())) if dim is None else dim):
        static.add(d)
        dyn.discard(d)


def _tensor_marks(leaves: list):
    if _MARKS:
        for i, x in enumerate(leaves):
            m = _MARKS.get(id(x))
            if m is not None:
                yield i, m


def _marked_dynamic(leaves: list) -> bool:
    return any(dyn for _, (dyn, _s) in _tensor_marks(leaves))


def _static_dims(leaves: list) -> set:
    """(leaf position, dim) of every dimension marked static."""
    return {(i, d) for i, (_d, static) in _tensor_marks(leaves) for d in static}


def maybe_mark_dynamic(t, index: Union[int, list, tuple]) -> None:
    """``mark_dynamic``, as a hint (PyTorch's does not insist on the dimension staying symbolic;
    neither does fusegrad's marking)."""
    mark_dynamic(t, index)


def mark_static_address(t, guard: bool = False) -> None:
    """Nothing to do: compiled code reads its tensors where they are at every call."""


def forbid_in_graph(fn: Callable) -> Callable:
    """``fn`` kept out of compiled code: called while compiling it raises (AssertionError, as
    PyTorch's), eagerly it runs."""
    @functools.wraps(fn)
    def outside(*args, **kwargs):
        from .tracer.trace import capture_trace
        if capture_trace() is not None:
            raise AssertionError(f"Attempt to trace forbidden callable {fn}")
        return fn(*args, **kwargs)
    return outside


def nonstrict_trace(traceable_fn: Callable) -> Callable:
    """``traceable_fn`` itself: fusegrad traces every function it calls."""
    return traceable_fn


def dont_skip_tracing(fn: Optional[Callable] = None):
    """``fn`` itself (or a decorator returning it): fusegrad skips tracing no function."""
    return fn if fn is not None else (lambda f: f)
