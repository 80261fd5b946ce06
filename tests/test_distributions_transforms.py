"""Transforms, ``TransformedDistribution``, ``biject_to``/``transform_to`` and the
distributions built on them, checked against PyTorch on the same parameters (eager)."""
import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import distributions as D

T = torch.distributions


def f(a):
    return fusegrad.tensor(np.asarray(a, dtype=np.float64))


def g(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


def close(ours, theirs, rtol=1e-7, atol=1e-9):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4))
POS = np.abs(X) + 0.3
UNIT = 1 / (1 + np.exp(-X))


def _transform_cases():
    """(fusegrad transform, torch transform, input) triples."""
    loc, scale = RNG.normal(size=4), RNG.normal(size=4)
    return [
        (D.ExpTransform(), T.ExpTransform(), X),
        (D.SigmoidTransform(), T.SigmoidTransform(), X),
        (D.TanhTransform(), T.TanhTransform(), X),
        (D.SoftplusTransform(), T.SoftplusTransform(), X),
        (D.PowerTransform(f(2.5)), T.PowerTransform(g(2.5)), POS),
        (D.AffineTransform(0.5, -2.0), T.AffineTransform(0.5, -2.0), X),
        (D.AffineTransform(f(loc), f(scale)), T.AffineTransform(g(loc), g(scale)), X),
        (D.AffineTransform(f(loc), f(scale), event_dim=1), T.AffineTransform(g(loc), g(scale), event_dim=1), X),
        (D.StickBreakingTransform(), T.StickBreakingTransform(), X),
        (D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 3.0)]),
         T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0)]), X),
        (D.ComposeTransform([D.SigmoidTransform(), D.StickBreakingTransform()]),
         T.ComposeTransform([T.SigmoidTransform(), T.StickBreakingTransform()]), X),
        (D.IndependentTransform(D.ExpTransform(), 1), T.IndependentTransform(T.ExpTransform(), 1), X),
        (D.ReshapeTransform((4,), (2, 2)), T.ReshapeTransform((4,), (2, 2)), X),
        (D.CatTransform([D.ExpTransform(), D.SigmoidTransform()], dim=1, lengths=[1, 3]),
         T.CatTransform([T.ExpTransform(), T.SigmoidTransform()], dim=1, lengths=[1, 3]), X),
        (D.CatTransform([D.ExpTransform(), D.IndependentTransform(D.SigmoidTransform(), 1)], dim=0, lengths=[1, 2]),
         T.CatTransform([T.ExpTransform(), T.IndependentTransform(T.SigmoidTransform(), 1)], dim=0, lengths=[1, 2]),
         X),
        (D.StackTransform([D.ExpTransform(), D.TanhTransform(), D.SoftplusTransform()], dim=0),
         T.StackTransform([T.ExpTransform(), T.TanhTransform(), T.SoftplusTransform()], dim=0), X),
        (D.identity_transform, T.identity_transform, X),
    ]


@pytest.mark.parametrize("ours,theirs,x", _transform_cases())
def test_bijective_transform_matches_torch(ours, theirs, x):
    y_ours, y_theirs = ours(f(x)), theirs(g(x))
    close(y_ours, y_theirs)
    close(ours.inv(y_ours), theirs.inv(y_theirs), rtol=1e-6, atol=1e-8)
    close(ours.log_abs_det_jacobian(f(x), y_ours), theirs.log_abs_det_jacobian(g(x), y_theirs), rtol=1e-6)
    close(ours.inv.log_abs_det_jacobian(y_ours, f(x)), theirs.inv.log_abs_det_jacobian(y_theirs, g(x)), rtol=1e-6)
    assert ours.bijective == theirs.bijective
    assert ours.domain.event_dim == theirs.domain.event_dim
    assert ours.codomain.event_dim == theirs.codomain.event_dim
    assert tuple(ours.forward_shape((3, 4))) == tuple(theirs.forward_shape((3, 4)))
    assert ours.inv.inv is ours
    if not (isinstance(ours, D.CatTransform) and ours.event_dim):  # PyTorch's cat check needs equal event dims
        assert bool(ours.codomain.check(y_ours).all())


