"""The SVD family against PyTorch: linalg.svd, linalg.svdvals, torch.svd, the pseudoinverse,
the singular-value norms, matrix_rank and cond. Singular values compare directly; singular
vectors (unique up to sign for distinct singular values) compare after aligning signs, and
through reconstructions. Gradients (first and second order, float64) are checked
numerically and against PyTorch on losses that do not depend on the signs; tangents with
jacfwd, batching with vmap."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck
from helpers import compiled_matches_eager

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_rng = np.random.default_rng(11)
INF = float("inf")
SHAPES = [(4, 3), (3, 5), (3, 3), (2, 4, 3), (2, 3, 2, 5), (1, 1)]


def _t(mod, a, **kw):
    return mod.tensor(a, **kw)


def _aligned(u, vh, tu, tvh, k):
    """``u``'s first k columns and ``vh``'s first k rows with the signs that match torch's."""
    u, vh = u[..., :, :k], vh[..., :k, :]
    sign = np.sign(np.sum(u * tu[..., :, :k], axis=-2))
    sign[sign == 0] = 1
    return u * sign[..., None, :], vh * sign[..., :, None]


def _tol(dtype):
    return 1e-10 if dtype == np.float64 else 2e-4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_svd_values_match_torch(shape, full, dtype):
    a = _rng.standard_normal(shape).astype(dtype)
    got = fg.linalg.svd(_t(fg, a), full_matrices=full)
    want = torch.linalg.svd(_t(torch, a), full_matrices=full)
    assert type(got).__name__ == type(want).__name__ == "linalg_svd" and got._fields == ("U", "S", "Vh")
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and g.numpy().dtype == w.numpy().dtype
    u, s, vh = (x.numpy() for x in got)
    tu, ts, tvh = (x.numpy() for x in want)
    tol = _tol(dtype)
    k = min(shape[-2:])
    np.testing.assert_allclose(s, ts, rtol=tol, atol=tol)
    au, avh = _aligned(u, vh, tu, tvh, k)
    np.testing.assert_allclose(au, tu[..., :, :k], atol=tol * 10)
    np.testing.assert_allclose(avh, tvh[..., :k, :], atol=tol * 10)
    # the factors reconstruct A and are orthonormal (a full U / Vh is square orthogonal)
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=tol * 10)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.eye(u.shape[-1]) + 0 * u[..., :1, :1], atol=tol * 10)
    np.testing.assert_allclose(vh @ np.swapaxes(vh, -1, -2), np.eye(vh.shape[-2]) + 0 * vh[..., :1, :1],
                               atol=tol * 10)
    s_only = fg.linalg.svdvals(_t(fg, a))
    assert s_only.numpy().dtype == dtype
    np.testing.assert_allclose(s_only.numpy(), torch.linalg.svdvals(_t(torch, a)).numpy(), rtol=tol, atol=tol)


def test_torch_svd_and_method():
    a = _rng.standard_normal((2, 5, 3))
    x, t = _t(fg, a), _t(torch, a)
    for kw in ({}, dict(some=False)):
        got, want = fg.svd(x, **kw), torch.svd(t, **kw)
        assert type(got).__name__ == "svd" and got._fields == ("U", "S", "V")
        assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
        u, vh = _aligned(got.U.numpy(), got.V.mT.numpy(), want.U.numpy(), want.V.mT.numpy(), 3)
        np.testing.assert_allclose(u, want.U.numpy()[..., :3], atol=1e-10)
        np.testing.assert_allclose(vh, want.V.mT.numpy(), atol=1e-10)
        np.testing.assert_allclose(got.S.numpy(), want.S.numpy(), rtol=1e-12)
    got, want = x.svd(compute_uv=False), t.svd(compute_uv=False)
    assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want] == [(2, 5, 5), (2, 3), (2, 3, 3)]
    assert not got.U.numpy().any() and not got.V.numpy().any()
    np.testing.assert_allclose(got.S.numpy(), want.S.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.svd().S.numpy(), want.S.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 0), (0, 3, 4), (2, 0, 3)], ids=str)
