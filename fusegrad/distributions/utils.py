"""Helpers shared by the distributions, as ``torch.distributions.utils`` has them."""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..ir import dtypes as D
from ..nn import functional as F
from ..runtime import ops as O
from ..runtime.tensor import Tensor

__all__ = ["broadcast_all", "lazy_property", "logits_to_probs", "probs_to_logits", "clamp_probs", "sum_rightmost"]


def broadcast_all(*values) -> tuple:
    """``values`` (tensors and numbers) as tensors of one broadcast shape; numbers take the
    first tensor's dtype, or the default dtype when there is none."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or fusegrad.Tensor.")
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else D.get_default_dtype()
    ts = [v if isinstance(v, Tensor) else O.as_t(float(v), dtype=dtype) for v in values]
    return tuple(O.broadcast_tensors(*ts))


def tensor_like(value, like: Tensor) -> Tensor:
    """``value`` as a tensor: itself if it is one, else a scalar of ``like``'s dtype."""
    return value if isinstance(value, Tensor) else O.as_t(float(value), dtype=like.dtype)


class lazy_property:
    """A property computed on first access and then stored on the instance (so ``probs``
    and ``logits`` each come from whichever one a distribution was built with)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None) -> Any:
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class BinaryProbs:
    """``probs`` and ``logits`` of a distribution over the outcomes of 0/1 trials (Bernoulli,
    Binomial, Geometric): whichever it was built with, the other computed from it."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` kept at least machine epsilon away from 0 and 1 (finite logits)."""
    eps = float(np.finfo(probs._data.dtype).eps)
    return O.clamp(probs, min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    ps = clamp_probs(probs)
    return O.log(ps) - O.log1p(-ps) if is_binary else O.log(ps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    return O.sigmoid(logits) if is_binary else F.softmax(logits, dim=-1)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its rightmost ``dim`` dimensions."""
    if dim == 0:
        return value
    return O.sum(value, tuple(range(-dim, 0)))
