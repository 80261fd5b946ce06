"""fusegrad.distributions against torch.distributions: log_prob, entropy, moments, shapes,
expand and KL values and their gradients for the same parameters; sampling by moments with
a fixed seed (tolerances of >= 6 standard errors); rsample paths by float64 gradcheck with
the noise fixed by reseeding."""
from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
FD, TD = fg.distributions, torch.distributions

_rng = np.random.default_rng(0)


def _pd(*batch, n=3):
    a = _rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# name -> (constructor args as numpy arrays (keyword), a value array to score)
CASES = {
    "normal": ("Normal", dict(loc=_rng.standard_normal((2, 3)), scale=_rng.uniform(0.5, 2, (2, 3))),
               _rng.standard_normal((4, 2, 3))),
    "normal_bcast": ("Normal", dict(loc=_rng.standard_normal(3), scale=_rng.uniform(0.5, 2, (2, 1))),
                     _rng.standard_normal(3)),
    "uniform": ("Uniform", dict(low=_rng.uniform(-2, 0, (3,)), high=_rng.uniform(0.5, 2, (3,))),
                _rng.uniform(-0.4, 0.4, (5, 3))),
    "bernoulli_probs": ("Bernoulli", dict(probs=_rng.uniform(0.05, 0.95, (2, 3))),
                        _rng.integers(0, 2, (2, 3)).astype(np.float64)),
    "bernoulli_logits": ("Bernoulli", dict(logits=_rng.standard_normal((4,)) * 3),
                         _rng.integers(0, 2, (3, 4)).astype(np.float64)),
    "categorical_probs": ("Categorical", dict(probs=_rng.uniform(0.1, 1, (2, 5))), _rng.integers(0, 5, (3, 2))),
    "categorical_logits": ("Categorical", dict(logits=_rng.standard_normal((5,)) * 2), _rng.integers(0, 5, (4,))),
    "mvn_cov": ("MultivariateNormal", dict(loc=_rng.standard_normal((2, 3)), covariance_matrix=_pd(2)),
                _rng.standard_normal((4, 2, 3))),
    "mvn_tril": ("MultivariateNormal", dict(loc=_rng.standard_normal(3), scale_tril=np.linalg.cholesky(_pd(2))),
                 _rng.standard_normal((2, 3))),
    "mvn_prec": ("MultivariateNormal", dict(loc=_rng.standard_normal(3), precision_matrix=_pd()),
                 _rng.standard_normal((5, 3))),
}


def _build(lib, name, grad=False):
    cls, kw, _ = CASES[name]
    params = {k: lib.tensor(v, requires_grad=grad) for k, v in kw.items()}
    return getattr(lib.distributions, cls)(**params), params


