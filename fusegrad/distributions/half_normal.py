"""The half-normal distribution ``HalfNormal(scale)``: ``|X|`` for ``X ~ Normal(0, scale)``
(PyTorch's ``TransformedDistribution``, implemented directly with its values)."""
from __future__ import annotations

import math

from ..runtime.tensor import Size
from . import constraints
from .folded import Folded
from ._simple import _Elementwise
from .normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(Folded, _Elementwise):
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
