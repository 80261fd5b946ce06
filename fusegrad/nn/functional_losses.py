"""Distance-based, divergence, likelihood and multi-class margin losses of ``nn.functional``
(re-exported there), and the distances they use, as compositions."""
from __future__ import annotations

import math
import warnings
from typing import Optional, Union

import numpy as np

from ..ir import dtypes as D
from ..runtime import ops as O
from ..runtime.autocast_state import float32_policy
from ..runtime.factory import arange, tensor as _tensor
from ..runtime.ops import named
from ..runtime.tensor import Tensor
from ..tracer.trace import user_stacklevel
from . import functional as F

__all__ = ["kl_div", "cosine_similarity", "pairwise_distance", "cosine_embedding_loss", "margin_ranking_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "hinge_embedding_loss", "soft_margin_loss",
           "pdist", "gaussian_nll_loss", "poisson_nll_loss", "multi_margin_loss", "multilabel_soft_margin_loss",
           "multilabel_margin_loss"]

# PyTorch's scalar type names, as its dtype errors print them
SCALAR_TYPE_NAMES = {D.bool_: "Bool", D.uint8: "Byte", D.int8: "Char", D.int16: "Short", D.int32: "Int",
                     D.int64: "Long", D.float16: "Half", D.bfloat16: "BFloat16", D.float32: "Float",
                     D.float64: "Double"}


@float32_policy
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
                          stacklevel=user_stacklevel())
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
    for x in (x1, x2):
        if x.is_complex():
            raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                               f"{'ComplexDouble' if x.dtype == D.complex128 else 'ComplexFloat'}")
    n1 = O.clamp_min(O.norm(x1, 2, dim, keepdim=True), eps)
    n2 = O.clamp_min(O.norm(x2, 2, dim, keepdim=True), eps)
    return O.sum(O.mul(O.div(x1, n1), O.div(x2, n2)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim."""
    return O.norm(O.add(O.sub(x1, x2), eps), p, -1, keepdim=keepdim)


def _check_targets(name: str, target: Tensor, shape) -> None:
    if tuple(target.shape) != tuple(shape):
        raise RuntimeError(f"{name}: expected target of shape {list(shape)}, got {list(target.shape)}")


@float32_policy
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


@float32_policy
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


@float32_policy
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``."""
    reduction = F._reduction(size_average, reduce, reduction)
    neg = O.where(O.eq(target, -1), O.clamp_min(O.rsub(input, margin), 0.0), 0.0)
    pos = O.where(O.eq(target, 1), input, 0.0)
    return F._reduce(O.add(pos, neg), reduction)


@float32_policy
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * x))``."""
    reduction = F._reduction(size_average, reduce, reduction)
    return F._reduce(F.softplus(O.mul(O.neg(target), input), threshold=1e30), reduction)


@float32_policy
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


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` for any distance ``d`` (``pairwise_distance`` by default)."""
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin} "
                         "instead")
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
                           f"negative {negative.ndim}D inputs")
    d = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = d(anchor, positive), d(anchor, negative)
    if swap:
        d_neg = O.minimum(d_neg, d(positive, negative))
    return F._reduce(O.clamp_min(O.add(O.sub(d_pos, d_neg), margin), 0.0), reduction)




# ---------------------------------------------------------------- pairwise distances within a batch
def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between every pair of rows ``i < j`` of the (N, M) ``input``, in
    row-major order of the pairs (the upper triangle of ``cdist(input, input)``); as PyTorch's, a zero
    distance has a zero gradient."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if input.dtype.itemsize == 2:  # (PyTorch's CPU kernel has none for half types)
        raise NotImplementedError(f"\"pdist\" not implemented for '{O.scalar_name(input)}'")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    first, second = np.triu_indices(input.shape[0], 1)  # pair positions from the shape only
    diff = O.sub(O.index_select(input, 0, _tensor(first)), O.index_select(input, 0, _tensor(second)))
    return named(_row_norms(diff, p), "PdistBackward0")


def _row_norms(diff: Tensor, p: float) -> Tensor:
    """``||diff[r]||_p`` per row, differentiated as PyTorch's pdist: zero where the norm is zero
    (and, for ``p < 1``, at zero coordinates), the full gradient to every coordinate tied at the
    maximum for ``p = inf``."""
    mag = O.abs(diff)
    if p == 0:  # the count of nonzero coordinates, with PyTorch's zero gradient (sign's)
        return O.sum(O.abs(O.sign(diff)), 1)
    if p == math.inf:
        top = O.amax(mag, 1, keepdim=True).detach()
        # the value is the maximum; each coordinate equal to it passes the whole gradient
        ties = O.where(O.eq(mag, top), O.grad_only(mag), 0.0)
        return O.add(O.squeeze(top, 1), O.sum(ties, 1))
    nonzero = O.gt(mag, 0)
    powered = O.where(nonzero, O.pow(O.where(nonzero, mag, 1.0), p), 0.0)
    total = O.sum(powered, 1)
    positive = O.gt(total, 0)
    return O.where(positive, O.pow(O.where(positive, total, 1.0), 1.0 / p), 0.0)


