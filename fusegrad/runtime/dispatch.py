"""Binding a primitive: the one path every op takes, in every mode.

1. If an operand is traced (its payload is an IR Var) or the op is random inside a trace,
   the innermost such trace records an equation; otherwise the eager NumPy impl runs.
2. If grad mode is on and an operand requires grad, a grad_fn node records the op.
Errors from the impl come back naming the op, the operands' shapes and the user's line."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Var
from ..ir.primitive import install_dispatcher
from ..tracer.trace import _STACK, user_frame
from .grad_mode import STATE
from .nodes import attach_node_classes
from .tensor import Tensor, wrap


def _traced_payload(prim, args, params):
    top = None
    for a in args:
        if isinstance(a, Tensor) and type(a._data) is Var:
            tr = a._data.trace
            if top is None or tr.level > top.level:
                top = tr
    if top is None and prim.effect:
        top = _STACK.traces[-1]
    if top is None:
        return None
    return top.emit(prim, args, params)


def bind(prim, args, params):
    data = None
    if _STACK.traces:
        try:
            data = _traced_payload(prim, args, params)
        except (ValueError, IndexError) as e:  # a shape rule's complaint, reported as eagerly
            raise _op_error(prim, args, e) from None
    if data is None:
        try:
            data = prim.impl(*[a._data if isinstance(a, Tensor) else a for a in args], **params)
        except (ValueError, IndexError, TypeError, RuntimeError, MemoryError) as e:
            raise _op_error(prim, args, e) from None
        if type(data) is not np.ndarray:  # NumPy returns scalars for 0-d operands
            data = np.asarray(data)
    out = wrap(data)
    if prim.kind == "view":
        base = args[0]
        if base._vbox is None:
            base._vbox = [0]
        out._vbox = base._vbox
        out._base = base._base if base._base is not None else base
        # how to rebuild this view from its base: replayed when the view is written in place
        out._view_fn = (base._view_fn or ()) + ((prim, params),) if base._base is not None else ((prim, params),)
    if STATE.enabled and not prim.nondiff:
        for a in args:
            if isinstance(a, Tensor) and a._rg:
                record(prim, args, params, out)
                break
    return out


def record(prim, args, params, out) -> None:
    """Make ``out``'s grad_fn node for ``prim`` applied to ``args``."""
    node = prim.node_cls.__new__(prim.node_cls)
    node._init(tuple(_edge(a) for a in args))
    node.prim = prim
    node.params = params
    node.ins = args
    node.freed = False
    node.versions = tuple((a, a._version) for a in args[prim.checked] if isinstance(a, Tensor)) if prim.saves_in else ()
    if prim.saves_out:
        if out._vbox is None:
            out._vbox = [0]
        node.out_data = out._data
        node.out_box = out._vbox
        node.out_ver = out._vbox[0]
    else:
        node.out_data = node.out_box = None
        node.out_ver = 0
    out._grad_fn = node
    out._rg = True


def _edge(a):
    if isinstance(a, Tensor) and a._rg:
        if a._grad_fn is not None:
            return (a._grad_fn, a._out_nr)
        return (a._accumulator(), 0)
    return None


def _op_error(prim, args, e: Exception) -> Exception:
    shapes = ", ".join(f"{list(a.shape)} {a.dtype.name}" if isinstance(a, Tensor) else repr(a) for a in args)
    msg = f"{prim.name}: {e} (operands: {shapes}) at {user_frame()}"
    if isinstance(e, IndexError):
        return IndexError(msg)
    if isinstance(e, MemoryError):
        return MemoryError(msg)
    if isinstance(e, TypeError):
        return TypeError(msg)
    return RuntimeError(msg)


install_dispatcher(bind)
attach_node_classes()
