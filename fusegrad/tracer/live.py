"""What compiled code reads afresh at every call, and what it checks before replaying.

``CallTimeConst``: a graph const whose holder supplies the array when the compiled function
runs, not when it was traced: ``RngKey`` (tracer.rng) draws a generator key, ``LiveNumber``
reads a Python number such as an optimizer's learning rate, which a scheduler changes
between calls, ``LiveArray`` a NumPy array that ``torch.tensor`` copies.

Guards: Python values the traced code branched on (a module's ``training`` flag, a global
scale, whether weight decay is zero), recorded by the capturing trace as (read, value,
identity) triples; the compiled function retraces when a read no longer gives its value (the
same object, for identity guards: a global tensor or module rebound to another)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..runtime.tensor import Tensor, wrap
from .trace import capturing, current_traces


class CallTimeConst(Tensor):
    """A captured tensor whose value at call time is ``draw()``."""
    __slots__ = ()

    def draw(self) -> np.ndarray:
        raise NotImplementedError


def _read_path(source, path: tuple):
    for k in path:
        source = source[k]
    return source


class LiveNumber(CallTimeConst):
    """``source[path[0]][path[1]]...`` as a 0-d array."""
    __slots__ = ("source", "path")

    def draw(self) -> np.ndarray:
        return np.asarray(_read_path(self.source, self.path), dtype=self._data.dtype)


class NamedNumber(CallTimeConst):
    """A number a global or closure cell holds (``read()``), as a 0-d float64 array."""
    __slots__ = ("read",)

    def draw(self) -> np.ndarray:
        return np.asarray(self.read(), dtype=np.float64)


class LiveTensor(CallTimeConst):
    """A tensor the function names (a global, a closure cell): the one the name holds when
    the compiled code runs (``read()``)."""
    __slots__ = ("read",)

    def draw(self) -> np.ndarray:
        return self.read()._data


class LiveArray(CallTimeConst):
    """A NumPy array that traced code copied into a tensor (``torch.tensor(W)``), copied again
    at every call: an array the program changes in place between calls (a global table, an
    object's NumPy state) gives its current values, as in eager."""
    __slots__ = ("array",)

    def draw(self) -> np.ndarray:
        return np.array(self.array, dtype=self._data.dtype)


def live_array(source: np.ndarray, value: np.ndarray):
    """``value``, the copy of ``source`` that ``torch.tensor`` made, as a tensor of compile's
    trace that the compiled code copies from ``source`` at every call; None outside one, or
    in a segment (which runs in this call: its constant is this value)."""
    if not capturing():
        return None
    trace = current_traces()[-1]
    if getattr(trace, "runs_in_call", False):
        return None
    holder = wrap(value, LiveArray)
    holder.array = source
    return wrap(trace.lift(holder))


class LiveGrad(CallTimeConst):
    """``leaf.grad`` as it is when the compiled code runs."""
    __slots__ = ("leaf",)

    def draw(self) -> np.ndarray:
        return self.leaf._grad._data


def live_grad(leaf: Tensor, trace) -> Tensor:
    """``leaf.grad`` in ``trace`` (compile's), for a gradient accumulated onto it: read from
    the leaf at every call, since the tensor there may be another one each time
    (``zero_grad(set_to_none=True)``, then a first backward that makes a new one)."""
    holder = wrap(leaf._grad._data, LiveGrad)
    holder.leaf = leaf
    return wrap(trace.lift(holder))


def guard(key: Any, read: Callable[[], Any], identity: bool = False) -> Any:
    """``read()``; inside a capturing trace (compile's, a transform's) the graph is also
    guarded on the value (on the object itself with ``identity``; ``key`` names the read, so
    each is checked once), and so is every capturing trace it is nested in."""
    value = read()
    for trace in current_traces():
        if trace.captures_state:
            trace.guards.setdefault(key, (read, value, identity))
    return value


def guards_hold(guards) -> bool:
    """Whether every (read, value, identity) guard still reads its value."""
    for read, value, identity in guards:
        v = read()
        if (v is not value) if identity else (v != value):
            return False
    return True


def guarded_value(source, *path):
    """``source[path...]`` for control flow in traced code: a change (an optimizer's
    ``nesterov`` turned on) retraces instead of replaying the old branch."""
    return guard((id(source), path), lambda: _read_path(source, path))


def live_number(source, *path, dtype: np.dtype = np.dtype(np.float32)):
    """``source[path...]``: the number itself, or inside ``fusegrad.compile``'s trace a 0-d
    tensor of ``dtype`` that the compiled code reads from ``source`` at every call (guarded
    on its zero-ness, which updates branch on: no weight decay at 0)."""
    v = _read_path(source, path)
    if isinstance(v, Tensor) and capturing():  # read as a captured tensor: guarded on being that one
        guard((id(source), path, "tensor"), lambda: _read_path(source, path), identity=True)
    if not capturing() or isinstance(v, Tensor):
        return v
    guard((id(source), path, "nonzero"), lambda: _read_path(source, path) != 0)
    trace = current_traces()[-1]
    if getattr(trace, "runs_in_call", False):
        # a segment runs at the next break: the number as read now, an input of each segment
        # that uses it (lifted on use: one read before a break may be used after it)
        return wrap(np.asarray(v, dtype=dtype))
    holder = wrap(np.asarray(v, dtype=dtype), LiveNumber)
    holder.source, holder.path = source, path
    return wrap(current_traces()[-1].lift(holder))