def _close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), b.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_entropy_moments_match_torch(name):
    d, p = _build(fg, name, grad=True)
    t, tp = _build(torch, name, grad=True)
    value = CASES[name][2]
    assert tuple(d.batch_shape) == tuple(t.batch_shape) and tuple(d.event_shape) == tuple(t.event_shape)
    lp, tlp = d.log_prob(fg.tensor(value)), t.log_prob(torch.tensor(value))
    _close(lp, tlp)
    _close(d.entropy(), t.entropy())
    for attr in ("mean", "variance", "stddev", "mode"):
        a, b = getattr(d, attr), getattr(t, attr)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)
    # gradients of log_prob and entropy w.r.t. every parameter
    w = _rng.standard_normal(tuple(tlp.shape))
    ((lp * fg.tensor(w)).sum() + d.entropy().sum()).backward()
    ((tlp * torch.tensor(w)).sum() + t.entropy().sum()).backward()
    for k in p:
        _close(p[k].grad, tp[k].grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sample_shapes_and_expand(name):
    d, _ = _build(fg, name)
    t, _ = _build(torch, name)
    for shape in ((), (2,), (3, 1)):
        s = d.sample(shape)
        assert tuple(s.shape) == tuple(t.sample(shape).shape) and not s.requires_grad
        assert s.dtype == fg.int64 if "categorical" in name else s.dtype == fg.float64
    new = (4,) + tuple(d.batch_shape)
    de, te = d.expand(new), t.expand(new)
    assert tuple(de.batch_shape) == tuple(te.batch_shape) and tuple(de.event_shape) == tuple(te.event_shape)
    value, k = CASES[name][2], len(d.batch_shape) + len(d.event_shape)
    if 0 < k <= value.ndim:  # one value of batch_shape + event_shape, broadcast over the new dimension
        value = value.reshape((-1,) + value.shape[value.ndim - k:])[0]
    _close(de.log_prob(fg.tensor(value)), te.log_prob(torch.tensor(value)))
    _close(de.entropy(), te.entropy())


def _moments_ok(samples: np.ndarray, mean: np.ndarray, var: np.ndarray):
    n = samples.shape[0]
    se = np.sqrt(var / n)
    assert np.all(np.abs(samples.mean(0) - mean) <= 6 * se + 1e-12)
    assert np.all(np.abs(samples.var(0) - var) <= 0.1 * var + 1e-12)


@pytest.mark.parametrize("name", ["normal", "uniform", "bernoulli_probs", "mvn_cov"])
def test_sampling_moments(name):
    fg.manual_seed(5)
    d, _ = _build(fg, name)
    for draw in (d.sample, d.rsample) if d.has_rsample else (d.sample,):
        _moments_ok(draw((20000,)).detach().numpy(), d.mean.detach().numpy(), d.variance.detach().numpy())
    if name == "mvn_cov":  # the covariance, not only the variances
        s = d.sample((20000,)).numpy()[:, 0]
        np.testing.assert_allclose(np.cov(s.T), CASES[name][1]["covariance_matrix"][0], atol=0.25)


def test_categorical_sample_frequencies():
    fg.manual_seed(2)
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    s = FD.Categorical(probs=fg.tensor(probs)).sample((8000,)).numpy()
    freq = np.stack([np.bincount(s[:, i], minlength=4) / 8000 for i in range(2)])
    np.testing.assert_allclose(freq, probs, atol=0.035)  # > 6 standard errors
    assert (s[:, 0] != 1).all()


@pytest.mark.parametrize("name", ["normal", "normal_bcast", "uniform", "mvn_tril", "mvn_cov"])
def test_rsample_gradcheck_with_fixed_noise(name):
    cls, kw, _ = CASES[name]
    keys = sorted(kw)
    params = [fg.tensor(kw[k], requires_grad=True) for k in keys]

    def draw(*ps):
        fg.manual_seed(11)  # the same noise at every evaluation: a deterministic function of ps
        if name == "mvn_cov":
            ps = [p if k == "loc" else p @ p.mT for k, p in zip(keys, ps)]  # stay symmetric under perturbation
        return getattr(FD, cls)(**dict(zip(keys, ps)), validate_args=False).rsample((3,))

    assert gradcheck(draw, params)


def test_rsample_is_the_transform_of_the_noise():
    loc, scale = fg.tensor([1.0, -2.0], requires_grad=True), fg.tensor([0.5, 3.0], requires_grad=True)
    fg.manual_seed(4)
    x = FD.Normal(loc, scale).rsample((6,))
    fg.manual_seed(4)
    eps = fg.randn(6, 2)
    np.testing.assert_allclose(x.detach().numpy(), (loc + eps * scale).detach().numpy())
    # the same noise through torch's parameters gives torch's gradient
    tl, ts = torch.tensor([1.0, -2.0], requires_grad=True), torch.tensor([0.5, 3.0], requires_grad=True)
    (x ** 2).sum().backward()
    ((tl + torch.tensor(eps.numpy()) * ts) ** 2).sum().backward()
    np.testing.assert_allclose(scale.grad.numpy(), ts.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(loc.grad.numpy(), tl.grad.numpy(), rtol=1e-6)


KL_PAIRS = [
    ("normal", dict(loc=_rng.standard_normal(3), scale=_rng.uniform(0.5, 2, 3)), "Normal",
     dict(loc=_rng.standard_normal(3), scale=_rng.uniform(0.5, 2, 3)), "Normal"),
    ("uniform", dict(low=np.array([0.0, -1.0, 0.5]), high=np.array([1.0, 1.0, 2.0])), "Uniform",
     dict(low=np.array([-1.0, -1.0, 0.7]), high=np.array([2.0, 0.5, 3.0])), "Uniform"),  # two infinite
    ("uniform_normal", dict(low=np.array([0.0, -1.0]), high=np.array([1.0, 3.0])), "Uniform",
     dict(loc=np.array([0.3, -1.0]), scale=np.array([0.7, 2.0])), "Normal"),
    ("normal_uniform", dict(loc=np.array([0.3]), scale=np.array([0.7])), "Normal",
     dict(low=np.array([0.0]), high=np.array([1.0])), "Uniform"),
    ("normal_laplace", dict(loc=np.array([0.3, -1.0, 2.0]), scale=np.array([1.5, 0.4, 2.0])), "Normal",
     dict(loc=np.array([0.0, 0.5, 2.5]), scale=np.array([1.0, 2.0, 0.7])), "Laplace"),
    ("bernoulli", dict(probs=np.array([0.2, 0.0, 1.0, 0.5, 0.3])), "Bernoulli",
     dict(probs=np.array([0.6, 0.3, 0.4, 0.0, 1.0])), "Bernoulli"),
    ("categorical", dict(probs=np.array([[0.2, 0.0, 0.8], [0.3, 0.3, 0.4]])), "Categorical",
     dict(logits=np.array([[0.1, 1.0, -2.0], [0.0, 2.0, 1.0]])), "Categorical"),
    ("categorical_inf", dict(probs=np.array([0.5, 0.5, 0.0])), "Categorical",
     dict(probs=np.array([1.0, 0.0, 1.0])), "Categorical"),
    ("mvn", dict(loc=_rng.standard_normal((2, 3)), covariance_matrix=_pd(2)), "MultivariateNormal",
     dict(loc=_rng.standard_normal(3), scale_tril=np.linalg.cholesky(_pd())), "MultivariateNormal"),
]


@pytest.mark.parametrize("case", KL_PAIRS, ids=[c[0] for c in KL_PAIRS])
def test_kl_divergence_matches_torch(case):
    _, pk, pc, qk, qc = case
    ps = {k: fg.tensor(v, requires_grad=True) for k, v in pk.items()}
    qs = {k: fg.tensor(v, requires_grad=True) for k, v in qk.items()}
    tps = {k: torch.tensor(v, requires_grad=True) for k, v in pk.items()}
    tqs = {k: torch.tensor(v, requires_grad=True) for k, v in qk.items()}
    kl = FD.kl_divergence(getattr(FD, pc)(**ps), getattr(FD, qc)(**qs))
    tkl = TD.kl_divergence(getattr(TD, pc)(**tps), getattr(TD, qc)(**tqs))
    _close(kl, tkl)
    finite = np.isfinite(tkl.detach().numpy())
    if finite.any() and kl.requires_grad:
        kl[fg.tensor(finite)].sum().backward()
        tkl[torch.tensor(finite)].sum().backward()
        for mine, theirs in zip(list(ps.values()) + list(qs.values()), list(tps.values()) + list(tqs.values())):
            if theirs.grad is not None:
                _close(mine.grad, theirs.grad, rtol=1e-8, atol=1e-10)


def test_independent_matches_torch():
    loc, scale = _rng.standard_normal((4, 2, 3)), _rng.uniform(0.5, 2, (4, 2, 3))
    value = _rng.standard_normal((5, 4, 2, 3))
    for n in (0, 1, 2):
        d = FD.Independent(FD.Normal(fg.tensor(loc), fg.tensor(scale)), n)
        t = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), n)
        assert tuple(d.batch_shape) == tuple(t.batch_shape) and tuple(d.event_shape) == tuple(t.event_shape)
        _close(d.log_prob(fg.tensor(value)), t.log_prob(torch.tensor(value)))
        _close(d.entropy(), t.entropy())
        _close(d.mean, t.mean)
        assert tuple(d.rsample((2,)).shape) == tuple(t.rsample((2,)).shape) and d.has_rsample
        q = FD.Independent(FD.Normal(fg.tensor(scale), fg.tensor(loc ** 2 + 1)), n)
        tq = TD.Independent(TD.Normal(torch.tensor(scale), torch.tensor(loc ** 2 + 1)), n)
        _close(FD.kl_divergence(d, q), TD.kl_divergence(t, tq))
        de, te = d.expand((6,) + tuple(d.batch_shape)), t.expand((6,) + tuple(t.batch_shape))
        assert tuple(de.batch_shape) == tuple(te.batch_shape) and tuple(de.event_shape) == tuple(te.event_shape)
        _close(de.log_prob(fg.tensor(value[0])), te.log_prob(torch.tensor(value[0])))
    b = FD.Independent(FD.Bernoulli(probs=fg.tensor([[0.2, 0.7]])), 1)
    tb = TD.Independent(TD.Bernoulli(probs=torch.tensor([[0.2, 0.7]])), 1)
    _close(b.log_prob(fg.tensor([[1.0, 0.0]])), tb.log_prob(torch.tensor([[1.0, 0.0]])))


