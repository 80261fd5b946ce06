"""``fusegrad.compiler``: marks on tensors that steer ``compile``'s dynamic shapes, as
``torch.compiler``'s / ``torch._dynamo``'s ``mark_dynamic`` and ``mark_static``."""
from __future__ import annotations

import weakref
from typing import Union

__all__ = ["mark_dynamic", "mark_static"]

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


def mark_dynamic(t, dim: Union[int, list, tuple]) -> None:
    """Compile the first call with ``t`` with dimension ``dim`` symbolic (its size may vary
    without a kernel compiled again)."""
    dyn, static = _marks(t)
    for d in _dims(t, dim):
        dyn.add(d)
        static.discard(d)


def mark_static(t, dim: Union[int, list, tuple]) -> None:
    """Keep dimension ``dim`` of ``t`` static: a change of its size compiles anew (with
    static sizes) instead of going symbolic."""
    dyn, static = _marks(t)
    for d in _dims(t, dim):
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
