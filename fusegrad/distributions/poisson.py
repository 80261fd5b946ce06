"""The Poisson distribution ``Poisson(rate)``."""
from __future__ import annotations

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size
from ..special import xlogy
from . import constraints
from ._sampling import poisson
from ._simple import _Elementwise

__all__ = ["Poisson"]


class Poisson(_Elementwise):
    """``P(k) = rate^k exp(-rate) / k!`` on the nonnegative integers."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer
    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._init_params((rate,), validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        with no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return xlogy(value, self.rate) - self.rate - (value + 1).lgamma()
