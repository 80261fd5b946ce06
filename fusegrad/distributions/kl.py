"""``kl_divergence(p, q)`` and ``register_kl``: KL divergences looked up by the pair of
distribution types, the most specific registered pair winning (as PyTorch's)."""
from __future__ import annotations

import math
from functools import total_ordering

from ..ir.prims.shapes import broadcast_shapes
from ..autograd import grad
from ..nn import functional as F
from ..runtime import factory
from ..runtime import ops as O
from ..runtime.linalg import diag_embed, solve_triangular
from ..special import xlogy
from ._sampling import EULER
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .laplace import Laplace
from .log_normal import LogNormal
from .lowrank_multivariate_normal import (LowRankMultivariateNormal, _batch_lowrank_logdet,
                                          _batch_lowrank_mahalanobis)
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .categorical import Categorical
from .distribution import Distribution
from .independent import Independent
from .multivariate_normal import MultivariateNormal, batch_mahalanobis, half_log_det
from .normal import Normal
from .pareto import Pareto
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}  # (type_p, type_q) -> fn: the registrations
_KL_MEMOIZE: dict = {}  # (type_p, type_q) -> fn: a cache of dispatch results, cleared on registration


def register_kl(type_p: type, type_q: type):
    """Decorator registering ``fn(p, q)`` as the KL divergence of ``type_p`` from ``type_q``."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn
    return decorator


@total_ordering
class _Match:
    """Orders registered pairs by how specific they are for a given pair of types."""

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p: type, type_q: type):
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun, right_fun = _KL_REGISTRY[left_p, left_q], _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        import warnings
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl"
                      f"({left_p.__name__}, {right_q.__name__})", RuntimeWarning)
    return left_fun


def kl_divergence(p: Distribution, q: Distribution):
    """KL(p || q), batched over the distributions' batch shape."""
    key = (type(p), type(q))
    fun = _KL_MEMOIZE.get(key)
    if fun is None:
        fun = _KL_MEMOIZE[key] = _dispatch_kl(type(p), type(q))
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    return fun(p, q)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = O.where(p.probs == 0, 0.0, O.where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = O.where(p.probs == 1, 0.0, O.where(q.probs == 1, math.inf, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = O.where((p.probs == 0).expand_as(t), 0.0, O.where((q.probs == 0).expand_as(t), math.inf, t))
    return t.sum(-1)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    ratio = loc_diff / p.scale
    t1 = (p.scale / q.scale).log()
    t2 = math.sqrt(2 / math.pi) * p.scale * O.exp(-0.5 * ratio.pow(2))
    t3 = loc_diff * O.erf(math.sqrt(0.5) * ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return O.where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return factory.full_like(p.loc, math.inf)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    n = p.event_shape[0]
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    shape = tuple(broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2]))) + (n, n)
    term2 = solve_triangular(lq.expand(shape), lp.expand(shape), upper=False).pow(2).sum((-2, -1))
    term3 = batch_mahalanobis(lq, q.loc - p.loc)
    return half_log_det(lq) - half_log_det(lp) + 0.5 * (term2 + term3 - n)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + q.concentration.lgamma() + q.concentration * EULER - (1 + EULER)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_params_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_params_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sum_params_q - sum_params_p) * sum_params_p.digamma()
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return O.where(p.total_count > q.total_count, math.inf, kl)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * EULER
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + EULER)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


def _kl_infinite(param: str):
    """KL of a distribution with support beyond the other's: infinite."""
    return lambda p, q: factory.full_like(getattr(p, param), math.inf)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    return O.where(p.support.lower_bound < q.support.lower_bound, math.inf, result)


for _type_p, _param in ((Beta, "concentration1"), (Exponential, "rate"), (Gamma, "concentration"), (Gumbel, "loc"),
                        (Laplace, "loc"), (Normal, "loc")):
    register_kl(_type_p, Pareto)(_kl_infinite(_param))