@pytest.mark.parametrize("ours,theirs,x", [
    (D.AbsTransform(), T.AbsTransform(), X),
    (D.SoftmaxTransform(), T.SoftmaxTransform(), X),
    (D.LowerCholeskyTransform(), T.LowerCholeskyTransform(), RNG.normal(size=(2, 3, 3))),
    (D.PositiveDefiniteTransform(), T.PositiveDefiniteTransform(), RNG.normal(size=(2, 3, 3))),
])
def test_non_bijective_transform_matches_torch(ours, theirs, x):
    y_ours, y_theirs = ours(f(x)), theirs(g(x))
    close(y_ours, y_theirs)
    close(ours.inv(y_ours), theirs.inv(y_theirs))
    assert bool(ours.codomain.check(y_ours).all())


def test_transform_log_abs_det_jacobian_matches_autograd():
    """The elementwise Jacobians agree with the derivative taken by autograd."""
    for t in (D.ExpTransform(), D.SigmoidTransform(), D.TanhTransform(), D.SoftplusTransform(),
              D.PowerTransform(f(0.7)), D.AffineTransform(1.0, -3.0)):
        x = f(POS).requires_grad_()
        y = t(x)
        (dy,) = fusegrad.autograd.grad(y.sum(), x)
        close(t.log_abs_det_jacobian(x, y), g(np.log(np.abs(dy.numpy()))), rtol=1e-6)


def test_transform_sign_equality_and_cache():
    assert D.ExpTransform() == D.ExpTransform() and D.ExpTransform() != D.SigmoidTransform()
    assert D.AffineTransform(1.0, -2.0).sign == -1 and D.ExpTransform().inv.sign == 1
    assert D.ComposeTransform([D.AffineTransform(0.0, -1.0), D.ExpTransform()]).sign == -1
    t = D.ExpTransform(cache_size=1)
    x = f(X)
    y = t(x)
    assert t.inv(y) is x and t(x) is y
    assert D.ExpTransform().with_cache(1)._cache_size == 1
    with pytest.raises(ValueError):
        D.ExpTransform(cache_size=2)
    with pytest.raises(ValueError):
        D.ReshapeTransform((4,), (3,))


def test_cumulative_distribution_transform():
    t, tt = D.CumulativeDistributionTransform(D.Normal(f(0.5), f(2.0))), \
        T.CumulativeDistributionTransform(T.Normal(g(0.5), g(2.0)))
    y = t(f(X))
    close(y, tt(g(X)))
    close(t.inv(y), g(X), rtol=1e-6)
    close(t.log_abs_det_jacobian(f(X), y), tt.log_abs_det_jacobian(g(X), tt(g(X))))


CONSTRAINTS = [
    (D.constraints.real, T.constraints.real),
    (D.constraints.positive, T.constraints.positive),
    (D.constraints.greater_than(1.5), T.constraints.greater_than(1.5)),
    (D.constraints.greater_than_eq(-1.0), T.constraints.greater_than_eq(-1.0)),
    (D.constraints.less_than(2.0), T.constraints.less_than(2.0)),
    (D.constraints.unit_interval, T.constraints.unit_interval),
    (D.constraints.interval(-2.0, 3.0), T.constraints.interval(-2.0, 3.0)),
    (D.constraints.half_open_interval(-2.0, 3.0), T.constraints.half_open_interval(-2.0, 3.0)),
    (D.constraints.simplex, T.constraints.simplex),
    (D.constraints.real_vector, T.constraints.real_vector),
    (D.constraints.independent(D.constraints.positive, 1), T.constraints.independent(T.constraints.positive, 1)),
    (D.constraints.cat([D.constraints.positive, D.constraints.real], 1, [2, 2]),
     T.constraints.cat([T.constraints.positive, T.constraints.real], 1, [2, 2])),
    (D.constraints.stack([D.constraints.positive, D.constraints.unit_interval, D.constraints.real], 0),
     T.constraints.stack([T.constraints.positive, T.constraints.unit_interval, T.constraints.real], 0)),
]


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("ours,theirs", CONSTRAINTS)
def test_constraint_registry_matches_torch(registry, ours, theirs):
    t, tt = getattr(D, registry)(ours), getattr(T, registry)(theirs)
    y = t(f(X))
    close(y, tt(g(X)))
    assert bool(ours.check(y).all())
    if t.bijective:
        close(t.inv(y), g(X), rtol=1e-6, atol=1e-7)
        close(t.log_abs_det_jacobian(f(X), y), tt.log_abs_det_jacobian(g(X), tt(g(X))), rtol=1e-6)


