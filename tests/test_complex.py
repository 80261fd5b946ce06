"""Complex tensors and torch.fft against PyTorch: values and complex128 gradients (PyTorch's
convention, dL/dRe + i dL/dIm, checked once against finite differences too), dtype
promotion, printing, errors, random draws, and a compiled function that breaks its graph
at complex values (LLaMA's rotary embedding)."""
import warnings

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_RNG = np.random.default_rng(11)


def _c(*s):
    return _RNG.standard_normal(s) + 1j * _RNG.standard_normal(s)


def _r(*s):
    return _RNG.standard_normal(s)


Z, W, X = _c(3, 4), _c(3, 4), _r(3, 4)
M = _c(4, 2)
K4, K33, W10, W12, S20 = _c(4), _c(3, 3), _r(3, 10), _r(3, 12), _r(2, 20)


def _losses(T, z, w, x, m):
    """Real scalars from the complex ops under test (z, w, m complex; x real)."""
    c = lambda a: T.tensor(a)  # noqa: E731
    hann = T.hann_window(8, dtype=T.float64)
    spec = lambda: T.stft(x.reshape(-1), 8, hop_length=2, window=hann, return_complex=True)  # noqa: E731
    return [
        (((z * w + x) / (w - 2)).exp().abs() ** 2).sum(),
        (z.real * w.imag + T.view_as_real(z * x).sum(-1) ** 2).sum(),
        T.view_as_real(T.polar(x.abs() + 0.1, x * 2) * z).pow(2).sum(),
        # abs == 0 where x < 0, with a nonzero derivative there: PyTorch's gradient of abs is 0
        (T.polar(T.relu(x) + (x - x.detach()), x * 3) * z).real.sum(),
        (T.angle(z) * x).sum() + (T.sgn(w) * z).real.sum() + T.sgn(z * 0).abs().sum(),
        (T.view_as_complex(T.stack([x, x * 2], -1)) * z).abs().sum(),
        ((z @ m) * (z @ m.conj())).real.sum() + (z @ x.t().to(z.dtype)).abs().sum(),
        (z.conj() * w.sqrt() + (z * z).log()).imag.sum() + T.tanh(z).abs().sum() + (z ** 2).real.sum(),
        (T.complex(x, x * x) * z).abs().sum() + (z / (1 + 2j)).real.sum() + (2j * x).imag.sum(),
        T.cat([z, w]).mean().abs() + (T.stack([z, w]).sum(0) * 2).abs().sum() + z[1:].sum().real,
        (T.fft.fft(z) * c(K4)).real.sum() + T.fft.fft(x, n=6).abs().sum() + T.fft.ifft(z, norm="ortho").abs().sum(),
        T.fft.ifft(w, n=2, dim=0, norm="forward").real.sum() + (T.fft.rfft(x) * c(K4[:3])).imag.sum(),
        T.fft.rfft(x, n=5, norm="ortho").abs().sum() + (T.fft.irfft(z) * c(W10[:, :6])).sum(),
        (T.fft.irfft(w, n=7, norm="forward") ** 2).sum() + T.fft.fft2(z).abs().sum(),
        T.fft.fftn(x, s=(4, 4)).real.sum() + T.fft.ifftn(z, dim=(0,)).imag.sum(),
        (T.fft.irfft2(T.fft.rfft2(x) * c(K33), s=(3, 4)) * x).sum() + T.fft.rfftn(x).abs().sum(),
        (T.fft.irfftn(z, s=(3, 6)) * c(W12[:, :6])).sum() + (T.fft.hfft(w) * c(W10[:, :6])).sum(),
        T.fft.ihfft(x).abs().sum() + (T.fft.fftshift(z).abs() * x).sum() + (T.fft.ifftshift(x, dim=1) * x).sum(),
        (spec().abs() ** 2).sum(),
        T.view_as_real(T.stft(x, 4, hop_length=1, win_length=3, center=False, normalized=True,
                              return_complex=True)).pow(2).sum(),
        (T.istft(spec(), 8, hop_length=2, window=hann, length=12) * x.reshape(-1)).sum(),
    ]


def _run(T):
    z, w, m = (T.tensor(a, requires_grad=True) for a in (Z, W, M))
    x = T.tensor(X, requires_grad=True)
    outs = []
    for loss in _losses(T, z, w, x, m):
        gs = T.autograd.grad(loss, (z, w, x, m), allow_unused=True)
        outs.append([loss.detach().numpy()] + [None if g is None else g.resolve_conj().numpy() for g in gs])
    return outs


def test_values_and_gradients_match_pytorch():
    for i, (got, want) in enumerate(zip(_run(fg), _run(torch))):
        for g, e in zip(got, want):
            assert (g is None) == (e is None), i
            if e is not None:
                np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-10, err_msg=f"loss {i}")


def test_gradient_convention_is_pytorchs_by_finite_differences():
    def loss(T, z):
        return (T.fft.hfft(z * z.conj() + z) * T.tensor(W10[:, :6])).sum()
    z = fg.tensor(Z, requires_grad=True)
    g, = fg.autograd.grad(loss(fg, z), z)
    eps, base = 1e-6, loss(fg, fg.tensor(Z)).item()
    for k in range(4):
        dre, dim = Z.copy(), Z.copy()
        dre[1, k] += eps
        dim[1, k] += 1j * eps
        fd = (loss(fg, fg.tensor(dre)).item() - base) / eps + 1j * (loss(fg, fg.tensor(dim)).item() - base) / eps
        assert abs(g.numpy()[1, k] - fd) < 1e-4


def test_dtypes_promotion_and_printing():
    cases = [
        lambda T: (T.tensor([1.0, 2.0]) * 1j).dtype,
        lambda T: (T.tensor([1.0, 2.0], dtype=T.float64) * 1j).dtype,
        lambda T: (T.tensor([1, 2]) * 1j).dtype,
        lambda T: (T.ones(2) * T.tensor(1j, dtype=T.complex128)).dtype,
        lambda T: (T.ones(2, dtype=T.int64) * T.tensor(1j, dtype=T.complex128)).dtype,
        lambda T: T.promote_types(T.complex64, T.float64),
        lambda T: T.promote_types(T.complex64, T.float16),
        lambda T: T.tensor([1 + 2j]).dtype, lambda T: T.tensor([1 + 2j]).abs().dtype,
        lambda T: T.tensor([1.0, 2.0]).to(T.cfloat).dtype, lambda T: T.complex64.to_real(),
        lambda T: T.float64.to_complex(), lambda T: T.cdouble.is_complex, lambda T: T.float32.is_complex,
        lambda T: T.can_cast(T.complex64, T.float32), lambda T: T.can_cast(T.float32, T.complex64),
        lambda T: T.tensor([1 + 2j]).is_complex(), lambda T: T.is_complex(T.ones(1)),
        lambda T: T.tensor([1 + 2j, 3.5]).isreal().tolist(), lambda T: T.ones(2).isreal().tolist(),
        lambda T: T.tensor([1.0, -2.0]).angle().tolist(), lambda T: T.tensor([1 + 2j, 0j]).sgn().tolist(),
        lambda T: T.tensor([1 + 2j]).item(), lambda T: T.zeros(2, dtype=T.cfloat).tolist(),
        lambda T: T.full((2,), 1 + 1j).dtype, lambda T: T.tensor([1 + 2j]).real.tolist(),
        lambda T: T.fft.fftfreq(5, 0.5).tolist(), lambda T: T.fft.rfftfreq(6).tolist(),
        # (the factor 1 / (n d) rounded to the dtype, each product rounded once)
        lambda T: [T.fft.fftfreq(n, d, dtype=dt).tolist() for n in (7, 33, 100) for d in (0.1, 1 / 3, 2.5e-3)
                   for dt in (T.float32, T.float16, T.bfloat16)],
        lambda T: [T.fft.rfftfreq(n, d, dtype=dt).tolist() for n in (7, 33) for d in (0.1, 1 / 3)
                   for dt in (T.float32, T.float16)],
        lambda T: T.fft.rfft(T.ones(4)).dtype, lambda T: T.fft.fft(T.ones(4, dtype=T.float64)).dtype,
        lambda T: T.fft.irfft(T.ones(3, dtype=T.complex64)).shape,
        lambda T: T.ones(2).cfloat().dtype, lambda T: T.ones(2).cdouble().dtype,
        lambda T: T.tensor([[1 + 2j, 3 - 1j], [0.5j, -2 + 0j]]).mH.tolist(),
        lambda T: T.tensor([[1 + 2j, 3 - 1j], [0.5j, -2 + 0j]]).adjoint().tolist(),
        lambda T: T.vdot(T.tensor([1 + 2j, 3 - 1j]), T.tensor([0.5j, -2 + 0j])).item(),
        lambda T: round(T.tensor([[1 + 2j, 3 - 1j], [0.5j, -2 + 0j]]).norm().item(), 5),
        lambda T: [round(v, 5) for v in T.linalg.vector_norm(T.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]]), dim=1).tolist()],
        lambda T: round(T.tensor([[1 + 2j, 3 - 1j], [0.5j, -2 + 0j]]).var().item(), 5),
        lambda T: complex(T.tensor([1 + 2j])), lambda T: T.tensor([1 + 2j]).type(),
        lambda T: T.finfo(T.cfloat).eps, lambda T: T.tensor([1j]).to(T.cdouble).dtype,
    ]
    for i, f in enumerate(cases):
        got, want = f(fg), f(torch)
        assert str(got).replace("fusegrad", "torch") == str(want), (i, got, want)
    prints = [
        lambda T: T.tensor([1 + 2j, 3 - 1j]), lambda T: T.tensor([1.5 + 2j, 3 - 1.25j], dtype=T.cdouble),
        lambda T: T.tensor([[1e-5 + 2j, 300 - 1j], [0j, 1j]]), lambda T: T.tensor([1 + 2j], requires_grad=True) * 2,
        lambda T: T.tensor(1 + 2j), lambda T: T.tensor([float("nan") + 1j, 2 - float("inf") * 1j]),
        lambda T: T.tensor([], dtype=T.cfloat), lambda T: T.arange(30.0).reshape(3, 10).to(T.cfloat) * (1 - 0.5j),
    ]
    for f in prints:
        assert repr(f(fg)).replace("fusegrad", "torch") == repr(f(torch))


