"""The Wishart distribution ``Wishart(df, covariance_matrix | precision_matrix | scale_tril)``
over positive-definite matrices, as PyTorch has it: the distribution of ``X^T X`` for ``df``
rows ``X`` of a zero-mean multivariate normal with that covariance. ``rsample`` uses the
Bartlett decomposition (chi-squared diagonal, standard normal lower triangle), so samples
differentiate in ``df`` (implicitly, through the chi-squared draws) and in the scale."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..ir.prims.shapes import broadcast_shapes
from ..runtime import factory
from ..runtime import ops as O
from ..runtime.linalg import diag_embed, diagonal, slogdet
from ..runtime.linalg_extras import cholesky_solve
from ..runtime.tensor import Size
from . import constraints
from .distribution import _all_true
from .exp_family import ExponentialFamily
from .gamma import Chi2
from .multivariate_normal import ScaleTrilMatrices
from .utils import lazy_property, vec_to_tril_matrix

__all__ = ["Wishart"]

_log_2 = math.log(2)


def _mvdigamma(x, p: int):
    """The multivariate digamma of dimension ``p``: ``sum_i digamma(x - i / 2)``."""
    if not _all_true(x > (p - 1) / 2):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    return (x.unsqueeze(-1) - factory.arange(p, dtype=x.dtype) / 2).digamma().sum(-1)


def _in_one_graph_trace() -> bool:
    from ..tracer.trace import capture_trace
    tr = capture_trace()
    return tr is not None and getattr(tr, "one_graph", False)


def _any(cond) -> bool:
    """Whether ``cond`` holds anywhere; inside a compiled trace that must stay one graph, a
    traced ``cond`` counts as False (the check is left out, as ``Distribution``'s validation
    does there), elsewhere reading it is a graph break."""
    return not _all_true(~cond)


class Wishart(ScaleTrilMatrices, ExponentialFamily):
    """Density ``|X|^((df - p - 1) / 2) exp(-tr(S^-1 X) / 2) / (2^(df p / 2) |S|^(df / 2)
    Gamma_p(df / 2))`` over ``p x p`` positive-definite ``X``, with ``S = L L^T`` given as a
    covariance matrix, a precision matrix ``S^-1`` or ``scale_tril = L``; ``df > p - 1``."""
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = Size(param.shape[:-2])
            self.df = O.as_t(float(df), dtype=param.dtype)
        else:
            batch_shape = Size(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(batch_shape)
        event_shape = Size(param.shape[-2:])
        p = event_shape[-1]
        if _any(self.df <= p - 1):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        self._keep_matrix(scale_tril, covariance_matrix, precision_matrix, batch_shape)
        if _any(self.df < p):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for "
                          "ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._factor(scale_tril, covariance_matrix, precision_matrix)
        self._dist_chi2 = self._chi2()

    def _chi2(self):
        """The chi-squared laws of the Bartlett factor's squared diagonal: ``df - i``, ``i < p``."""
        p = self._event_shape[-1]
        offsets = factory.arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        return Chi2(self.df.unsqueeze(-1) - offsets.expand(tuple(self._batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        self._expanded(new, batch_shape)
        new._dist_chi2 = new._chi2()
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def precision_matrix(self):
        eye = factory.eye(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        return cholesky_solve(eye, self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    def _df_matrix(self, df=None):
        """``df`` (default ``self.df``) shaped to scale the batch's matrices. A number ``df``
        stays a 0-d tensor (as in PyTorch) and is broadcast here, where PyTorch's ``view``
        fails for a batched scale."""
        df = self.df if df is None else df
        return df.expand(self._batch_shape).reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        """``(df - p - 1) S``, NaN where ``df <= p + 1``."""
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = O.where(factor <= 0, O.as_t(float("nan"), dtype=factor.dtype), factor)
        return self._df_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag_v = diagonal(v, 0, -2, -1)
        return self._df_matrix() * (v.pow(2) + diag_v.unsqueeze(-1) * diag_v.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=Size()):
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        eps = float(np.finfo(chi._data.dtype).eps)
        normal = factory.randn(tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,), dtype=chi.dtype)
        noise = diag_embed(O.clamp(chi, min=eps)) + vec_to_tril_matrix(normal, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def _singular(self, sample, sample_shape):
        """Per sample index: whether any matrix of its batch is not positive definite."""
        bad = ~self.support.check(sample)
        return bad.reshape(tuple(sample_shape) + (-1,)).any(-1)

    def rsample(self, sample_shape=Size(), max_try_correction=None):
        """``(L A)(L A)^T`` with the Bartlett factor ``A``. Samples that come out singular
        (likely for ``df`` near ``p - 1``) are drawn again, up to ``max_try_correction`` times
        (10), with a warning; they may still be singular then (``log_prob`` -inf)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        if _in_one_graph_trace():
            return sample
        is_singular = self._singular(sample, sample_shape)
        if bool(is_singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            trailing = (1,) * (len(self._batch_shape) + 2)
            for _ in range(max_try_correction):
                redraw = self._bartlett_sampling(sample_shape)
                sample = O.where(is_singular.reshape(tuple(sample_shape) + trailing), redraw, sample)
                is_singular = self._singular(sample, sample_shape)
                if not bool(is_singular.any()):
                    break
        return sample

    def _half_log_det_scale(self):
        p = self._event_shape[-1]
        return p * _log_2 / 2 + diagonal(self._unbroadcasted_scale_tril, 0, -2, -1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        trace = diagonal(cholesky_solve(value, self._unbroadcasted_scale_tril), 0, -2, -1).sum(-1)
        return (-nu * self._half_log_det_scale() - (nu / 2).mvlgamma(p)
                + (nu - p - 1) / 2 * slogdet(value)[1] - trace / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        return ((p + 1) * self._half_log_det_scale() + (nu / 2).mvlgamma(p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x)[1] + _log_2 * p) + (y + (p + 1) / 2).mvlgamma(p)
