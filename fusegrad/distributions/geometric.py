"""The geometric distribution ``Geometric(probs | logits)``: failures before the first success."""
from __future__ import annotations

from numbers import Number

import numpy as np

from ..nn import functional as F
from ..runtime import factory
from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import BinaryProbs, broadcast_all

__all__ = ["Geometric"]


class Geometric(BinaryProbs, Distribution):
    """``P(k) = (1 - p)^k p`` for ``k = 0, 1, ...``."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param, is_scalar = self.probs, isinstance(probs, Number)
        else:
            (self.logits,) = broadcast_all(logits)
            param, is_scalar = self.logits, isinstance(logits, Number)
        super().__init__(Size() if is_scalar else param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Expected parameter probs ({type(self.probs).__name__} of shape "
                             f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but found "
                             f"invalid values:\n{self.probs}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return self.probs * 0

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            tiny = float(np.finfo(self.probs._data.dtype).tiny)
            u = factory.rand(shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = O.broadcast_tensors(value, self.probs)
        probs = O.where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs
