"""The cuda backend's code generation (codegen.cuda, codegen.cuda_render, codegen.kir_layout)
and the eager CUDA service (runtime.cuda_ops), on Numba's CUDA simulator: compiled graphs
against eager NumPy, the kernel mapping (grid-stride threads, block tree reductions, tiled
GEMM), kernel reuse, donation, and apply's cache and host fallback.

The simulator must be chosen before numba.cuda is first imported, so without
``FUSEGRAD_CUDA_SIM=1`` this module runs itself in a subprocess that sets it (the rest of
the session keeps whatever CUDA setup it has). It is slow (a Python thread per CUDA
thread): sizes are a few dozen elements and primitives are batched into few graphs."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import mse_step, run_on_cuda_simulator

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="numba-cuda not installed")

# FUSEGRAD_CUDA_TESTS=device: run on the real GPU in this process (benchmarks/gpu_check.py)
SIM = os.environ.get("FUSEGRAD_CUDA_SIM") == "1" or os.environ.get("FUSEGRAD_CUDA_TESTS") == "device"

if not SIM:
    def test_cuda_codegen_on_the_simulator():
        run_on_cuda_simulator(__file__)

    def test_device_kernels_compile_to_ptx():
        """The kernels as rendered for a GPU compile to PTX (tests/cuda_ptx_check.py;
        skipped where libnvvm is not installed)."""
        env = {k: v for k, v in os.environ.items() if k not in ("FUSEGRAD_CUDA_SIM", "NUMBA_ENABLE_CUDASIM")}
        here = os.path.dirname(__file__)
        r = subprocess.run([sys.executable, os.path.join(here, "cuda_ptx_check.py")], env=env,
                           capture_output=True, text=True, cwd=here)
        if r.returncode == 77:
            pytest.skip(r.stdout.strip())
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
        assert "kernels compiled to PTX" in r.stdout

else:
    import fusegrad as fg
    from fusegrad.codegen.backend import Unsupported, get_backend
    from fusegrad.codegen.cuda import POOL, CudaBackend
    from fusegrad.codegen.cuda_render import BLOCK_MIN
    from fusegrad.codegen.kir_interp import run as interpret
    from fusegrad.codegen.kir_layout import lower_layout
    from fusegrad.ir import prims as P
    from fusegrad.ir.prims import elementwise as E
    from fusegrad.ir.prims import reduce as R
    from fusegrad.runtime import cuda_ops
    from fusegrad.runtime.cuda_driver import numba_cuda, simulated
    from helpers import graph_of
    from test_kernel_ir import _elementwise_all, _softmax_mix

    cuda = numba_cuda()
    F32 = dict(rtol=2e-5, atol=2e-6)

    def _host(a):
        return a.copy_to_host()

    def _compare(fn, arrays, tol=F32, **compile_kw):
        """Compile ``fn``'s optimized graph for cuda, run it on device copies of ``arrays``
        and compare every output with eager fusegrad; returns the executable."""
        g = graph_of(fn, arrays, optimize=True)
        exe = CudaBackend().compile(g, **compile_kw)
        got = exe(*[cuda.to_device(a) for a in arrays + [np.asarray(h._data) for _, h in g.consts]])
        ref = fn(*[fg.tensor(a) for a in arrays])
        ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        assert len(got) == len(ref)
        for k, (g, r) in enumerate(zip(got, ref)):
            assert not isinstance(g, np.ndarray), "outputs stay on the device"
            g, r = _host(g), r.numpy()
            assert g.shape == r.shape and g.dtype == r.dtype, (k, g.shape, r.shape, g.dtype, r.dtype)
            np.testing.assert_allclose(g, r, equal_nan=True, err_msg=f"output {k}", **tol)
        return exe

    def test_runs_on_the_simulator():
        assert simulated() and get_backend("cuda").name == "cuda"
        assert type(cuda.device_array(2)).__module__.startswith("numba.cuda.simulator")

    def test_every_elementwise_primitive_and_short_reductions(rng):
        """Each elementwise primitive with a lowering (unary, binary, predicates, where,
        cast) and short reductions, in one graph; and softmax's phases."""
        a = rng.standard_normal((2, 3, 4)).astype(np.float32)
        a[0, 0, 0] = np.nan
        b = rng.random((2, 3, 4)).astype(np.float32)
        exe = _compare(_elementwise_all, [a, b], dict(rtol=2e-5, atol=2e-6))
        assert "@cuda.jit" in exe.kernel_source() and "libdevice" not in exe.kernel_source()
        x, y = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
        _compare(_softmax_mix, [x, y])

    def test_long_reductions_are_block_tree_reductions(rng):
        """Rows longer than BLOCK_MIN: one block per row, a tree reduction in shared
        memory; max/min propagate NaN; a full sum to one value; int and bool reductions."""
        n = BLOCK_MIN + 13
        x = rng.standard_normal((3, n)).astype(np.float32)
        x[1, 5] = np.nan
        k = rng.integers(-5, 5, (2, n)).astype(np.int32)

        def f(x, k):
            m = R.reduce_max(x, axes=(1,), keepdims=True)
            e = E.exp(E.sub(x, m))
            return (E.div(e, R.reduce_sum(e, axes=(1,), keepdims=True)), R.reduce_min(x, axes=(1,), keepdims=False),
                    R.reduce_sum(x, axes=(0, 1), keepdims=False), R.reduce_sum(k, axes=(1,), keepdims=False),
                    R.reduce_max(E.gt(k, 3), axes=(1,), keepdims=False),
                    R.reduce_prod(E.add(E.mul(x, 0.01), 1.0), axes=(1,), keepdims=False))
        exe = _compare(f, [x, k], dict(rtol=1e-5, atol=1e-5))
        src = exe.kernel_source()
        assert "cuda.shared.array" in src and "cuda.syncthreads()" in src
        assert any(getattr(s, "rendered", None) is not None and s.rendered.block for s in exe._steps)

    def test_full_reductions_split_over_the_grid(rng):
        """A reduction to single values over many elements runs on several blocks: per-block
        partials, then the block that finishes last folds them (its ticket counter reset
        for the next call); NaN propagates through max."""
        x = rng.standard_normal((7, 40)).astype(np.float32)
        k = rng.integers(-9, 9, 300).astype(np.int64)

        def f(x, k):
            return (R.reduce_sum(x, axes=(0, 1), keepdims=False), R.reduce_max(x, axes=(0, 1), keepdims=False),
                    E.mul(R.reduce_sum(E.exp(x), axes=(0, 1), keepdims=False), 2.0),
                    R.reduce_sum(k, axes=(0,), keepdims=False), R.reduce_min(E.mul(x, 3.0), axes=(0, 1), keepdims=True))
        exe = _compare(f, [x, k], dict(rtol=1e-5, atol=1e-5))
        steps = [s for s in exe._steps if hasattr(s, "rendered")]
        assert steps and all(s.rendered.scratch and s.launch[0] > 1 for s in steps)
        x[3, 3] = np.nan
        for _ in range(2):  # again: the last block left the ticket counter at zero
            got = exe(cuda.to_device(x), cuda.to_device(k))
            np.testing.assert_allclose(_host(got[0]), np.nan, equal_nan=True)
            assert np.isnan(_host(got[1])) and _host(got[3]) == k.sum()

    def test_views(rng):
        """Views read through index arithmetic: flip, strided slice, transpose, broadcast,
        a reshape that merges dims."""
        x = rng.standard_normal((4, 6)).astype(np.float32)
        _compare(lambda x: (fg.flip(x, [0]) * 2, x[::2, 1:5] + 1, x.T.reshape(3, 8) * 1.5, x.reshape(24)[3:9].exp(),
                            x[:, :1].expand(4, 6) - x), [x])

    @pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the simulator's NumPy scalars (random draws, inf)
    def test_fuzz_batch():
        """Six random fuzz programs compiled as one function with the cuda backend: values
        and gradients equal eager, one graph (tests/fuzz)."""
        from fuzz.check import check_batch
        from fuzz.generator import generate
        check_batch([generate(s) for s in range(6)], "cuda")

    def test_vjp_graphs(rng):
        """Gradients of a few primitives (a traced func.grad) against eager."""
        x = rng.standard_normal((4, 6)).astype(np.float32)
        w = rng.standard_normal((6, 3)).astype(np.float32)

        def loss(x, w):
            h = fg.tanh(x @ w) * fg.sigmoid(x[:, :3]) + fg.exp(-x[:, 3:] ** 2)
            return (fg.softmax(h, dim=1) * fg.log1p(h.abs())).sum() + fg.maximum(x, 0.1 * x).sum()
        _compare(fg.func.grad(loss, argnums=(0, 1)), [x, w], dict(rtol=1e-4, atol=1e-5))

    def test_mlp_forward_and_backward(rng):
        """A two-layer MLP's loss and gradients: matmuls as GEMM kernels, bias and relu
        fused, the batch-sum of the bias gradient a reduction."""
        xs = rng.standard_normal((10, 7)).astype(np.float32)
        t = rng.standard_normal((10, 3)).astype(np.float32)
        w1 = (rng.standard_normal((7, 9)) * 0.3).astype(np.float32)
        b1 = rng.standard_normal(9).astype(np.float32)
        w2 = (rng.standard_normal((9, 3)) * 0.3).astype(np.float32)

        def step(w1, b1, w2, xs, t):
            def loss(w1, b1, w2):
                h = fg.relu(xs @ w1 + b1)
                return ((h @ w2 - t) ** 2).mean()
            return fg.func.grad_and_value(loss, argnums=(0, 1, 2))(w1, b1, w2)

        def flat(*a):
            grads, value = step(*a)
            return (*grads, value)
        exe = _compare(flat, [w1, b1, w2, xs, t], dict(rtol=1e-4, atol=1e-5))
        assert "tiled GEMM" in exe.kernel_source()

    def test_matmul_tiles_at_odd_sizes(rng):
        """Sizes that are not multiples of the tile; transposed operands; the GEMM
        epilogue (X + c * A @ B); batched matmul with broadcast batch dims; k = 0."""
        a = rng.standard_normal((5, 9)).astype(np.float32)
        b = rng.standard_normal((9, 11)).astype(np.float32)
        c = rng.standard_normal((5, 11)).astype(np.float32)
        tol = dict(rtol=1e-4, atol=1e-5)
        exe = _compare(lambda a, b: (a @ b, a.T @ a, b @ b.T), [a, b], tol)
        assert exe.kernel_source().count("tiled GEMM") == 3
        exe = _compare(lambda a, b, c: c - 0.5 * (a @ b), [a, b, c], tol)
        assert exe.kernel_source().count("tiled GEMM") == 1 and "* x[o]" in exe.kernel_source()
        _compare(lambda a, b: a @ b, [rng.standard_normal((2, 3, 5, 9)).astype(np.float32),
                                      rng.standard_normal((3, 9, 4)).astype(np.float32)], dict(rtol=1e-4, atol=1e-5))
        _compare(lambda a, b: a @ b, [np.ones((3, 0)), np.ones((0, 2))])

    def test_layout_and_index_calls(rng):
        """concatenate and pad as loop kernels; index (advanced, sliced, int keys), gather,
        scatter_add and index_put (set and accumulate) as element-parallel kernels; cumsum
        and argmax/argmin a thread per row (NaN first wins); random draws equal eager's."""
        a = rng.standard_normal((3, 4)).astype(np.float32)
        a[1, 2] = np.nan
        b = rng.standard_normal((3, 2)).astype(np.float32)
        i = np.array([2, 0, -1], np.int64)

        def f(a, b, i):
            c, d = a * 1.0, a * 1.0
            c[i % 3] = 5.0
            d.index_put_((i % 3,), a[0] * 2, accumulate=True)
            return (fg.cat([a, b], dim=1), fg.cat([a, a * 2], dim=0), fg.nn.functional.pad(a, (1, 2, 0, 1), value=3.0),
                    a[i], a[:, i], a[i, 1:3], a[1, i], fg.gather(a, 1, (i % 2).reshape(3, 1).expand(3, 2)),
                    (a * 0).scatter_add(1, (i % 4).reshape(3, 1).expand(3, 2), b), c, d,
                    fg.cumsum(a, 1), fg.argmax(a, 1), fg.argmin(a, 0, keepdims=True), fg.cumsum(i, 0))
        exe = _compare(f, [a, b, i])
        src = exe.kernel_source()
        assert "cuda.atomic.add" in src and "cumsum" in src and "argmin" in src
        with pytest.raises(IndexError, match="out of range"):
            exe(*[cuda.to_device(x) for x in (a, b, np.array([2, 0, 7], np.int64))])

    def test_embedding_cross_entropy_gradient(rng):
        """Embedding lookup and cross-entropy's gradient: index, scatter_add and an
        accumulating index_put (colliding rows) on the device."""
        def grad(w, i, t):
            return fg.func.grad(lambda w: fg.nn.functional.cross_entropy(
                fg.nn.functional.embedding(i, w).sum(1), t))(w)
        exe = _compare(grad, [rng.standard_normal((10, 4)).astype(np.float32), np.array([[1, 2], [3, 3]]),
                              np.array([1, 2])])
        assert "host" not in exe.kernel_source()

    @pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the simulator's uint64 scalars
    def test_random_draws_equal_eager():
        """uniform and normal draws: the same SplitMix64 stream as eager, a thread per element."""
        from fusegrad.runtime.compiled import _read
        from fusegrad.runtime.interpreter import run_arrays

        def draw(x):
            return fg.rand(5, 7) + x, fg.randn(33) * 2
        x = np.zeros((5, 7), np.float32)
        g = graph_of(draw, [x], optimize=True)
        arrays = [x] + [np.asarray(_read(h)) for _, h in g.consts]  # the random keys, drawn once
        exe = CudaBackend().compile(g)
        got = exe(*[cuda.to_device(a) for a in arrays])
        for a, r in zip(got, run_arrays(g, arrays)):
            np.testing.assert_allclose(_host(a), r, rtol=1e-6, atol=1e-6)
        src = exe.kernel_source()
        assert "uniform" in src and "normal" in src and "np.uint64" in src

    def test_layout_kernels_interpreted(rng):
        """kir_layout's kernels on the reference interpreter (no simulator involved)."""
        x = rng.standard_normal((2, 3)).astype(np.float32)
        y = rng.standard_normal((2, 1)).astype(np.float32)
        for fn, arrays in ((lambda x, y: fg.cat([x, y, x], dim=1), [x, y]),
                           (lambda x: fg.nn.functional.pad(x, (2, 0, 1, 1), value=-1.0), [x])):
            g = graph_of(fn, arrays)
            (e,) = g.eqns
            lg = lower_layout(e)
            bufs = {b.name: (np.empty(v.size, v.dtype) if b.role == "out" else arrays[g.inputs.index(v)].reshape(-1))
                    for b, v in zip(lg.kernel.buffers, lg.binds)}
            interpret(lg.kernel, bufs)
            np.testing.assert_array_equal(bufs["y0"].reshape(e.out.shape), fn(*map(fg.tensor, arrays)).numpy())

    def test_kernel_reuse_symbolic_sizes_and_pool(rng):
        """Loop groups of equal structure (two layers) share one compiled kernel;
        symbolic kernels serve another size; intermediates go back to the pool."""
        x = rng.standard_normal((4, 6)).astype(np.float32)
        w = (rng.standard_normal((6, 6)) * 0.5).astype(np.float32)
        POOL.clear()
        exe = _compare(lambda x, w: fg.tanh(fg.tanh(x * 2.0) @ w * 2.0) @ w, [x, w], dict(rtol=1e-4, atol=1e-5))
        loops = [s for s in exe._steps if hasattr(s, "rendered")]
        assert len(loops) == 2 and loops[0].fn is loops[1].fn
        assert POOL.held_bytes() > 0  # the layers' intermediates, returned after their last reader
        e4 = _compare(lambda x: fg.tanh(x) * 3 - x, [x], symbolic=True)
        e7 = _compare(lambda x: fg.tanh(x) * 3 - x, [rng.standard_normal((7, 5)).astype(np.float32)], symbolic=True)
        assert e4._steps[0].fn is e7._steps[0].fn

    def test_donated_output_is_written_in_place(rng):
        """An SGD update donated to its parameter: the caller's device array holds it."""
        w = rng.standard_normal((3, 5)).astype(np.float32)
        gr = rng.standard_normal((3, 5)).astype(np.float32)
        exe = CudaBackend().compile(graph_of(lambda w, g: w - 0.1 * g, [w, gr]), donate={0: 0})
        dw = cuda.to_device(w)
        (out,) = exe(dw, cuda.to_device(gr))
        np.testing.assert_allclose(_host(dw), w - np.float32(0.1) * gr, **F32)
        np.testing.assert_allclose(_host(out), _host(dw))

    def test_unsupported_graphs_say_why():
        from fusegrad.ir.graph import Eqn, Graph, Var
        g = Graph()
        x, y = Var((3,), np.dtype(np.complex64)), Var((3,), np.dtype(np.complex64))
        g.inputs, g.eqns, g.outputs = [x], [Eqn(P.mul, (x, x), {}, y)], [y]
        with pytest.raises(Unsupported, match="complex64"):
            CudaBackend().compile(g)

    def test_half_graphs_compute_in_float32_on_the_device(rng):
        """A float16 graph runs upcast (passes.upcast): its half arguments widened and its
        half results rounded on the device (codegen.cuda_half), as the cpu backend does."""
        x = rng.standard_normal((4, 5)).astype(np.float16)
        exe = _compare(lambda x: ((x * 3).exp().sum(1), x.to(fg.float32) @ x.T.to(fg.float32)), [x],
                       dict(rtol=2e-3, atol=1e-3))
        got = exe(cuda.to_device(x))
        assert got[0].dtype == np.float16 and not isinstance(got[0], np.ndarray)

    def test_apply_eager_service(rng):
        """cuda_ops.apply: one primitive on device arrays and weak scalars, cached per
        signature; cholesky's kernel (codegen.cuda_solve)."""
        x = rng.standard_normal((4, 3)).astype(np.float32)
        dx = cuda.to_device(x)
        cases = [(P.add, (dx, 2.0), {}), (P.mul, (3, dx), {}), (P.exp, (dx,), {}),
                 (P.reduce_sum, (dx,), dict(axes=(1,), keepdims=False)),
                 (P.reduce_max, (dx,), dict(axes=(0, 1), keepdims=False)),
                 (P.matmul, (dx, cuda.to_device(x.T.copy())), {}), (P.transpose, (dx,), dict(perm=(1, 0))),
                 (P.cast, (dx,), dict(dtype=np.dtype(np.int32))), (P.gt, (dx, 0.0), {}),
                 (P.iota, (), dict(n=7, dtype=np.dtype(np.float32))),
                 (P.full, (), dict(shape=(2, 3), value=2.5, dtype=np.dtype(np.int64)))]
        for prim, args, params in cases:
            got = cuda_ops.apply(prim, args, params)
            ref = prim.impl(*[_host(a) if hasattr(a, "copy_to_host") else a for a in args], **params)
            g = _host(got)
            assert g.shape == ref.shape and g.dtype == ref.dtype, (prim.name, g.shape, ref.shape, g.dtype, ref.dtype)
            np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6, err_msg=prim.name)
        n = len(cuda_ops._EXES)
        cuda_ops.apply(P.add, (dx, 2.0), {})
        assert len(cuda_ops._EXES) == n  # the same signature: no new executable
        assert not isinstance(cuda_ops.apply(P.exp, (x,), {}), np.ndarray)  # a host array in: a device array out
        spd = x.T @ x + 3 * np.eye(3, dtype=np.float32)
        got = cuda_ops.apply(P.cholesky, (cuda.to_device(spd),), {})
        np.testing.assert_allclose(_host(got), np.linalg.cholesky(spd), rtol=1e-5, atol=1e-6)

    def test_compiled_adam_training_step_matches_cpu_backend(tmp_path, monkeypatch):
        """``compile(step, backend="cuda")`` on CPU tensors (host arrays in and out): a small
        MLP's Adam step for 5 steps equals the cpu backend's; FUSEGRAD_DUMP writes the CUDA
        kernels."""
        from fusegrad import nn
        x, y = fg.randn(6, 5), fg.randn(6, 3)
        runs = {}
        for be in ("cpu", "cuda"):
            fg.manual_seed(0)
            m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
            opt = fg.optim.Adam(m.parameters(), lr=0.01)
            step = mse_step(m, opt)
            if be == "cuda":
                monkeypatch.setenv("FUSEGRAD_DUMP", str(tmp_path))
            compiled = fg.compile(step, backend=be)
            losses = [float(compiled(x, y)) for _ in range(5)]
            runs[be] = losses, [p.detach().numpy().copy() for p in m.parameters()], compiled
        np.testing.assert_allclose(runs["cuda"][0], runs["cpu"][0], rtol=1e-5)
        for a, b in zip(runs["cuda"][1], runs["cpu"][1]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        src = runs["cuda"][2].lower(x, y).kernel_source()
        assert "@cuda.jit" in src and "tiled GEMM" in src
        dumped = [p.read_text() for p in tmp_path.rglob("*kernel.py")]
        assert dumped and all("@cuda.jit" in d for d in dumped)
