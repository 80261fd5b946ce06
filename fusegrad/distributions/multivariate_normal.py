"""The multivariate normal distribution, parameterized by a covariance matrix, a precision
matrix or a lower-triangular scale (Cholesky factor) ``scale_tril``."""
from __future__ import annotations

import math

from ..ir.prims.shapes import broadcast_shapes
from ..runtime import factory
from ..runtime.linalg import cholesky, diagonal, solve_triangular
from ..runtime.tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def batch_mahalanobis(scale_tril, x):
    """``x^T (L L^T)^-1 x`` over the last dimension of ``x``: ``|L^-1 x|^2``."""
    y = solve_triangular(scale_tril, x.unsqueeze(-1), upper=False).squeeze(-1)
    return y.pow(2).sum(-1)


def half_log_det(scale_tril):
    """``log det(L L^T) / 2`` = the sum of the logs of ``L``'s diagonal."""
    return diagonal(scale_tril, 0, -2, -1).log().sum(-1)


def _precision_to_scale_tril(p):
    # the lower factor of P^-1 from the Cholesky factor of P with its indices reversed
    lf = cholesky(p.flip((-2, -1)))
    l_inv = lf.flip((-2, -1)).mT
    eye = factory.eye(p.shape[-1], dtype=p.dtype)
    return solve_triangular(l_inv, eye, upper=False)


class ScaleTrilMatrices:
    """``scale_tril`` and ``covariance_matrix`` of a distribution that keeps its scale as the
    lower Cholesky factor ``_unbroadcasted_scale_tril``, broadcast to ``_matrix_shape()``;
    made from the one matrix it was given (``_keep_matrix`` before the parameters are
    validated, ``_factor`` after)."""

    def _keep_matrix(self, scale_tril, covariance_matrix, precision_matrix, batch_shape) -> None:
        full = tuple(batch_shape) + (-1, -1)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(full)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(full)
        else:
            self.precision_matrix = precision_matrix.expand(full)

    def _factor(self, scale_tril, covariance_matrix, precision_matrix) -> None:
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        lo = self._unbroadcasted_scale_tril
        return (lo @ lo.mT).expand(self._matrix_shape())


class MultivariateNormal(ScaleTrilMatrices, Distribution):
    """Normal distribution over vectors with mean ``loc`` and covariance ``L L^T``."""
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        if matrix.dim() < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix matrix must be at least "
                             "two-dimensional, with optional leading batch dimensions")
        batch_shape = broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        self._keep_matrix(scale_tril, covariance_matrix, precision_matrix, batch_shape)
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        self._factor(scale_tril, covariance_matrix, precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        return self._expanded(new, batch_shape)

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def precision_matrix(self):
        eye = factory.eye(self._event_shape[0], dtype=self.loc.dtype)
        l_inv = solve_triangular(self._unbroadcasted_scale_tril, eye, upper=False)
        return (l_inv.mT @ l_inv).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) +
                                                                     tuple(self._event_shape))

    def rsample(self, sample_shape=Size()):
        """``loc + L eps`` with standard normal ``eps``: differentiable in ``loc`` and ``L``."""
        eps = factory.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det(self._unbroadcasted_scale_tril)
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
