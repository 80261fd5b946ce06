"""The half-Cauchy distribution ``HalfCauchy(scale)``: ``|X|`` for ``X ~ Cauchy(0, scale)``."""
from __future__ import annotations

import math

from ..runtime import factory
from . import constraints
from .folded import Folded
from .cauchy import Cauchy
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfCauchy"]


class HalfCauchy(Folded, TransformedDistribution):
    """Density ``2 / (pi * scale * (1 + (x / scale) ** 2))`` on ``x >= 0``."""
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mean(self):
        return factory.full(self._extended_shape(), math.inf, dtype=self.scale.dtype)

    @property
    def mode(self):
        return factory.zeros_like(self.scale)

    @property
    def variance(self):
        return self.base_dist.variance
