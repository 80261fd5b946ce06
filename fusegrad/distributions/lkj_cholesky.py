"""The LKJ distribution over lower Cholesky factors of correlation matrices
(``LKJCholesky(dim, concentration)``), after NumPyro's and PyTorch's: ``L L^T`` has density
proportional to ``det(L L^T) ^ (concentration - 1)``. Samples come from the onion method of
Lewandowski, Kurowicka and Joe (2009), Section 3.2, vectorized over the rows."""
from __future__ import annotations

import math

import numpy as np

from ..runtime import factory
from ..runtime import ops as O
from ..runtime.linalg import diag_embed, diagonal, vector_norm
from ..runtime.tensor import Size
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """Cholesky factors ``L`` of ``dim x dim`` correlation matrices; ``concentration == 1`` is
    uniform over correlation matrices ``L L^T``."""
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.shape
        # the beta draws of Sec. 3.2 of the paper, one per row (the first row's is unused): row
        # k > 0 has squared off-diagonal norm ~ Beta(k / 2, concentration + (dim - 1 - k) / 2).
        # (PyTorch 2.13 has k - 1/2 for k / 2, which skews the rows past the second for dim >= 3;
        # NumPyro, which it follows, has k / 2.)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = factory.arange(self.dim - 1, dtype=self.concentration.dtype)
        offset = O.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = 0.5 * offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, Size((dim, dim)), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        return self._expanded(new, batch_shape)

    def sample(self, sample_shape=Size()):
        """The onion method: row ``i`` is ``sqrt(y_i) u_i`` off the diagonal with ``y_i`` beta and
        ``u_i`` uniform on the unit sphere of its ``i`` entries, and the diagonal makes its norm 1."""
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u_normal = factory.randn(self._extended_shape(sample_shape), dtype=y.dtype).tril(-1)
        rest = u_normal[..., 1:, :]  # the first row is all zero: its direction is left zero
        u_hypersphere = O.cat([u_normal[..., :1, :], rest / vector_norm(rest, dim=-1, keepdim=True)], -2)
        w = y.sqrt() * u_hypersphere
        tiny = float(np.finfo(w._data.dtype).tiny)
        diag_elems = O.clamp(1 - (w * w).sum(-1), min=tiny).sqrt()
        return (w + diag_embed(diag_elems)).detach()

    def log_prob(self, value):
        # the density of L is proportional to prod_i L_ii ^ (2 (concentration - 1) + dim - i)
        # (the correlation matrix's det ^ (concentration - 1) times the Jacobian of L -> L L^T)
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = diagonal(value, 0, -2, -1)[..., 1:]
        order = factory.arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        # the normalization constant (page 1999 of the paper)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = alpha.lgamma() * dm1
        numerator = (alpha - 0.5).mvlgamma(dm1)
        # the paper's pi term is D (D - 1) / 4 log(pi); mvlgamma's is (D - 1) (D - 2) / 4 log(pi)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