def test_empty_shapes_as_torch(shape):
    a = np.zeros(shape)
    for full in (True, False):
        got = fg.linalg.svd(_t(fg, a), full_matrices=full)
        want = torch.linalg.svd(_t(torch, a), full_matrices=full)
        for g, w in zip(got, want):  # an empty side's full basis: the identity, as PyTorch's
            assert tuple(g.shape) == tuple(w.shape)
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    for f in ("svdvals", "pinv", "matrix_rank"):
        g, w = getattr(fg.linalg, f)(_t(fg, a)), getattr(torch.linalg, f)(_t(torch, a))
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def _rank_deficient():
    a = _rng.standard_normal((3, 4, 3))
    a[1, :, 2] = a[1, :, 0] + a[1, :, 1]  # rank 2
    a[2] *= 1e-3
    return a


@pytest.mark.parametrize("kw", [{}, dict(atol=0.5), dict(rtol=0.3), dict(atol=0.1, rtol=0.2), dict(hermitian=True),
                                dict(rtol=1e-2, hermitian=True)], ids=str)
def test_pinv_and_matrix_rank_match_torch(kw):
    a = _rng.standard_normal((2, 3, 3)) if kw.get("hermitian") else _rank_deficient()
    g, w = fg.linalg.pinv(_t(fg, a), **kw), torch.linalg.pinv(_t(torch, a), **kw)
    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-9, atol=1e-9)
    g, w = fg.linalg.matrix_rank(_t(fg, a), **kw), torch.linalg.matrix_rank(_t(torch, a), **kw)
    assert g.dtype == fg.int64
    np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_pinverse_tolerances_and_float32():
    a = _rank_deficient()
    x, t = _t(fg, a), _t(torch, a)
    np.testing.assert_allclose(fg.pinverse(x).numpy(), torch.pinverse(t).numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(x.pinverse(rcond=0.1).numpy(), t.pinverse(rcond=0.1).numpy(), rtol=1e-9, atol=1e-9)
    atol = np.array([0.1, 5.0, 1e-4])
    g = fg.linalg.matrix_rank(x, atol=_t(fg, atol))
    np.testing.assert_array_equal(g.numpy(), torch.linalg.matrix_rank(t, atol=_t(torch, atol)).numpy())
    np.testing.assert_array_equal(fg.linalg.matrix_rank(x, tol=0.5).numpy(),
                                  torch.linalg.matrix_rank(t, tol=0.5).numpy())
    a32 = _rng.standard_normal((4, 6)).astype(np.float32)
    g, w = fg.linalg.pinv(_t(fg, a32)), torch.linalg.pinv(_t(torch, a32))
    assert g.numpy().dtype == np.float32
    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-5)


NORM_CASES = [
    ("linalg.matrix_norm", (2, 3, 4), dict(ord="nuc")),
    ("linalg.matrix_norm", (2, 3, 4), dict(ord=2)),
    ("linalg.matrix_norm", (2, 3, 4), dict(ord=-2, keepdim=True)),
    ("linalg.matrix_norm", (2, 3, 4), dict(ord=2, dim=(0, 2), keepdim=True)),
    ("linalg.matrix_norm", (2, 3, 4), dict(ord="nuc", dim=(2, 0))),
    ("linalg.norm", (3, 4), dict(ord="nuc")),
    ("linalg.norm", (3, 4), dict(ord=-2)),
    ("linalg.norm", (2, 3, 4), dict(ord=2, dim=(1, 2))),
    ("linalg.cond", (2, 4, 4), {}),
    ("linalg.cond", (3, 5), {}),
    ("linalg.cond", (5, 3), dict(p=-2)),
] + [("linalg.cond", (2, 3, 3), dict(p=p)) for p in ("fro", "nuc", 1, -1, INF, -INF)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,shape,kw", NORM_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(NORM_CASES)])
def test_singular_value_norms_match_torch(name, shape, kw, dtype):
    a = _rng.standard_normal(shape).astype(dtype)
    fname = name.split(".")[1]
    g, w = getattr(fg.linalg, fname)(_t(fg, a), **kw), getattr(torch.linalg, fname)(_t(torch, a), **kw)
    assert tuple(g.shape) == tuple(w.shape) and g.numpy().dtype == w.numpy().dtype
    tol = _tol(dtype)
    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol * 10, atol=tol)


