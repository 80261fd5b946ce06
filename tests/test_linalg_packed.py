"""LAPACK's packed factorizations (runtime/linalg_packed.py) against PyTorch's: geqrf's
reflectors and scales, householder_product / orgqr and ormqr (values and gradients, every
side and transpose), ldl_factor(_ex) and ldl_solve (symmetric and Hermitian, real and
complex), and a singular D's info and error (and the error class's name, PyTorch's)."""
import numpy as np
import pytest
import torch

import fusegrad as fg

rng = np.random.default_rng(5)


def _matrix(shape, dtype):
    a = rng.standard_normal(shape)
    return (a + 1j * rng.standard_normal(shape)).astype(dtype) if np.dtype(dtype).kind == "c" else a.astype(dtype)


def _numpy(t):
    return t.detach().resolve_conj().numpy() if hasattr(t, "resolve_conj") else t.detach().numpy()


def _householder(T, a, c, c_right):
    """geqrf of ``a``; then Q and every ormqr product, with gradients of a real loss to the
    reflectors and their scales."""
    packed, tau = T.geqrf(T.tensor(a))
    x, t = packed.clone().requires_grad_(True), tau.clone().requires_grad_(True)
    outs = [T.linalg.householder_product(x, t), T.orgqr(x, t), T.ormqr(x, t, T.tensor(c)),
            T.ormqr(x, t, T.tensor(c), transpose=True), T.ormqr(x, t, T.tensor(c_right), left=False),
            x.ormqr(t, T.tensor(c_right), left=False, transpose=True)]
    weights = [T.tensor(_W[i][:o.shape[-2], :o.shape[-1]]) for i, o in enumerate(outs)]
    loss = sum(((o * w).real if o.is_complex() else o * w).sum() for o, w in zip(outs, weights))
    loss.backward()
    return [packed, tau, *outs, x.grad, t.grad]


_W = [rng.standard_normal((5, 5)) for _ in range(6)]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_geqrf_householder_product_and_ormqr_as_torch(dtype):
    a, c, c_right = _matrix((2, 5, 3), dtype), _matrix((2, 5, 2), dtype), _matrix((2, 2, 5), dtype)
    for g, w in zip(_householder(fg, a, c, c_right), _householder(torch, a, c, c_right)):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(_numpy(g), _numpy(w), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_ldl_factor_and_solve_as_torch(dtype):
    s = _matrix((2, 4, 4), dtype)
    s = s + np.swapaxes(s, -1, -2)
    b = _matrix((2, 4, 3), dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-10
    for hermitian in (False, True):
        h = (s + np.conj(np.swapaxes(s, -1, -2))) / 2 if hermitian else s
        got, want = [], []
        for T, out in ((fg, got), (torch, want)):
            ld, piv = T.linalg.ldl_factor(T.tensor(h), hermitian=hermitian)
            out += [ld, piv, *T.linalg.ldl_factor_ex(T.tensor(h), hermitian=hermitian),
                    T.linalg.ldl_solve(ld, piv, T.tensor(b), hermitian=hermitian)]
        for g, w in zip(got, want):
            np.testing.assert_allclose(_numpy(g), _numpy(w), rtol=tol, atol=tol)


def test_a_singular_d_is_reported_in_info_and_raised_by_ldl_factor():
    z = np.zeros((3, 3))
    assert int(fg.linalg.ldl_factor_ex(fg.tensor(z)).info) == int(torch.linalg.ldl_factor_ex(torch.tensor(z)).info) == 1
    for call in (lambda T: T.linalg.ldl_factor(T.tensor(z)),
                 lambda T: T.linalg.ldl_factor_ex(T.tensor(z), check_errors=True)):
        for T in (fg, torch):
            with pytest.raises(RuntimeError):
                call(T)
    with pytest.raises(fg.linalg.LinAlgError) as info:  # (its class is named as PyTorch's: _LinAlgError)
        fg.linalg.cholesky(fg.tensor(-np.eye(2)))
    assert type(info.value).__name__ == torch.linalg.LinAlgError.__name__
