"""The Fisher-Snedecor (F) distribution ``FisherSnedecor(df1, df2)``: the ratio of two
scaled chi-square draws, reparameterized through their gamma draws."""
from __future__ import annotations

import math

from ..runtime import ops as O
from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise
from .gamma import Gamma

__all__ = ["FisherSnedecor"]


class FisherSnedecor(_Elementwise):
    """``(X1 / df1) / (X2 / df2)`` for ``Xi ~ Chi2(dfi)``."""
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True
    _params = ("df1", "df2")

    def __init__(self, df1, df2, validate_args=None):
        self._init_params((df1, df2), validate_args)

    @property
    def _gamma1(self):
        return Gamma(self.df1 * 0.5, self.df1, validate_args=False)

    @property
    def _gamma2(self):
        return Gamma(self.df2 * 0.5, self.df2, validate_args=False)

    @property
    def mean(self):
        return O.where(self.df2 <= 2, math.nan, self.df2 / (self.df2 - 2))

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return O.where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self):
        df1, df2 = self.df1, self.df2
        var = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return O.where(df2 <= 4, math.nan, var)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        tiny = float(self._finfo().tiny)
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2, ct3 = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
