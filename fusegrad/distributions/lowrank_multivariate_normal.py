"""``LowRankMultivariateNormal``: a multivariate normal with covariance
``cov_factor @ cov_factor.T + diag(cov_diag)``, evaluated through the small "capacitance"
matrix ``I + W^T D^-1 W`` (Woodbury identity, matrix determinant lemma)."""
from __future__ import annotations

import math

from ..runtime import factory
from ..runtime import ops as O
from ..runtime.linalg import cholesky, diag_embed, diagonal, solve_triangular
from ..runtime.tensor import Size
from . import constraints
from .distribution import Distribution
from .multivariate_normal import batch_mahalanobis
from .utils import lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _batch_mv(mat, vec):
    return (mat @ vec.unsqueeze(-1)).squeeze(-1)


def _plus_identity(k):
    return k + factory.eye(k.shape[-1], dtype=k.dtype)


def _batch_capacitance_tril(w, d):
    """Cholesky factor of ``I + W^T D^-1 W``."""
    wt_dinv = w.mT / d.unsqueeze(-2)
    return cholesky(_plus_identity(wt_dinv @ w))


def _batch_lowrank_logdet(w, d, capacitance_tril):
    """``log|W W^T + D| = log|C| + log|D|``."""
    return 2 * diagonal(capacitance_tril, 0, -2, -1).log().sum(-1) + d.log().sum(-1)


def _batch_lowrank_mahalanobis(w, d, x, capacitance_tril):
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    wt_dinv_x = _batch_mv(w.mT / d.unsqueeze(-2), x)
    return (x.pow(2) / d).sum(-1) - batch_mahalanobis(capacitance_tril, wt_dinv_x)


class LowRankMultivariateNormal(Distribution):
    """Normal over vectors with mean ``loc`` and covariance ``W W^T + diag(cov_diag)``."""
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {tuple(event_shape)}")
        try:
            loc_, self.cov_factor, cov_diag_ = O.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                   cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor "
                             f"{tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / d_sqrt
        scale_tril = d_sqrt * cholesky(_plus_identity(dinvsqrt_w @ dinvsqrt_w.mT))
        return scale_tril.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        w = self._unbroadcasted_cov_factor
        cov = w @ w.mT + diag_embed(self._unbroadcasted_cov_diag)
        return cov.expand(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self):
        wt_dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        a = solve_triangular(self._capacitance_tril, wt_dinv, upper=False)
        precision = diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - a.mT @ a
        return precision.expand(self._batch_shape + self._event_shape + self._event_shape)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        w_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_w = factory.randn(w_shape, dtype=self.loc.dtype)
        eps_d = factory.randn(shape, dtype=self.loc.dtype)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                     self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                       value - self.loc, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + m)

    def entropy(self):
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h.expand(self._batch_shape) if len(self._batch_shape) else h
