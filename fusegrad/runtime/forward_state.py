"""Forward-mode AD in eager mode: the tangent of each dual tensor, and their propagation.

While a dual level is open, ``dispatch.bind`` calls ``propagate`` after each op whose
operands carry tangents: the primitive's JVP rule (written in primitives, as its VJP)
computes the output's tangent. Tangents are kept here by tensor identity, so that Tensor
itself carries nothing for the common case of no forward AD."""
from __future__ import annotations

import weakref

import numpy as np
from typing import Optional

from ..ir import dtypes as D


class _State:
    __slots__ = ("level", "tangents", "busy")

    def __init__(self):
        self.level: Optional[int] = None  # the open dual level (PyTorch allows one)
        self.tangents: dict = {}  # id(tensor) -> (weakref to it, tangent)
        self.busy = False  # computing a tangent: its own ops carry none


STATE = _State()


def get_tangent(t):
    e = STATE.tangents.get(id(t))
    if e is None or e[0]() is not t:
        return None
    return e[1]


def holders(base) -> list:
    """(tensor, tangent) of ``base`` and its views (the tensors sharing its version counter)
    that hold a tangent."""
    box = base._vbox
    out = []
    for ref, tangent in list(STATE.tangents.values()):
        t = ref()
        if t is not None and (t is base or (box is not None and t._vbox is box)):
            out.append((t, tangent))
    return out


def set_tangent(t, tangent) -> None:
    key = id(t)
    tangents = STATE.tangents

    def gone(_ref, key=key):
        e = tangents.get(key)
        if e is not None and e[0] is _ref:
            del tangents[key]
    tangents[key] = (weakref.ref(t, gone), tangent)


def propagate(prim, args, params, out) -> None:
    """Give ``out`` the tangent of ``prim`` applied to ``args`` (nothing if no operand has one)."""
    from .tensor import Tensor
    ts = [get_tangent(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in ts) or prim.nondiff or not D.np_differentiable(out._data.dtype):
        return
    if prim.jvp is None:
        raise NotImplementedError(f"Trying to use forward AD with {prim.name} that does not support it.")
    STATE.busy = True
    try:  # (out itself: a tangent that reads it stays differentiable through it, reverse over forward)
        t = prim.jvp(ts, args, out, **params)
    finally:
        STATE.busy = False
    if t is not None:
        if t._data.dtype != out._data.dtype:
            t = t.to(out.dtype)
        set_tangent(out, t)
        node = out._grad_fn
        if prim.saves_out and node is not None and getattr(node, "prim", None) is prim:
            set_tangent(node, t)  # the output the node saves has it too: forward over reverse (saved_tangent)


def saved_tangent(node, out) -> None:
    """Give ``out``, the output ``node`` saved, rewrapped for a ``create_graph`` backward, the
    tangent the output had, so the VJP's use of it carries its tangent as in PyTorch."""
    t = get_tangent(node)
    if t is not None:
        set_tangent(out, t)


def carry_tangent(src, dst) -> None:
    """An in-place op wrote ``src``'s value into ``dst``: so goes its tangent (none: zero)."""
    if STATE.level is not None:
        t = get_tangent(src)
        if t is not None:
            set_tangent(dst, t)
        elif get_tangent(dst) is not None and isinstance(dst._data, np.ndarray):
            from .tensor import wrap
            set_tangent(dst, wrap(np.zeros(dst._data.shape, dst._data.dtype)))