def test_constraint_registry_errors_and_lower_cholesky():
    with pytest.raises(NotImplementedError):
        D.biject_to(D.constraints.lower_cholesky)
    with pytest.raises(TypeError):
        D.biject_to.register(int, lambda c: None)
    m = RNG.normal(size=(3, 3))
    close(D.transform_to(D.constraints.lower_cholesky)(f(m)), T.transform_to(T.constraints.lower_cholesky)(g(m)))
    close(D.transform_to(D.constraints.positive_definite)(f(m)),
          T.transform_to(T.constraints.positive_definite)(g(m)))


def test_constraints_cat_stack_less_than_multinomial_check():
    v = np.array([[1.0, -1.0, 0.5, 2.0], [-1.0, 2.0, 0.1, -3.0]])
    for ours, theirs in CONSTRAINTS[-2:-1] + [(D.constraints.less_than(0.5), T.constraints.less_than(0.5))]:
        np.testing.assert_array_equal(ours.check(f(v)).numpy(), theirs.check(g(v)).numpy())
    counts = np.array([[1.0, 2.0, 0.0], [3.0, 2.0, 1.0], [-1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(D.constraints.multinomial(4).check(f(counts)).numpy(),
                                  T.constraints.multinomial(4).check(g(counts)).numpy())


def test_transformed_distribution_matches_torch():
    loc, scale = RNG.normal(size=3), POS[0, :3]
    ours = D.TransformedDistribution(D.Normal(f(loc), f(scale)), [D.AffineTransform(1.0, -2.0), D.ExpTransform()])
    theirs = T.TransformedDistribution(T.Normal(g(loc), g(scale)), [T.AffineTransform(1.0, -2.0), T.ExpTransform()])
    v = POS[:, :3]
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.cdf(f(v)), theirs.cdf(g(v)))
    close(ours.icdf(f(UNIT[:, :3])), theirs.icdf(g(UNIT[:, :3])), rtol=1e-6)
    assert ours.rsample((5, 2)).shape == (5, 2, 3) and ours.sample().shape == (3,)
    assert ours.has_rsample and tuple(ours.expand((2, 3)).batch_shape) == (2, 3)
    assert repr(ours.support) == repr(theirs.support)


def test_transformed_distribution_event_dims():
    """A stick-breaking transform makes an event dimension; an Independent base is built."""
    base_loc = RNG.normal(size=(2, 3))
    ours = D.TransformedDistribution(D.Normal(f(base_loc), f(np.ones((2, 3)))), D.StickBreakingTransform())
    theirs = T.TransformedDistribution(T.Normal(g(base_loc), g(np.ones((2, 3)))), T.StickBreakingTransform())
    assert ours.batch_shape == theirs.batch_shape and ours.event_shape == theirs.event_shape
    y = theirs.sample((4,))
    close(ours.log_prob(f(y.numpy())), theirs.log_prob(y), rtol=1e-6)
    assert ours.support.event_dim == 1
    with pytest.raises(ValueError):
        D.TransformedDistribution(D.Normal(0.0, 1.0), "exp")


def test_transformed_distribution_rsample_gradient():
    """d(rsample)/d(loc) of exp(loc + scale * eps) equals the sample itself."""
    loc = f(np.array([0.2, -0.4])).requires_grad_()
    d = D.TransformedDistribution(D.Normal(loc, f(np.array([1.0, 0.5]))), D.ExpTransform())
    x = d.rsample((3,))
    (grad,) = fusegrad.autograd.grad(x.sum(), loc)
    np.testing.assert_allclose(grad.numpy(), x.detach().numpy().sum(0), rtol=1e-10)


def _continuous_cases():
    a, b = POS[0, :3], POS[1, :3] + 1.0
    return [
        (D.Weibull(f(a), f(b)), T.Weibull(g(a), g(b)), POS[:, :3]),
        (D.Pareto(f(a), f(b + 1.5)), T.Pareto(g(a), g(b + 1.5)), POS[:, :3] + a + 0.1),
        (D.HalfCauchy(f(a)), T.HalfCauchy(g(a)), POS[:, :3]),
    ]


@pytest.mark.parametrize("ours,theirs,v", _continuous_cases())
def test_transformed_families_match_torch(ours, theirs, v):
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.cdf(f(v)), theirs.cdf(g(v)))
    close(ours.icdf(f(UNIT[:, :3])), theirs.icdf(g(UNIT[:, :3])), rtol=1e-6)
    close(ours.entropy(), theirs.entropy())
    close(ours.mean, theirs.mean)
    close(ours.variance, theirs.variance)
    close(ours.mode, theirs.mode)
    assert ours.rsample((4,)).shape == (4, 3)
    assert tuple(ours.expand((2, 3)).batch_shape) == (2, 3)
    assert isinstance(ours, D.TransformedDistribution)
    s = ours.sample((50,))
    assert bool(ours.support.check(s).all())


def test_weibull_rsample_gradient_matches_finite_difference():
    """At fixed noise, the sample is scale * E ** (1/c): compare d/dc by finite differences."""
    conc = f(np.array([1.5, 3.0])).requires_grad_()
    fusegrad.manual_seed(3)
    x = D.Weibull(f(np.array([2.0, 0.5])), conc).rsample((4,))
    (grad,) = fusegrad.autograd.grad(x.sum(), conc)
    h = 1e-6
    fd = []
    for i in range(2):
        c = np.array([1.5, 3.0])
        vals = []
        for sgn in (1, -1):
            c2 = c.copy()
            c2[i] += sgn * h
            fusegrad.manual_seed(3)
            vals.append(D.Weibull(f(np.array([2.0, 0.5])), f(c2)).rsample((4,)).numpy()[:, i].sum())
        fd.append((vals[0] - vals[1]) / (2 * h))
    np.testing.assert_allclose(grad.numpy(), fd, rtol=1e-5)


def test_relaxed_distributions_match_torch():
    temp, p = 0.7, UNIT[0, :3]
    ours, theirs = D.RelaxedBernoulli(f(temp), probs=f(p)), T.RelaxedBernoulli(g(temp), probs=g(p))
    v = UNIT[1:, :3]
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)), rtol=1e-6)
    assert ours.rsample((5,)).shape == (5, 3) and bool(ours.support.check(ours.sample((20,))).all())
    probs = POS[0] / POS[0].sum()
    ours = D.RelaxedOneHotCategorical(f(temp), probs=f(probs))
    theirs = T.RelaxedOneHotCategorical(g(temp), probs=g(probs))
    v = theirs.sample((3,))
    close(ours.log_prob(f(v.numpy())), theirs.log_prob(v), rtol=1e-6)
    s = ours.rsample((6,))
    assert s.shape == (6, 4) and bool(D.constraints.simplex.check(s).all())
    close(ours.logits, theirs.logits)
    # Gradients reach the logits through the reparameterized draw.
    logits = f(np.log(probs)).requires_grad_()
    (grad,) = fusegrad.autograd.grad((D.RelaxedOneHotCategorical(f(temp), logits=logits).rsample() ** 2).sum(),
                                     logits)
    assert np.all(np.isfinite(grad.numpy())) and np.any(grad.numpy() != 0)


