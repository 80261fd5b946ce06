"""Student's t distribution ``StudentT(df, loc=0, scale=1)``."""
from __future__ import annotations

import math

from ..runtime import ops as O
from ..runtime import factory
from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise
from .gamma import Chi2

__all__ = ["StudentT"]


class StudentT(_Elementwise):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("df", "loc", "scale")

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._init_params((df, loc, scale), validate_args)

    @property
    def mean(self):
        return O.where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        m = self.scale.pow(2) * self.df / (self.df - 2)
        m = O.where(self.df > 2, m, math.inf)
        return O.where(self.df <= 1, math.nan, m)

    def rsample(self, sample_shape=Size()):
        """``loc + scale * X / sqrt(Z / df)``: ``X`` standard normal, ``Z ~ Chi2(df)``."""
        shape = self._extended_shape(sample_shape)
        x = factory.randn(shape, dtype=self.df.dtype)
        z = Chi2(self.df, validate_args=False).rsample(sample_shape)
        y = x * (z / self.df).rsqrt()
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + (0.5 * self.df).lgamma() - (0.5 * (self.df + 1.0)).lgamma())
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self):
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
                + 0.5 * self.df.log() + lbeta)
