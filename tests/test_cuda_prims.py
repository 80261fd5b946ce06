"""Every primitive on CUDA tensors equals the CPU backend: forward values, and the VJP of
every differentiable one, on Numba's CUDA simulator (issue 15's done-means).

The differentiable cases are test_prims_grad's table (broadcasting, non-contiguous
sources, 0-d and empty tensors); the table below adds the non-differentiable primitives,
and a coverage test keeps both complete as primitives are added. The simulator must be
chosen before numba.cuda is first imported, so without ``FUSEGRAD_CUDA_SIM=1`` this
module runs itself in a subprocess that sets it."""
import importlib.util
import os

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ir.dtypes import _BF16
from fusegrad.ir.primitive import PRIMS
from helpers import run_on_cuda_simulator
from test_prims_grad import CASES

SIM = os.environ.get("FUSEGRAD_CUDA_SIM") == "1" or os.environ.get("FUSEGRAD_CUDA_TESTS") == "device"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="numba-cuda not installed")


def _rng(seed=0):
    return np.random.default_rng(seed)


def _sorted_rows():
    s = np.sort(_rng(1).integers(-4, 5, (2, 6)).astype(np.float64), axis=1)
    s[1, -1] = np.nan  # NaN sorts last
    return s


COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
# torch.special's functions without a derivative (computed on the host, as NumPy/SciPy)
SPECIAL_NONDIFF = ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
                   "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
                   "spherical_bessel_j0", "airy_ai")
