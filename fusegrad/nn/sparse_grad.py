"""``embedding(..., sparse=True)`` and ``embedding_bag(..., sparse=True)``: the weight's
gradient as a sparse COO tensor, one entry per index looked up (the ``padding_idx`` ones left
out, uncoalesced), as PyTorch gives it;
``optim.SparseAdam`` and the optimizers that take sparse gradients read it."""
from __future__ import annotations

from typing import Optional

from ..autograd.function import Function
from ..runtime import ops as O
from ..runtime.sparse_coo import SparseCOOTensor
from ..runtime.tensor import Tensor


class SparseEmbedding(Function):
    """Rows of ``weight`` at ``input``; backward: the rows' gradients as a sparse tensor, of
    the positions where ``keep`` (a mask like ``input``, or None: all) holds."""

    @staticmethod
    def forward(ctx, weight: Tensor, input: Tensor, padding_idx: Optional[int],  # noqa: A002
                keep: Optional[Tensor] = None) -> Tensor:
        ctx.save_for_backward(input)
        ctx.size, ctx.padding_idx, ctx.keep = tuple(weight.shape), padding_idx, keep
        return weight[input]

    @staticmethod
    def backward(ctx, grad: Tensor):
        input, = ctx.saved_tensors
        rows = O.reshape(input, (-1,)).long()
        # (contiguous: an expanded gradient, a sum's, would refuse the in-place scaling of p.grad.div_(n))
        values = O.reshape(grad, (-1,) + ctx.size[1:]).contiguous()
        keep = None if ctx.keep is None else O.reshape(ctx.keep, (-1,))
        if ctx.padding_idx is not None:
            pad = O.ne(rows, ctx.padding_idx)
            keep = pad if keep is None else O.logical_and(keep, pad)
        if keep is not None:
            rows, values = rows[keep], values[keep]
        return SparseCOOTensor(O.unsqueeze(rows, 0), values, ctx.size, False), None, None, None