def test_multinomial_matches_torch():
    probs = POS[:2, :3] / POS[:2, :3].sum(-1, keepdims=True)
    ours, theirs = D.Multinomial(5, probs=f(probs)), T.Multinomial(5, probs=g(probs))
    v = np.array([[2.0, 2.0, 1.0], [0.0, 5.0, 0.0]])
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.mean, theirs.mean)
    close(ours.variance, theirs.variance)
    close(ours.entropy(), theirs.entropy(), rtol=1e-6)  # PyTorch takes lgamma(n + 1) in float32
    s = ours.sample((7,))
    assert s.shape == (7, 2, 3) and np.all(s.numpy().sum(-1) == 5)
    with pytest.raises(ValueError):
        ours.log_prob(f(np.array([[2.0, 2.0, 2.0], [0.0, 5.0, 0.0]])))
    logits = np.log(probs)
    logits[0, 0] = -np.inf
    close(D.Multinomial(5, logits=f(logits)).log_prob(f(np.array([0.0, 3.0, 2.0]))),
          T.Multinomial(5, logits=g(logits)).log_prob(g(np.array([0.0, 3.0, 2.0]))))


def test_negative_binomial_matches_torch():
    r, p = POS[0, :3], UNIT[0, :3]
    for ours, theirs in ((D.NegativeBinomial(f(r), probs=f(p)), T.NegativeBinomial(g(r), probs=g(p))),
                         (D.NegativeBinomial(f(r), logits=f(X[0, :3])), T.NegativeBinomial(g(r), logits=g(X[0, :3])))):
        v = np.array([[0.0, 3.0, 7.0], [2.0, 0.0, 1.0]])
        close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
        close(ours.mean, theirs.mean)
        close(ours.variance, theirs.variance)
        close(ours.mode, theirs.mode)
        s = ours.sample((30,))
        assert s.shape == (30, 3) and bool(ours.support.check(s).all())
    with pytest.raises(ValueError):
        D.NegativeBinomial(f(r), probs=f(np.array([0.5, 1.0, 0.2])))
    with pytest.raises(ValueError):
        D.NegativeBinomial(f(r), probs=f(p)).log_prob(f(np.array([0.5, 1.0, 2.0])))


