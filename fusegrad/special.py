"""``torch.special``: PyTorch's special functions with its names, signatures and semantics.

Most are thin wrappers over fusegrad's ops (their gradients, batching and compilation are
those ops'); lgamma, digamma, the Hurwitz zeta, erfinv, erfcx, ndtri, the modified Bessel
functions i0, i0e, i1, i1e, the incomplete gamma functions, the Bessel and Airy functions
and the orthogonal polynomials are primitives (``fusegrad/ir/prims/elementwise.py``),
computed eagerly in NumPy (or SciPy) and without a kernel lowering: a compiled graph
holding one breaks there and runs it eagerly. As in PyTorch, the Bessel and Airy
functions and the polynomials have no derivative (their results have no grad_fn).

This module also declares the top-level ops that PyTorch has as ``torch.X`` and
``Tensor.X``: ``erfinv``, ``lgamma``, ``digamma``, ``polygamma``, ``i0``, ``sinc``,
``igamma`` and ``igammac`` (``fusegrad/__init__.py`` imports it before
``runtime.methods`` binds the methods)."""
from __future__ import annotations

import math

import numpy as np

from .ir import dtypes as D
from .ir.prims import elementwise as E
from .runtime import ops as O
from .runtime.exports import op
from .runtime.keywords import _type_name, write_out
from .runtime.numeric import zero_log
from .runtime.tensor import Tensor

