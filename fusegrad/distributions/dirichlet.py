"""The Dirichlet distribution ``Dirichlet(concentration)`` over the probability simplex."""
from __future__ import annotations

import numpy as np

from ..nn import functional as F
from ..runtime import ops as O
from ..runtime.tensor import Size
from ..special import xlogy
from . import constraints
from ._sampling import standard_gamma
from .distribution import Distribution

__all__ = ["Dirichlet"]


class Dirichlet(Distribution):
    """Density ``prod x_i^(c_i - 1) / B(c)`` on the simplex; ``rsample`` normalizes
    independent ``Gamma(c_i, 1)`` draws (each implicitly reparameterized)."""
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        return self._expanded(new, batch_shape)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(shape))
        x = g / g.sum(-1, keepdim=True)
        fi = np.finfo(self.concentration._data.dtype)
        return x.clamp(min=float(fi.tiny), max=1 - float(fi.eps))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        concm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concm1 / concm1.sum(-1, keepdim=True)
        mask = O.all(self.concentration < 1, -1, keepdim=True)
        k = self.event_shape[-1]
        one_hot = F.one_hot(mode.argmax(-1), k).to(mode.dtype)  # (PyTorch's: of the NaN 0/0 modes, the first)
        return O.where(mask, one_hot, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.size(-1)
        a0 = c.sum(-1)
        return c.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - ((c - 1.0) * c.digamma()).sum(-1)