def test_errors_match_pytorch():
    calls = [
        lambda T: T.tensor([1.0]).imag, lambda T: T.view_as_real(T.ones(2)),
        lambda T: T.view_as_complex(T.ones(2, 3)), lambda T: T.view_as_complex(T.ones(2, 2, dtype=T.int64)),
        lambda T: T.view_as_complex(T.ones(2, 4)[:, ::2]), lambda T: T.complex(T.ones(2), T.ones(2, dtype=T.float64)),
        lambda T: T.complex(T.ones(2, dtype=T.int64), T.ones(2, dtype=T.int64)),
        lambda T: T.fft.rfft(T.ones(4, dtype=T.cfloat)), lambda T: T.fft.fft(T.ones(4), norm="bad"),
        lambda T: T.fft.fft(T.ones(4), dim=2), lambda T: T.stft(T.ones(16), 4),
        lambda T: T.tensor([1 + 1j]).sign(), lambda T: T.ones(2).add_(1j), lambda T: T.tensor([1j]) < 1,
        lambda T: 1 <= T.tensor([1j]), lambda T: float(T.tensor(1j)),
        # ops without complex kernels in PyTorch (NumPy's would answer, ordering lexicographically)
        lambda T: T.tensor([1j, 2]).max(), lambda T: T.tensor([1j, 2]).amax(0), lambda T: T.tensor([1j, 2]).argmin(),
        lambda T: T.tensor([1j, 2]).sort(), lambda T: T.tensor([1j, 2]).topk(1), lambda T: T.tensor([1j, 2]).softmax(0),
        lambda T: T.unique(T.tensor([1j, 2])), lambda T: T.maximum(T.tensor([1j]), T.tensor([2j])),
        lambda T: T.relu(T.tensor([1j])), lambda T: T.tensor([1j, 2]).cummax(0), lambda T: T.tensor([1.5j]).round(),
        lambda T: T.tensor([1j]).erf(), lambda T: T.searchsorted(T.tensor([1j, 2]), T.tensor([1j])),
        lambda T: T.nn.functional.mse_loss(T.tensor([1j]), T.tensor([2j])), lambda T: T.tensor([1j]) % 2,
        lambda T: T.nn.functional.cosine_similarity(T.tensor([[1j]]), T.tensor([[2j]])),
        lambda T: T.nansum(T.tensor([1j, 2])), lambda T: T.nanmean(T.tensor([1j, 2])),
        # (integer PCM passed by mistake; a negative length: fusegrad returned a spectrogram, an empty signal)
        lambda T: T.stft(T.arange(64, dtype=T.int16), 16, 4, window=T.hann_window(16), return_complex=True),
        lambda T: T.istft(T.stft(T.arange(64.0), 16, 4, window=T.hann_window(16), return_complex=True), 16, 4,
                          window=T.hann_window(16), length=-1),
    ]
    for i, f in enumerate(calls):
        errs = []
        for T in (fg, torch):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    f(T)
                    errs.append(None)
                except Exception as e:  # noqa: BLE001 - comparing the kinds
                    errs.append((type(e).__name__, str(e).split("\n")[0]))
        assert errs[0] is not None and errs[0][0] == errs[1][0], (i, errs)
        # (ours adds the op, its operands and the line; the kernel names of the refusals differ)
        assert errs[1][1] in errs[0][1] or i == 9 or i >= 16, (i, errs)


