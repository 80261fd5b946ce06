"""The exponential distribution ``Exponential(rate)``."""
from __future__ import annotations

from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise

__all__ = ["Exponential"]


class Exponential(_Elementwise):
    """Density ``rate * exp(-rate * x)`` on ``x >= 0``."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._init_params((rate,), validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return self.rate * 0

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=Size()):
        """``-log(1 - u) / rate`` with ``u`` uniform on ``[0, 1)``."""
        return -(-self._uniform(sample_shape)).log1p() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()