def test_errors_as_torch():
    bad = [("linalg.svd", np.ones(3), {}), ("linalg.svd", np.ones((2, 2), np.int64), {}),
           ("linalg.svdvals", np.ones(3), {}), ("svd", np.ones(3), {}), ("linalg.pinv", np.ones(3), {}),
           ("linalg.pinv", np.ones((3, 3), np.int64), {}), ("linalg.pinv", np.ones((2, 3)), dict(hermitian=True)),
           ("linalg.matrix_rank", np.ones(3), {}), ("linalg.cond", np.ones((2, 3)), dict(p=1)),
           ("linalg.cond", np.ones((3, 3)), dict(p=3)), ("linalg.matrix_norm", np.ones((3, 3)), dict(ord="abc"))]
    for f, a, kw in bad:
        msgs = []
        for mod in (torch, fg):
            fn = mod
            for part in f.split("."):
                fn = getattr(fn, part)
            with pytest.raises(RuntimeError) as e:
                fn(mod.tensor(a), **kw)
            msgs.append(str(e.value))
        assert msgs[0] in msgs[1], f


# ---------------------------------------------------------------- gradients
def _invariant(u, s, vh):
    """Outputs of the reduced factors that do not depend on the singular vectors' signs."""
    k = s.shape[-1]
    u, vh = u[..., :, :k], vh[..., :k, :]
    return s, (u * s.unsqueeze(-2)) @ vh * 1.5 + u @ vh, u @ u.mT, vh.mT @ vh


GRAD_CASES = {
    "svd": lambda a: _invariant(*fg.linalg.svd(a, full_matrices=False)),
    "svd_full": lambda a: _invariant(*fg.linalg.svd(a)),
    "svd_raw": lambda a: tuple(fg.linalg.svd(a, full_matrices=False)),  # locally the signs are fixed
    "torch_svd": lambda a: (lambda u, s, v: (u * s.unsqueeze(-2)) @ v.mT)(*fg.svd(a)),
    "svdvals": lambda a: fg.linalg.svdvals(a),
    "pinv": lambda a: fg.linalg.pinv(a),
    "norms": lambda a: (fg.linalg.matrix_norm(a, "nuc"), fg.linalg.matrix_norm(a, 2), fg.linalg.matrix_norm(a, -2)),
    "cond": lambda a: fg.linalg.cond(a),
}


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck_and_gradgradcheck(name, shape):
    a = fg.tensor(_rng.standard_normal(shape), requires_grad=True)
    assert gradcheck(GRAD_CASES[name], (a,))
    assert gradgradcheck(GRAD_CASES[name], (a,))


def _loss(mod, a, full):
    u, s, vh = mod.linalg.svd(a, full_matrices=full)
    k = s.shape[-1]
    u, vh = u[..., :, :k], vh[..., :k, :]
    w = mod.tensor(np.arange(1.0, k + 1.0))
    r = (u * s.unsqueeze(-2)) @ vh
    return ((s * w).sum() + (r ** 3).sum() + ((u @ u.mT) ** 2 * 1.7).sum() + (vh.mT @ vh).sin().sum()
            + (u ** 2).exp().sum() + (vh ** 2 * w.unsqueeze(-1)).sum())


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (3, 3), (2, 4, 3), (2, 2, 5)], ids=str)
def test_gradients_match_torch(shape, full):
    a = _rng.standard_normal(shape)
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    _loss(fg, x, full).backward()
    _loss(torch, t, full).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)], ids=str)