def test_mixture_same_family_matches_torch():
    w, loc, scale = POS[0, :3], X[:2, :3], POS[:2, :3]
    ours = D.MixtureSameFamily(D.Categorical(f(w)), D.Normal(f(loc), f(scale)))
    theirs = T.MixtureSameFamily(T.Categorical(g(w)), T.Normal(g(loc), g(scale)))
    v = X[:, :2]
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.cdf(f(v)), theirs.cdf(g(v)))
    close(ours.mean, theirs.mean)
    close(ours.variance, theirs.variance)
    assert ours.sample((5,)).shape == (5, 2) and ours.batch_shape == theirs.batch_shape
    assert tuple(ours.expand((4, 2)).batch_shape) == (4, 2)
    # Multivariate components: the event dimension stays.
    ours = D.MixtureSameFamily(D.Categorical(f(w)), D.Independent(D.Normal(f(X[:, :2]), f(POS[:, :2])), 1))
    theirs = T.MixtureSameFamily(T.Categorical(g(w)), T.Independent(T.Normal(g(X[:, :2]), g(POS[:, :2])), 1))
    v = X[:2, 2:]
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.mean, theirs.mean)
    close(ours.variance, theirs.variance)
    assert ours.sample((5,)).shape == (5, 2)
    with pytest.raises(ValueError):
        D.MixtureSameFamily(D.Categorical(f(w[:2])), D.Normal(f(loc), f(scale)))
    with pytest.raises(ValueError):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(f(loc), f(scale)))


def test_validate_args_errors():
    for make in (lambda: D.Weibull(f([-1.0]), f([1.0])), lambda: D.Pareto(f([1.0]), f([0.0])),
                 lambda: D.HalfCauchy(f([-1.0])), lambda: D.RelaxedBernoulli(f(0.5), probs=f([1.5])),
                 lambda: D.Multinomial(3, probs=f([-0.5, 1.5]))):
        with pytest.raises(ValueError):
            make()
    with pytest.raises(ValueError):
        D.Weibull(f([1.0]), f([1.0])).log_prob(f([-1.0]))
    with pytest.raises(ValueError):
        D.Pareto(f([1.0]), f([2.0])).log_prob(f([0.5]))


def test_kl_registrations_match_torch():
    pairs = [
        (D.Pareto(f([1.0, 2.0]), f([3.0, 4.0])), D.Pareto(f([1.5, 1.0]), f([2.0, 5.0])),
         T.Pareto(g([1.0, 2.0]), g([3.0, 4.0])), T.Pareto(g([1.5, 1.0]), g([2.0, 5.0]))),
        (D.Pareto(f([1.0, 2.0]), f([3.0, 4.0])), D.Normal(f([0.5, 1.0]), f([2.0, 1.0])),
         T.Pareto(g([1.0, 2.0]), g([3.0, 4.0])), T.Normal(g([0.5, 1.0]), g([2.0, 1.0]))),
        (D.Pareto(f([1.0, 2.0]), f([3.0, 0.5])), D.Exponential(f([0.5, 1.0])),
         T.Pareto(g([1.0, 2.0]), g([3.0, 0.5])), T.Exponential(g([0.5, 1.0]))),
        (D.Pareto(f([1.0, 2.0]), f([3.0, 4.0])), D.Gamma(f([0.5, 1.0]), f([2.0, 1.0])),
         T.Pareto(g([1.0, 2.0]), g([3.0, 4.0])), T.Gamma(g([0.5, 1.0]), g([2.0, 1.0]))),
        (D.Uniform(f([1.0, 2.0]), f([3.0, 4.0])), D.Pareto(f([1.5, 1.0]), f([2.0, 5.0])),
         T.Uniform(g([1.0, 2.0]), g([3.0, 4.0])), T.Pareto(g([1.5, 1.0]), g([2.0, 5.0]))),
        (D.Normal(f([1.0]), f([3.0])), D.Pareto(f([1.5]), f([2.0])),
         T.Normal(g([1.0]), g([3.0])), T.Pareto(g([1.5]), g([2.0]))),
        (D.Weibull(f([1.0, 2.0]), f([3.0, 4.0])), D.Weibull(f([1.0, 2.0]), f([3.0, 4.0])),
         T.Weibull(g([1.0, 2.0]), g([3.0, 4.0])), T.Weibull(g([1.0, 2.0]), g([3.0, 4.0]))),
    ]
    for p, q, tp, tq in pairs:
        close(D.kl_divergence(p, q), T.kl_divergence(tp, tq))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.TransformedDistribution(D.Normal(0.0, 1.0), D.ExpTransform()),
                        D.TransformedDistribution(D.Normal(0.0, 1.0), D.SigmoidTransform()))