__all__ = ["expit", "logit", "erf", "erfc", "erfcx", "erfinv", "exp2", "expm1", "log1p", "log_softmax", "softmax",
           "logsumexp", "xlogy", "xlog1py", "entr", "sinc", "round", "gammaln", "digamma", "psi", "polygamma",
           "multigammaln", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "zeta", "gammainc", "gammaincc",
           "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "spherical_bessel_j0", "airy_ai", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
           "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


def _out(name, r, out):
    return r if out is None else write_out(name, r, out)


def _ft(x) -> Tensor:
    """``x`` as a floating tensor (integers and bools become the default float dtype)."""
    return O._float(O.as_t(x))


def _unary(prim, name, node_name):
    def fn(input, *, out=None):  # noqa: A002 - PyTorch's names
        return _out(name, O.named(O.bind(prim, (_ft(input),), {}), node_name), out)
    fn.__name__ = name
    fn.__qualname__ = name
    return fn


# ---------------------------------------------------------------- top-level ops (torch.X and Tensor.X)
erfinv = op(_unary(E.erfinv, "erfinv", "ErfinvBackward0"), inplace="method")
lgamma = op(_unary(E.lgamma, "lgamma", "LgammaBackward0"), inplace="method")
digamma = op(_unary(E.digamma, "digamma", "DigammaBackward0"), inplace="method")
i0 = op(_unary(E.i0, "i0", "I0Backward0"), inplace="both")


@op(inplace="method")
def polygamma(n, input, *, out=None):  # noqa: A002
    """The ``n``-th derivative of digamma. As a method, ``x.polygamma(n)``: the operands
    come in the other order (``n`` is an int, ``input`` a tensor)."""
    if isinstance(n, Tensor) and not isinstance(input, Tensor):
        n, input = input, n
    n = int(n)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = _ft(input)
    if n == 0:
        r = O.bind(E.digamma, (x,), {})
    elif n == 1:
        r = E._trigamma(x)
    else:  # (-1)^(n+1) n! zeta(n + 1, x)
        r = O.mul(O.bind(E.zeta, (float(n + 1), x), {}), (1.0 if n % 2 else -1.0) * math.exp(math.lgamma(n + 1.0)))
    return _out("polygamma", O.named(r, "PolygammaBackward0"), out)


@op(inplace="both")
def sinc(input, *, out=None):  # noqa: A002
    """sin(pi x) / (pi x), 1 at 0 (its gradient 0 there)."""
    x = _ft(input)
    zero = O.eq(x, 0)
    px = O.mul(O.where(zero, 1.0, x), math.pi)
    return _out("sinc", O.named(O.where(zero, 1.0, O.div(O.sin(px), px)), "SincBackward0"), out)


def _igamma_operands(name, input, other):  # noqa: A002
    """The operands of igamma/igammac as floating tensors of their result dtype: PyTorch has
    no integer kernel (integer operands are converted only beside a floating one)."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        rt = D.result_type(input, other)
        if not rt.is_floating_point:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_type_name(rt)}'")
    return O.float_pair(input, other)


@op(inplace="method")
def igamma(input, other, *, out=None):  # noqa: A002
    """The regularized lower incomplete gamma function P(input, other) (also
    ``torch.special.gammainc``); differentiable in ``other`` only, as in PyTorch."""
    a, x = _igamma_operands("igamma", input, other)
    return _out("igamma", O.bind(E.gammainc, (a, x), {}), out)


@op(inplace="method")
def igammac(input, other, *, out=None):  # noqa: A002
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other)
    (also ``torch.special.gammaincc``); differentiable in ``other`` only, as in PyTorch."""
    a, x = _igamma_operands("igammac", input, other)
    return _out("igammac", O.bind(E.gammaincc, (a, x), {}), out)


# ---------------------------------------------------------------- torch.special
gammaln = lgamma
psi = digamma
gammainc = igamma
gammaincc = igammac
i0e = _unary(E.i0e, "i0e", "SpecialI0EBackward0")
i1 = _unary(E.i1, "i1", "SpecialI1Backward0")
i1e = _unary(E.i1e, "i1e", "SpecialI1EBackward0")
ndtri = _unary(E.ndtri, "ndtri", "SpecialNdtriBackward0")
erfcx = _unary(E.erfcx, "erfcx", "SpecialErfcxBackward0")


def expit(input, *, out=None):  # noqa: A002
    return _out("expit", O.sigmoid(_ft(input)), out)


def logit(input, eps=None, *, out=None):  # noqa: A002
    return _out("logit", O.logit(_ft(input), eps), out)


def erf(input, *, out=None):  # noqa: A002
    return _out("erf", O.erf(_ft(input)), out)


def erfc(input, *, out=None):  # noqa: A002
    return _out("erfc", O.erfc(_ft(input)), out)


def exp2(input, *, out=None):  # noqa: A002
    return _out("exp2", O.exp2(_ft(input)), out)


def expm1(input, *, out=None):  # noqa: A002
    return _out("expm1", O.expm1(_ft(input)), out)


def log1p(input, *, out=None):  # noqa: A002
    return _out("log1p", O.log1p(_ft(input)), out)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    return O.log_softmax(input, dim, dtype=dtype)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    return O.softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False, *, out=None):  # noqa: A002
    return _out("logsumexp", O.logsumexp(input, dim, keepdim), out)


def xlogy(input, other, *, out=None):  # noqa: A002
    from .runtime.numeric import xlogy as _xlogy
    a, b = O.float_pair(input, other)
    return _out("xlogy", _xlogy(a, b), out)


def xlog1py(input, other, *, out=None):  # noqa: A002
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    x, y = O.float_pair(input, other)
    r = O.mul(x, O.log1p(O.where(zero_log(x, y, -1), 0.0, y)))
    return _out("xlog1py", O.named(O.where(O.isnan(y), y, r), "SpecialXlog1PyBackward0"), out)


def entr(input, *, out=None):  # noqa: A002
    """-x log(x) for x > 0, 0 at 0, -inf below 0 (NaN stays NaN)."""
    x = _ft(input)
    pos = O.gt(x, 0)
    xp = O.where(pos, x, 1.0)
    r = O.neg(O.mul(xp, O.log(xp)))
    r = O.where(pos, r, O.where(O.eq(x, 0), 0.0, O.where(O.isnan(x), math.nan, -math.inf)))
    return _out("entr", O.named(r, "SpecialEntrBackward0"), out)