def test_checkpoint_round_trip_with_pytorch(tmp_path):
    torch.save({"z": torch.tensor([1 + 2j, 3 - 1j]), "w": torch.tensor([0.5j], dtype=torch.cdouble)}, tmp_path / "t.pt")
    d = fg.load(tmp_path / "t.pt")
    assert d["z"].dtype is fg.complex64 and d["w"].dtype is fg.complex128 and d["z"].tolist() == [1 + 2j, 3 - 1j]
    fg.save({"z": d["z"] * 2j}, tmp_path / "f.pt")
    assert torch.load(tmp_path / "f.pt")["z"].tolist() == [-4 + 2j, 2 + 6j]


def test_random_complex_draws_have_pytorchs_parts():
    fg.manual_seed(0)
    z = fg.randn(40000, dtype=fg.cfloat)
    assert z.dtype is fg.complex64
    assert abs(z.real.var().item() - 0.5) < 0.02 and abs(z.imag.var().item() - 0.5) < 0.02
    u = fg.rand(40000, dtype=fg.cdouble)
    assert 0 <= u.real.min().item() and u.imag.max().item() < 1 and abs(u.imag.mean().item() - 0.5) < 0.02


def _rope(T, xq, xk, freqs):
    """LLaMA's apply_rotary_emb, as its reference code writes it."""
    xq_ = T.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = T.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs.view(1, xq_.shape[1], 1, xq_.shape[-1])
    q = T.view_as_real(xq_ * f).flatten(3)
    k = T.view_as_real(xk_ * f).flatten(3)
    return (q.type_as(xq) * k.type_as(xk).sin()).sum()


