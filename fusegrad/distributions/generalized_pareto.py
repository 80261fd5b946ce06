"""The generalized Pareto distribution ``GeneralizedPareto(loc, scale, concentration)``:
exponential tails at ``concentration = 0``, heavy above it, bounded below it."""
from __future__ import annotations

import math

from ..runtime import factory
from ..runtime import ops as O
from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise

__all__ = ["GeneralizedPareto"]


def _isclose_zero(t):
    # torch.isclose(t, 0) with its default tolerances: |t| <= 1e-8.
    return t.abs() <= 1e-8


class GeneralizedPareto(_Elementwise):
    """Survival ``(1 + c z) ** (-1 / c)`` with ``z = (x - loc) / scale``, ``c = concentration``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True
    _params = ("loc", "scale", "concentration")

    def __init__(self, loc, scale, concentration, validate_args=None):
        self._init_params((loc, scale, concentration), validate_args)

    def _safe_concentration(self):
        """The concentration with zeros replaced by one (the zero case takes another branch)."""
        eq_zero = _isclose_zero(self.concentration)
        return eq_zero, O.where(eq_zero, 1.0, self.concentration)

    def rsample(self, sample_shape=Size()):
        return self.icdf(self._uniform(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + factory.ones_like(z)
        where_nonzero = O.where(y == 0, y, y * (safe_conc * z).log1p())
        return -self.scale.log() - O.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe_concentration()
        return O.where(eq_zero, -z, -(safe_conc * z).log1p() / safe_conc)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        eq_zero, safe_conc = self._safe_concentration()
        logu = (-value).log1p()
        where_nonzero = self.loc + self.scale / safe_conc * (-safe_conc * logu).expm1()
        return O.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = O.where(valid, self.concentration, 0.5)
        return O.where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = O.where(valid, self.concentration, 0.25)
        return O.where(valid, self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc)), math.nan)

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).expand(self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = O.where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
