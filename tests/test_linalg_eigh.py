"""The symmetric eigendecomposition against PyTorch: linalg.eigh and linalg.eigvalsh.
Eigenvalues compare directly; eigenvectors (unique up to sign for distinct eigenvalues)
compare after aligning signs, and through reconstructions. Gradients (first and second
order, float64) are checked numerically on symmetric inputs (symmetrized inside the
function), and against PyTorch on losses that do not depend on the signs; tangents with
jvp/jacfwd, batching with vmap, compiled against eager."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck
from helpers import compiled_matches_eager

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_rng = np.random.default_rng(17)
SHAPES = [(3, 3), (1, 1), (2, 4, 4), (2, 3, 2, 2)]


def _t(mod, a, **kw):
    return mod.tensor(a, **kw)


def _sym(a):
    return (a + np.swapaxes(a, -1, -2)) / 2


def _aligned(v, tv):
    """``v``'s columns with the signs that match torch's ``tv``."""
    sign = np.sign(np.sum(v * tv, axis=-2))
    sign[sign == 0] = 1
    return v * sign[..., None, :]


def _tol(dtype):
    return 1e-10 if dtype == np.float64 else 2e-4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values_match_torch(shape, uplo, dtype):
    a = _rng.standard_normal(shape).astype(dtype)  # not symmetric: only the triangle UPLO names is read
    got = fg.linalg.eigh(_t(fg, a), uplo)
    want = torch.linalg.eigh(_t(torch, a), uplo)
    assert type(got).__name__ == type(want).__name__ == "linalg_eigh"
    assert got._fields == ("eigenvalues", "eigenvectors")
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and g.numpy().dtype == w.numpy().dtype
    w, v = got.eigenvalues.numpy(), got.eigenvectors.numpy()
    tw, tv = want.eigenvalues.numpy(), want.eigenvectors.numpy()
    tol = _tol(dtype)
    np.testing.assert_allclose(w, tw, rtol=tol, atol=tol)
    assert np.all(np.diff(w, axis=-1) >= 0)  # ascending
    np.testing.assert_allclose(_aligned(v, tv), tv, atol=tol * 10)
    # V diag(w) V^T is the symmetric matrix the triangle defines; V is orthogonal
    tri = np.tril(a) if uplo == "L" else np.triu(a)
    full = tri + np.swapaxes(tri, -1, -2) - tri * np.eye(shape[-1], dtype=dtype)
    np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), full, atol=tol * 10)
    np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v, np.broadcast_to(np.eye(shape[-1]), v.shape), atol=tol * 10)
    e = fg.linalg.eigvalsh(_t(fg, a), UPLO=uplo)
    assert e.numpy().dtype == dtype and tuple(e.shape) == tuple(tw.shape)
    np.testing.assert_allclose(e.numpy(), torch.linalg.eigvalsh(_t(torch, a), UPLO=uplo).numpy(), rtol=tol, atol=tol)


def test_lowercase_uplo_and_keyword():
    a = _sym(_rng.standard_normal((3, 3)))
    for uplo in ("l", "u", "U"):
        np.testing.assert_allclose(fg.linalg.eigvalsh(_t(fg, a), UPLO=uplo).numpy(),
                                   torch.linalg.eigvalsh(_t(torch, a), UPLO=uplo).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)], ids=str)
def test_empty_shapes_as_torch(shape):
    a = np.zeros(shape)
    got, want = fg.linalg.eigh(_t(fg, a)), torch.linalg.eigh(_t(torch, a))
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
    assert tuple(fg.linalg.eigvalsh(_t(fg, a)).shape) == tuple(torch.linalg.eigvalsh(_t(torch, a)).shape)
    x = fg.tensor(a, requires_grad=True)
    w, v = fg.linalg.eigh(x)
    (w.sum() + v.sum() + fg.linalg.eigvalsh(x).sum()).backward()
    assert tuple(x.grad.shape) == shape


def test_errors_as_torch():
    bad = [(np.ones(3), {}, RuntimeError), (np.ones((2, 3)), {}, RuntimeError),
           (np.ones((3, 3), np.int64), {}, NotImplementedError), (np.ones((3, 3), np.float16), {}, NotImplementedError),
           (np.ones((3, 3)), dict(UPLO="X"), RuntimeError), (np.ones((3, 3)), dict(UPLO="lo"), RuntimeError),
           (np.ones((3, 3)), dict(UPLO=1), TypeError)]
    for f in ("eigh", "eigvalsh"):
        for a, kw, exc in bad:
            msgs = []
            for mod in (torch, fg):
                with pytest.raises(exc) as e:
                    getattr(mod.linalg, f)(mod.tensor(a), **kw)
                msgs.append(str(e.value))
            assert msgs[0] == msgs[1], (f, a.dtype, kw)
    # LAPACK's failure to converge: a LinAlgError (a RuntimeError) naming linalg.eigh
    with pytest.raises(fg.linalg.LinAlgError, match="linalg.eigh: The algorithm failed to converge"):
        fg.linalg.eigh(fg.full((3, 3), float("nan"), dtype=fg.float64))
    with pytest.raises(RuntimeError, match=r"linalg.eigh: \(Batch element 1\): The algorithm failed"):
        fg.linalg.eigvalsh(fg.tensor(np.stack([np.eye(3), np.full((3, 3), np.nan)])))


# ---------------------------------------------------------------- gradients
def _invariant(w, v):
    """Outputs of the eigendecomposition that do not depend on the eigenvectors' signs."""
    return w, (v * w.sin().unsqueeze(-2)) @ v.mT, v.abs()