def test_lowrank_multivariate_normal_matches_torch():
    loc, w, d = X[:2, :3], RNG.normal(size=(2, 3, 2)), POS[2, :3]
    ours = D.LowRankMultivariateNormal(f(loc), f(w), f(d))
    theirs = T.LowRankMultivariateNormal(g(loc), g(w), g(d))
    v = RNG.normal(size=(4, 2, 3))
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.entropy(), theirs.entropy())
    for name in ("mean", "variance", "scale_tril", "covariance_matrix", "precision_matrix"):
        close(getattr(ours, name), getattr(theirs, name), atol=1e-12)
    assert ours.rsample((5,)).shape == (5, 2, 3) and tuple(ours.expand((4, 2)).batch_shape) == (4, 2)
    with pytest.raises(ValueError):
        D.LowRankMultivariateNormal(f(loc), f(w[:, :2]), f(d))
    with pytest.raises(ValueError):
        D.LowRankMultivariateNormal(f(loc[0]), f(w[0]), f(d[:2]))


def test_lowrank_rsample_covariance_by_reparameterization():
    """The draw is loc + W eps_W + sqrt(D) eps_D: its gradient in loc is the identity."""
    loc = f(X[0, :3]).requires_grad_()
    x = D.LowRankMultivariateNormal(loc, f(RNG.normal(size=(3, 1))), f(POS[0, :3])).rsample((6,))
    (grad,) = fusegrad.autograd.grad(x.sum(), loc)
    np.testing.assert_allclose(grad.numpy(), np.full(3, 6.0))


@pytest.mark.parametrize("name,args,v", [
    ("Kumaraswamy", ([1.5, 0.7], [2.5, 0.5]), [0.3, 0.8]),
    ("InverseGamma", ([3.5, 1.5], [2.0, 0.5]), [0.7, 2.0]),
])
def test_kumaraswamy_inverse_gamma_match_torch(name, args, v):
    ours, theirs = getattr(D, name)(*map(f, args)), getattr(T, name)(*map(g, args))
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    close(ours.entropy(), theirs.entropy())
    for moment in ("mean", "variance", "mode"):
        close(getattr(ours, moment), getattr(theirs, moment))
    s = ours.expand((4, 2)).rsample((3,))
    assert s.shape == (3, 4, 2) and bool(ours.support.check(s).all())
    with pytest.raises(ValueError):
        getattr(D, name)(f([-1.0, 1.0]), f([1.0, 1.0]))


def test_logistic_normal_matches_torch():
    loc, scale = X[:2, :3], POS[:2, :3]
    ours, theirs = D.LogisticNormal(f(loc), f(scale)), T.LogisticNormal(g(loc), g(scale))
    assert ours.event_shape == theirs.event_shape and ours.batch_shape == theirs.batch_shape
    v = theirs.sample((3,))
    close(ours.log_prob(f(v.numpy())), theirs.log_prob(v))
    s = ours.rsample((5,))
    assert s.shape == (5, 2, 4) and bool(D.constraints.simplex.check(s).all())
    close(ours.loc, theirs.loc)
    assert D.LogisticNormal(f(0.5), f(1.0)).event_shape == (2,)


def test_one_hot_straight_through_gradient():
    probs = f(POS[0] / POS[0].sum()).requires_grad_()
    d = D.OneHotCategoricalStraightThrough(probs=probs)
    s = d.rsample((5,))
    assert s.shape == (5, 4) and bool(D.constraints.one_hot.check(s.detach()).all())
    weights = np.arange(1.0, 5.0)
    (grad,) = fusegrad.autograd.grad((s * f(weights)).sum(), probs)
    # Straight through d(sample)/d(probs) is the identity through the normalization of probs.
    p = g(POS[0] / POS[0].sum()).requires_grad_()
    (expected,) = torch.autograd.grad((torch.distributions.OneHotCategorical(probs=p).probs * g(weights)).sum() * 5, p)
    close(grad, expected)


