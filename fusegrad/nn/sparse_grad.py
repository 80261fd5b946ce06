"""``embedding(..., sparse=True)``: the weight's gradient as a sparse COO tensor, one entry
per index looked up (the ``padding_idx`` ones left out, uncoalesced), as PyTorch gives it;
``optim.SparseAdam`` and the optimizers that take sparse gradients read it."""
from __future__ import annotations

from typing import Optional

from ..autograd.function import Function
from ..runtime import ops as O
from ..runtime.sparse_coo import SparseCOOTensor
from ..runtime.tensor import Tensor


class SparseEmbedding(Function):
    """Rows of ``weight`` at ``input``; backward: the rows' gradients as a sparse tensor."""

    @staticmethod
    def forward(ctx, weight: Tensor, input: Tensor, padding_idx: Optional[int]) -> Tensor:  # noqa: A002
        ctx.save_for_backward(input)
        ctx.size, ctx.padding_idx = tuple(weight.shape), padding_idx
        return weight[input]

    @staticmethod
    def backward(ctx, grad: Tensor):
        input, = ctx.saved_tensors
        rows = O.reshape(input, (-1,)).long()
        values = O.reshape(grad, (-1,) + ctx.size[1:])
        if ctx.padding_idx is not None:
            keep = O.ne(rows, ctx.padding_idx)
            rows, values = rows[keep], values[keep]
        return SparseCOOTensor(O.unsqueeze(rows, 0), values, ctx.size, False), None, None
