"""Complex matrices in the factorizations and what is built on them (det, slogdet, logdet,
cholesky, qr, eigh, eigvalsh, svd, svdvals, pinv, matrix norms, cond, the LU family,
triangular solves, Cholesky solves, lstsq and the ``*_ex`` variants): values, gradients and forward-mode
derivatives against PyTorch's (they refused complex input)."""
import numpy as np
import pytest
import torch

import fusegrad as fg

rng = np.random.default_rng(0)


def _complex(*shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


A = _complex(2, 3, 3)
TALL = _complex(4, 3)
H = A @ np.conj(np.swapaxes(A, -1, -2)) + 3 * np.eye(3)  # Hermitian positive-definite
W = _complex(2, 3, 3)
WR = rng.standard_normal((2, 3, 3))


def _losses(T):
    """Real losses of each function's results (the eigen- and singular vectors' through
    phase-invariant terms, which alone define a gradient)."""
    w, wr = T.tensor(W), T.tensor(WR)
    L = T.linalg
    return {
        "det": (A, lambda a: (L.det(a) * w[:, 0, 0]).real.sum() + L.det(a).abs().sum()),
        "slogdet": (A, lambda a: (lambda s: (s.sign * w[:, 0, 1]).real.sum() + (s.logabsdet * 2).sum())(L.slogdet(a))),
        "logdet": (H, lambda a: T.logdet(a).real.sum()),
        "cholesky": (H, lambda a: (L.cholesky(a) * w).real.sum()),
        "qr": (A, lambda a: (lambda q, r: (q * w).real.sum() + (r * w).imag.sum())(*L.qr(a))),
        "qr_tall": (TALL, lambda a: (lambda q, r: (q * w[0].repeat(2, 1)[:4]).real.sum() + (r * w[1]).imag.sum())(
            *L.qr(a))),
        "eigvalsh": (H, lambda a: (L.eigvalsh(a) * wr[:, 0]).sum()),
        "eigh": (H, lambda a: (lambda e, v: (e * wr[:, 1]).sum() + (v.abs() ** 2 * wr).sum())(*L.eigh(a))),
        "svdvals": (A, lambda a: (L.svdvals(a) * wr[:, 0]).sum()),
        "svd": (A, lambda a: (lambda u, s, vh: (s * wr[:, 1]).sum() + (u.abs() ** 2 * wr).sum() + (vh.abs() ** 2 * wr).sum()
                              + ((u @ T.diag_embed(s.to(u.dtype)) @ vh) * w).real.sum())(*L.svd(a))),
        "svd_wide": (TALL.T.copy(), lambda a: (lambda u, s, vh: s.sum() + (vh.abs() ** 2 * wr[0, :, :1]).sum())(
            *L.svd(a, full_matrices=False))),
        "pinv": (TALL, lambda a: (L.pinv(a) * w[0].repeat(1, 2)[:, :4]).real.sum()),
        "matrix_norm": (A, lambda a: L.matrix_norm(a, 2).sum() + L.matrix_norm(a, "nuc").sum()),
        "cond": (A, lambda a: L.cond(a).sum()),
        "cholesky_upper": (H, lambda a: (L.cholesky(a, upper=True) * w).real.sum()),
        "solve_triangular": (A, lambda a: sum(
            (L.solve_triangular(a, w, upper=up, left=left, unitriangular=unit) * w.mT).imag.sum()
            for up in (True, False) for left in (True, False) for unit in (True, False))),
        "lu_factor": (A, lambda a: (lambda lu, piv: (lu * w).real.sum() + (lu.abs() ** 2).sum())(*L.lu_factor(a))),
        "lu": (A, lambda a: (lambda p, lo, up: (lo * w).imag.sum() + (up * w).real.sum() + p.real.sum())(*L.lu(a))),
        "lu_solve": (A, lambda a: sum((L.lu_solve(*L.lu_factor(a), w, left=left, adjoint=adj) * w).real.sum()
                                      for left in (True, False) for adj in (True, False))),
        "lstsq": (TALL, lambda a: (L.lstsq(a, w[0].repeat(2, 1)[:4]).solution * w[1]).real.sum()),
        "cholesky_solve": (H, lambda a: sum((T.cholesky_solve(w, L.cholesky(a, upper=up), upper=up) * w).real.sum()
                                            + (T.cholesky_inverse(L.cholesky(a, upper=up), upper=up) * w).imag.sum()
                                            for up in (True, False))),
    }


def _run(T):
    values, grads = {}, {}
    for name, (a0, loss) in _losses(T).items():
        a = T.tensor(a0, dtype=T.complex128, requires_grad=True)
        out = loss(a)
        out.backward()
        values[name], grads[name] = float(out), a.grad.numpy()
    return values, grads


def test_complex_factorizations_values_and_gradients_as_torch():
    (fv, fgr), (tv, tgr) = _run(fg), _run(torch)
    for name in tv:
        assert fv[name] == pytest.approx(tv[name], rel=1e-9), name
        np.testing.assert_allclose(fgr[name], tgr[name], rtol=1e-7, atol=1e-9, err_msg=name)


def test_complex_factorizations_results_and_forward_derivatives_as_torch():
    tangent = _complex(2, 3, 3)
    herm = tangent + np.conj(np.swapaxes(tangent, -1, -2))
    got = []
    for T in (fg, torch):
        L = T.linalg
        row = []
        for fn, a0, t0 in ((L.eigvalsh, H, herm), (L.svdvals, A, tangent), (L.det, A, tangent),
                           (lambda a: L.slogdet(a)[0] * L.slogdet(a)[1], A, tangent), (L.cholesky, H, herm),
                           (lambda a: L.qr(a)[0], A, tangent), (lambda a: L.qr(a)[1], A, tangent),
                           (lambda a: L.eigh(a)[0], H, herm)):
            value, derivative = T.func.jvp(fn, (T.tensor(a0),), (T.tensor(t0),))
            row += [value.numpy(), derivative.numpy()]
        s = L.slogdet(T.tensor(A))
        e = L.eigh(T.tensor(H))
        u, sv, vh = L.svd(T.tensor(TALL), full_matrices=False)
        row += [s.logabsdet.dtype == T.float64, e.eigenvalues.dtype == T.float64, sv.dtype == T.float64,
                (u @ T.diag_embed(sv.to(u.dtype)) @ vh).numpy(), tuple(T.svd(T.tensor(TALL)).V.shape),
                L.matrix_rank(T.tensor(A)).numpy(), L.pinv(T.tensor(H), hermitian=True).numpy()]
        got.append(row)
    for g, w in zip(*got):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


def test_complex_lu_lstsq_and_ex_variants_results_as_torch():
    """Pivots (LAPACK compares |Re| + |Im|), P, residuals (real), the partial factor and info of
    a matrix that is not positive-definite, the upper factor (L^H), and NaN + NaN j for singular
    matrices in solve_ex and inv_ex."""
    sing = A[0].copy()
    sing[2] = 0  # (exactly singular: a multiple of a row leaves LAPACK a rounded, nonzero pivot)
    bad = H[0].copy()
    bad[1, 1] = -5
    got = []
    for T in (fg, torch):
        L = T.linalg
        a, tall, h = T.tensor(A), T.tensor(TALL), T.tensor(H)
        row = [*L.lu_factor(a), *L.lu(a)]
        for driver in ("gelsy", "gelsd", "gels", "gelss"):
            r = L.lstsq(tall, T.tensor(W[0]).repeat(2, 1)[:4], driver=driver)
            row += [r.solution, r.residuals, r.rank, r.singular_values]
        row += [*L.cholesky_ex(h, upper=True), *L.cholesky_ex(T.tensor(bad)),
                *L.solve_ex(T.stack([a[0], T.tensor(sing)]), T.tensor(W[0])),
                *L.inv_ex(T.stack([a[1], T.tensor(sing)]))]
        got.append([(str(t.dtype).split(".")[1], t.resolve_conj().numpy()) for t in row])
    for (gd, g), (wd, w) in zip(*got):
        assert gd == wd
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


def test_general_eigendecomposition_gradients_as_torch():
    """linalg.eig / eigvals of real and complex matrices: values and the gradients of losses
    that do not depend on the eigenvectors' phases equal PyTorch's (eig had no gradient and
    refused complex input); forward-mode too."""
    r = np.random.default_rng(1)
    real_a = r.standard_normal((2, 4, 4))
    complex_a = real_a + 1j * r.standard_normal((2, 4, 4))
    got = []
    for T in (fg, torch):
        row = []
        for a0 in (real_a, complex_a):
            a = T.tensor(a0, requires_grad=True)
            w, v = T.linalg.eig(a)
            weights = T.arange(16.0).double().view(4, 4)
            loss = (w.real ** 2).sum() + (w.imag * T.arange(4.0).double()).sum() + (v.abs() ** 2 * weights).sum()
            loss.backward()
            row += [w.detach().numpy(), a.grad.numpy()]
            a.grad = None
            T.linalg.eigvals(a).abs().sum().backward()
            row.append(a.grad.numpy())
        _, tangent = T.func.jvp(lambda m: T.linalg.eigvals(m), (T.tensor(real_a[0]),), (T.tensor(real_a[1]),))
        row += [tangent.numpy(), str(T.linalg.eig(T.tensor(real_a[0]).float())[0].dtype).split(".")[-1]]
        got.append(row)
    for g, w in zip(*got):
        if isinstance(w, str):
            assert g == w
        else:
            np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


def test_losses_depending_on_complex_vectors_phases_are_refused_as_torch():
    """A loss that depends on the phases of complex eigen- or singular vectors has no
    gradient: PyTorch's backward raises, fusegrad's returned a number."""
    r = np.random.default_rng(0)
    a0 = r.standard_normal((3, 3)) + 1j * r.standard_normal((3, 3))
    h0 = a0 @ a0.conj().T
    got = []
    for T in (fg, torch):
        row = []
        for f, m in ((lambda a: T.linalg.eigh(a)[1].real.sum(), h0), (lambda a: T.linalg.eig(a)[1].real.sum(), a0),
                     (lambda a: T.linalg.svd(a)[0].real.sum(), a0), (lambda a: T.linalg.eigh(a)[1].abs().sum(), h0)):
            a = T.tensor(m, requires_grad=True)
            try:
                f(a).backward()
                row.append(np.round(a.grad.numpy(), 8).tolist())
            except RuntimeError as e:
                row.append(str(e)[:60])
        got.append(row)
    assert got[0] == got[1]


def test_orthogonal_parametrization_of_a_complex_layer_is_unitary_as_torch():
    """parametrizations.orthogonal on a complex Linear (unitary RNN weights): matrix_exp and
    cayley give a unitary weight keeping the initial one's span, trained by gradients as
    torch's; householder refuses complex weights with torch's ValueError (the complex QR and
    sign made the parametrization fail)."""
    r = np.random.default_rng(0)
    w0 = r.standard_normal((4, 4)) + 1j * r.standard_normal((4, 4))
    x0 = r.standard_normal((3, 4)) + 1j * r.standard_normal((3, 4))
    got = []
    for T in (fg, torch):
        row = []
        for mp in ("matrix_exp", "cayley"):
            lin = T.nn.Linear(4, 4, bias=False, dtype=T.complex64)
            with T.no_grad():
                lin.weight.copy_(T.tensor(w0, dtype=T.complex64))
            T.nn.utils.parametrizations.orthogonal(lin, orthogonal_map=mp)
            opt = T.optim.SGD(lin.parameters(), lr=0.05)
            for _ in range(3):
                opt.zero_grad()
                loss = lin(T.tensor(x0, dtype=T.complex64)).abs().pow(2).sum() + lin.weight.real.sum()
                loss.backward()
                opt.step()
            w = lin.weight.detach()
            row += [float(loss), T.view_as_real(w).numpy(), bool(T.allclose(w.mH @ w, T.eye(4, dtype=T.complex64),
                                                                               atol=1e-5))]
        with pytest.raises(ValueError) as info:
            T.nn.utils.parametrizations.orthogonal(T.nn.Linear(3, 3, dtype=T.complex64), orthogonal_map="householder")
        row.append(str(info.value))
        got.append(row)
    for g, w in zip(*got):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        elif isinstance(w, float):
            assert g == pytest.approx(w, rel=1e-4)
        else:
            assert g == w
