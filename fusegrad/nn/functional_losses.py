"""Distance-based and divergence losses of ``nn.functional`` (re-exported there), as compositions."""
from __future__ import annotations

import warnings

from ..runtime import ops as O
from ..runtime.tensor import Tensor
from . import functional as F

__all__ = ["kl_div", "cosine_similarity", "pairwise_distance", "cosine_embedding_loss", "margin_ranking_loss",
           "triplet_margin_loss", "hinge_embedding_loss", "soft_margin_loss"]


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """``target * (log(target) - input)`` (``input`` holds log-probabilities); ``reduction="batchmean"``
    divides the sum by the batch size, the mathematically correct KL divergence."""
    if reduction == "batchmean":
        red = "batchmean"
    else:
        red = F._reduction(size_average, reduce, reduction)
        if red == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                          "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                          "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
    if log_target:
        loss = O.mul(O.exp(target), O.sub(target, input))
    else:
        positive = O.gt(target, 0)
        # xlogy: 0 where the target is 0; the log sees 1 there so no -inf reaches the backward pass
        tlogt = O.where(positive, O.mul(target, O.log(O.where(positive, target, 1.0))), 0.0)
        loss = O.sub(tlogt, O.mul(target, input))
    if red == "batchmean":
        return O.div(loss.sum(), input.shape[0]) if input.ndim else loss.sum()
    return F._reduce(loss, red)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 * x2) / (max(|x1|, eps) * max(|x2|, eps))`` along ``dim`` (inputs broadcast)."""
    n1 = O.clamp_min(O.norm(x1, 2, dim, keepdim=True), eps)
    n2 = O.clamp_min(O.norm(x2, 2, dim, keepdim=True), eps)
    return O.sum(O.mul(O.div(x1, n1), O.div(x2, n2)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim."""
    return O.norm(O.add(O.sub(x1, x2), eps), p, -1, keepdim=keepdim)


def _check_targets(name: str, target: Tensor, shape) -> None:
    if tuple(target.shape) != tuple(shape):
        raise RuntimeError(f"{name}: expected target of shape {list(shape)}, got {list(target.shape)}")


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where ``target == -1``."""
    reduction = F._reduction(size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss: expected 1D or 2D inputs of the same shape, got "
                           f"{list(input1.shape)} and {list(input2.shape)}")
    _check_targets("cosine_embedding_loss", target, input1.shape[:-1])
    eps = 1e-12  # PyTorch's: added to the squared magnitudes
    dim = input1.ndim - 1
    dot = O.sum(O.mul(input1, input2), dim)
    mag = O.mul(O.add(O.sum(O.mul(input1, input1), dim), eps), O.add(O.sum(O.mul(input2, input2), dim), eps))
    cos = O.div(dot, O.sqrt(mag))
    pos = O.where(O.eq(target, 1), O.rsub(cos, 1.0), 0.0)
    neg = O.where(O.eq(target, -1), O.clamp_min(O.sub(cos, margin), 0.0), 0.0)
    return F._reduce(O.add(pos, neg), reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (x1 - x2) + margin)``."""
    reduction = F._reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, "
                           f"target: {list(target.shape)} ")
    loss = O.clamp_min(O.add(O.mul(O.neg(target), O.sub(input1, input2)), margin), 0.0)
    return F._reduce(loss, reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``."""
    reduction = F._reduction(size_average, reduce, reduction)
    neg = O.where(O.eq(target, -1), O.clamp_min(O.rsub(input, margin), 0.0), 0.0)
    pos = O.where(O.eq(target, 1), input, 0.0)
    return F._reduce(O.add(pos, neg), reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * x))``."""
    reduction = F._reduction(size_average, reduce, reduction)
    return F._reduce(F.softplus(O.mul(O.neg(target), input), threshold=1e30), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the ``p``-norm distance (``swap``: the smaller of
    ``d(a, n)`` and ``d(p, n)``)."""
    reduction = F._reduction(size_average, reduce, reduction)
    if not (anchor.ndim == positive.ndim == negative.ndim) or anchor.ndim not in (1, 2):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions (1 or 2), but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
                           f"negative {negative.ndim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = O.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return F._reduce(O.clamp_min(O.add(O.sub(d_pos, d_neg), margin), 0.0), reduction)


