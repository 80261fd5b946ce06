"""The cpu backend's shape-symbolic compile (``CpuBackend().compile(graph, symbolic=True)``):
kernels rendered from kernel IR with runtime extents, shared by graphs of other sizes,
against eager NumPy at sizes 0, 1 and several. Few Numba compiles: each distinct kernel
compiles once for the whole file."""
import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.codegen.cpu import CpuBackend
from fusegrad.codegen.cpu_render import prepare, render
from fusegrad.codegen.kir import Loop, stmts
from fusegrad.ir.prims import elementwise as E
from fusegrad.ir.prims import layout as L
from fusegrad.ir.prims import reduce as R
from helpers import graph_of


def _eager(fn, arrays):
    out = fn(*[fg.tensor(a) for a in arrays])
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else [out])]


def _linear_step(x, w, b):
    """nn.Linear's forward and the pieces of its backward: matmul, bias, activation, sums."""
    y = E.add(x @ L.transpose(w, perm=(1, 0)), b)
    t = E.tanh(y)
    gb = R.reduce_sum(E.sub(1.0, E.mul(t, t)), axes=(0,), keepdims=False)
    return t, gb, R.reduce_max(y, axes=(1,), keepdims=True)


def test_linear_at_five_batch_sizes_runs_on_one_compiled_kernel_set(rng):
    lin = nn.Linear(4, 2)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    backend = CpuBackend()
    kernel_sets = []
    for batch in (8, 9, 10, 11, 12):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        exe = backend.compile(graph_of(_linear_step, [x, w, b], optimize=True), symbolic=True)
        kernel_sets.append(tuple(exe.kernels.values()))
        for got, ref in zip(exe(x, w, b), _eager(_linear_step, [x, w, b])):
            assert got.shape == ref.shape and got.dtype == ref.dtype
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # the same compiled functions (one Numba signature each) serve every batch size
    assert kernel_sets[0] and all(ks == kernel_sets[0] for ks in kernel_sets)
    assert all(len(fn.signatures) == 1 for fn in kernel_sets[0])


def _mix(x, y):
    a = E.add(E.mul(E.sin(x), 2.0), y)
    m = R.reduce_max(a, axes=(1,), keepdims=True)
    e = E.exp(E.sub(a, m))
    s = E.div(e, R.reduce_sum(e, axes=(1,), keepdims=True))
    c = E.where(E.gt(x, 0.0), E.sqrt(E.abs_(x)), E.neg(y))
    return s, R.reduce_sum(s, axes=(0,), keepdims=False), c, E.exp(L.transpose(s, perm=(1, 0))), \
        R.reduce_sum(E.cast(E.gt(x, 0.0), dtype=np.dtype(np.int64)), axes=(0, 1), keepdims=False)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_symbolic_kernels_at_sizes_0_1_and_several(dt, rng):
    backend = CpuBackend()
    first = None
    for n, m in [(3, 5), (0, 5), (1, 5), (1, 1), (6, 7), (33, 65)]:
        x, y = rng.standard_normal((n, m)).astype(dt), rng.standard_normal(m).astype(dt)
        if n * m:
            x.flat[0] = 1e6  # sin past fastmath's exact range: libm's value
        exe = backend.compile(graph_of(_mix, [x, y], optimize=True), symbolic=True)
        if n > 1 and m > 1:
            first = first or exe.kernels
            assert list(exe.kernels.values()) == list(first.values())
        for got, ref in zip(exe(x, y), _eager(_mix, [x, y])):
            assert got.shape == ref.shape and got.dtype == ref.dtype
            np.testing.assert_allclose(got, ref, rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-6)


def test_rendered_from_kernel_ir_with_runtime_extents(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    exe = CpuBackend().compile(graph_of(lambda x: E.exp(E.mul(x, 2.0)), [x], optimize=True), symbolic=True)
    (lg,) = exe.lowered.values()
    assert lg.kernel.syms and all(not isinstance(lp.extent, int) for lp in stmts(lg.kernel.body) if isinstance(lp, Loop))
    src = render(prepare(lg.kernel), from_python=True)
    assert src == exe.kernel_source() and "def kernel(b0, b1, n0, n1)" in src
    assert "kernel" in str(exe.stages["kernel"]) and "n0" in str(exe.stages["kernel"])


def test_a_new_size_of_a_symbolic_graph_prepares_no_kernel_again(monkeypatch):
    """The kernels of a shape-symbolic graph are the same at every size: a new size reuses
    their compiled functions without running the kernel passes or rendering again (each new
    length of autoregressive generation re-prepared every kernel: 0.2 s per call)."""
    from fusegrad.codegen import cpu_render
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    cm = fg.compile(model, dynamic=True)
    prepared = []
    real = cpu_render.prepare
    monkeypatch.setattr(cpu_render, "prepare", lambda k, *a, **kw: prepared.append(1) or real(k, *a, **kw))
    with fg.no_grad():
        for n in (3, 5, 6, 9):
            before = len(prepared)
            x = fg.randn(n, 4)
            np.testing.assert_allclose(cm(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
            if n > 5:
                assert len(prepared) == before, n
    assert cm.cache_info()["symbolic_sizes"] >= 2