def test_derived_gradients_match_torch(shape):
    a = _rng.standard_normal(shape)
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)

    def f(mod, a):
        return ((mod.linalg.pinv(a) ** 2).sum() * 1.3 + mod.linalg.matrix_norm(a, "nuc").sum()
                + mod.linalg.matrix_norm(a, 2).sum() + mod.linalg.matrix_norm(a, -2).sum() + mod.linalg.cond(a).sum()
                + mod.pinverse(a).sin().sum() + (mod.linalg.svdvals(a) ** 2).sum())

    f(fg, x).backward()
    f(torch, t).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_svdvals_gradient_at_repeated_singular_values():
    # U diag(gS) Vh needs no singular value gaps: finite at the identity, as PyTorch's
    for ord_ in ("nuc", 2):
        x = fg.eye(3, dtype=fg.float64, requires_grad=True)
        t = torch.eye(3, dtype=torch.float64, requires_grad=True)
        fg.linalg.matrix_norm(x * 2.0, ord_).backward()
        torch.linalg.matrix_norm(t * 2.0, ord_).backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_gradient_of_empty_matrices_is_empty():
    x = fg.zeros(2, 0, 3, dtype=fg.float64, requires_grad=True)
    u, s, vh = fg.linalg.svd(x)
    (u.sum() + s.sum() + vh.sum() + fg.linalg.svdvals(x).sum()).backward()
    assert tuple(x.grad.shape) == (2, 0, 3)


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (3, 3)], ids=str)
def test_jacfwd_matches_torch(shape, full):
    a = _rng.standard_normal(shape)
    k = min(shape)

    def f(mod):
        def g(x):
            u, s, vh = mod.linalg.svd(x, full_matrices=full)
            u, vh = u[..., :, :k], vh[..., :k, :]
            return mod.cat([s, (u @ vh).reshape(-1), (u ** 2 @ vh ** 2).reshape(-1)])
        return g

    got = fg.func.jacfwd(f(fg))(fg.tensor(a))
    want = torch.func.jacfwd(f(torch))(torch.tensor(a))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    # forward mode proper (the primitives' JVP rules), one tangent
    t = _rng.standard_normal(shape)
    got = fg.func.jvp(f(fg), (fg.tensor(a),), (fg.tensor(t),))[1]
    want = torch.func.jvp(f(torch), (torch.tensor(a),), (torch.tensor(t),))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    got = fg.func.jvp(fg.linalg.svdvals, (fg.tensor(a),), (fg.tensor(t),))[1]
    want = torch.func.jvp(torch.linalg.svdvals, (torch.tensor(a),), (torch.tensor(t),))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    got = fg.func.jacfwd(fg.linalg.svdvals)(fg.tensor(a))
    want = torch.func.jacfwd(torch.linalg.svdvals)(torch.tensor(a))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)


