"""Helpers shared by the distributions, as ``torch.distributions.utils`` has them."""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..ir import dtypes as D
from ..nn import functional as F
from ..runtime import ops as O
from ..runtime.tensor import Tensor

__all__ = ["broadcast_all", "lazy_property", "logits_to_probs", "probs_to_logits", "clamp_probs", "sum_rightmost",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]


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
    """``value`` summed over its rightmost ``dim`` dimensions (all of them when it has fewer:
    a Wishart's scalar natural parameter in the exponential-family KL, as PyTorch's reshape)."""
    if dim == 0:
        return value
    return O.sum(value, tuple(range(-min(dim, value.ndim), 0)))


def _tril_flat_index(n: int, diag: int) -> np.ndarray:
    """Positions in a flattened ``n x n`` matrix of its entries on and below diagonal ``diag``,
    in row order (PyTorch's ``arange < arange.view(-1, 1) + diag + 1`` mask)."""
    rows, cols = np.tril_indices(n, diag)
    return rows * n + cols


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of ``mat`` (``... x D x D``) on and below diagonal ``diag``, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return O.index_select(flat, -1, O.as_t(_tril_flat_index(n, diag)))


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The ``D x D`` lower-triangular matrices (below diagonal ``diag``) whose entries, in row
    order, are the last dimension of ``vec``; zero elsewhere."""
    m = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > float(np.finfo(vec._data.dtype).eps):
        raise ValueError(f"The size of last dimension is {m} which cannot be expressed as "
                         "the lower triangular part of a square D x D matrix.")
    n = round(n)
    where = np.full(n * n, m, dtype=np.int64)  # index m: a zero appended to vec
    where[_tril_flat_index(n, diag)] = np.arange(m)
    padded = O.cat([vec, vec.new_zeros(tuple(vec.shape[:-1]) + (1,))], -1)
    mat = O.index_select(padded, -1, O.as_t(where))
    return mat.reshape(tuple(vec.shape[:-1]) + (n, n))
