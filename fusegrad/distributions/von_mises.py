"""The von Mises distribution ``VonMises(loc, concentration)`` over angles (radians, taken
modulo ``2 pi``), sampled by Best and Fisher's rejection method in float64."""
from __future__ import annotations

import math

from ..ir import dtypes as D
from ..runtime import factory
from ..runtime import ops as O
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size
from ..special import i0e, i1e
from . import constraints
from ._simple import _Elementwise
from .utils import lazy_property

__all__ = ["VonMises"]


def _log_modified_bessel_fn(x, order: int = 0):
    """``log I_order(x)`` for ``x > 0`` from the exponentially scaled Bessel function."""
    return (i0e(x) if order == 0 else i1e(x)).log() + x


class VonMises(_Elementwise):
    """Density ``exp(concentration * cos(x - loc)) / (2 pi I0(concentration))``."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False
    _params = ("loc", "concentration")

    def __init__(self, loc, concentration, validate_args=None):
        self._init_params((loc, concentration), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_modified_bessel_fn(self.concentration, order=0))

    def _proposal_r(self, kappa):
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        return O.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))

    def sample(self, sample_shape=Size()):
        """Rejection sampling in float64 (float32 can stall at small concentrations)."""
        with no_grad():
            shape = self._extended_shape(sample_shape)
            loc = self.loc.to(D.float64)
            kappa = self.concentration.to(D.float64)
            proposal_r = self._proposal_r(kappa)
            x = factory.zeros(shape, dtype=D.float64)
            done = factory.zeros(shape, dtype=D.bool_)
            while not bool(done.all()):
                u1, u2, u3 = factory.rand((3,) + tuple(shape), dtype=D.float64).unbind()
                z = (math.pi * u1).cos()
                f = (1 + proposal_r * z) / (proposal_r + z)
                c = kappa * (proposal_r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                x = O.where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
                done = done | accept
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance ``1 - I1(k) / I0(k)``."""
        return 1 - (_log_modified_bessel_fn(self.concentration, order=1)
                    - _log_modified_bessel_fn(self.concentration, order=0)).exp()
