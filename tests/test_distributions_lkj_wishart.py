"""``LKJCholesky``, ``Wishart`` and ``CorrCholeskyTransform`` (with the constraints
``corr_cholesky``, ``positive_semidefinite``, ``symmetric``, ``square``, ``lower_triangular``),
checked against PyTorch on the same inputs (float64); samples, whose random streams differ
from PyTorch's, by their shapes, their validity and a Monte-Carlo mean."""
import warnings

import numpy as np
import pytest
import torch

import fusegrad
from fusegrad import distributions as D

T = torch.distributions
pytestmark = pytest.mark.torch


def f(a, requires_grad=False):
    return fusegrad.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def g(a, requires_grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def close(ours, theirs, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(ours.detach().numpy()), theirs.detach().numpy(), rtol=rtol, atol=atol)


RNG = np.random.default_rng(1234)
X6 = RNG.normal(size=(2, 3, 6))  # batches of unconstrained vectors for 4 x 4 correlation factors


def _spd(batch, p, rng=RNG):
    a = rng.normal(size=batch + (p, p))
    return a @ np.swapaxes(a, -1, -2) + 0.5 * np.eye(p)


def _corr_factors(x):
    """Cholesky factors of correlation matrices, made by NumPy (not by the transform under test)."""
    c = _spd(x.shape[:-1], 4, np.random.default_rng(7))
    d = np.sqrt(np.diagonal(c, axis1=-2, axis2=-1))
    return np.linalg.cholesky(c / d[..., :, None] / d[..., None, :])


# --------------------------------------------------------------------------- CorrCholeskyTransform
def test_corr_cholesky_transform_forward_inverse_logdet():
    ft, tt = D.CorrCholeskyTransform(), T.CorrCholeskyTransform()
    fy, ty = ft(f(X6)), tt(g(X6))
    assert tuple(fy.shape) == tuple(ty.shape) == (2, 3, 4, 4)
    close(fy, ty)
    close(ft.inv(fy), tt.inv(ty))
    close(ft.inv(fy), g(X6), rtol=1e-9)
    close(ft.log_abs_det_jacobian(f(X6), fy), tt.log_abs_det_jacobian(g(X6), ty))
    # the inverse on factors that did not come from the forward map
    lf = _corr_factors(X6)
    close(ft.inv(f(lf)), tt.inv(g(lf)))
    # 2 x 2 factors (one free entry)
    x1 = RNG.normal(size=(5, 1))
    close(ft(f(x1)), tt(g(x1)))
    close(ft.log_abs_det_jacobian(f(x1), ft(f(x1))), tt.log_abs_det_jacobian(g(x1), tt(g(x1))))


def test_corr_cholesky_transform_gradients():
    fx, tx = f(X6, True), g(X6, True)
    wts = RNG.normal(size=(2, 3, 4, 4))
    ft, tt = D.CorrCholeskyTransform(), T.CorrCholeskyTransform()
    fy, ty = ft(fx), tt(tx)
    ((fy * f(wts)).sum() + ft.log_abs_det_jacobian(fx, fy).sum()).backward()
    ((ty * g(wts)).sum() + tt.log_abs_det_jacobian(tx, ty).sum()).backward()
    close(fx.grad, tx.grad)
    lf = _corr_factors(X6)
    fl, tl = f(lf, True), g(lf, True)
    (ft.inv(fl) ** 2).sum().backward()
    (tt.inv(tl) ** 2).sum().backward()
    close(fl.grad, tl.grad)


def test_corr_cholesky_transform_shapes_and_attributes():
    ft, tt = D.CorrCholeskyTransform(), T.CorrCholeskyTransform()
    for shape in [(6,), (2, 3, 6), (1,), (10,)]:
        assert tuple(ft.forward_shape(shape)) == tuple(tt.forward_shape(torch.Size(shape)))
    for shape in [(4, 4), (2, 3, 4, 4), (2, 2)]:
        assert tuple(ft.inverse_shape(shape)) == tuple(tt.inverse_shape(torch.Size(shape)))
    for bad in [(), (5,)]:
        with pytest.raises(ValueError):
            ft.forward_shape(bad)
    for bad in [(4,), (3, 4)]:
        with pytest.raises(ValueError):
            ft.inverse_shape(bad)
    assert ft.bijective and ft.domain is D.constraints.real_vector and ft.codomain is D.constraints.corr_cholesky
    assert (ft.domain.event_dim, ft.codomain.event_dim) == (1, 2)
    # equality as PyTorch's: by identity (the class defines no __eq__)
    assert (ft == ft, ft == D.CorrCholeskyTransform()) == (tt == tt, tt == T.CorrCholeskyTransform())
    assert ft.inv.inv is ft and ft.inv == ft.inv
    cached = ft.with_cache(1)
    y = cached(f(X6))
    assert cached.inv(y) is not None and cached._cache_size == 1
    assert isinstance(D.transforms.CorrCholeskyTransform(), D.Transform)


def test_corr_cholesky_constraint_and_registry():
    for reg in ("biject_to", "transform_to"):
        assert isinstance(getattr(D, reg)(D.constraints.corr_cholesky), D.CorrCholeskyTransform)
        assert isinstance(getattr(T, reg)(T.constraints.corr_cholesky), T.CorrCholeskyTransform)
    assert isinstance(D.transform_to(D.constraints.positive_semidefinite), D.PositiveDefiniteTransform)
    lf = _corr_factors(X6)
    bad = lf.copy()
    bad[0, 0, 2, 2] *= 1.01  # a row off the unit sphere
    bad[1, 2, 0, 1] = 0.1  # not lower triangular
    bad[0, 1, 3, 3] *= -1  # a negative diagonal entry (row norm still 1)
    for c_ours, c_theirs in [(D.constraints.corr_cholesky, T.constraints.corr_cholesky),
                             (D.constraints.lower_triangular, T.constraints.lower_triangular),
                             (D.constraints.lower_cholesky, T.constraints.lower_cholesky)]:
        for m in (lf, bad):
            np.testing.assert_array_equal(c_ours.check(f(m)).numpy(), c_theirs.check(g(m)).numpy())
        assert c_ours.event_dim == c_theirs.event_dim == 2


def test_matrix_constraints_match_torch():
    spd = _spd((3,), 3)
    neg = -spd
    asym = spd + np.triu(np.ones(3), 1)
    for name in ("symmetric", "positive_semidefinite", "positive_definite", "square"):
        ours, theirs = getattr(D.constraints, name), getattr(T.constraints, name)
        assert ours.event_dim == theirs.event_dim == 2
        for m in (spd, neg, asym):
            np.testing.assert_array_equal(ours.check(f(m)).numpy(), theirs.check(g(m)).numpy(), err_msg=name)
    # semidefinite but singular: in positive_semidefinite, not in positive_definite
    assert bool(D.constraints.positive_semidefinite.check(f(np.diag([1.0, 0.0, 2.0]))).all())
    assert not bool(D.constraints.positive_definite.check(f(np.diag([1.0, 0.0, 2.0]))).all())
    np.testing.assert_array_equal(D.constraints.square.check(f(np.zeros((2, 3, 4)))).numpy(), [False, False])
    assert D.constraints.positive_integer.check(f([0.0, 1.0, 2.5, 3.0])).numpy().tolist() == \
        T.constraints.positive_integer.check(g([0.0, 1.0, 2.5, 3.0])).tolist()


# --------------------------------------------------------------------------- LKJCholesky
CONCS = [1.0, 0.5, np.array([0.3, 1.0, 2.5])]


def _lkj(mod, tens, dim, conc, **kw):
    return mod.LKJCholesky(dim, tens(conc) if isinstance(conc, np.ndarray) else conc, **kw)


@pytest.mark.parametrize("conc", CONCS)
@pytest.mark.parametrize("dim", [2, 4])
def test_lkj_log_prob_matches_torch(dim, conc):
    fd, td = _lkj(D, f, dim, conc), _lkj(T, g, dim, conc)
    assert tuple(fd.batch_shape) == tuple(td.batch_shape) and tuple(fd.event_shape) == tuple(td.event_shape)
    x = RNG.normal(size=(5, 1, dim * (dim - 1) // 2))
    value = T.CorrCholeskyTransform()(g(x)).numpy()
    close(fd.log_prob(f(value)), td.log_prob(g(value)))


def test_lkj_log_prob_gradient():
    conc = np.array([0.3, 1.0, 2.5])
    value = T.CorrCholeskyTransform()(g(RNG.normal(size=(2, 3, 3)))).numpy()
    fc, tc, fv, tv = f(conc, True), g(conc, True), f(value, True), g(value, True)
    D.LKJCholesky(3, fc).log_prob(fv).sum().backward()
    T.LKJCholesky(3, tc).log_prob(tv).sum().backward()
    close(fc.grad, tc.grad)
    close(fv.grad, tv.grad)


def test_lkj_attributes_expand_and_validation():
    fd, td = D.LKJCholesky(3, 2.0), T.LKJCholesky(3, 2.0)
    assert fd.support is D.constraints.corr_cholesky
    assert set(fd.arg_constraints) == set(td.arg_constraints) == {"concentration"}
    assert fd.arg_constraints["concentration"] is D.constraints.positive
    assert not fd.has_rsample
    fe, te = fd.expand((2, 5)), td.expand((2, 5))
    assert tuple(fe.batch_shape) == tuple(te.batch_shape) == (2, 5)
    assert tuple(fe.sample((3,)).shape) == tuple(te.sample((3,)).shape) == (3, 2, 5, 3, 3)
    value = T.CorrCholeskyTransform()(g(RNG.normal(size=(2, 5, 3)))).numpy()
    close(fe.log_prob(f(value)), te.log_prob(g(value)))
    with pytest.raises(ValueError):
        D.LKJCholesky(1, 1.0)
    with pytest.raises(ValueError):
        D.LKJCholesky(3, -1.0, validate_args=True)
    checked = D.LKJCholesky(3, 2.0, validate_args=True)
    with pytest.raises(ValueError):
        checked.log_prob(f(2 * np.eye(3)))  # rows not of unit norm


@pytest.mark.parametrize("conc", CONCS)
def test_lkj_samples_are_correlation_cholesky_factors(conc):
    fusegrad.manual_seed(0)
    fd = _lkj(D, f, 4, conc)
    s = fd.sample((200,))
    assert tuple(s.shape) == (200,) + tuple(fd.batch_shape) + (4, 4)
    a = s.numpy()
    assert np.all(np.triu(a, 1) == 0) and np.all(np.diagonal(a, axis1=-2, axis2=-1) > 0)
    corr = a @ np.swapaxes(a, -1, -2)
    assert a.dtype == (np.float64 if isinstance(conc, np.ndarray) else np.float32)  # the default dtype, as torch
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, rtol=0,
                               atol=1e-12 if a.dtype == np.float64 else 1e-6)
    assert np.all(np.linalg.eigvalsh(corr) > 0)
    assert bool(D.constraints.corr_cholesky.check(s).all())
    assert np.all(np.isfinite(fd.log_prob(s).numpy()))


@pytest.mark.parametrize("dim,eta", [(3, 2.0), (5, 0.7)])
def test_lkj_sample_marginals_match_the_density(dim, eta):
    """Under LKJ(eta) in dimension d every off-diagonal correlation is 2 B - 1 with
    B ~ Beta(b, b), b = eta - 1 + d / 2, so E[r^2] = 1 / (2 b + 1) for each entry. (PyTorch
    2.13's sampler fails this for the rows past the second: its beta concentration1 is k - 1/2
    where the onion method has k / 2; fusegrad's follows NumPyro's.)"""
    fusegrad.manual_seed(1)
    n = 4000
    a = D.LKJCholesky(dim, eta).sample((n,)).numpy().astype(np.float64)
    i, j = np.tril_indices(dim, -1)
    r2 = (a @ np.swapaxes(a, -1, -2))[:, i, j] ** 2
    mean = 1 / (2 * (eta - 1 + dim / 2) + 1)
    # Var[r^2] <= E[r^4] <= E[r^2]: 5 standard errors per entry
    assert np.all(np.abs(r2.mean(0) - mean) < 5 * np.sqrt(mean / n)), r2.mean(0)


# --------------------------------------------------------------------------- Wishart
P = 3
COV = _spd((2,), P)
DF = np.array([3.5, 7.0])


def _wisharts(kind, df=DF, cov=COV, **kw):
    m = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
         "scale_tril": np.linalg.cholesky(cov)}[kind]
    dfs = (f(df), g(df)) if isinstance(df, np.ndarray) else (df, df)
    return D.Wishart(dfs[0], **{kind: f(m)}, **kw), T.Wishart(dfs[1], **{kind: g(m)}, **kw)


KINDS = ["covariance_matrix", "precision_matrix", "scale_tril"]


@pytest.mark.parametrize("kind", KINDS)
def test_wishart_moments_and_parameters(kind):
    fd, td = _wisharts(kind)
    assert tuple(fd.batch_shape) == tuple(td.batch_shape) == (2,)
    assert tuple(fd.event_shape) == tuple(td.event_shape) == (P, P)
    for name in ("mean", "mode", "variance", "covariance_matrix", "precision_matrix", "scale_tril", "df"):
        close(getattr(fd, name), getattr(td, name), rtol=1e-9)
    assert np.isnan(fd.mode.numpy()[0]).all()  # df <= p + 1: no mode
    close(fd.entropy(), td.entropy())
    close(D.ExponentialFamily.entropy(fd), td.entropy(), rtol=1e-9)  # from the log normalizer


@pytest.mark.parametrize("kind", KINDS)
def test_wishart_log_prob_matches_torch(kind):
    fd, td = _wisharts(kind)
    values = _spd((4, 2), P)
    close(fd.log_prob(f(values)), td.log_prob(g(values)))
    # one matrix broadcast over the batch (its shape equals scale_tril.shape[:-1] when p == batch size)
    v1 = _spd((), P)
    close(fd.log_prob(f(v1)), td.log_prob(g(v1)))


def test_wishart_scalar_df_and_batch_broadcast():
    cov = _spd((), 2)
    df = np.array([[2.5], [4.0], [9.0]])  # (3, 1) against an unbatched matrix
    fd, td = D.Wishart(f(df), covariance_matrix=f(cov)), T.Wishart(g(df), covariance_matrix=g(cov))
    assert tuple(fd.batch_shape) == tuple(td.batch_shape) == (3, 1)
    values = _spd((5, 3, 1), 2)
    close(fd.log_prob(f(values)), td.log_prob(g(values)))
    close(fd.entropy(), td.entropy())
    close(fd.variance, td.variance)
    lo = np.linalg.cholesky(COV)
    fs, ts = D.Wishart(4.0, scale_tril=f(lo)), T.Wishart(4.0, scale_tril=g(lo))
    assert tuple(fs.batch_shape) == tuple(ts.batch_shape) == (2,)
    assert fs.df.dtype == fusegrad.float64 and tuple(fs.df.shape) == tuple(ts.df.shape) == ()
    # PyTorch's mean/mode/variance fail here (a 0-d df viewed as (2, 1, 1)); fusegrad broadcasts it
    tb = T.Wishart(g([4.0, 4.0]), scale_tril=g(lo))
    for name in ("mean", "mode", "variance"):
        close(getattr(fs, name), getattr(tb, name))
    close(fs.entropy(), ts.entropy())
    close(fs.log_prob(f(COV)), ts.log_prob(g(COV)))


def test_wishart_gradients():
    values = _spd((2,), P)
    l = np.linalg.cholesky(COV)
    fdf, tdf, fl, tl, fv, tv = f(DF, True), g(DF, True), f(l, True), g(l, True), f(values, True), g(values, True)
    fd, td = D.Wishart(fdf, scale_tril=fl), T.Wishart(tdf, scale_tril=tl)
    (fd.log_prob(fv).sum() + fd.entropy().sum()).backward()
    (td.log_prob(tv).sum() + td.entropy().sum()).backward()
    # the entropy's df-derivative takes trigamma, which PyTorch computes to ~5e-10 relative (fusegrad to 1e-15)
    close(fdf.grad, tdf.grad, rtol=1e-8)
    close(fl.grad, tl.grad, rtol=1e-9)
    close(fv.grad, tv.grad, rtol=1e-9)


def test_wishart_expand():
    fd, td = _wisharts("covariance_matrix")
    fe, te = fd.expand((4, 2)), td.expand((4, 2))
    assert tuple(fe.batch_shape) == tuple(te.batch_shape) == (4, 2)
    for name in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        close(getattr(fe, name), getattr(te, name), rtol=1e-9)
    values = _spd((4, 2), P)
    close(fe.log_prob(f(values)), te.log_prob(g(values)))
    close(fe.entropy(), te.entropy())
    assert tuple(fe.rsample((3,)).shape) == (3, 4, 2, P, P)


def test_wishart_validation_errors_match_torch():
    cases = [
        dict(df=2.0, covariance_matrix=np.eye(3)),  # df <= p - 1
        dict(df=3.0),  # no matrix
        dict(df=3.0, covariance_matrix=np.eye(3), scale_tril=np.eye(3)),  # two matrices
        dict(df=3.0, covariance_matrix=np.ones(3)),  # one-dimensional
        dict(df=4.0, covariance_matrix=-np.eye(3), validate_args=True),
        dict(df=4.0, scale_tril=np.ones((3, 3)), validate_args=True),
        dict(df=4.0, precision_matrix=np.triu(np.ones((3, 3))), validate_args=True),
    ]
    for case in cases:
        errors = []
        for mod, tens in ((D, f), (T, g)):
            kw = {k: tens(v) if isinstance(v, np.ndarray) else v for k, v in case.items()}
            with pytest.raises(Exception) as info:
                mod.Wishart(**kw)
            errors.append(info.type)
        assert errors[0] is errors[1], case
    with pytest.warns(UserWarning, match="Low df values"):
        D.Wishart(2.5, covariance_matrix=f(np.eye(3)))
    fd = D.Wishart(4.0, covariance_matrix=f(np.eye(3)), validate_args=True)
    with pytest.raises(ValueError):
        fd.log_prob(f(-np.eye(3)))
    assert fd.support is D.constraints.positive_definite and fd.has_rsample
    assert set(fd.arg_constraints) == set(T.Wishart(4.0, covariance_matrix=g(np.eye(3))).arg_constraints)
    assert repr(fd.arg_constraints["df"]) == "GreaterThan(lower_bound=2)"


def test_wishart_samples_shapes_validity_and_mean():
    fusegrad.manual_seed(0)
    fd, _ = _wisharts("scale_tril", df=np.array([4.0, 9.0]))
    n = 4000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no singular-sample warning for these df
        s = fd.rsample((n,))
    assert tuple(s.shape) == (n, 2, P, P)
    assert tuple(fd.sample().shape) == (2, P, P)
    a = s.numpy()
    np.testing.assert_allclose(a, np.swapaxes(a, -1, -2), rtol=1e-12, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(a) > 0)
    # the mean within 5 standard errors per entry (sd from the distribution's own variance)
    se = np.sqrt(fd.variance.numpy() / n)
    assert np.all(np.abs(a.mean(0) - fd.mean.numpy()) < 5 * se)
    # variance within 25% (4000 samples of fourth-moment quantities)
    np.testing.assert_allclose(a.var(0), fd.variance.numpy(), rtol=0.25)


def test_wishart_rsample_differentiates():
    fusegrad.manual_seed(3)
    l = np.linalg.cholesky(COV)
    fl, fdf = f(l, True), f(DF + 2, True)
    s = D.Wishart(fdf, scale_tril=fl).rsample((5,))
    s.sum().backward()
    assert fl.grad is not None and np.all(np.isfinite(fl.grad.numpy())) and np.any(fl.grad.numpy() != 0)
    assert fdf.grad is not None and np.all(np.isfinite(fdf.grad.numpy())) and np.any(fdf.grad.numpy() != 0)
    fusegrad.manual_seed(4)
    w = D.Wishart(f(DF + 2), scale_tril=f(np.eye(P)))
    assert bool(D.constraints.positive_definite.check(w.rsample()).all())


def test_exports():
    for name in ("LKJCholesky", "Wishart", "CorrCholeskyTransform"):
        assert name in D.__all__ and hasattr(T, name)
    assert D.CorrCholeskyTransform is D.transforms.CorrCholeskyTransform
    assert "CorrCholeskyTransform" in D.transforms.__all__
    for name in ("corr_cholesky", "positive_semidefinite", "symmetric", "square", "lower_triangular",
                 "positive_integer"):
        assert name in D.constraints.__all__ and name in T.constraints.__all__


def test_log_probs_compile_as_one_graph():
    """Wishart's data-dependent checks (df > p - 1, the low-df warning, the multivariate
    digamma's domain) are left out of a one-graph trace, as validation is; the values match eager."""
    def fn(df, scale_tril, values, x):
        w = D.Wishart(df, scale_tril=scale_tril, validate_args=False)
        t = D.CorrCholeskyTransform()
        y = t(x)
        lkj = D.LKJCholesky(3, df, validate_args=False)
        return (w.log_prob(values) + w.entropy()).sum() + lkj.log_prob(y).sum() + t.log_abs_det_jacobian(x, y).sum()

    args = (f(DF + 1), f(np.linalg.cholesky(COV)), f(_spd((2,), P)), f(RNG.normal(size=(2, 3))))
    close(fusegrad.compile(fn, fullgraph=True)(*args), fn(*args), rtol=1e-9)
