"""bfloat16/float16 graphs with the cpu backend: computed in float32 (passes.upcast), with
eager's rounding at the casts the program makes and half values at the boundary."""
import re

import ml_dtypes
import numpy as np
import pytest

import fusegrad as fg


def _mlp(L):
    L.manual_seed(0)
    return L.nn.Sequential(L.nn.Linear(6, 16), L.nn.ReLU(), L.nn.Linear(16, 3))


def _run(L, model, dtype, compiled, steps=3):
    rng = np.random.default_rng(1)
    opt = L.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        with L.autocast("cpu", dtype=dtype):
            out = model(x)
            loss = ((out.float() - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss, out

    f = fg.compile(step) if compiled else step
    losses, outs = [], []
    for _ in range(steps):
        x = L.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        y = L.tensor(rng.standard_normal((8, 3)).astype(np.float32))
        loss, out = f(x, y)
        assert out.dtype == dtype
        losses.append(float(loss.detach()))
        outs.append(out.float().detach().numpy())
    if compiled:  # the graph holds half values; the backend computes them in float32
        lowered = f.lower(x, y)
        assert re.search(r"\bb?f16\[", lowered.ir("optimized"))
        assert not re.search(r"\bb?f16\[", lowered.ir("fused"))
        kernels = lowered.ir("kernel")  # forward and backward kernels
        assert "float32" in kernels and not re.search(r"(?<!dtype=)\bb?float16\b", kernels)
        assert "reduce_precision" in lowered.ir("fused")
    return losses, outs, [p.detach().numpy().copy() for p in model.parameters()], f


@pytest.mark.torch
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_mlp_step_under_autocast_compiles_and_matches_eager_and_torch(half, pt):
    torch = pt
    tol = dict(rtol=0.05, atol=0.03) if half == "bfloat16" else dict(rtol=5e-3, atol=3e-3)
    model = _mlp(fg)
    ref_model = _mlp(fg)
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.tensor(p.detach().numpy()))
    cl, co, cp, f = _run(fg, model, getattr(fg, half), compiled=True)
    el, eo, ep, _ = _run(fg, ref_model, getattr(fg, half), compiled=False)
    tl, to, tp_, _ = _run(torch, tmodel, getattr(torch, half), compiled=False)
    info = f.cache_info()
    assert info["fallbacks"] == 0 and not info["notes"], info
    np.testing.assert_allclose(cl, el, **tol)
    np.testing.assert_allclose(cl, tl, **tol)
    for a, b, c in zip(co + cp, eo + ep, to + tp_):
        np.testing.assert_allclose(a, b, **tol)
        np.testing.assert_allclose(a, c, **tol)


def _bits(a):
    return np.asarray(a).view(np.uint16)


def test_explicit_casts_round_as_eager_and_boundary_is_half():
    """bf16 inputs, a .to(bfloat16) of float32 work in the middle and .to(float16) of it:
    those single roundings equal eager's bit for bit; f16 overflow gives inf, NaN stays."""
    def f(a, b, w):
        p = a.float() * b.float() + w            # float32 work on half inputs
        r = p.to(fg.bfloat16)                    # one rounding of a float32 value
        h = (w * 1000.0).to(fg.float16)          # overflows to inf past 65504
        q = (a * b)                              # bf16 in, bf16 out (computed in float32)
        return r, h, q, r.float() * 3.0, (h.float() + 1.0).to(fg.float16)

    cf = fg.compile(f)
    rng = np.random.default_rng(0)
    a = fg.tensor(rng.standard_normal(64).astype(np.float32)).to(fg.bfloat16)
    b = fg.tensor(rng.standard_normal(64).astype(np.float32)).to(fg.bfloat16)
    wn = (rng.standard_normal(64) * 40).astype(np.float32)
    wn[:4] = [np.nan, np.inf, -np.inf, 70.0]   # 70000 -> inf in float16
    w = fg.tensor(wn)
    got, want = cf(a, b, w), f(a, b, w)
    assert cf.cache_info()["fallbacks"] == 0 and not cf.cache_info()["notes"]
    assert [g.dtype for g in got] == [x.dtype for x in want] == [fg.bfloat16, fg.float16, fg.bfloat16,
                                                                 fg.float32, fg.float16]
    for k in (0, 1, 4):  # single roundings (and NaN/inf): bitwise equal
        g, e = got[k].numpy(), want[k].numpy()
        assert np.array_equal(np.isnan(g.astype(np.float32)), np.isnan(e.astype(np.float32)))
        ok = ~np.isnan(e.astype(np.float32))
        np.testing.assert_array_equal(_bits(g)[ok], _bits(e)[ok])
    assert np.isinf(got[1].numpy()[1:4].astype(np.float32)).all() and np.isnan(got[1].numpy()[0].astype(np.float32))
    # a * b: one product of bf16 values rounded once at the boundary, as eager's ufunc
    np.testing.assert_array_equal(_bits(got[2].numpy()), _bits(want[2].numpy()))
    np.testing.assert_array_equal(got[3].numpy(), want[3].numpy())
    lowered = cf.lower(a, b, w)
    assert re.search(r"\bb?f16\[", lowered.ir("optimized"))  # the program's half values...
    fused = lowered.ir("fused")
    assert not re.search(r"\bb?f16\[", fused) and "reduce_precision" in fused  # ...computed in float32


def test_reduce_precision_primitive_matches_numpy_casts():
    from fusegrad.ir import prims as P
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32) * 1e3
    for dt in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(P.reduce_precision.impl(x, dtype=dt), x.astype(dt).astype(np.float32))


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_one_op_rounds_once_in_eager_as_torch(half):
    """An op PyTorch computes in one kernel rounds its float32 result once (softmax,
    addcmul, lerp: composites here; sigmoid, rsqrt: several NumPy steps); log_softmax keeps
    its sum and log-sum in the input's dtype along the last dimension, as PyTorch's kernel does. Bit for bit with torch."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)

    def ops(L):
        t = L.tensor(x).to(getattr(L, half))
        return [t.softmax(-1), t.softmax(0), t.log_softmax(-1), t.log_softmax(0), t.sigmoid(), (t.abs() + 1).rsqrt(), L.addcmul(t, t, t, value=0.5),
                L.lerp(t, t * 2, 0.3), L.lerp(t, t * 2, L.full_like(t, 0.7))]
    for got, want in zip(ops(fg), ops(torch)):
        assert str(got.dtype).split(".")[1] == half
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_compiled_half_matmul_results_are_rounded_as_eager(dtype):
    """A half-precision graph computes in float32 but rounds what a GEMM stores (as eager and
    torch.compile do): a dequantized linear's output scaled afterwards (a weight-only int8
    layer) is bit for bit eager's; it was a third of the outputs an ulp off."""
    rng = np.random.default_rng(49)
    dt = getattr(fg, dtype)
    w = rng.standard_normal((6, 8)).astype(np.float32)
    s = np.abs(w).max(-1, keepdims=True) / 127
    wq = fg.tensor(np.round(w / s).astype(np.int8))
    x, sc = fg.tensor(rng.standard_normal((3, 8)), dtype=dt), fg.tensor(s, dtype=dt)

    def f(x, wq, scales):
        return fg.nn.functional.linear(x, wq.to(dtype=x.dtype)) * scales.squeeze(-1)

    np.testing.assert_array_equal(fg.compile(f)(x, wq, sc).float().numpy(), f(x, wq, sc).float().numpy())