def test_exponential_family_entropy_by_autograd():
    """A Normal written as an exponential family: entropy from the log normalizer."""
    class _ExpNormal(D.ExponentialFamily):
        arg_constraints = {}

        def __init__(self, loc, scale):
            self.loc, self.scale = loc, scale
            super().__init__(loc.shape)

        @property
        def _natural_params(self):
            return self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()

        def _log_normalizer(self, x, y):
            return -0.25 * x.pow(2) / y + 0.5 * (-np.pi / y).log()

        @property
        def _mean_carrier_measure(self):
            return 0

    loc, scale = X[0, :3], POS[0, :3]
    close(_ExpNormal(f(loc), f(scale)).entropy(), T.Normal(g(loc), g(scale)).entropy())


def test_continuous_bernoulli_matches_torch():
    p = np.array([0.2, 0.4995, 0.8, 0.97])  # 0.4995 lies in the Taylor-expanded region
    v = np.array([0.3, 0.6, 0.9, 0.05])
    for ours, theirs in ((D.ContinuousBernoulli(probs=f(p)), T.ContinuousBernoulli(probs=g(p))),
                         (D.ContinuousBernoulli(logits=f(X[0])), T.ContinuousBernoulli(logits=g(X[0])))):
        close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
        close(ours.cdf(f(v)), theirs.cdf(g(v)), atol=1e-12)
        close(ours.icdf(f(v)), theirs.icdf(g(v)), atol=1e-12)
        close(ours.entropy(), theirs.entropy())
        close(ours.mean, theirs.mean)
        close(ours.variance, theirs.variance)
        s = ours.rsample((5,))
        assert s.shape == (5, 4) and bool(ours.support.check(s).all())
    q = D.ContinuousBernoulli(probs=f(p[::-1].copy()))
    close(D.kl_divergence(D.ContinuousBernoulli(probs=f(p)), q),
          T.kl_divergence(T.ContinuousBernoulli(probs=g(p)), T.ContinuousBernoulli(probs=g(p[::-1].copy()))))
    with pytest.raises(ValueError):
        D.ContinuousBernoulli(probs=f([1.5]), validate_args=True)


def test_exponential_family_kl_is_bregman_divergence():
    """The generic Bregman KL of two continuous Bernoullis equals the closed form."""
    from fusegrad.distributions.kl import _kl_expfamily_expfamily
    p, q = D.ContinuousBernoulli(logits=f(X[0])), D.ContinuousBernoulli(logits=f(X[1]))
    close(_kl_expfamily_expfamily(p, q),
          T.kl_divergence(T.ContinuousBernoulli(logits=g(X[0])), T.ContinuousBernoulli(logits=g(X[1]))), rtol=1e-6)


def test_fisher_snedecor_matches_torch():
    df1, df2 = np.array([3.0, 1.5, 6.0]), np.array([5.0, 7.0, 3.0])
    ours, theirs = D.FisherSnedecor(f(df1), f(df2)), T.FisherSnedecor(g(df1), g(df2))
    v = POS[:, :3]
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)))
    for moment in ("mean", "variance", "mode"):
        close(getattr(ours, moment), getattr(theirs, moment))
    d1 = f(df1).requires_grad_()
    s = D.FisherSnedecor(d1, f(df2)).rsample((4,))
    assert s.shape == (4, 3) and bool(ours.support.check(s.detach()).all())
    (grad,) = fusegrad.autograd.grad(s.sum(), d1)
    assert np.all(np.isfinite(grad.numpy()))
    with pytest.raises(ValueError):
        D.FisherSnedecor(f([0.0]), f([1.0]))


def test_generalized_pareto_matches_torch():
    loc, scale, conc = np.array([0.0, 1.0, -1.0]), np.array([1.0, 2.0, 0.5]), np.array([0.3, 0.0, -0.2])
    ours, theirs = D.GeneralizedPareto(f(loc), f(scale), f(conc)), T.GeneralizedPareto(g(loc), g(scale), g(conc))
    v = np.array([[0.5, 1.5, -0.5], [2.0, 4.0, 0.5]])
    # PyTorch's log_prob compares the concentration with a float32 zero, so it needs float32.
    theirs32 = T.GeneralizedPareto(*(g(a).float() for a in (loc, scale, conc)))
    close(ours.log_prob(f(v)), theirs32.log_prob(g(v).float()).double(), rtol=1e-5)
    close(ours.cdf(f(v)), theirs32.cdf(g(v).float()).double(), rtol=1e-5)
    close(ours.log_survival_function(f(v)), theirs32.log_survival_function(g(v).float()).double(), rtol=1e-5)
    close(ours.icdf(f(UNIT[:2, :3])), theirs.icdf(g(UNIT[:2, :3])))
    for moment in ("mean", "variance", "mode"):
        close(getattr(ours, moment), getattr(theirs, moment))
    close(ours.entropy(), theirs.entropy())
    s = ours.rsample((10,))
    assert s.shape == (10, 3) and bool(ours.support.check(s).all())
    with pytest.raises(ValueError):
        ours.log_prob(f([[0.5, 1.5, 2.0]]))  # beyond the upper bound loc - scale / c of the third