def round(input, *, decimals=0, out=None):  # noqa: A001,A002
    """Round half to even; ``decimals`` digits after the point (before it when negative)."""
    x = O.as_t(input)
    if decimals == 0:
        return _out("round", O.round(x), out)
    if decimals > 0:
        p = 10.0 ** decimals
        r = O.div(O.round(O.mul(x, p)), p)
    else:
        p = 10.0 ** -decimals
        r = O.mul(O.round(O.div(x, p)), p)
    return _out("round", O.named(r, "RoundBackward1"), out)


def multigammaln(input, p, *, out=None):  # noqa: A002
    """The multivariate log-gamma of dimension ``p``: p(p-1)/4 log(pi) + sum_j lgamma(x - j/2)."""
    x = _ft(input)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if type(x._data) is np.ndarray and bool(np.any(x._data <= (p - 1) / 2)):
        raise RuntimeError("All elements must be greater than (p-1)/2")
    r = None
    for j in range(p):
        t = lgamma(O.sub(x, j / 2.0)) if j else lgamma(x)
        r = t if r is None else O.add(r, t)
    r = O.add(r, p * (p - 1) / 4.0 * math.log(math.pi))
    return _out("multigammaln", O.named(r, "MvlgammaBackward0"), out)


def ndtr(input, *, out=None):  # noqa: A002
    """The standard normal CDF: erfc(-x / sqrt(2)) / 2."""
    r = O.in_float64(_ft(input), lambda x: O.mul(O.erfc_of(O.mul(x, -math.sqrt(0.5))), 0.5))
    return _out("ndtr", O.named(r, "SpecialNdtrBackward0"), out)


def log_ndtr(input, *, out=None):  # noqa: A002
    """log(ndtr(x)), accurate in both tails: log(erfcx(-x/sqrt(2)) / 2) - x^2 / 2 below -1,
    log1p(-erfc(x/sqrt(2)) / 2) above."""
    return _out("log_ndtr", O.named(O.in_float64(_ft(input), _log_ndtr), "SpecialLogNdtrBackward0"), out)


def _log_ndtr(x: Tensor) -> Tensor:
    lo = O.lt(x, -1.0)
    xl = O.where(lo, x, -1.0)
    xh = O.where(lo, -1.0, x)
    left = O.sub(O.log(O.mul(O.bind(E.erfcx, (O.mul(xl, -math.sqrt(0.5)),), {}), 0.5)), O.mul(O.mul(xl, xl), 0.5))
    right = O.log1p(O.mul(O.erfc_of(O.mul(xh, math.sqrt(0.5))), -0.5))
    return O.where(lo, left, right)


def zeta(input, other, *, out=None):  # noqa: A002
    """The Hurwitz zeta function sum_k (other + k)^-input (its gradient with respect to
    ``input`` is not implemented, as in PyTorch)."""
    x, q = O.float_pair(input, other)
    return _out("zeta", O.bind(E.zeta, (x, q), {}), out)


# ---------------------------------------------------------------- no derivative in PyTorch
def _float32_or_64(name, x) -> Tensor:
    """``x`` as a floating tensor, float32 or float64: PyTorch's kernels of the functions
    below have no other dtype."""
    t = _ft(x)
    if t.dtype not in (D.float32, D.float64):
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_type_name(t.dtype)}'")
    return t


def _nondiff_unary(prim, doc):
    """``torch.special.<prim.name>``: its result has no grad_fn (PyTorch defines no derivative)."""
    name = prim.name

    def fn(input, *, out=None):  # noqa: A002
        return _out(name, O.bind(prim, (_float32_or_64(name, input),), {}), out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc} No derivative, as in PyTorch."
    return fn


