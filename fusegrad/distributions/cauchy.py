"""The Cauchy distribution ``Cauchy(loc, scale)``."""
from __future__ import annotations

import math

from ..runtime import factory
from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise

__all__ = ["Cauchy"]


class Cauchy(_Elementwise):
    """Density ``1 / (pi scale (1 + ((x - loc) / scale)^2))``; no mean or variance."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def mean(self):
        return factory.full(self._extended_shape(), float("nan"), dtype=self.loc.dtype)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return factory.full(self._extended_shape(), float("inf"), dtype=self.loc.dtype)

    def rsample(self, sample_shape=Size()):
        """``loc + scale * tan(pi (u - 1/2))`` with ``u`` uniform."""
        eps = (math.pi * (self._uniform(sample_shape) - 0.5)).tan()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