def test_rotary_embedding_eager_and_compiled():
    q0, k0 = _r(2, 5, 3, 8).astype(np.float32), _r(2, 5, 3, 8).astype(np.float32)
    results = []
    for T, compiled in ((torch, False), (fg, False), (fg, True)):
        freqs = 1.0 / (10000.0 ** (T.arange(0, 8, 2)[:4].float() / 8))
        freqs = T.polar(T.ones(5, 4), T.outer(T.arange(5).float(), freqs))
        q, k = T.tensor(q0, requires_grad=True), T.tensor(k0, requires_grad=True)
        f = fg.compile(lambda a, b: _rope(fg, a, b, freqs)) if compiled else (lambda a, b: _rope(T, a, b, freqs))
        loss = f(q, k)
        loss.backward()
        results.append((loss.item(), q.grad.numpy(), k.grad.numpy()))
        if compiled:
            breaks = f.cache_info()["graph_breaks"]
            assert any("complex" in b for b in breaks), breaks
    for got in results[1:]:
        np.testing.assert_allclose(got[0], results[0][0], rtol=1e-5)
        np.testing.assert_allclose(got[1], results[0][1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[2], results[0][2], rtol=1e-4, atol=1e-5)


def _func_results(T):
    func = T.func
    x = T.tensor(X)
    z = T.tensor(Z[0])
    return [
        func.vmap(func.grad(lambda v: T.fft.rfft(v).abs().pow(2).sum()))(x),
        func.jacrev(lambda v: T.fft.irfft(T.fft.rfft(v) * (1 + 2j), n=4))(x[0]),
        func.jacfwd(lambda v: T.fft.fft(v).abs())(x[0]),
        func.vmap(lambda v: T.view_as_real(T.fft.fft(v)))(x),
        func.grad(lambda v: (v * v.conj()).real.sum() + v.abs().sum())(z),
        func.hessian(lambda v: T.fft.rfft(v).abs().pow(2).sum())(x[0]),
    ]


def test_function_transforms_match_torch_func():
    for got, want in zip(_func_results(fg), _func_results(torch)):
        np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=1e-9, atol=1e-10)
    for T in (fg, torch):
        with pytest.raises(RuntimeError, match="implicitly created only for real scalar outputs"):
            T.func.grad(lambda v: v.sum())(T.tensor(Z[0]))