register_kl(Pareto, Beta)(_kl_infinite("scale"))
register_kl(Pareto, Uniform)(_kl_infinite("scale"))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    result = ((p.alpha / scale_rate_prod).log() - p.alpha.reciprocal()
              + p.alpha * scale_rate_prod / (p.alpha - 1) - 1)
    return O.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return O.where(p.alpha <= 1, math.inf, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return O.where(p.alpha <= 2, math.inf, t1 - p.alpha.reciprocal() + (t3 + t4) / var_normal - 1)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (xlogy(p.high, p.high) - xlogy(p.low, p.low) - support_uniform) / support_uniform
    return O.where(p.low < q.support.lower_bound, math.inf, t2 * (q.alpha + 1) - t1)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma())
    return -p.entropy() + t2 - t3 + q.rate * p.mean


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    e_beta = p.mean
    var_normal = q.scale.pow(2)
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (e_beta * (1 - e_beta) / (p.concentration1 + p.concentration0 + 1) + e_beta.pow(2)) * 0.5
    return -p.entropy() + t2 + (t3 - q.loc * e_beta + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return O.where((q.low > p.support.lower_bound) | (q.high < p.support.upper_bound), math.inf, result)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
    return t1 - loc_scale_ratio + t2 + scale_rate_prod.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
    return t1 - 1 + (rate_sqr.reciprocal() - q.loc / p.rate + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - p.concentration - p.concentration.lgamma()
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + 0.5 * q.loc.pow(2)) / var_normal


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (EULER + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + t2 / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
    return -t1 + mean_scale_ratio - loc_scale_ratio + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    common_term = p.high - p.low
    t2 = (q.concentration1 - 1) * (xlogy(p.high, p.high) - xlogy(p.low, p.low) - common_term) / common_term
    t3 = ((q.concentration0 - 1) * (xlogy(1 - p.high, 1 - p.high) - xlogy(1 - p.low, 1 - p.low) + common_term)
          / common_term)
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    outside = (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound)
    return O.where(outside, math.inf, t3 + t4 - common_term.log() - t2)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return O.where(p.low < q.support.lower_bound, math.inf, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common_term = p.high - p.low
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (xlogy(p.high, p.high) - xlogy(p.low, p.low) - common_term) / common_term
    t4 = q.rate * (p.high + p.low) / 2
    return O.where(p.low < q.support.lower_bound, math.inf, -common_term.log() + t2 + t3 + t4)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    return t1 - common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())


for _type_p, _param, _types_q in ((Exponential, "rate", (Beta, Uniform)), (Gamma, "concentration", (Beta, Uniform)),
                                   (Gumbel, "loc", (Beta, Exponential, Gamma, Uniform)),
                                   (Laplace, "loc", (Beta, Exponential, Gamma, Uniform)),
                                   (Normal, "loc", (Beta, Exponential, Gamma)),
                                   (Poisson, "rate", (Bernoulli, Binomial))):
    for _type_q in _types_q:
        register_kl(_type_p, _type_q)(_kl_infinite(_param))


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log normalizer between the natural parameters."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_nparams = [nparam.detach().requires_grad_() for nparam in p._natural_params]
    q_nparams = q._natural_params
    lg_normal = p._log_normalizer(*p_nparams)
    gradients = grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


def _batch_trace_xxt(bmat):
    """``trace(X X^T)`` of a batch of matrices: the sum of their squared entries."""
    return bmat.pow(2).sum((-2, -1))


def _check_same_event_shape(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")


def _lowrank_logdet(d):
    return _batch_lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag, d._capacitance_tril)


def _lowrank_mahalanobis(q, diff):
    return _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, diff,
                                      q._capacitance_tril)


def _lowrank_precision_factor(q):
    """``A`` with ``inv(cov_q) = inv(D_q) - A^T A`` (Woodbury)."""
    qwt_qdinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return solve_triangular(q._capacitance_tril, qwt_qdinv, upper=False)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    _check_same_event_shape(p, q)
    term1 = _lowrank_logdet(q) - _lowrank_logdet(p)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    a = _lowrank_precision_factor(q)
    term2 = ((p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
             + _batch_trace_xxt(p._unbroadcasted_cov_factor * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
             - _batch_trace_xxt(a * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
             - _batch_trace_xxt(a @ p._unbroadcasted_cov_factor))
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrank(p, q):
    _check_same_event_shape(p, q)
    term1 = _lowrank_logdet(q) - 2 * half_log_det(p._unbroadcasted_scale_tril)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    a = _lowrank_precision_factor(q)
    term2 = (_batch_trace_xxt(p._unbroadcasted_scale_tril * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
             - _batch_trace_xxt(a @ p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_multivariatenormal(p, q):
    _check_same_event_shape(p, q)
    term1 = 2 * half_log_det(q._unbroadcasted_scale_tril) - _lowrank_logdet(p)
    term3 = batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    n = p.event_shape[0]
    batch = tuple(broadcast_shapes(tuple(q._unbroadcasted_scale_tril.shape[:-2]),
                                   tuple(p._unbroadcasted_cov_factor.shape[:-2])))
    q_tril = q._unbroadcasted_scale_tril.expand(batch + (n, n))
    p_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_diag = diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term2 = (_batch_trace_xxt(solve_triangular(q_tril, p_factor, upper=False))
             + _batch_trace_xxt(solve_triangular(q_tril, p_diag, upper=False)))
    return 0.5 * (term1 + term2 + term3 - n)


def _cross_entropy_to_continuous_bernoulli(p, q):
    """``-E_p[log q]`` for a continuous Bernoulli ``q`` and ``p`` on ``[0, 1]``."""
    return -p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() + _cross_entropy_to_continuous_bernoulli(p, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() + _cross_entropy_to_continuous_bernoulli(p, q)
    outside = (p.high >= q.support.upper_bound) | (p.low <= q.support.lower_bound)
    return O.where(outside, math.inf, result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return -p.entropy() + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low >= p.support.lower_bound) | (q.high <= p.support.upper_bound)
    return O.where(outside, math.inf, result)


for _type_p, _param in ((Exponential, "rate"), (Gamma, "concentration"), (Gumbel, "loc"), (Laplace, "loc"),
                        (Normal, "loc"), (Pareto, "scale")):
    register_kl(_type_p, ContinuousBernoulli)(_kl_infinite(_param))
register_kl(ContinuousBernoulli, Pareto)(_kl_infinite("probs"))