# ---------------------------------------------------------------- likelihood losses
def gaussian_nll_loss(input: Tensor, target: Tensor, var: Union[Tensor, float], full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """``0.5 * (log(var) + (input - target)^2 / var)`` (plus ``0.5 log(2 pi)`` when ``full``), ``var``
    clamped below at ``eps`` with its gradient passed through; ``var`` may lack the last dim or have
    size 1 in one dim (one variance shared)."""
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = O.mul(O.ones_of(input), var)
    elif F._concrete(var) and bool(O.any(O.lt(var, 0))):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = O.unsqueeze(var, -1)
        elif not (input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # PyTorch clamps a clone of var under no_grad: eps below it, with var's own gradient there too
    var = O.where(O.lt(var, eps), O.add(O.sub(var, var.detach()), eps), var)
    diff = O.sub(input, target)
    loss = O.mul(O.add(O.log(var), O.div(O.mul(diff, diff), var)), 0.5)
    if full:
        loss = O.add(loss, 0.5 * math.log(2 * math.pi))
    return F._reduce(loss, reduction)


@float32_policy
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """Poisson negative log likelihood: ``exp(input) - target * input`` of a log-rate (``log_input``),
    else ``input - target * log(input + eps)``; ``full`` adds Stirling's approximation of
    ``log(target!)`` where ``target > 1``."""
    reduction = F._reduction(size_average, reduce, reduction)
    if log_input:
        loss = O.sub(O.exp(input), O.mul(target, input))
    else:
        loss = O.sub(input, O.mul(target, O.log(O.add(input, eps))))
    if full:
        big = O.gt(target, 1)
        t = O.where(big, target, 2.0)  # the term is 0 elsewhere: keep log(0) out of its gradient
        stirling = O.add(O.sub(O.mul(t, O.log(t)), t), O.mul(O.log(O.mul(t, 2 * math.pi)), 0.5))
        loss = O.add(loss, O.where(big, stirling, 0.0))
    return F._reduce(loss, reduction)


# ---------------------------------------------------------------- multi-class and multi-label margin losses
def _as_matrix(input: Tensor) -> Tensor:
    """``input`` as (N, C): a vector (or a number) is one sample, as PyTorch's margin losses take it."""
    if input.ndim > 2 or (input.ndim >= 1 and input.shape[-1] == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    return O.reshape(input, -1, input.shape[-1] if input.ndim else 1)


def _check_long(target: Tensor) -> None:
    if target.dtype != D.int64:
        raise RuntimeError(f"expected scalar type Long but found "
                           f"{SCALAR_TYPE_NAMES.get(target.dtype, target.dtype.name)}")


def _class_positions(n: int, like: Tensor) -> Tensor:
    """``0 .. n - 1`` along the last of ``like``'s dims, to compare class indices with."""
    return O.reshape(arange(n, device=like.device), *([1] * (like.ndim - 1)), n)


@float32_policy
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Optional[Tensor] = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} w[y] max(0, margin - x[y] + x[i])^p / C`` per sample."""
    reduction = F._reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x = _as_matrix(input)
    n, c = x.shape
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{n}], but got {list(target.shape)}. Input "
                           f"has shape {list(input.shape)}.")
    _check_long(target)
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    t = O.reshape(target, n, 1)
    if F._concrete(target) and n and bool(O.any(O.logical_or(O.lt(t, 0), O.ge(t, c)))):
        raise RuntimeError("target out of range")
    z = O.add(O.rsub(O.gather(x, 1, t), margin), x)
    hinge = O.where(O.gt(z, 0), z, 0.0)
    if p == 2:
        hinge = O.mul(hinge, hinge)
    if weight is not None:
        hinge = O.mul(hinge, O.reshape(weight[O.reshape(t, n)], n, 1))
    hinge = O.where(O.eq(t, _class_positions(c, x)), 0.0, hinge)
    loss = O.div(O.sum(hinge, 1), c)
    out = O.reshape(loss, target.shape) if reduction == "none" else F._reduce(loss, reduction)
    return named(out, "MultiMarginLossBackward0")


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Optional[Tensor] = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """Per-class logistic loss ``-(y log sigmoid(x) + (1 - y) log sigmoid(-x))``, averaged over the
    classes (the last dim)."""
    reduction = F._reduction(size_average, reduce, reduction)
    loss = O.neg(O.add(O.mul(target, F.logsigmoid(input)), O.mul(O.rsub(target, 1.0), F.logsigmoid(O.neg(input)))))
    if weight is not None:
        loss = O.mul(loss, weight)
    class_dim = input.ndim - 1
    return F._reduce(O.div(O.sum(loss, class_dim), input.shape[class_dim]), reduction)


@float32_policy
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: for each target class ``j`` (the leading non-negative entries of a
    ``target`` row) and each non-target class ``i``, ``max(0, 1 - (x[j] - x[i]))``, summed and
    divided by the number of classes."""
    reduction = F._reduction(size_average, reduce, reduction)
    x = _as_matrix(input)
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    _check_long(target)
    n, c = x.shape
    t = O.reshape(target, n, c)
    # a row's targets end at its first negative entry
    listed = O.eq(O.cumsum(O.to(O.lt(t, 0), D.int64), 1), 0)
    if F._concrete(target) and t.numel() and bool(O.any(O.logical_or(O.lt(t, -1), O.ge(t, c)))):
        raise RuntimeError("argument #2 'target' is out of range")
    safe = O.where(listed, t, 0)
    hits = O.logical_and(O.eq(O.unsqueeze(safe, 2), _class_positions(c, O.unsqueeze(x, 1))), O.unsqueeze(listed, 2))
    is_target = O.any(hits, 1)                                                   # (N, C)
    z = O.add(O.rsub(O.unsqueeze(O.gather(x, 1, safe), 2), 1.0), O.unsqueeze(x, 1))  # (N, K, C)
    counted = O.logical_and(O.logical_and(O.unsqueeze(listed, 2), O.unsqueeze(O.logical_not(is_target), 1)),
                            O.gt(z, 0))
    loss = O.div(O.sum(O.where(counted, z, 0.0), (1, 2)), c)
    out = O.reshape(loss, target.shape[:-1] if target.ndim else ()) if reduction == "none" \
        else F._reduce(loss, reduction)
    return named(out, "MultilabelMarginLossBackward0")
