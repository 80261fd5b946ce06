"""kl_divergence for every (p, q) pair PyTorch registers: fusegrad registers the same pair and gives
PyTorch's values (inf and nan included) and gradients w.r.t. the parameters, for fixed batched float64
parameters chosen so that the pairs with a support condition have both finite and infinite entries."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.distributions import kl as fkl

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
FD, TD = fg.distributions, torch.distributions

_rng = np.random.default_rng(11)


def _tril(*batch, n=2):
    a = _rng.standard_normal(batch + (n, n))
    return np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + n * np.eye(n))


def _loc_scale(loc, scale):
    return dict(loc=np.array(loc), scale=np.array(scale))


# type name -> (parameters of p, parameters of q); batch shape (3,)
PARAMS = {
    "Bernoulli": (dict(probs=np.array([0.2, 0.5, 0.9])), dict(probs=np.array([0.6, 0.3, 0.1]))),
    "Beta": (dict(concentration1=np.array([0.8, 2.0, 3.5]), concentration0=np.array([1.5, 0.7, 2.5])),
             dict(concentration1=np.array([2.0, 1.2, 0.9]), concentration0=np.array([0.9, 3.0, 1.7]))),
    "Binomial": (dict(total_count=np.array([5.0, 5.0, 7.0]), probs=np.array([0.3, 0.6, 0.5])),
                 dict(total_count=np.array([5.0, 5.0, 5.0]), probs=np.array([0.4, 0.2, 0.7]))),
    "Categorical": (dict(probs=_rng.uniform(0.1, 1, (3, 4))), dict(probs=_rng.uniform(0.1, 1, (3, 4)))),
    "Cauchy": (_loc_scale([0.3, -1.0, 2.0], [1.5, 0.4, 2.0]), _loc_scale([0.0, 0.5, 2.5], [1.0, 2.0, 0.7])),
    "ContinuousBernoulli": (dict(probs=np.array([0.2, 0.7, 0.42])), dict(probs=np.array([0.6, 0.3, 0.85]))),
    "Dirichlet": (dict(concentration=_rng.uniform(0.5, 3, (3, 4))), dict(concentration=_rng.uniform(0.5, 3, (3, 4)))),
    "Exponential": (dict(rate=np.array([0.5, 1.5, 3.0])), dict(rate=np.array([2.0, 0.7, 1.2]))),
    "Gamma": (dict(concentration=np.array([0.7, 2.0, 4.0]), rate=np.array([1.5, 0.6, 2.0])),
              dict(concentration=np.array([2.5, 1.2, 0.8]), rate=np.array([0.9, 2.0, 1.1]))),
    "Geometric": (dict(probs=np.array([0.2, 0.5, 0.8])), dict(probs=np.array([0.6, 0.3, 0.4]))),
    "Gumbel": (_loc_scale([0.3, -1.0, 1.5], [0.8, 1.5, 0.5]), _loc_scale([-0.2, 0.4, 1.0], [1.2, 0.6, 2.0])),
    "HalfNormal": (dict(scale=np.array([0.5, 1.5, 2.5])), dict(scale=np.array([1.2, 0.8, 3.0]))),
    "Independent": (_loc_scale(_rng.standard_normal((3, 2)), _rng.uniform(0.5, 2, (3, 2))),
                    _loc_scale(_rng.standard_normal((3, 2)), _rng.uniform(0.5, 2, (3, 2)))),
    "Laplace": (_loc_scale([0.3, -1.0, 2.0], [1.5, 0.4, 2.0]), _loc_scale([0.0, 0.5, 2.5], [1.0, 2.0, 0.7])),
    "LowRankMultivariateNormal": (
        dict(loc=_rng.standard_normal((3, 2)), cov_factor=_rng.standard_normal((3, 2, 1)),
             cov_diag=_rng.uniform(0.5, 2, (3, 2))),
        dict(loc=_rng.standard_normal((3, 2)), cov_factor=_rng.standard_normal((3, 2, 1)),
             cov_diag=_rng.uniform(0.5, 2, (3, 2)))),
    "MultivariateNormal": (dict(loc=_rng.standard_normal((3, 2)), scale_tril=_tril(3)),
                           dict(loc=_rng.standard_normal((3, 2)), scale_tril=_tril(3))),
    "Normal": (_loc_scale([0.3, -1.0, 0.8], [0.7, 1.3, 0.4]), _loc_scale([-0.5, 0.2, 1.5], [1.1, 0.6, 2.0])),
    "OneHotCategorical": (dict(probs=_rng.uniform(0.1, 1, (3, 4))), dict(probs=_rng.uniform(0.1, 1, (3, 4)))),
    "Pareto": (dict(scale=np.array([0.05, 0.3, 0.2]), alpha=np.array([0.8, 1.5, 3.0])),
               dict(scale=np.array([0.1, 0.2, 0.3]), alpha=np.array([2.5, 1.2, 4.0]))),
    "Poisson": (dict(rate=np.array([0.5, 2.0, 4.0])), dict(rate=np.array([1.5, 0.8, 3.0]))),
    "TransformedDistribution": (_loc_scale([0.3, -1.0, 0.8], [0.7, 1.3, 0.4]),
                                _loc_scale([-0.5, 0.2, 1.5], [1.1, 0.6, 2.0])),
    # p: inside [0, 1], below 0, above 1; q: around p, around p, cutting p
    "Uniform": (dict(low=np.array([0.1, -0.5, 0.2]), high=np.array([0.8, 0.6, 1.5])),
                dict(low=np.array([-0.1, -1.0, 0.5]), high=np.array([1.0, 1.5, 1.2]))),
}
# a concrete stand-in for an abstract type, its KL taken from the abstract pair's function
_ABSTRACT = {"ExponentialFamily": "ContinuousBernoulli"}


def _build(lib, name, which):
    D = lib.distributions
    kw = {k: lib.tensor(v, requires_grad=k != "total_count") for k, v in PARAMS[name][which].items()}
    if name == "Independent":
        return D.Independent(D.Normal(**kw), 1), kw
    if name == "TransformedDistribution":
        return D.TransformedDistribution(D.Normal(**kw), [D.transforms.ExpTransform()]), kw
    return getattr(D, name)(**kw), kw


def _names(pair):
    return tuple(t.__name__ for t in pair)


PAIRS = sorted(_names(pair) for pair in TD.kl._KL_REGISTRY)


def _close(a, b, rtol, atol):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=rtol, atol=atol,
                               equal_nan=True)


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(pair) for pair in PAIRS])
def test_kl_pair_matches_torch(pair):
    assert pair in {_names(key) for key in fkl._KL_REGISTRY}
    pn, qn = (_ABSTRACT.get(n, n) for n in pair)
    p, ps = _build(fg, pn, 0)
    q, qs = _build(fg, qn, 1)
    tp, tps = _build(torch, pn, 0)
    tq, tqs = _build(torch, qn, 1)
    if pn == pair[0] and qn == pair[1]:
        kl, tkl = FD.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    else:
        key = tuple(getattr(FD, n) for n in pair)
        kl, tkl = fkl._KL_REGISTRY[key](p, q), TD.kl._KL_REGISTRY[tuple(getattr(TD, n) for n in pair)](tp, tq)
    assert tuple(kl.shape) == tuple(tkl.shape) and kl.dtype == fg.float64
    _close(kl, tkl, rtol=1e-10, atol=1e-12)
    finite = np.isfinite(tkl.detach().numpy())
    if not finite.any() or not tkl.requires_grad:
        return
    kl[fg.tensor(finite)].sum().backward()
    tkl[torch.tensor(finite)].sum().backward()
    for k, (mine, theirs) in enumerate(zip(list(ps.values()) + list(qs.values()),
                                           list(tps.values()) + list(tqs.values()))):
        if theirs.grad is None:
            assert mine.grad is None or not np.any(mine.grad.numpy()), k
        else:
            # atol: PyTorch's CPU trigamma (in the gradients of digamma, lgamma-based entropies) is off by up
            # to ~1e-9 from SciPy's, which fusegrad's matches
            _close(mine.grad, theirs.grad, rtol=1e-8, atol=1e-8)


def test_wisharts_through_the_exponential_family_kl_as_pytorch():
    """No KL is registered for two Wisharts (in PyTorch either): both fall back to the
    exponential-family formula, whose scalar natural parameter is summed as a whole."""
    def kls(m):
        D = m.distributions
        a = D.Wishart(df=m.tensor(5.0, dtype=m.float64), covariance_matrix=m.eye(2, dtype=m.float64))
        b = D.Wishart(df=m.tensor(6.0, dtype=m.float64), covariance_matrix=2 * m.eye(2, dtype=m.float64))
        return [D.kl_divergence(a, b).item(), D.kl_divergence(b, a).item()]
    np.testing.assert_allclose(kls(fg), kls(torch), rtol=1e-10)
