"""The log-normal distribution ``LogNormal(loc, scale)``: ``exp`` of ``Normal(loc, scale)``
(PyTorch's ``TransformedDistribution``, implemented directly with its values)."""
from __future__ import annotations

from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise
from .normal import Normal

__all__ = ["LogNormal"]


class LogNormal(_Elementwise):
    """``exp(X)`` for ``X ~ Normal(loc, scale)``; ``base_dist`` is that normal."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def base_dist(self):
        return Normal(self.loc, self.scale, validate_args=False)

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.pow(2)).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape).exp()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        x = value.log()
        return self.base_dist.log_prob(x) - x

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.base_dist.cdf(value.log())

    def icdf(self, value):
        return self.base_dist.icdf(value).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