bessel_j0 = _nondiff_unary(E.bessel_j0, "The Bessel function of the first kind of order 0, J0.")
bessel_j1 = _nondiff_unary(E.bessel_j1, "The Bessel function of the first kind of order 1, J1.")
bessel_y0 = _nondiff_unary(E.bessel_y0, "The Bessel function of the second kind of order 0, Y0 (NaN below 0).")
bessel_y1 = _nondiff_unary(E.bessel_y1, "The Bessel function of the second kind of order 1, Y1 (NaN below 0).")
modified_bessel_i0 = _nondiff_unary(E.modified_bessel_i0, "The modified Bessel function of the first kind, I0.")
modified_bessel_i1 = _nondiff_unary(E.modified_bessel_i1, "The modified Bessel function of the first kind, I1.")
modified_bessel_k0 = _nondiff_unary(E.modified_bessel_k0, "The modified Bessel function of the second kind, K0.")
modified_bessel_k1 = _nondiff_unary(E.modified_bessel_k1, "The modified Bessel function of the second kind, K1.")
scaled_modified_bessel_k0 = _nondiff_unary(E.scaled_modified_bessel_k0, "exp(x) K0(x).")
scaled_modified_bessel_k1 = _nondiff_unary(E.scaled_modified_bessel_k1, "exp(x) K1(x).")
spherical_bessel_j0 = _nondiff_unary(E.spherical_bessel_j0, "The spherical Bessel function j0(x) = sin(x) / x.")
airy_ai = _nondiff_unary(E.airy_ai, "The Airy function Ai(x).")


def _polynomial(prim, doc):
    """``torch.special.<prim.name>(x, n)``: x and n tensors or numbers (not both numbers), of
    their PyTorch result dtype (integers: the default float dtype); n truncated to an
    integer, a negative degree giving 0. No derivative, as in PyTorch."""
    name = prim.name

    def fn(x, n, *, out=None):
        if not isinstance(x, Tensor) and not isinstance(n, Tensor):
            raise TypeError(f"{name}(): x and n cannot both be numbers")
        a, b = O.float_pair(x, n)
        return _out(name, O.bind(prim, (_float32_or_64(name, a), b), {}), out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{doc}, n truncated toward zero to an integer degree (0 where negative). No derivative, "
                  "as in PyTorch.")
    return fn


chebyshev_polynomial_t = _polynomial(E.chebyshev_polynomial_t, "The Chebyshev polynomial of the first kind T_n(x)")
chebyshev_polynomial_u = _polynomial(E.chebyshev_polynomial_u, "The Chebyshev polynomial of the second kind U_n(x)")
chebyshev_polynomial_v = _polynomial(E.chebyshev_polynomial_v, "The Chebyshev polynomial of the third kind V_n(x)")
chebyshev_polynomial_w = _polynomial(E.chebyshev_polynomial_w, "The Chebyshev polynomial of the fourth kind W_n(x)")
shifted_chebyshev_polynomial_t = _polynomial(E.shifted_chebyshev_polynomial_t,
                                             "The shifted Chebyshev polynomial T_n(2x - 1)")
shifted_chebyshev_polynomial_u = _polynomial(E.shifted_chebyshev_polynomial_u,
                                             "The shifted Chebyshev polynomial U_n(2x - 1)")
shifted_chebyshev_polynomial_v = _polynomial(E.shifted_chebyshev_polynomial_v,
                                             "The shifted Chebyshev polynomial V_n(2x - 1)")
shifted_chebyshev_polynomial_w = _polynomial(E.shifted_chebyshev_polynomial_w,
                                             "The shifted Chebyshev polynomial W_n(2x - 1)")
hermite_polynomial_h = _polynomial(E.hermite_polynomial_h, "The physicists' Hermite polynomial H_n(x) (NaN "
                                   "beyond degree 128 in float32, 512 in float64)")
hermite_polynomial_he = _polynomial(E.hermite_polynomial_he, "The probabilists' Hermite polynomial He_n(x) (NaN "
                                    "beyond degree 128 in float32, 512 in float64)")
laguerre_polynomial_l = _polynomial(E.laguerre_polynomial_l, "The Laguerre polynomial L_n(x)")
legendre_polynomial_p = _polynomial(E.legendre_polynomial_p, "The Legendre polynomial P_n(x)")
