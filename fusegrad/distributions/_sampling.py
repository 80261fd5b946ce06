"""Draws that fusegrad's random primitives do not have (gamma, Poisson, binomial), taken
with NumPy from a ``numpy.random.Generator`` seeded by fusegrad's default generator: the
draws follow ``fusegrad.manual_seed`` and advance the generator as any draw does. They run
eagerly (a compiled function breaks its graph there). The implicit reparameterization
gradient of the standard gamma draw makes ``Gamma.rsample`` differentiable."""
from __future__ import annotations

import math

import numpy as np
from scipy import special as sps

from ..autograd.function import Function
from ..runtime.extra_ops import poisson
from ..runtime.factory import numpy_rng
from ..runtime.tensor import Tensor, wrap

__all__ = ["numpy_rng", "standard_gamma", "standard_gamma_grad", "poisson", "binomial"]


def _concrete(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def standard_gamma_grad(alpha: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``dx/dalpha`` of a standard gamma draw ``x`` at fixed CDF (implicit
    reparameterization): ``-(dP(alpha, x)/dalpha) / pdf(x)``, the derivative of the
    regularized incomplete gamma function taken by a central difference of the log of
    whichever tail is smaller (so the ratio to the density stays accurate)."""
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        lower = sps.gammainc(alpha, x) <= 0.5

        def log_tail(a):
            return np.log(np.where(lower, sps.gammainc(a, x), sps.gammaincc(a, x)))

        h = 1e-5 * alpha
        dlog = (log_tail(alpha + h) - log_tail(alpha - h)) / (2 * h)
        log_pdf = (alpha - 1) * np.log(x) - x - sps.gammaln(alpha)
        ratio = np.exp(log_tail(alpha) - log_pdf) * dlog
        out = np.where(lower, -ratio, ratio)
    return np.where(np.isfinite(out), out, 0.0)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, alpha):
        a = _concrete(alpha)
        x = numpy_rng(a.size).standard_gamma(a).astype(a.dtype, copy=False)
        x = np.maximum(x, np.finfo(a.dtype).tiny)
        out = wrap(np.ascontiguousarray(x.reshape(a.shape)))
        ctx.save_for_backward(alpha, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        g = standard_gamma_grad(_concrete(alpha), _concrete(x)).astype(_concrete(x).dtype)
        return grad * wrap(np.ascontiguousarray(g))


def standard_gamma(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) draws of ``alpha``'s shape, differentiable in ``alpha``."""
    return _StandardGamma.apply(alpha)


def binomial(count: Tensor, probs: Tensor) -> Tensor:
    n, p = np.broadcast_arrays(_concrete(count), _concrete(probs))
    out = numpy_rng(p.size).binomial(n.astype(np.int64), np.clip(p, 0.0, 1.0))
    return wrap(np.ascontiguousarray(out.astype(p.dtype).reshape(p.shape)))


EULER = 0.57721566490153286060
LOG_PI = math.log(math.pi)
