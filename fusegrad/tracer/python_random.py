"""Random numbers that Python code draws while it is captured (``random.random()``,
``np.random.randn(...)``, the methods of a ``random.Random`` or NumPy generator the function
names): a captured graph replays what was traced, so such a draw would give the first
call's numbers at every call. A capture notes the generators' states before tracing; when
the trace changed one, it puts the states back and the capture is a graph break, so compile
runs the Python at every call (segments) and a function transform runs directly, each
drawing as eager code does."""
from __future__ import annotations

import pickle
import random
from typing import Any, Iterable

import numpy as np

_OWNERS = (random.Random, np.random.RandomState, np.random.Generator)


def _state(g) -> Any:
    if isinstance(g, random.Random):
        return g.getstate()
    return g.get_state() if isinstance(g, np.random.RandomState) else g.bit_generator.state


def _set(g, state) -> None:
    if isinstance(g, random.Random):
        g.setstate(state)
    elif isinstance(g, np.random.RandomState):
        g.set_state(state)
    else:
        g.bit_generator.state = state


def snapshot(values: Iterable[Any]) -> list:
    """(generator, its state, the state's bytes) for the global generators of ``random`` and
    ``numpy.random`` and the generators among ``values`` (what the function names)."""
    gens = {id(g): g for g in [random._inst, np.random.mtrand._rand] + [v for v in values if isinstance(v, _OWNERS)]}
    out = []
    for g in gens.values():
        s = _state(g)
        out.append((g, s, pickle.dumps(s)))
    return out


def drawn_and_restored(snap: list) -> bool:
    """Whether a generator of ``snap`` moved since; if so every one is put back."""
    if all(pickle.dumps(_state(g)) == b for g, _, b in snap):
        return False
    for g, s, _ in snap:
        _set(g, s)
    return True
