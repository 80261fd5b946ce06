"""Values compiled code reads afresh at every call: graph consts whose holder supplies the
array when the compiled function runs, not when it was traced.

``RngKey`` (tracer.rng) draws a generator key; ``LiveNumber`` reads a Python number from a
mapping, such as an optimizer's learning rate, which a scheduler changes between calls."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.tensor import Tensor, wrap
from .trace import capturing, current_traces


class CallTimeConst(Tensor):
    """A captured tensor whose value at call time is ``draw()``; ``guard_key()`` is what
    must still hold for the compiled graph to apply (it recompiles otherwise)."""
    __slots__ = ()

    def draw(self) -> np.ndarray:
        raise NotImplementedError

    def guard_key(self) -> Any:
        return None


def _read_path(source, path: tuple):
    for k in path:
        source = source[k]
    return source


class LiveNumber(CallTimeConst):
    """``source[path[0]][path[1]]...`` as a 0-d array. The graph was traced with the
    number's zero-ness fixed (an optimizer skips weight decay at 0), so that is its guard."""
    __slots__ = ("source", "path")

    def value(self) -> Any:
        return _read_path(self.source, self.path)

    def draw(self) -> np.ndarray:
        return np.asarray(self.value(), dtype=self._data.dtype)

    def guard_key(self) -> Any:
        return self.value() != 0


class GuardedNumber(LiveNumber):
    """A number the traced code branched on: the graph holds for that value only."""
    __slots__ = ()

    def guard_key(self) -> Any:
        return self.value()


def _lift(cls, source, path: tuple, value, dtype) -> Tensor:
    holder = wrap(np.asarray(value, dtype=dtype), cls)
    holder.source, holder.path = source, path
    return wrap(current_traces()[-1].lift(holder))


def live_number(source, *path, dtype: np.dtype = np.dtype(np.float32)):
    """``source[path...]``: the number itself, or inside ``fusegrad.compile``'s trace a 0-d
    tensor of ``dtype`` that the compiled code reads from ``source`` at every call."""
    v = _read_path(source, path)
    if not capturing() or isinstance(v, Tensor):
        return v
    return _lift(LiveNumber, source, path, v, dtype)


def guarded_value(source, *path):
    """``source[path...]`` for control flow in traced code; inside ``fusegrad.compile``'s
    trace the graph is guarded on it, so that a change (an optimizer's ``nesterov`` turned
    on) recompiles instead of replaying the old branch."""
    v = _read_path(source, path)
    if capturing() and not isinstance(v, Tensor):
        _lift(GuardedNumber, source, path, v, np.dtype(np.float64))
    return v