def _forward_and_custom(T):
    fw = T.autograd.forward_ad
    x, t = T.tensor(X[0]), T.tensor(X[1])
    with fw.dual_level():
        d = fw.make_dual(x, t)
        a = fw.unpack_dual(T.view_as_real((T.fft.rfft(d * 2) * (1 + 1j)).exp()).sum(-1)).tangent
        z = T.complex(d, d * d)
        b = fw.unpack_dual((z * z.conj()).real + z.abs() + T.angle(z)).tangent

    class Rotate(T.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v * 2j

        @staticmethod
        def backward(ctx, g):
            return g * -2j
    w = T.tensor(Z[1], requires_grad=True)
    Rotate.apply(w).abs().sum().backward()
    return [a, b, w.grad]


def test_forward_mode_and_custom_functions_match_pytorch():
    for got, want in zip(_forward_and_custom(fg), _forward_and_custom(torch)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-10)


def _optimizer_runs(T):
    out = []
    for make in (lambda ps: T.optim.Adam(ps, lr=0.1, amsgrad=True), lambda ps: T.optim.AdamW(ps, lr=0.1),
                 lambda ps: T.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
                 lambda ps: T.optim.RMSprop(ps, lr=0.05, centered=True, momentum=0.5),
                 lambda ps: T.optim.Adagrad(ps, lr=0.1, weight_decay=0.1)):
        p = T.nn.Parameter(T.tensor([1 + 2j, -1 + 0.5j, 0.25 - 3j]))
        opt = make([p])
        for _ in range(3):
            opt.zero_grad()
            (p.abs() ** 2 + p.real * 3 - p.imag).sum().backward()
            opt.step()
        out.append(p.detach().numpy())
    return out


def test_optimizers_update_complex_parameters_as_pytorchs():
    for got, want in zip(_optimizer_runs(fg), _optimizer_runs(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    p = fg.nn.Parameter(fg.tensor([1 + 2j]))
    p.abs().sum().backward()
    with pytest.raises(RuntimeError, match="does not support complex parameters"):
        fg.optim.Adamax([p]).step()


def test_compiled_training_step_with_complex_parameters_matches_eager():
    """A spectral layer (an FNO's): a complex weight, rfft/irfft, Adam; the step compiled
    breaks at the complex values, including inside the optimizer's loop over parameters."""
    x = fg.tensor(_r(4, 12).astype(np.float32))
    results = []
    for compiled in (False, True):
        w = fg.nn.Parameter(fg.tensor((_c(7) * 0 + Z.reshape(-1)[:7]).astype(np.complex64)))
        lin = fg.nn.Linear(12, 12)
        with fg.no_grad():
            lin.weight.copy_(fg.tensor(W12[:, :12].repeat(4, 0)[:12].astype(np.float32) * 0.1))
            lin.bias.zero_()
        opt = fg.optim.Adam([w, *lin.parameters()], lr=0.05)

        def step():
            opt.zero_grad()
            y = fg.fft.irfft(fg.fft.rfft(lin(x)) * w, n=12)
            loss = (y - x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        f = fg.compile(step) if compiled else step
        losses = [f().item() for _ in range(4)]
        results.append((losses, w.detach().numpy(), lin.weight.detach().numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[1][2], results[0][2], rtol=1e-5, atol=1e-6)


def _unitary_evolution(T):
    """A quantum-simulation pattern: U = exp(-iH) with H built from real parameters, plus the
    inverse and a solve of a complex matrix; gradients to complex and real leaves."""
    a = T.tensor(Z[:, :3] + 3 * np.eye(3), requires_grad=True)
    b = T.tensor(M[:3], requires_grad=True)
    h = T.tensor(X[0, :3], requires_grad=True)
    u = T.linalg.matrix_exp(-1j * (T.diag(h).to(T.complex128) + a * 0.1))
    loss = (u @ b).abs().pow(2).sum() + T.linalg.inv(a).real.sum() + T.linalg.solve(a, b).imag.sum()
    return [loss.detach(), *T.autograd.grad(loss, (a, b, h))]


def test_holomorphic_linear_algebra_of_complex_matrices_as_pytorchs():
    for got, want in zip(_unitary_evolution(fg), _unitary_evolution(torch)):
        np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=1e-9, atol=1e-10)


def test_real_and_imag_are_views_written_through_as_pytorchs():
    def program(T):
        z = T.tensor([1 + 2j, 3 - 1j])
        z.imag.zero_()
        z.real[0] = 5
        r = z.real
        z.mul_(2)
        return z.tolist(), r.tolist(), r._version == z._version
    assert program(fg) == program(torch)

    def recorded(T):  # (writes through the parts that autograd records: the other part kept)
        x = T.tensor(X[0], requires_grad=True)
        out = []
        for write in (lambda s: s.imag.__setitem__(0, 0.0), lambda s: s.imag.zero_(), lambda s: s.real.mul_(2),
                      lambda s: s[1:].real.add_(s[:-1].imag)):
            spec = T.fft.rfft(x)
            write(spec)
            g, = T.autograd.grad((spec * T.tensor(K4[:3])).abs().sum(), x)
            out.append(np.round(g.numpy(), 9).tolist())
        return out
    assert recorded(fg) == recorded(torch)
    v = fg.tensor([[1.0, 2.0]], requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="through view_as_real or view_as_complex"):
        fg.view_as_complex(v).mul_(2)  # (recorded by autograd: refused rather than written wrongly)


def test_prod_gradient_and_view_as_complex_alias_as_pytorchs():
    def program(T):
        z = T.tensor(Z[0], requires_grad=True)
        g, = T.autograd.grad((z.prod() * (1 - 2j)).real + z[1:].prod(0).abs(), z)
        x = T.zeros(2, 2)
        c = T.view_as_complex(x)
        c[0] = 1 + 2j
        x[1, 1] = 5.0
        return [g.resolve_conj().numpy().round(9).tolist(), x.tolist(), c.tolist()]
    assert program(fg) == program(torch)


def _module_and_optimizer_cases(T):
    class Rope(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("freqs", T.polar(T.ones(3), T.arange(3.0)))
            self.lin = T.nn.Linear(2, 2)
    out = []
    import warnings as w
    with w.catch_warnings():
        w.simplefilter("ignore")
        m = Rope().to(T.float64)
        out += [str(m.freqs.dtype), str(m.lin.weight.dtype), np.round(m.freqs.numpy(), 5).tolist()]
        m = Rope().to(T.complex128)
        out += [str(m.freqs.dtype), str(m.lin.weight.dtype)]
    ema = T.tensor([1 + 2j, 3 - 1j])
    ema.lerp_(T.tensor([0j, 1j]), 0.1)
    out.append(np.round(ema.numpy(), 6).tolist())
    p = T.nn.Parameter(T.tensor(Z[0]))
    opt = T.optim.LBFGS([p], lr=0.5, max_iter=4)

    def closure():
        opt.zero_grad()
        loss = (p * p.conj()).real.sum() + (p * T.tensor(Z[1])).real.sum()
        loss.backward()
        return loss
    opt.step(closure)
    out.append(np.round(p.detach().numpy(), 6).tolist())
    with T.autocast("cpu", dtype=T.bfloat16):
        out.append(str(T.fft.rfft2(T.ones(4, 4, dtype=T.bfloat16)).dtype))
    return [str(v).replace("fusegrad.", "torch.") for v in out]


def test_modules_lerp_lbfgs_and_autocast_with_complex_values_as_pytorchs():
    """Module.to(real) casts complex buffers to their real parts and to(complex) casts float
    parameters; lerp of complex tensors; LBFGS on complex parameters works on their parts;
    FFTs of bfloat16 under autocast run in float32."""
    assert _module_and_optimizer_cases(fg) == _module_and_optimizer_cases(torch)


def test_fullgraph_compile_of_complex_code_runs_one_interpreted_graph():
    """fullgraph=True cannot break at the complex values kernels cannot hold: the one graph
    runs on the IR interpreter instead (a note says so), with eager's values and gradients."""
    def spec(x):
        return fg.fft.rfft(x * 2, norm="ortho").abs().pow(2).sum()
    x0 = _r(8)
    cf = fg.compile(spec, fullgraph=True)
    for f in (spec, cf):
        x = fg.tensor(x0, requires_grad=True)
        loss = f(x)
        loss.backward()
        if f is spec:
            want = (loss.item(), x.grad.numpy())
    np.testing.assert_allclose(loss.item(), want[0], rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), want[1], rtol=1e-12)
    info = cf.cache_info()
    assert info["graph_breaks"] == [] and any("runs interpreted" in n for n in info["notes"]), info


def _statistics_and_transforms(T):
    z = T.tensor(Z[:2])
    x = T.tensor(Z[0], requires_grad=True)
    v = T.linalg.vecdot(x, T.tensor(Z[1]))
    g, = T.autograd.grad(v.real + v.imag, x)
    p = T.nn.Parameter(T.tensor(Z[2]))
    opt = T.optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.5)
    p.abs().sum().backward()
    opt.step()
    out = [np.round(T.cov(z).numpy(), 9).tolist(), np.round(T.corrcoef(z).numpy(), 9).tolist(), np.round(complex(v), 9),
           np.round(g.resolve_conj().numpy(), 9).tolist(), np.round(p.detach().numpy(), 9).tolist()]
    for jac in (T.func.jacrev, T.func.jacfwd):
        try:
            jac(lambda t: t * 1j)(T.ones(2))
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_covariance_vecdot_adagrad_and_jacobians_of_complex_values_as_pytorchs():
    """cov/corrcoef conjugate (Hermitian), vecdot conjugates its first operand, Adagrad's
    initial accumulator fills both parts, Jacobians of complex outputs are refused."""
    assert _statistics_and_transforms(fg) == _statistics_and_transforms(torch)


def _hermitian_transforms(T):
    z = T.tensor(Z[:3, :, None] * np.linspace(1, 2, 5) * (1 + 0.5j), requires_grad=True)
    r = T.tensor(W12[:, :6], requires_grad=True)
    losses = [(T.fft.hfft2(z, s=(4, 8)) * T.tensor(np.arange(96.0).reshape(3, 4, 8) % 7)).sum(),
              (T.fft.hfftn(z, dim=(0, 2), norm="ortho") ** 2).sum(), T.fft.ihfft2(r).abs().sum(),
              (T.fft.ihfftn(r, s=(2, 6)) * (1 + 2j)).real.sum()]
    out = []
    for loss in losses:
        gz, gr = T.autograd.grad(loss, (z, r), allow_unused=True)
        out.append([round(loss.item(), 8)] + [None if g is None else np.round(g.resolve_conj().numpy(), 8).tolist()
                                               for g in (gz, gr)])
    return out


def test_hermitian_fft_variants_as_pytorchs():
    assert _hermitian_transforms(fg) == _hermitian_transforms(torch)


def test_logsumexp_of_complex_values_shifts_by_the_real_part():
    z = np.array([[1 + 2j, 3 - 1j, -2 + 0.5j], [200 + 1j, 199 - 3j, 0j]], np.complex64)
    got = fg.logsumexp(fg.tensor(z), 1).numpy()
    np.testing.assert_allclose(got, torch.logsumexp(torch.tensor(z), 1).numpy(), rtol=1e-5)


def test_the_complex_to_real_cast_warning_names_the_users_line():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fg.tensor([1 + 2j]).float()
    assert [x.filename for x in w if "imaginary part" in str(x.message)] == [__file__]


def test_general_eigendecomposition_of_real_matrices_as_pytorchs():
    rng = np.random.default_rng(2)
    for dt in (np.float32, np.float64):
        a = rng.standard_normal((2, 4, 4)).astype(dt)
        w, v = fg.linalg.eig(fg.tensor(a))
        tw, tv = torch.linalg.eig(torch.tensor(a))
        assert str(w.dtype).split(".")[1] == str(tw.dtype).split(".")[1]
        np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(fg.linalg.eigvals(fg.tensor(a)).numpy(), tw.numpy(), rtol=1e-4, atol=1e-5)
    # (its gradients: tests/test_linalg_complex.py)


def test_complex_exponent_gradient_and_logcumsumexp_as_pytorchs():
    z = np.array([0.3 + 0.4j, -0.2 + 0.9j])
    got, want = [], []
    for T, out in ((fg, got), (torch, want)):
        e = T.tensor(z, requires_grad=True)
        (2 ** e).abs().sum().backward()
        out += [e.grad.numpy(), T.logcumsumexp(T.tensor(np.array([0.1 - 0.5j, 0.7 + 0.2j, -0.3 + 0.1j])), 0).numpy()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_inverse_trigonometric_and_hyperbolic_functions_and_logaddexp_of_complex_values():
    """asin, acos, atan, asinh, acosh, atanh and logaddexp of complex values as PyTorch's
    (they refused them), values on the branch cuts included: the side a signed zero names
    (asin(2+0j) = pi/2 + 1.317j, asin(2-0j) = pi/2 - 1.317j); complex128 gradients off the cuts."""
    cut = [complex(r, i) for r in (2.0, -2.0, 0.5, 1.0, 0.0) for i in (0.0, -0.0)]
    cut += [complex(i, r) for r in (2.0, -2.0, 0.5) for i in (0.0, -0.0)]
    z = np.concatenate([_c(12) * 2, cut])
    for name in ("asin", "acos", "atan", "asinh", "acosh", "atanh"):
        for dt in ("complex64", "complex128"):
            got = getattr(fg, name)(fg.tensor(z, dtype=getattr(fg, dt))).numpy()
            want = getattr(torch, name)(torch.tensor(z, dtype=getattr(torch, dt))).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5 if dt == "complex64" else 1e-12, atol=1e-6, err_msg=name)
        e, te = fg.tensor(z[:12], requires_grad=True), torch.tensor(z[:12], requires_grad=True)
        for T, x in ((fg, e), (torch, te)):
            y = getattr(T, name)(x)
            (y.real * 1.3 + y.imag * 0.7).sum().backward()
        np.testing.assert_allclose(e.grad.numpy(), te.grad.numpy(), rtol=1e-10, err_msg=name)
    a, b = _c(5), _c(5) * 3
    ea, ta = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got, want = fg.logaddexp(ea, fg.tensor(b)), torch.logaddexp(ta, torch.tensor(b))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got.abs().sum().backward()
    want.abs().sum().backward()
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-10)