def test_validation_as_torch():
    with pytest.raises(ValueError, match="scale"):
        FD.Normal(fg.tensor([0.0]), fg.tensor([-1.0]))
    with pytest.raises(ValueError, match="probs"):
        FD.Bernoulli(probs=fg.tensor([1.5]))
    with pytest.raises(ValueError, match="low>= high"):
        FD.Uniform(fg.tensor([1.0]), fg.tensor([0.0]))
    with pytest.raises(ValueError, match="support"):
        FD.Bernoulli(probs=fg.tensor([0.5])).log_prob(fg.tensor([0.5]))
    with pytest.raises(ValueError, match="support"):
        FD.Categorical(probs=fg.tensor([0.5, 0.5])).log_prob(fg.tensor(2))
    with pytest.raises(ValueError, match="covariance_matrix"):
        FD.MultivariateNormal(fg.zeros(2), covariance_matrix=fg.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        FD.Bernoulli()
    with pytest.raises(ValueError, match="Exactly one"):
        FD.MultivariateNormal(fg.zeros(2))
    # validate_args=False: as torch, no check, log_prob computes what the formula gives
    d = FD.Normal(fg.tensor([0.0]), fg.tensor([-1.0]), validate_args=False)
    t = TD.Normal(torch.tensor([0.0]), torch.tensor([-1.0]), validate_args=False)
    np.testing.assert_allclose(d.log_prob(fg.tensor([0.3])).numpy(), t.log_prob(torch.tensor([0.3])).numpy(),
                               equal_nan=True)


def test_register_kl_dispatch_and_missing_pair():
    class MyNormal(FD.Normal):
        pass

    p, q = MyNormal(fg.tensor(0.0), fg.tensor(1.0)), FD.Normal(fg.tensor(1.0), fg.tensor(2.0))
    np.testing.assert_allclose(FD.kl_divergence(p, q).numpy(),
                               TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)).numpy())  # inherited

    @FD.register_kl(MyNormal, FD.Normal)
    def _mine(p, q):
        return fg.tensor(-1.0)

    assert FD.kl_divergence(p, q).item() == -1.0
    assert FD.kl_divergence(q, q).item() == 0.0  # the base pair still uses its own rule
    with pytest.raises(NotImplementedError, match="Bernoulli.*Normal"):
        FD.kl_divergence(FD.Bernoulli(probs=fg.tensor(0.5)), q)