def test_vmap_matches_a_loop():
    a = _rng.standard_normal((5, 3, 4))
    x = fg.tensor(a)
    got = fg.func.vmap(fg.linalg.svdvals)(x)
    want = np.stack([fg.linalg.svdvals(fg.tensor(a[i])).numpy() for i in range(5)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    got = fg.func.vmap(fg.linalg.svdvals, in_dims=2)(x)  # a batch axis that is not the first
    want = np.stack([fg.linalg.svdvals(fg.tensor(a[:, :, i])).numpy() for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)

    def recon(m):
        u, s, vh = fg.linalg.svd(m, full_matrices=False)
        return (u * s.unsqueeze(-2)) @ vh + fg.linalg.pinv(m).mT

    got = fg.func.vmap(recon)(x)
    want = np.stack([recon(fg.tensor(a[i])).numpy() for i in range(5)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # per-sample gradients of the nuclear norm
    g = fg.func.vmap(fg.func.grad(lambda m: fg.linalg.matrix_norm(m, "nuc")))(x)
    t = torch.func.vmap(torch.func.grad(lambda m: torch.linalg.matrix_norm(m, "nuc")))(torch.tensor(a))
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)


def test_compiled_matches_eager():
    a = _rng.standard_normal((2, 4, 3))

    def step(x):
        u, s, vh = fg.linalg.svd(x * 2.0, full_matrices=False)
        return ((u * s.unsqueeze(-2)) @ vh).sum() + fg.linalg.matrix_norm(x, "nuc").sum()

    compiled_matches_eager(step, a)


def test_out_and_return_types():
    a = _rng.standard_normal((3, 3))
    out = (fg.empty(0, dtype=fg.float64), fg.empty(0, dtype=fg.float64), fg.empty(0, dtype=fg.float64))
    r = fg.linalg.svd(fg.tensor(a), out=out)
    assert r[1] is out[1] and tuple(out[0].shape) == (3, 3)
    s = fg.empty(0, dtype=fg.float64)
    fg.linalg.svdvals(fg.tensor(a), out=s)
    np.testing.assert_allclose(s.numpy(), torch.linalg.svdvals(torch.tensor(a)).numpy(), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "linalg_svd" in repr(fg.linalg.svd(fg.tensor(a)))


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3), (3, 3), (2, 2, 3)], ids=str)
def test_primitive_jvp_and_vjp_match_finite_differences(shape, full):
    """The packed ``svd`` primitive's rules (U's extra columns and Vh's extra rows of a full
    decomposition aside: they are not a function of A) against central differences."""
    from fusegrad.autograd import grad
    from fusegrad.ir.primitive import PRIMS
    prim = PRIMS["svd"]
    a, t = _rng.standard_normal(shape), _rng.standard_normal(shape)
    m, n = shape[-2:]
    k = min(m, n)
    cu, cv = (m, n) if full else (k, k)
    # the entries that are functions of A: U[..., :, :k], S, Vh[..., :k, :]
    keep = np.concatenate([np.broadcast_to(np.arange(cu) < k, (m, cu)).reshape(-1), np.ones(k, bool),
                           np.broadcast_to((np.arange(cv) < k)[:, None], (cv, n)).reshape(-1)])
    eps = 1e-6
    fd = (prim(fg.tensor(a + eps * t), full_matrices=full).numpy()
          - prim(fg.tensor(a - eps * t), full_matrices=full).numpy()) / (2 * eps)
    x = fg.tensor(a)
    out = prim(x, full_matrices=full)
    jt = prim.jvp([fg.tensor(t)], [x], out, full_matrices=full).numpy()
    np.testing.assert_allclose(jt[..., keep], fd[..., keep], rtol=1e-5, atol=1e-6)
    assert not jt[..., ~keep].any()
    x.requires_grad_(True)
    v = _rng.standard_normal(tuple(out.shape)) * keep
    (g,) = grad(prim(x, full_matrices=full), [x], fg.tensor(v))
    np.testing.assert_allclose(np.sum(g.numpy() * t), np.sum(v * fd), rtol=1e-6, atol=1e-8)
    s = PRIMS["svdvals"]
    fd = (s(fg.tensor(a + eps * t)).numpy() - s(fg.tensor(a - eps * t)).numpy()) / (2 * eps)
    np.testing.assert_allclose(s.jvp([fg.tensor(t)], [fg.tensor(a)], s(fg.tensor(a))).numpy(), fd, rtol=1e-6,
                               atol=1e-8)


def test_hermitian_pinv_gradient_matches_torch_on_symmetric_input():
    a = _rng.standard_normal((2, 3, 3))
    a = a + np.swapaxes(a, -1, -2)
    w = _rng.standard_normal((2, 3, 3))
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (fg.linalg.pinv(x, hermitian=True) * fg.tensor(w)).sum().backward()
    (torch.linalg.pinv(t, hermitian=True) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)
