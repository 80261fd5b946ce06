"""The negative binomial distribution ``NegativeBinomial(total_count, probs | logits)``: the
number of successes before ``total_count`` failures of Bernoulli(probs) trials."""
from __future__ import annotations

from ..nn import functional as F
from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size
from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .poisson import Poisson
from .utils import BinaryProbs, broadcast_all

__all__ = ["NegativeBinomial"]


class NegativeBinomial(BinaryProbs, Distribution):
    """Probability of ``k`` ``C(k + r - 1, k) p^k (1 - p)^r`` with ``r = total_count``."""
    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)
        return self._expanded(new, batch_shape)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / O.sigmoid(-self.logits)

    def sample(self, sample_shape=Size()):
        # A Gamma-Poisson mixture.
        with no_grad():
            rate = Gamma(self.total_count, (-self.logits).exp(), validate_args=False).sample(sample_shape)
            return Poisson(rate, validate_args=False).sample()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        log_normalization = (-(self.total_count + value).lgamma() + (1.0 + value).lgamma()
                             + self.total_count.lgamma())
        # The zero-count, zero-failure case has probability one.
        log_normalization = O.where(self.total_count + value == 0.0, 0.0, log_normalization)
        return log_unnormalized_prob - log_normalization
