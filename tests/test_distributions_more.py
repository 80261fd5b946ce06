"""The distributions beyond Normal/Uniform/Bernoulli/Categorical/MVN against
torch.distributions: log_prob, entropy, cdf/icdf, moments, shapes and expand, and the
gradients of log_prob and entropy for the same parameters (float64); sampling by moments
with a fixed seed (fusegrad's own generator, so not equal to torch's draws); the implicit
reparameterization gradient of gamma draws; KL values and gradients."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
FD, TD = fg.distributions, torch.distributions

_rng = np.random.default_rng(1)


def _u(lo, hi, *shape):
    return _rng.uniform(lo, hi, shape)


def _simplex(*shape):
    x = _rng.gamma(1.0, 1.0, shape)
    return x / x.sum(-1, keepdims=True)


def _onehot(k, *shape):
    return np.eye(k)[_rng.integers(0, k, shape)]


# name -> (class name, constructor args (numpy arrays, keyword), a value array to score)
CASES = {
    "exponential": ("Exponential", dict(rate=_u(0.5, 2, 2, 3)), _u(0, 3, 4, 2, 3)),
    "laplace": ("Laplace", dict(loc=_rng.standard_normal((2, 3)), scale=_u(0.5, 2, 2, 3)),
                _rng.standard_normal((4, 2, 3)) * 2),
    "lognormal": ("LogNormal", dict(loc=_rng.standard_normal(3) * 0.5, scale=_u(0.3, 1, 2, 1)), _u(0.1, 3, 3)),
    "gamma": ("Gamma", dict(concentration=_u(0.5, 3, 2, 3), rate=_u(0.5, 2, 2, 3)), _u(0.1, 3, 4, 2, 3)),
    "chi2": ("Chi2", dict(df=_u(1, 5, 3)), _u(0.1, 4, 5, 3)),
    "beta": ("Beta", dict(concentration1=_u(0.5, 3, 2, 3), concentration0=_u(0.5, 3, 2, 3)),
             _u(0.05, 0.95, 4, 2, 3)),
    "dirichlet": ("Dirichlet", dict(concentration=_u(0.5, 3, 2, 4)), _simplex(3, 2, 4)),
    "poisson": ("Poisson", dict(rate=_u(0.5, 5, 3)), _rng.integers(0, 8, (4, 3)).astype(np.float64)),
    "binomial_probs": ("Binomial", dict(total_count=np.full((2, 3), 6.0), probs=_u(0.05, 0.95, 2, 3)),
                       _rng.integers(0, 7, (4, 2, 3)).astype(np.float64)),
    "binomial_logits": ("Binomial", dict(total_count=np.array([3.0, 5.0, 10.0]), logits=_rng.standard_normal(3) * 2),
                        np.array([[0.0, 5.0, 7.0], [3.0, 1.0, 10.0]])),
    "geometric_probs": ("Geometric", dict(probs=_u(0.1, 0.9, 2, 3)), _rng.integers(0, 6, (4, 2, 3)).astype(float)),
    "geometric_logits": ("Geometric", dict(logits=_rng.standard_normal(4)), _rng.integers(0, 6, (3, 4)).astype(float)),
    "onehot_probs": ("OneHotCategorical", dict(probs=_u(0.1, 1, 2, 5)), _onehot(5, 3, 2)),
    "onehot_logits": ("OneHotCategorical", dict(logits=_rng.standard_normal(4)), _onehot(4, 3)),
    "studentt": ("StudentT", dict(df=np.array([0.7, 1.5, 3.0, 8.0]), loc=_rng.standard_normal(4),
                                  scale=_u(0.5, 2, 4)), _rng.standard_normal((3, 4)) * 2),
    "cauchy": ("Cauchy", dict(loc=_rng.standard_normal((2, 3)), scale=_u(0.5, 2, 2, 3)),
               _rng.standard_normal((4, 2, 3)) * 3),
    "halfnormal": ("HalfNormal", dict(scale=_u(0.5, 2, 2, 3)), _u(0, 3, 4, 2, 3)),
    "gumbel": ("Gumbel", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3)), _rng.standard_normal((5, 3)) * 2),
}
NO_GRAD = {"total_count"}


def _build(lib, name, grad=False, kw=None):
    cls, default_kw, _ = CASES[name]
    params = {k: lib.tensor(v, requires_grad=grad and k not in NO_GRAD) for k, v in (kw or default_kw).items()}
    return getattr(lib.distributions, cls)(**params), params


def _np(t):
    return np.asarray(t.detach().numpy())


def _close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol, equal_nan=True)


def _torch_or_none(fn):
    try:
        return fn()
    except NotImplementedError:
        return None


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    d, p = _build(fg, name, grad=True)
    t, tp = _build(torch, name, grad=True)
    value = CASES[name][2]
    assert tuple(d.batch_shape) == tuple(t.batch_shape) and tuple(d.event_shape) == tuple(t.event_shape)
    assert d.has_rsample == t.has_rsample and type(d.support).__name__ == type(t.support).__name__
    assert set(d.arg_constraints) == set(t.arg_constraints)
    lp, tlp = d.log_prob(fg.tensor(value)), t.log_prob(torch.tensor(value))
    _close(lp, tlp)
    tent = _torch_or_none(t.entropy)
    if tent is not None:
        _close(d.entropy(), tent)
    for attr in ("mean", "variance", "stddev", "mode"):
        b = _torch_or_none(lambda: getattr(t, attr))
        if b is not None:
            _close(getattr(d, attr), b)
    w = _rng.standard_normal(tuple(tlp.shape))
    ((lp * fg.tensor(w)).sum() + (d.entropy().sum() if tent is not None else 0)).backward()
    ((tlp * torch.tensor(w)).sum() + (tent.sum() if tent is not None else 0)).backward()
    for k in p:
        if tp[k].requires_grad:
            _close(p[k].grad, tp[k].grad, rtol=1e-8, atol=1e-10)


CDF_CASES = ["exponential", "laplace", "lognormal", "cauchy", "halfnormal", "gumbel", "gamma", "chi2"]


@pytest.mark.parametrize("name", CDF_CASES)
def test_cdf_icdf_match_torch(name):
    d, p = _build(fg, name, grad=True)
    t, tp = _build(torch, name, grad=True)
    value = CASES[name][2]
    if name in ("gamma", "chi2"):  # torch has no gradient of the incomplete gamma in its first argument
        for k in ("concentration", "df"):
            if k in tp:
                tp[k].requires_grad_(False)
    c, tc = d.cdf(fg.tensor(value)), t.cdf(torch.tensor(value))
    _close(c, tc, rtol=1e-9, atol=1e-12)
    if name == "chi2":  # torch's Chi2 took the gradient-tracking df into its concentration
        return
    c.sum().backward()
    if tc.requires_grad:
        tc.sum().backward()
    for k in p:
        if tp[k].requires_grad:
            _close(p[k].grad, tp[k].grad, rtol=1e-7, atol=1e-10)
    if name in ("gamma", "chi2"):  # ours differentiates in the concentration too: check by central difference
        from scipy import special as sps
        k = "concentration" if name == "gamma" else "df"
        a, x = _np(p[k]), (_np(d.rate) * value)
        h = 1e-6
        fd = (sps.gammainc(a * (1 + h), x) - sps.gammainc(a * (1 - h), x)) / (2 * h * a)
        fd = (fd * (1 if name == "gamma" else 0.5)).reshape((-1,) + a.shape).sum(0) if name == "gamma" else None
        if fd is not None:
            np.testing.assert_allclose(_np(p[k].grad), fd, rtol=1e-5)
    if name in ("gamma", "chi2"):
        return
    q = _u(0.02, 0.98, *tuple(t.batch_shape))
    qa, tqa = fg.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
    i, ti = d.icdf(qa), t.icdf(tqa)
    _close(i, ti, rtol=1e-9, atol=1e-12)
    i.sum().backward()
    ti.sum().backward()
    _close(qa.grad, tqa.grad, rtol=1e-7, atol=1e-10)
    _close(d.cdf(i), fg.tensor(q), rtol=1e-9)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sample_shapes_and_expand(name):
    fg.manual_seed(0)
    d, _ = _build(fg, name)
    t, _ = _build(torch, name)
    for shape in ((), (2,), (3, 1)):
        s = d.sample(shape)
        assert tuple(s.shape) == tuple(t.sample(shape).shape) and not s.requires_grad
        assert s.dtype == fg.float64
        assert bool(d.support.check(s).all())
        if d.has_rsample:
            assert tuple(d.rsample(shape).shape) == tuple(s.shape)
    new = (4,) + tuple(d.batch_shape)
    de, te = d.expand(new), t.expand(new)
    assert tuple(de.batch_shape) == tuple(te.batch_shape) and tuple(de.event_shape) == tuple(te.event_shape)
    value, k = CASES[name][2], len(d.batch_shape) + len(d.event_shape)
    if 0 < k <= value.ndim:
        value = value.reshape((-1,) + value.shape[value.ndim - k:])[0]
    _close(de.log_prob(fg.tensor(value)), te.log_prob(torch.tensor(value)))
    assert tuple(de.sample((2,)).shape) == (2,) + new + tuple(d.event_shape)


MOMENT_CASES = {  # light enough tails for the sample variance to settle at 20000 draws
    "exponential": None, "laplace": None, "gamma": None, "chi2": None, "beta": None, "dirichlet": None,
    "poisson": None, "binomial_probs": None, "geometric_probs": None, "onehot_probs": None,
    "halfnormal": None, "gumbel": None,
    "lognormal": dict(loc=np.array([0.0, 1.0]), scale=np.array([0.2, 0.4])),
    "studentt": dict(df=np.array([9.0, 12.0]), loc=np.array([0.0, 2.0]), scale=np.array([1.0, 0.5])),
    "gamma_small": dict(concentration=np.array([0.1, 0.5, 20.0]), rate=np.array([1.0, 2.0, 0.5])),
}


@pytest.mark.parametrize("name", sorted(MOMENT_CASES))
def test_sampling_moments(name):
    fg.manual_seed(5)
    d, _ = _build(fg, name.replace("_small", ""), kw=MOMENT_CASES[name])
    n = 20000
    mean, var = _np(d.mean), _np(d.variance)
    for draw in (d.sample, d.rsample) if d.has_rsample else (d.sample,):
        s = _np(draw((n,)))
        assert np.all(np.abs(s.mean(0) - mean) <= 6 * np.sqrt(var / n) + 1e-12)
        rtol = 0.3 if name == "gamma_small" else 0.1  # concentration 0.1: a very skewed variance estimate
        assert np.all(np.abs(s.var(0) - var) <= rtol * var + 1e-12)


def test_cauchy_sample_quantiles_and_draws_follow_the_seed():
    d = FD.Cauchy(fg.tensor([0.5, -1.0]), fg.tensor([1.0, 3.0]))
    fg.manual_seed(3)
    s = _np(d.sample((20000,)))
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):
        for j, scale in enumerate((1.0, 3.0)):
            assert abs(np.quantile(s[:, j], q) - _np(d.icdf(fg.tensor(q)))[j]) <= 0.12 * scale
    g = FD.Gamma(fg.tensor([2.0]), fg.tensor([1.0]))
    fg.manual_seed(9)
    a = _np(g.sample((5,)))
    fg.manual_seed(9)
    np.testing.assert_array_equal(a, _np(g.sample((5,))))
    assert not np.array_equal(a, _np(g.sample((5,))))


def test_standard_gamma_grad_matches_torch():
    from fusegrad.distributions._sampling import standard_gamma_grad
    alpha = np.array([0.05, 0.3, 1.0, 2.5, 7.0, 12.0, 50.0, 200.0])
    fg.manual_seed(0)
    x = _np(FD.Gamma(fg.tensor(alpha), fg.ones(8, dtype=fg.float64)).sample((50,)))
    a = np.broadcast_to(alpha, x.shape)
    mine = standard_gamma_grad(a, x)
    theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    ok = x > 1e-30  # torch's series loses every digit on subnormal draws
    np.testing.assert_allclose(mine[ok], theirs[ok], rtol=5e-3, atol=1e-8)
    # against a central difference of the inverse CDF (the definition of the implicit gradient)
    from scipy import special as sps
    u = sps.gammainc(a, x)
    h = 1e-6 * a
    fd = (sps.gammaincinv(a + h, u) - sps.gammaincinv(a - h, u)) / (2 * h)
    mid = (u > 1e-6) & (u < 1 - 1e-6)
    np.testing.assert_allclose(mine[mid], fd[mid], rtol=1e-5)


@pytest.mark.parametrize("cls", ["Gamma", "Beta", "Dirichlet", "StudentT", "Chi2"])
def test_rsample_gradient_is_unbiased(cls):
    """The mean of d(sample)/d(parameter) estimates d(mean)/d(parameter)."""
    fg.manual_seed(1)
    n = 20000
    if cls == "Gamma":
        c, r = fg.tensor([0.4, 3.0], requires_grad=True), fg.tensor([2.0, 0.5], requires_grad=True)
        d, params = FD.Gamma(c, r), (c, r)
    elif cls == "Chi2":
        c = fg.tensor([0.8, 5.0], requires_grad=True)
        d, params = FD.Chi2(c), (c,)
    elif cls == "Beta":
        a, b = fg.tensor([0.5, 2.0], requires_grad=True), fg.tensor([1.5, 4.0], requires_grad=True)
        d, params = FD.Beta(a, b), (a, b)
    elif cls == "Dirichlet":
        c = fg.tensor([0.5, 2.0, 3.0], requires_grad=True)
        d, params = FD.Dirichlet(c), (c,)
    else:
        df = fg.tensor([5.0, 9.0], requires_grad=True)
        loc, scale = fg.tensor([0.0, 1.0], requires_grad=True), fg.tensor([1.0, 2.0], requires_grad=True)
        d, params = FD.StudentT(df, loc, scale), (df, loc, scale)
    s = d.rsample((n,))
    w = fg.tensor(_rng.standard_normal(tuple(d.event_shape) or tuple(d.batch_shape)))
    (s ** 2 * w).sum().backward()  # E[x^2] = var + mean^2
    got = [p.grad.numpy() / n for p in params]
    tparams = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    td = getattr(TD, cls)(*tparams)
    ((td.variance + td.mean ** 2) * torch.tensor(w.numpy())).sum().backward()
    for g, tp in zip(got, tparams):
        np.testing.assert_allclose(g, tp.grad.numpy(), rtol=0.08, atol=0.03)


KL_PAIRS = [
    ("Exponential", dict(rate=_u(0.5, 2, 3)), "Exponential", dict(rate=_u(0.5, 2, 3))),
    ("Laplace", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3)),
     "Laplace", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3))),
    ("LogNormal", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3)),
     "LogNormal", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3))),
    ("HalfNormal", dict(scale=_u(0.5, 2, 3)), "HalfNormal", dict(scale=_u(0.5, 2, 3))),
    ("Gamma", dict(concentration=_u(0.5, 3, 3), rate=_u(0.5, 2, 3)),
     "Gamma", dict(concentration=_u(0.5, 3, 3), rate=_u(0.5, 2, 3))),
    ("Exponential", dict(rate=_u(0.5, 2, 3)), "Gamma", dict(concentration=_u(0.5, 3, 3), rate=_u(0.5, 2, 3))),
    ("Beta", dict(concentration1=_u(0.5, 3, 3), concentration0=_u(0.5, 3, 3)),
     "Beta", dict(concentration1=_u(0.5, 3, 3), concentration0=_u(0.5, 3, 3))),
    ("Dirichlet", dict(concentration=_u(0.5, 3, 2, 4)), "Dirichlet", dict(concentration=_u(0.5, 3, 4))),
    ("Poisson", dict(rate=_u(0.5, 5, 3)), "Poisson", dict(rate=_u(0.5, 5, 3))),
    ("Binomial", dict(total_count=np.array([5.0, 7.0]), probs=_u(0.1, 0.9, 2)),
     "Binomial", dict(total_count=np.array([5.0, 4.0]), logits=_rng.standard_normal(2))),
    ("Geometric", dict(probs=_u(0.1, 0.9, 3)), "Geometric", dict(logits=_rng.standard_normal(3))),
    ("OneHotCategorical", dict(probs=_u(0.1, 1, 2, 4)), "OneHotCategorical", dict(logits=_rng.standard_normal(4))),
    ("Gumbel", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3)),
     "Gumbel", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3))),
    ("Cauchy", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3)),
     "Cauchy", dict(loc=_rng.standard_normal(3), scale=_u(0.5, 2, 3))),
]


@pytest.mark.parametrize("case", KL_PAIRS, ids=[f"{c[0]}-{c[2]}" for c in KL_PAIRS])
def test_kl_divergence_matches_torch(case):
    pc, pk, qc, qk = case
    mk = {lib: [{k: lib.tensor(v, requires_grad=k not in NO_GRAD) for k, v in kw.items()} for kw in (pk, qk)]
          for lib in (fg, torch)}
    (ps, qs), (tps, tqs) = mk[fg], mk[torch]
    kl = FD.kl_divergence(getattr(FD, pc)(**ps), getattr(FD, qc)(**qs))
    tkl = TD.kl_divergence(getattr(TD, pc)(**tps), getattr(TD, qc)(**tqs))
    _close(kl, tkl)
    finite = np.isfinite(_np(tkl))
    kl[fg.tensor(finite)].sum().backward()
    tkl[torch.tensor(finite)].sum().backward()
    for mine, theirs in zip(list(ps.values()) + list(qs.values()), list(tps.values()) + list(tqs.values())):
        if theirs.grad is not None:
            _close(mine.grad, theirs.grad, rtol=1e-8, atol=1e-10)


def test_validation_as_torch():
    with pytest.raises(ValueError, match="rate"):
        FD.Exponential(fg.tensor([-1.0]))
    with pytest.raises(ValueError, match="concentration"):
        FD.Gamma(fg.tensor([0.0]), fg.tensor([1.0]))
    with pytest.raises(ValueError, match="concentration"):
        FD.Dirichlet(fg.tensor([1.0, -2.0]))
    with pytest.raises(ValueError, match="support"):
        FD.Poisson(fg.tensor([1.0])).log_prob(fg.tensor([1.5]))
    with pytest.raises(ValueError, match="support"):
        FD.Exponential(fg.tensor([1.0])).log_prob(fg.tensor([-1.0]))
    with pytest.raises(ValueError, match="support"):
        FD.Binomial(fg.tensor(3.0), probs=fg.tensor(0.5)).log_prob(fg.tensor(4.0))
    with pytest.raises(ValueError, match="support"):
        FD.OneHotCategorical(probs=fg.tensor([0.5, 0.5])).log_prob(fg.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        FD.Geometric()
    d = FD.Exponential(fg.tensor([-1.0]), validate_args=False)
    t = TD.Exponential(torch.tensor([-1.0]), validate_args=False)
    np.testing.assert_allclose(_np(d.log_prob(fg.tensor([0.3]))), t.log_prob(torch.tensor([0.3])).numpy(),
                               equal_nan=True)


def test_scalar_parameters_and_enumerate_support():
    for cls, args in (("Exponential", (2.0,)), ("Laplace", (0.5, 2.0)), ("Gamma", (2.0, 3.0)),
                      ("Beta", (2.0, 3.0)), ("StudentT", (4.0,)), ("Gumbel", (0.0, 1.0)), ("Poisson", (3.0,))):
        d, t = getattr(FD, cls)(*args), getattr(TD, cls)(*args)
        assert tuple(d.batch_shape) == () and tuple(d.sample((3,)).shape) == (3,)
        v = 2.0 if cls == "Poisson" else 0.5
        np.testing.assert_allclose(_np(d.log_prob(fg.tensor(v))), t.log_prob(torch.tensor(v)).numpy(), rtol=1e-6)
    b = FD.Binomial(fg.tensor([4.0, 4.0]), probs=fg.tensor([0.3, 0.9]))
    tb = TD.Binomial(torch.tensor([4.0, 4.0]), probs=torch.tensor([0.3, 0.9]))
    np.testing.assert_array_equal(_np(b.enumerate_support()), tb.enumerate_support().numpy())
    o = FD.OneHotCategorical(probs=fg.tensor([[0.2, 0.8, 0.0]]))
    to = TD.OneHotCategorical(probs=torch.tensor([[0.2, 0.8, 0.0]]))
    np.testing.assert_array_equal(_np(o.enumerate_support()), to.enumerate_support().numpy())
    np.testing.assert_array_equal(_np(o.enumerate_support(False)), to.enumerate_support(False).numpy())


def test_beta_and_dirichlet_modes_with_concentrations_below_one_as_torch():
    """A concentration below 1 puts the mode on the boundary (Beta's was (a-1)/(a+b-2): -inf
    and values past 1); all below 1 gives PyTorch's vertex, the first."""
    a, b = [0.5, 3.0, 0.5, 2.0], [1.5, 0.7, 0.5, 3.0]
    c = [[0.3, 0.5, 0.4], [2.0, 3.0, 0.5]]
    for got, want in ((fg.distributions.Beta(fg.tensor(a), fg.tensor(b)).mode,
                       torch.distributions.Beta(torch.tensor(a), torch.tensor(b)).mode),
                      (fg.distributions.Dirichlet(fg.tensor(c)).mode,
                       torch.distributions.Dirichlet(torch.tensor(c)).mode)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
