"""The beta distribution ``Beta(concentration1, concentration0)`` on ``[0, 1]``."""
from __future__ import annotations

from ..runtime import ops as O
from ..runtime.tensor import Size
from ..special import xlogy
from . import constraints
from ._sampling import standard_gamma
from ._simple import _Elementwise
from .dirichlet import Dirichlet

__all__ = ["Beta"]


class Beta(_Elementwise):
    """Density ``x^(a-1) (1-x)^(b-1) / B(a, b)`` with ``a = concentration1``,
    ``b = concentration0``; ``rsample`` is ``Ga / (Ga + Gb)`` of two implicitly
    reparameterized gamma draws."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True
    _params = ("concentration1", "concentration0")

    def __init__(self, concentration1, concentration0, validate_args=None):
        self._init_params((concentration1, concentration0), validate_args)

    @property
    def concentration(self):
        return O.stack([self.concentration1, self.concentration0], -1)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        """The Dirichlet's mode of (a, b), as PyTorch's: a concentration below 1 puts it at 0 or 1."""
        return Dirichlet(self.concentration).mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(tuple(shape) + (2,)))
        x = g[..., 0] / g.sum(-1)
        fi = self._finfo()
        return x.clamp(min=float(fi.tiny), max=1 - float(fi.eps))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (xlogy(a - 1.0, value) + xlogy(b - 1.0, 1.0 - value)
                + (a + b).lgamma() - a.lgamma() - b.lgamma())

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        a0 = a + b
        return (a.lgamma() + b.lgamma() - a0.lgamma() - (2 - a0) * a0.digamma()
                - (a - 1.0) * a.digamma() - (b - 1.0) * b.digamma())
