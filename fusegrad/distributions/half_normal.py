"""The half-normal distribution ``HalfNormal(scale)``: ``|X|`` for ``X ~ Normal(0, scale)``
(PyTorch's ``TransformedDistribution``, implemented directly with its values)."""
from __future__ import annotations

import math

from ..runtime import ops as O
from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(_Elementwise):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _params = ("scale",)

    def __init__(self, scale, validate_args=None):
        self._init_params((scale,), validate_args)

    @property
    def base_dist(self):
        return Normal(self.scale * 0, self.scale, validate_args=False)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return self.scale * 0

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return O.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)
