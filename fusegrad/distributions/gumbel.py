"""The Gumbel distribution ``Gumbel(loc, scale)`` (PyTorch's transformed uniform)."""
from __future__ import annotations

import math

from ..runtime.tensor import Size
from . import constraints
from ._sampling import EULER
from ._simple import _Elementwise

__all__ = ["Gumbel"]


class Gumbel(_Elementwise):
    """CDF ``exp(-exp(-(x - loc) / scale))``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init_params((loc, scale), validate_args)

    @property
    def mean(self):
        return self.loc + self.scale * EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()):
        """``loc - scale * log(-log(u))`` with ``u`` uniform on ``[tiny, 1 - eps)``."""
        fi = self._finfo()
        u = self._uniform(sample_shape, float(fi.tiny), 1 - float(fi.eps))
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + EULER)