def test_scalar_parameters_and_cdf():
    d, t = FD.Normal(0.5, 2.0), TD.Normal(0.5, 2.0)
    assert tuple(d.batch_shape) == () and d.loc.dtype == fg.float32
    x = np.linspace(-3, 3, 7).astype(np.float32)
    np.testing.assert_allclose(d.cdf(fg.tensor(x)).numpy(), t.cdf(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-7)
    p = fg.tensor([0.01, 0.3, 0.5, 0.97], requires_grad=True)
    tp = torch.tensor([0.01, 0.3, 0.5, 0.97], requires_grad=True)
    d.icdf(p).sum().backward()
    t.icdf(tp).sum().backward()
    np.testing.assert_allclose(d.icdf(p).detach().numpy(), t.icdf(tp).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5)
    u, tu = FD.Uniform(-1.0, 3.0), TD.Uniform(-1.0, 3.0)
    np.testing.assert_allclose(u.cdf(fg.tensor(x / 4)).numpy(), tu.cdf(torch.tensor(x / 4)).numpy())
    np.testing.assert_allclose(u.icdf(fg.tensor([0.25])).numpy(), tu.icdf(torch.tensor([0.25])).numpy())
    b, tb = FD.Bernoulli(probs=fg.tensor([0.3, 0.9])), TD.Bernoulli(probs=torch.tensor([0.3, 0.9]))
    np.testing.assert_array_equal(b.enumerate_support().numpy(), tb.enumerate_support().numpy())
    c = FD.Categorical(logits=fg.tensor([[0.0, 1.0, 2.0]]))
    np.testing.assert_array_equal(c.enumerate_support().numpy(),
                                  TD.Categorical(logits=torch.tensor([[0.0, 1.0, 2.0]])).enumerate_support().numpy())
    tc = TD.Categorical(logits=torch.tensor([[0.0, 1.0, 2.0]]))
    assert math.isclose(c.perplexity().item(), tc.perplexity().item(), rel_tol=1e-6)


def test_log_prob_under_compile_and_grad():
    loc, scale = np.array([0.3, -1.0], np.float32), np.array([1.5, 0.5], np.float32)
    v = np.array([[0.1, 0.2], [1.0, -1.0]], np.float32)

    def f(lo, sc, x):
        n = FD.Normal(lo, sc, validate_args=False)
        c = FD.Categorical(logits=x, validate_args=False)
        return n.log_prob(x).sum() + n.entropy().sum() + c.entropy().sum()

    g = fg.compile(f)
    args = [fg.tensor(a) for a in (loc, scale, v)]
    np.testing.assert_allclose(g(*args).numpy(), f(*args).numpy(), rtol=1e-6)
    tf = f(*(fg.tensor(a) for a in (loc, scale, v)))
    tn = TD.Normal(torch.tensor(loc), torch.tensor(scale))
    want = (tn.log_prob(torch.tensor(v)).sum() + tn.entropy().sum()
            + TD.Categorical(logits=torch.tensor(v)).entropy().sum())
    np.testing.assert_allclose(tf.numpy(), want.numpy(), rtol=1e-6)
    gl = fg.func.grad(f, argnums=(0, 1))(*args)
    tl, ts = torch.tensor(loc, requires_grad=True), torch.tensor(scale, requires_grad=True)
    (TD.Normal(tl, ts).log_prob(torch.tensor(v)).sum() + TD.Normal(tl, ts).entropy().sum()).backward()
    np.testing.assert_allclose(gl[0].numpy(), tl.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(gl[1].numpy(), ts.grad.numpy(), rtol=1e-5)


def test_validated_distributions_compile_in_one_graph():
    """Distributions built inside ``compile(fullgraph=True)`` with validation on (the
    default) compile in one graph, as torch.compile's do; outside fullgraph an invalid
    parameter still raises."""
    rng = np.random.default_rng(3)
    w, o, a = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5, 3), (5, 2)))

    def program(lib, compile_):
        D = lib.distributions

        def policy(o, a, w):
            h = o @ w
            d = D.Normal(h[:, :2], h[:, 2:].clamp(-5, 2).exp())
            c = D.Categorical(logits=h)
            b = D.Bernoulli(logits=h)
            return d.log_prob(a).sum(-1), d.entropy().sum(-1), c.entropy(), b.log_prob((h > 0).float()).sum(-1)
        return [t.numpy() for t in compile_(policy)(*(lib.tensor(x) for x in (o, a, w)))]
    for got, want in zip(program(fg, lambda f: fg.compile(f, fullgraph=True)), program(torch, lambda f: f)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="scale"):
        fg.compile(lambda s: FD.Normal(fg.zeros(2), s).mean)(fg.tensor([1.0, -1.0]))