POLYNOMIALS = tuple(f"{s}chebyshev_polynomial_{k}" for s in ("", "shifted_") for k in "tuvw") + (
    "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
LOGICAL = ("logical_and", "logical_or", "logical_xor")


def _scatter_reductions(a, i, s, x, j, y):
    """scatter_reduce by atomics (int64; float64 with NaN) and by the row kernel (int16 has no
    atomic add, max or min; prod has no atomic at all), and scatter_add of int16."""
    return tuple(PRIMS["scatter_reduce"](base, idx, src, axis=1, reduce=r)
                 for base, idx, src in ((a, i, s), (a.to(fg.int16), i, s.to(fg.int16)), (x, j, y))
                 for r in ("amax", "amin", "prod")) + (PRIMS["scatter_add"](a.to(fg.int16), i, s.to(fg.int16), axis=1),)


# Non-differentiable primitives: (name, inputs, call on tensors)
NONDIFF = [
    ("argmax", lambda: [_rng().standard_normal((3, 4))], lambda x: PRIMS["argmax"](x, axis=1, keepdims=False)),
    ("argmin", lambda: [_rng().standard_normal((3, 4))], lambda x: PRIMS["argmin"](x, axis=0, keepdims=True)),
    ("argsort", lambda: [np.array([[3.0, 1.0, 3.0, np.nan, -2.0], [0.0, 0.0, 1.0, -1.0, 2.0]])],
     lambda x: (PRIMS["argsort"](x, axis=1, descending=False), PRIMS["argsort"](x, axis=1, descending=True))),
    ("searchsorted", lambda: [_sorted_rows(), np.array([[-5.0, 0.0, 2.0, 9.0], [1.0, np.nan, -1.0, 4.0]])],
     lambda s, v: (PRIMS["searchsorted"](s, v, right=False, dtype=np.dtype(np.int64)),
                   PRIMS["searchsorted"](s, v, right=True, dtype=np.dtype(np.int32)))),
    ("compare", lambda: [np.array([[1.0, np.nan, 2.0]]), np.array([[1.0], [2.0]])],
     lambda x, y: tuple(PRIMS[n](x, y) for n in COMPARISONS)),
    ("isnan", lambda: [np.array([1.0, np.nan, np.inf])], lambda x: PRIMS["isnan"](x)),
    ("logical", lambda: [np.array([True, False, True, False]), np.array([True, True, False, False])],
     lambda a, b: tuple(PRIMS[n](a, b) for n in LOGICAL) + (PRIMS["logical_not"](a),)),
    ("reduce_precision", lambda: [np.array([65504.0, 65519.99, 65520.0, -7e4, 1e-8, 1.5 * 2.0 ** -24, 2.0 ** -25,
                                            1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 3.4e38, 1e-40, np.nan,
                                            -np.inf, -0.0], np.float32)],
     lambda x: (PRIMS["reduce_precision"](x, dtype=np.dtype(np.float16)),
                PRIMS["reduce_precision"](x, dtype=_BF16))),
    ("stop_gradient", lambda: [_rng().standard_normal((2, 3))], lambda x: PRIMS["stop_gradient"](x) * 2),
    ("int_arith", lambda: [_rng().integers(-9, 9, (3, 4)), _rng(2).integers(1, 5, (4,))],
     lambda a, b: (a + b, a * b, a - b, PRIMS["reduce_sum"](a, axes=(1,), keepdims=False), a.abs(), -a,
                   PRIMS["cumsum"](a, axis=0))),
    ("floordiv", lambda: [_rng().integers(-9, 9, (3, 4)), np.array([1, -2, 3, -4])],
     lambda a, b: (PRIMS["floordiv"](a, b), PRIMS["floordiv"](a, 3))),
    ("mod", lambda: [_rng().integers(-9, 9, (3, 4)), np.array([1, -2, 3, -4])],
     lambda a, b: (PRIMS["mod"](a, b), PRIMS["mod"](a, -3))),
    ("ctc_grad", lambda: [_rng().standard_normal((4, 2, 3)), np.array([[0, 1, 0, 2, 0], [0, 2, 0, 2, 0]]),
                          np.array([4, 3]), np.array([2, 2])],
     lambda x, e, i, t: PRIMS["ctc_grad"](x.log_softmax(2), e, i, t, zero_infinity=True, as_pytorch=True)),
    ("scatter_reduce_int_nan", lambda: [_rng().integers(-9, 9, (3, 4)), _rng(2).integers(0, 4, (3, 5)),
                                        _rng(3).integers(-9, 9, (3, 5)), np.array([[1.0, np.nan, 2.0, 0.5]]),
                                        np.array([[0, 1, 0]]), np.array([[np.nan, 3.0, 1.0]])],
     _scatter_reductions),
] + [(n, lambda: [np.array([-3.0, -0.5, 0.0, 0.7, 2.0, 11.0])], lambda x, n=n: PRIMS[n](x)) for n in SPECIAL_NONDIFF] \
  + [(n, lambda: [np.array([-1.5, -0.3, 0.2, 0.9, 2.0]), np.array([0.0, 1.0, 2.0, 3.0, 5.0])],
      lambda x, k, n=n: PRIMS[n](x, k)) for n in POLYNOMIALS]

# Primitives that take no tensor: made on each device directly
FACTORIES = ["full", "iota", "normal", "uniform"]


def test_every_primitive_is_covered():
    names = {c.prim for c in CASES} | set(FACTORIES) | set(COMPARISONS) | set(LOGICAL) | {"logical_not"}
    names |= {n for n, _, _ in NONDIFF}
    assert set(PRIMS) - names == set()


if not SIM:
    def test_every_primitive_on_the_cuda_simulator():
        run_on_cuda_simulator(__file__)

else:
    def _on(arrays, device):
        return [fg.from_numpy(np.array(a)).to(device) for a in arrays]

    def _host(t):
        return t.detach().cpu().numpy()

    def _on_device_only():
        """No executable of the eager CUDA service fell back to host copies, but those of the
        primitives with no device kernel yet (the solvers without a cuda_solve plan) and those
        of complex operands (kernels hold no complex values)."""
        from fusegrad.codegen.cuda_solve import PLANS
        from fusegrad.runtime import cuda_ops
        host_only = {p.name for p in PRIMS.values() if p.no_lowering and p not in PLANS}
        def complex_values(key):  # complex operands, or a cast to a complex dtype
            return any(a[0] == "a" and np.dtype(a[2]).kind == "c" for a in key[2] if isinstance(a, tuple)) or \
                any(getattr(v[-1], "kind", None) == "c" for _, v in key[1] if isinstance(v, tuple))
        host = [k[0].name for k, e in cuda_ops._EXES.items()
                if isinstance(e, cuda_ops._HostApply) and k[0].name not in host_only and not complex_values(k)]
        assert host == [], f"ran on host copies: {host}"

    def _same(got, want, what):
        got, want = _host(got), _host(want)
        assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True, err_msg=what)

    def _run(case, device):
        arrs = [np.asarray(a) for a in case.gen()]
        diff = case.diff if case.diff is not None else tuple(i for i, a in enumerate(arrs) if a.dtype.kind == "f")
        xs = _on(arrs, device)
        for i in diff:
            xs[i].requires_grad_(True)
        out = case.call(*xs)
        ct = fg.from_numpy(_rng(7).standard_normal(out.shape).astype(_host(out).dtype)).to(device)
        grads = fg.autograd.grad(out, [xs[i] for i in diff], ct, allow_unused=True)
        return out, grads

    @pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
    def test_forward_and_vjp_equal_the_cpu(case):
        out, grads = _run(case, "cuda")
        ref, ref_grads = _run(case, "cpu")
        assert out.device.type == "cuda" and all(g is None or g.device.type == "cuda" for g in grads)
        _same(out, ref, "forward")
        for k, (g, r) in enumerate(zip(grads, ref_grads)):
            assert (g is None) == (r is None), k
            if g is not None:
                _same(g, r, f"gradient {k}")
        _on_device_only()

    @pytest.mark.parametrize("name,gen,call", NONDIFF, ids=[n for n, _, _ in NONDIFF])
    def test_nondifferentiable_primitives_equal_the_cpu(name, gen, call):
        arrs = gen()
        got, want = call(*_on(arrs, "cuda")), call(*_on(arrs, "cpu"))
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.device.type == "cuda"
            _same(g, w, f"{name} output {k}")
        _on_device_only()

    def test_cholesky_of_a_matrix_that_is_not_positive_definite_raises_as_on_the_cpu():
        a = np.array([[[4.0, 2.0], [2.0, 5.0]], [[1.0, 2.0], [2.0, 1.0]]])
        errors = []
        for device in ("cuda", "cpu"):
            with pytest.raises(fg.linalg.LinAlgError) as info:
                fg.linalg.cholesky(fg.tensor(a, device=device))
            errors.append(str(info.value))
        assert errors[0] == errors[1] and "positive-definite" in errors[0]
        good = fg.linalg.cholesky(fg.tensor(a[:1], device="cuda"), upper=True)
        _same(good, fg.linalg.cholesky(fg.tensor(a[:1]), upper=True), "cholesky")
        _on_device_only()

    @pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
    def test_half_precision_values_convert_on_the_device_bit_exactly(dtype):
        """Every 16-bit pattern widens to the float32 NumPy gives, and rounds back from it and
        from the midpoints between neighbours (ties to even) as NumPy rounds."""
        from fusegrad.codegen import cuda_half
        from fusegrad.runtime.cuda_driver import numba_cuda
        cuda, dt = numba_cuda(), np.dtype(_BF16 if dtype == "bfloat16" else dtype)
        patterns = np.arange(0, 2 ** 16, 3, dtype=np.uint16)  # every third: the simulator is slow
        wide = cuda_half.widen(cuda.to_device(patterns.view(dt))).copy_to_host()
        np.testing.assert_array_equal(wide, patterns.view(dt).astype(np.float32))
        finite = np.sort(wide[np.isfinite(wide)])
        probes = np.concatenate([wide, ((finite[1:].astype(np.float64) + finite[:-1]) / 2).astype(np.float32),
                                 [np.float32(3.4e38), np.float32(1e-45)]])
        back = cuda_half.narrow(cuda.to_device(probes.astype(np.float32)), dt).copy_to_host()
        with np.errstate(over="ignore"):
            want = probes.astype(np.float32).astype(dt)
        np.testing.assert_array_equal(back.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
        assert np.isnan(back[np.isnan(want)].astype(np.float32)).all()

    @pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
    def test_half_precision_tensors_compute_on_the_device(dtype):
        """Half CUDA tensors: each op computed in float32 on the device and rounded, as the
        CPU's, gradients included; nothing runs on host copies."""
        rng = _rng(5)
        runs = {}
        for device in ("cuda", "cpu"):
            x = fg.tensor(rng.standard_normal((3, 4)), dtype=getattr(fg, dtype), device=device, requires_grad=True)
            w = fg.tensor(np.linspace(-1, 1, 8).reshape(4, 2), dtype=getattr(fg, dtype), device=device)
            h = (x.exp() * 0.5 - x.sin() / 3).tanh()
            y = fg.cat([h @ w, h.sum(1, keepdim=True), h.amax(0)[:2].reshape(1, 2).expand(3, 2)[:, :1]], 1)
            y.float().sum().backward()
            runs[device] = y, x.grad, h.to(fg.float32), x.argsort(1)
            rng = _rng(5)
        for got, want in zip(runs["cuda"], runs["cpu"]):
            assert got.device.type == "cuda"
            got, want = _host(got).astype(np.float64), _host(want).astype(np.float64)
            np.testing.assert_allclose(got, want, rtol=1e-2 if dtype == "bfloat16" else 2e-3, atol=1e-3)
        _on_device_only()

    def test_factories_equal_the_cpu():
        for device in ("cuda", "cpu"):
            fg.manual_seed(3)
            made = [fg.full((2, 3), 1.5, device=device), fg.arange(5, device=device),
                    fg.randn(4, 3, device=device), fg.rand(7, device=device, dtype=fg.float64)]
            assert all(t.device.type == device for t in made)
            if device == "cuda":
                on_cuda = made
        for g, w in zip(on_cuda, made):
            _same(g, w, "factory")
        _on_device_only()