def _symmetric(f):
    return lambda a: f((a + a.mT) * 0.5)


GRAD_CASES = {
    "eigh": _symmetric(lambda a: _invariant(*fg.linalg.eigh(a))),
    "eigh_upper": _symmetric(lambda a: _invariant(*fg.linalg.eigh(a, "U"))),
    "eigh_raw": _symmetric(lambda a: tuple(fg.linalg.eigh(a))),  # locally the signs are fixed
    "eigh_values": _symmetric(lambda a: fg.linalg.eigh(a).eigenvalues),
    "eigvalsh": _symmetric(lambda a: fg.linalg.eigvalsh(a)),
    "eigvalsh_upper": _symmetric(lambda a: fg.linalg.eigvalsh(a, UPLO="U")),
}


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck_and_gradgradcheck(name, shape):
    a = fg.tensor(_rng.standard_normal(shape), requires_grad=True)
    assert gradcheck(GRAD_CASES[name], (a,))
    assert gradgradcheck(GRAD_CASES[name], (a,))


def _loss(mod, a, uplo):
    w, v = mod.linalg.eigh(a, uplo)
    n = w.shape[-1]
    c = mod.tensor(np.arange(1.0, n * n + 1.0).reshape(n, n))
    return ((w * mod.tensor(np.arange(1.0, n + 1.0))).sum() + ((v * w.exp().unsqueeze(-2)) @ v.mT * c).sum()
            + (v.abs() ** 3).sum() + (v ** 2 * c).sum() + (mod.linalg.eigvalsh(a, uplo) ** 3).sum())


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (2, 3, 3)], ids=str)
def test_gradients_match_torch(shape, uplo, symmetric):
    # PyTorch's gradient is V (...) V^T also where A is not symmetric (it is not restricted to the
    # triangle read): the same here
    a = _rng.standard_normal(shape)
    a = _sym(a) if symmetric else a
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    _loss(fg, x, uplo).backward()
    _loss(torch, t, uplo).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_eigenvalue_gradients_at_repeated_eigenvalues():
    # V diag(gL) V^T needs no eigenvalue gaps: finite at a multiple of the identity, as PyTorch's,
    # through eigvalsh and through eigh's eigenvalues alone
    for f in (lambda m, a: m.linalg.eigvalsh(a), lambda m, a: m.linalg.eigh(a).eigenvalues):
        x = fg.eye(3, dtype=fg.float64, requires_grad=True)
        t = torch.eye(3, dtype=torch.float64, requires_grad=True)
        (f(fg, x * 2.0) * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
        (f(torch, t * 2.0) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
        assert np.isfinite(x.grad.numpy()).all()
        # the eigenvectors of 2I are any orthonormal basis: compare the trace, basis-free
        np.testing.assert_allclose(np.trace(x.grad.numpy()), np.trace(t.grad.numpy()), rtol=1e-12)
    x = fg.eye(3, dtype=fg.float64, requires_grad=True)
    fg.linalg.eigvalsh(x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.eye(3), atol=1e-12)


def test_grad_fn_names():
    x = fg.tensor(_sym(_rng.standard_normal((3, 3))), requires_grad=True)
    w, v = fg.linalg.eigh(x)
    assert type(w.grad_fn).__name__ == type(v.grad_fn).__name__ == "LinalgEighBackward0"
    assert type(fg.linalg.eigvalsh(x).grad_fn).__name__ == "LinalgEighBackward0"
    assert fg.linalg.eigvalsh(x.detach()).grad_fn is None


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_jvp_and_jacfwd_match_torch(uplo):
    a, d = _sym(_rng.standard_normal((3, 3))), _sym(_rng.standard_normal((3, 3)))

    def f(mod):
        def g(x):
            w, v = mod.linalg.eigh(x, uplo)
            return mod.cat([w, ((v * w.unsqueeze(-2)) @ v.mT).reshape(-1), (v ** 2).reshape(-1)])
        return g

    got = fg.func.jvp(f(fg), (fg.tensor(a),), (fg.tensor(d),))[1]
    want = torch.func.jvp(f(torch), (torch.tensor(a),), (torch.tensor(d),))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    # a non-symmetric tangent too: used as it is, as PyTorch's linalg_eig_jvp
    d = _rng.standard_normal((3, 3))
    got = fg.func.jvp(f(fg), (fg.tensor(a),), (fg.tensor(d),))[1]
    want = torch.func.jvp(f(torch), (torch.tensor(a),), (torch.tensor(d),))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    ev = lambda m: lambda x: m.linalg.eigvalsh(x, UPLO=uplo)  # noqa: E731
    got = fg.func.jvp(ev(fg), (fg.tensor(a),), (fg.tensor(d),))[1]
    want = torch.func.jvp(ev(torch), (torch.tensor(a),), (torch.tensor(d),))[1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    got = fg.func.jacfwd(ev(fg))(fg.tensor(a))
    want = torch.func.jacfwd(ev(torch))(torch.tensor(a))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)


def test_primitive_jvp_and_vjp_match_finite_differences():
    """The packed ``eigh`` and the ``eigvalsh`` primitives' rules against central differences
    in symmetric directions (the primitives read one triangle)."""
    from fusegrad.autograd import grad
    from fusegrad.ir.primitive import PRIMS
    a, t = _sym(_rng.standard_normal((2, 4, 4))), _sym(_rng.standard_normal((2, 4, 4)))
    eps = 1e-6
    for name in ("eigh", "eigvalsh"):
        prim = PRIMS[name]
        for upper in (False, True):
            fd = (prim(fg.tensor(a + eps * t), upper=upper).numpy()
                  - prim(fg.tensor(a - eps * t), upper=upper).numpy()) / (2 * eps)
            x = fg.tensor(a)
            out = prim(x, upper=upper)
            np.testing.assert_allclose(prim.jvp([fg.tensor(t)], [x], out, upper=upper).numpy(), fd, rtol=1e-5,
                                       atol=1e-6)
            x.requires_grad_(True)
            v = _rng.standard_normal(tuple(out.shape))
            (g,) = grad(prim(x, upper=upper), [x], fg.tensor(v))
            np.testing.assert_allclose(g.numpy(), np.swapaxes(g.numpy(), -1, -2), atol=1e-12)  # symmetric
            np.testing.assert_allclose(np.sum(g.numpy() * t), np.sum(v * fd), rtol=1e-6, atol=1e-8)


def test_vmap_matches_a_loop():
    a = _sym(_rng.standard_normal((5, 3, 3)))
    x = fg.tensor(a)
    got = fg.func.vmap(fg.linalg.eigvalsh)(x)
    want = np.stack([fg.linalg.eigvalsh(fg.tensor(a[i])).numpy() for i in range(5)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    b = np.moveaxis(a, 0, 2)
    got = fg.func.vmap(fg.linalg.eigvalsh, in_dims=2)(fg.tensor(b))  # a batch axis that is not the first
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)

    def recon(m):
        w, v = fg.linalg.eigh(m)
        return (v * w.exp().unsqueeze(-2)) @ v.mT

    got = fg.func.vmap(recon)(x)
    want = np.stack([recon(fg.tensor(a[i])).numpy() for i in range(5)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # per-sample gradients of the largest eigenvalue
    g = fg.func.vmap(fg.func.grad(lambda m: fg.linalg.eigvalsh(m)[-1]))(x)
    t = torch.func.vmap(torch.func.grad(lambda m: torch.linalg.eigvalsh(m)[-1]))(torch.tensor(a))
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    g = fg.func.vmap(fg.func.grad(lambda m: recon(m).sum()))(x)
    t = torch.func.vmap(torch.func.grad(
        lambda m: (lambda w, v: ((v * w.exp().unsqueeze(-2)) @ v.mT).sum())(*torch.linalg.eigh(m))))(torch.tensor(a))
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)


def test_compiled_matches_eager():
    a = _rng.standard_normal((2, 3, 3))

    def step(x):
        s = x + x.mT
        w, v = fg.linalg.eigh(s * 2.0)
        return ((v * w.unsqueeze(-2)) @ v.mT).sum() + fg.linalg.eigvalsh(s, UPLO="U").max()

    compiled_matches_eager(step, a)


def test_out_and_return_types():
    a = _sym(_rng.standard_normal((3, 3)))
    out = (fg.empty(0, dtype=fg.float64), fg.empty(0, dtype=fg.float64))
    r = fg.linalg.eigh(fg.tensor(a), out=out)
    assert r.eigenvalues is out[0] and r.eigenvectors is out[1] and tuple(out[1].shape) == (3, 3)
    assert type(r).__name__ == "linalg_eigh"
    want = torch.linalg.eigh(torch.tensor(a))
    np.testing.assert_allclose(out[0].numpy(), want.eigenvalues.numpy(), rtol=1e-12)
    w = fg.empty(0, dtype=fg.float64)
    assert fg.linalg.eigvalsh(fg.tensor(a), out=w) is w
    np.testing.assert_allclose(w.numpy(), want.eigenvalues.numpy(), rtol=1e-12)
    x = fg.tensor(a, requires_grad=True)
    for f, o in ((fg.linalg.eigh, (fg.empty(0, dtype=fg.float64), fg.empty(0, dtype=fg.float64))),
                 (fg.linalg.eigvalsh, fg.empty(0, dtype=fg.float64))):
        with pytest.raises(RuntimeError, match=r"_linalg_eigh\(\): functions with out=\.\.\. arguments don't support"):
            f(x, out=o)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "linalg_eigh" in repr(fg.linalg.eigh(fg.tensor(a)))


def test_hermitian_matrix_rank_and_pinv_still_match_torch():
    a = _rng.standard_normal((2, 4, 4))
    a[1] = _sym(a[1])
    a[1, :, 3] = a[1, :, 0] + a[1, :, 1]  # rank-deficient lower triangle's matrix
    a[1] = np.tril(a[1]) + np.tril(a[1], -1).T
    for kw in ({}, dict(rtol=0.2), dict(atol=1.0)):
        g = fg.linalg.matrix_rank(_t(fg, a), hermitian=True, **kw)
        assert g.dtype == fg.int64
        np.testing.assert_array_equal(g.numpy(), torch.linalg.matrix_rank(_t(torch, a), hermitian=True, **kw).numpy())
        np.testing.assert_allclose(fg.linalg.pinv(_t(fg, a), hermitian=True, **kw).numpy(),
                                   torch.linalg.pinv(_t(torch, a), hermitian=True, **kw).numpy(), rtol=1e-8, atol=1e-8)
    with pytest.raises(RuntimeError, match="linalg.eigh: A must be batches of square matrices"):
        fg.linalg.matrix_rank(fg.ones(2, 3), hermitian=True)
