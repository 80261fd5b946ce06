"""Moving a tensor between devices (``.to(device)``, ``.cuda()``, ``.cpu()``) as an op
autograd sees: the copy's grad_fn is ``ToCopyBackward0``, which moves the gradient back."""
from __future__ import annotations

from ..ir.graph import Var
from . import devices
from .devices import device
from .grad_mode import STATE
from .nodes import FunctionNode, node_class
from .tensor import Tensor, wrap

_NODE = node_class("ToCopyBackward0", FunctionNode)


def transfer(x: Tensor, dev: device) -> Tensor:
    """``x`` on ``dev`` (a resolved device): ``x`` itself when it is there, else a copy.
    Inside compiled code a transfer is a graph break (it runs eagerly)."""
    if type(x._data) is Var:
        x._concrete(f"moving a tensor to {dev}", host=True)  # the break; x then holds its value
    src = x.device
    if src == dev:
        return x
    out = wrap(devices.move(x._data, dev))
    if STATE.enabled and x._rg:
        node = object.__new__(_NODE)
        node._init(((x._grad_fn, x._out_nr) if x._grad_fn is not None else (x._accumulator(), 0),))
        node.backward_fn = lambda g: (transfer(g, src),)
        node.n_out = 1
        node.out_meta = [(tuple(x.shape), x._data.dtype)]
        node.ctx = None
        out._grad_fn, out._rg = node, True
    return out