def test_von_mises_matches_torch():
    loc, conc = np.array([0.5, -2.0, 3.0]), np.array([0.3, 2.0, 40.0])
    ours, theirs = D.VonMises(f(loc), f(conc)), T.VonMises(g(loc), g(conc))
    v = X[:, :3] * 2
    close(ours.log_prob(f(v)), theirs.log_prob(g(v)), rtol=1e-6)
    # PyTorch approximates the Bessel functions (3e-7 off at 40): SciPy is the oracle here.
    from scipy.special import i0e, i1e
    np.testing.assert_allclose(ours.variance.numpy(), 1 - i1e(conc) / i0e(conc), rtol=1e-12)
    close(ours.mean, theirs.mean)
    fusegrad.manual_seed(0)
    s = ours.sample((4000,)).numpy()
    assert s.shape == (4000, 3) and np.all(np.abs(s) <= np.pi)
    # E[exp(i x)] = (1 - circular variance) exp(i loc); each component's standard error is < 0.012.
    resultant = np.exp(1j * s).mean(0)
    assert np.all(np.abs(resultant - (1 - theirs.variance.numpy()) * np.exp(1j * loc)) < 0.05)
    assert tuple(ours.expand((2, 3)).sample().shape) == (2, 3)


def test_lowrank_and_continuous_bernoulli_kl_match_torch():
    w1, w2 = RNG.normal(size=(2, 3, 2)), RNG.normal(size=(3, 1))
    d1, d2, loc = POS[0, :3], POS[1, :3], X[:2, :3]
    cov = w2 @ w2.T + np.diag(d2) + np.eye(3)
    pairs = [
        (D.LowRankMultivariateNormal(f(loc), f(w1), f(d1)), D.LowRankMultivariateNormal(f(loc[0]), f(w2), f(d2)),
         T.LowRankMultivariateNormal(g(loc), g(w1), g(d1)), T.LowRankMultivariateNormal(g(loc[0]), g(w2), g(d2))),
        (D.MultivariateNormal(f(loc), f(cov)), D.LowRankMultivariateNormal(f(loc[0]), f(w1), f(d1)),
         T.MultivariateNormal(g(loc), g(cov)), T.LowRankMultivariateNormal(g(loc[0]), g(w1), g(d1))),
        (D.LowRankMultivariateNormal(f(loc), f(w1), f(d1)), D.MultivariateNormal(f(loc[1]), f(cov)),
         T.LowRankMultivariateNormal(g(loc), g(w1), g(d1)), T.MultivariateNormal(g(loc[1]), g(cov))),
    ]
    probs, other = UNIT[0, :3], UNIT[1, :3]
    cb, tcb = D.ContinuousBernoulli(probs=f(probs)), T.ContinuousBernoulli(probs=g(probs))
    pairs += [
        (D.Beta(f(POS[0, :3]), f(POS[1, :3])), cb, T.Beta(g(POS[0, :3]), g(POS[1, :3])), tcb),
        (D.Uniform(f(other * 0.5), f(other * 0.5 + 0.3)), cb, T.Uniform(g(other * 0.5), g(other * 0.5 + 0.3)), tcb),
        (cb, D.Exponential(f(POS[0, :3])), tcb, T.Exponential(g(POS[0, :3]))),
        (cb, D.Normal(f(X[0, :3]), f(POS[0, :3])), tcb, T.Normal(g(X[0, :3]), g(POS[0, :3]))),
        (cb, D.Uniform(f([-0.5, 0.1, -1.0]), f([1.5, 2.0, 0.9])), tcb, T.Uniform(g([-0.5, 0.1, -1.0]),
                                                                                  g([1.5, 2.0, 0.9]))),
        (D.Normal(f(X[0, :3]), f(POS[0, :3])), cb, T.Normal(g(X[0, :3]), g(POS[0, :3])), tcb),
    ]
    for p, q, tp, tq in pairs:
        close(D.kl_divergence(p, q), T.kl_divergence(tp, tq), rtol=1e-6)
