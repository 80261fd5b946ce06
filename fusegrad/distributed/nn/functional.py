"""Differentiable collectives (PyTorch's ``torch.distributed.nn.functional``): each returns
a new tensor, and its backward runs the collective that carries the gradients back."""
from __future__ import annotations

from typing import Optional

from ...autograd.function import Function
from ...runtime.tensor import Tensor
from .. import collectives as C
from ..process_group import ProcessGroup


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.op, ctx.group = op, group
        out = tensor.clone()
        C.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # every rank's loss reads the reduced value: each input's gradient is the sum (the
        # mean for AVG) of the gradients all ranks got for it
        g = grad.clone()
        C.all_reduce(g, op=ctx.op, group=ctx.group)
        return None, None, g


def all_reduce(tensor: Tensor, op: C.ReduceOp = C.ReduceOp.SUM, group: Optional[ProcessGroup] = None) -> Tensor:
    """``tensor`` reduced across the ranks of ``group``, as a new tensor that backpropagates
    to every rank's input (SUM and AVG: other reductions have no such gradient here)."""
    op = C.ReduceOp(op)
    if op not in (C.ReduceOp.SUM, C.ReduceOp.AVG):
        raise RuntimeError(f"fusegrad.distributed.nn.all_reduce: no gradient for ReduceOp.{op.name}; use SUM or AVG")
    return _AllReduce.apply(op, group, tensor)
