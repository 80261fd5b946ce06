"""The Bernoulli distribution, parameterized by ``probs`` or ``logits``."""
from __future__ import annotations

from numbers import Number

from ..nn import functional as F
from ..runtime import factory
from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import BinaryProbs, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(BinaryProbs, Distribution):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        self._param = param
        super().__init__(Size() if is_scalar else param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return O.where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            u = factory.rand(shape, dtype=self.probs.dtype)
            return (u < self.probs.expand(shape)).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = O.broadcast_tensors(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = factory.arange(2, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
