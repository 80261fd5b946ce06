"""The Laplace distribution ``Laplace(loc, scale)``."""
from __future__ import annotations

from ..runtime.tensor import Size
from . import constraints
from ._simple import _Elementwise

__all__ = ["Laplace"]


class Laplace(_Elementwise):
    """Density ``exp(-|x - loc| / scale) / (2 scale)``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=Size()):
        """``loc - scale * sign(u) * log(1 - |u|)`` with ``u`` uniform on ``(-1, 1)``."""
        eps = float(self._finfo().eps)
        u = self._uniform(sample_shape, eps - 1, 1.0)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()
