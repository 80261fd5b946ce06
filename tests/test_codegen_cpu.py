"""The cpu backend against eager NumPy: every elementwise, reduction, layout and matmul
primitive, random multi-op programs, views, broadcasting, 0-d, empty and non-contiguous
inputs, float32 and float64. Numba compiles cost ~1 s each, so each test batches many
ops into one graph (one output per op)."""
import re
import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen.backend import Unsupported
from fusegrad.codegen.cpu import CpuBackend
from fusegrad.ir.prims import elementwise as E
from fusegrad.ir.prims import layout as L
from fusegrad.ir.prims import linalg as M
from fusegrad.ir.prims import reduce as R
from fusegrad.passes.fusion import LoopGroup, fuse
from fusegrad.runtime import kernel_cache
from helpers import check, graph_of

def _unaries(x):
    xs = E.abs_(x) + 0.5  # for log/sqrt/rsqrt
    outs = []
    for p in E.ELEMENTWISE_UNARY:
        arg = xs if p.name in ("log", "sqrt", "rsqrt") else x
        outs.append(p(arg))
    return tuple(outs)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_unary_all(dt, rng):
    # non-contiguous input (a transposed view) with negative, zero and large values
    x = rng.standard_normal((9, 7)).astype(dt).T * 3
    x[0, :3] = [0.0, -0.0, 2.5]
    check(_unaries, [x], tol=dict(rtol=1e-5 if dt == np.float32 else 1e-12, atol=3e-6 if dt == np.float32 else 1e-13))


def _binaries(a, b):
    outs = [p(a, b) for p in E.ELEMENTWISE_BINARY if p.name != "pow"]
    outs.append(E.pow_(E.abs_(a) + 0.1, b))
    outs += [p(a, b) for p in (E.eq, E.ne, E.lt, E.le, E.gt, E.ge)]
    ca, cb = E.gt(a, 0.0), E.lt(b, 0.5)
    outs += [E.logical_and(ca, cb), E.logical_or(ca, cb), E.logical_xor(ca, cb), E.logical_not(ca),
             E.isnan(E.log(a)), E.where(ca, a, b), E.where(cb, 1.5, a), E.cast(E.mul(b, 10.0), dtype=np.dtype(np.int32)),
             E.cast(ca, dtype=a.dtype.np), E.mul(2, a), E.sub(1.0, b), E.maximum(a, 0.25)]
    return tuple(outs)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_binary_broadcast_and_literals(dt, rng):
    a = rng.standard_normal((4, 1, 5)).astype(dt)
    b = rng.standard_normal((3, 1)).astype(dt)
    a[0, 0, 0] = np.nan  # maximum/minimum propagate NaN like NumPy
    check(_binaries, [a, b], tol=dict(rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-6))


def _reductions(x, y):
    outs = []
    for p in (R.reduce_sum, R.reduce_max, R.reduce_min, R.reduce_prod):
        for axes, keep in (((0,), False), ((1,), True), ((0, 2), False), ((0, 1, 2), False), ((2,), True)):
            outs.append(p(x, axes=axes, keepdims=keep))
    e = E.exp(E.sub(y, R.reduce_max(y, axes=(1,), keepdims=True)))  # softmax: one group
    outs.append(E.div(e, R.reduce_sum(e, axes=(1,), keepdims=True)))
    outs.append(R.reduce_sum(E.mul(y, y), axes=(0, 1), keepdims=False))  # 0-d result
    outs.append(R.reduce_sum(y, axes=(1,), keepdims=False) * 2.0)  # outer consumer
    return tuple(outs)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_reductions(dt, rng):
    x = (rng.standard_normal((3, 4, 5)) * 0.8).astype(dt)
    y = rng.standard_normal((6, 7)).astype(dt)
    y[2, 3] = np.nan
    check(_reductions, [x, y])


def test_big_parallel_reductions(rng):
    x = rng.standard_normal(1 << 17).astype(np.float32)
    x2 = rng.standard_normal((3, 1 << 15)).astype(np.float32)
    x[17] = np.nan

    def f(x, x2):
        return (R.reduce_sum(E.tanh(x), axes=(0,), keepdims=False), R.reduce_max(x, axes=(0,), keepdims=False),
                R.reduce_sum(x2, axes=(1,), keepdims=False), E.exp(E.mul(x, 0.5)))
    exe = check(f, [x, x2], tol=dict(rtol=1e-4, atol=1e-3))
    assert "prange" in exe.kernel_source()


def test_parallel_reductions_combine_chunk_partials_in_order(rng):
    """A parallel reduction keeps one partial per chunk and combines them after the loop in
    chunk order (no prange reduction variables): NaN in a late chunk still reaches max/min,
    integer and many float sums match NumPy, and repeated calls agree bit for bit."""
    n = 1 << 17
    x = rng.standard_normal(n).astype(np.float32)
    x[n - 5] = np.nan  # last chunk
    k = rng.integers(-1000, 1000, n).astype(np.int32)

    def f(x, k):
        y = E.where(E.eq(x, x), x, 0.0)  # NaN -> 0 for the sums
        sums = [R.reduce_sum(E.mul(y, float(i)), axes=(0,), keepdims=False) for i in range(1, 9)]
        return (R.reduce_max(x, axes=(0,), keepdims=False), R.reduce_min(x, axes=(0,), keepdims=False),
                R.reduce_max(y, axes=(0,), keepdims=False), R.reduce_sum(k, axes=(0,), keepdims=False), *sums)
    exe = check(f, [x, k], tol=dict(rtol=1e-4, atol=1e-3))
    src = exe.kernel_source()
    assert "prange" in src, src  # the chunked structure: test_kernel_ir's chunk_reductions tests
    first = exe(x, k)
    again = exe(x, k)
    assert np.isnan(first[0]) and np.isnan(first[1]) and first[3] == k.astype(np.int64).sum()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_one_element_concatenation_parts_are_written_in_place(rng):
    """A gradient of per-layer scalars (W5's shape) is a concatenation of one-element parts
    computed by the loop: they go straight into the concatenated buffer (written in place
    by the loop group's kernel, kir_views), with no copy per part, and the values match eager."""
    import re

    def fn(w, b, h):
        for i in range(w.shape[0]):
            h = fg.tanh(h * w[i] + b[i])
        return h.sum()
    w = fg.tensor((1 + 0.1 * rng.standard_normal(6)).astype(np.float32))
    b = fg.tensor((0.1 * rng.standard_normal(6)).astype(np.float32))
    h = fg.tensor(rng.standard_normal(1 << 16).astype(np.float32))
    g = fg.compile(fg.func.grad(fn, argnums=(0, 1)))
    got = g(w, b, h)
    src = g.lower(w, b, h).kernel_source()
    # no copy per part: the kernel gets the concatenation's buffer (an output's) and stores at offsets
    program = src.split("# program")[1].split("# generated")[0]
    assert "copy" not in program and re.search(r"call _kr\d+\([^)]*\bo0\b", program), src
    for x, y in zip(got, fg.func.grad(fn, argnums=(0, 1))(w, b, h)):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-3)


def _layouts(x, w, v):
    t = L.transpose(x, perm=(2, 0, 1))
    s = L.slice_(x, key=L.encode_key((slice(None, None, 2), 1, slice(1, 4)), x.shape))
    outs = [E.mul(t, 2.0), s, E.add(L.flip(x, axes=(0, 2)), 1.0), L.reshape(L.transpose(x, perm=(1, 0, 2)), shape=(4, 15)),
            L.broadcast_to(v, shape=(2, 3, 5)), L.concatenate(x, E.neg(x), axis=1),
            L.pad(x, widths=((1, 0), (0, 2), (1, 1)), value=-1.0),
            L.pad(x, widths=((0, 0), (0, 0), (2, 1)), value=0.0), L.pad(x, widths=((0, 1), (0, 0), (0, 0)), value=3.0),
            L.pad(L.reshape(x, shape=(3, 1, 4, 5)), widths=((0, 0), (1, 1), (2, 0), (0, 0)), value=0.5),
            L.concatenate(x, L.slice_(x, key=((0, 3, 1), (0, 4, 1), (0, 2, 1))), E.neg(x), axis=2),
            L.concatenate(L.slice_(x, key=((0, 3, 1), (0, 0, 1), (0, 5, 1))), x, axis=1),
            M.matmul(L.reshape(x, shape=(12, 5)), w), M.matmul(x, L.broadcast_to(w, shape=(3, 5, 2))),
            E.relu(E.add(M.matmul(L.reshape(x, shape=(12, 5)), w), L.slice_(w, key=((1, 2, 1), (0, 2, 1))))),
            E.add(L.transpose(E.exp(x), perm=(0, 2, 1)), 1.0)]
    return tuple(outs)


def test_layout_views_matmul(rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.standard_normal((5, 2)).astype(np.float32)
    v = rng.standard_normal((3, 1)).astype(np.float32)
    check(_layouts, [x, w, v], tol=dict(rtol=1e-5, atol=1e-5))


def test_zero_d_and_empty(rng):
    s = np.array(1.5, dtype=np.float64)
    e = np.zeros((0, 3), dtype=np.float64)
    m = rng.standard_normal((2, 3))

    def f(s, e, m):
        return (E.exp(s), E.add(s, m), E.mul(e, 2.0), R.reduce_sum(e, axes=(0,), keepdims=False),
                R.reduce_sum(e, axes=(1,), keepdims=False), R.reduce_sum(s, axes=(), keepdims=False),
                L.concatenate(e, L.reshape(m, shape=(2, 3)), axis=0))
    check(f, [s, e, m])


_OPS = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, lambda a, b: E.tanh(a) * b,
        lambda a, b: E.exp(E.neg(E.abs_(a))) + b, lambda a, b: E.where(E.gt(a, b), a, b),
        lambda a, b: E.sigmoid(a) / (E.abs_(b) + 1.0), lambda a, b: E.sin(a) + E.cos(b),
        lambda a, b: L.transpose(a, perm=(1, 0)) if a.shape[0] == a.shape[1] else a + 1.0,
        lambda a, b: a - R.reduce_max(a, axes=(1,), keepdims=True),
        lambda a, b: a * R.reduce_sum(b, axes=(0,), keepdims=True),
        lambda a, b: E.log1p(E.abs_(a)) * E.maximum(b, 0.0)]


def _random_program(seed: int):
    """Ten random ops over the values so far; the choices are drawn once, up front."""
    r = np.random.default_rng(seed)
    steps = [(r.integers(k + 2), r.integers(k + 2), r.integers(len(_OPS))) for k in range(10)]

    def prog(x, y):
        vals = [x, y]
        for i, j, op in steps:
            vals.append(_OPS[op](vals[i], vals[j]))
        return vals[-1], vals[-3]
    return prog


def test_random_programs(rng):
    progs = [_random_program(s) for s in range(6)]
    x = rng.standard_normal((6, 6)).astype(np.float32)
    y = rng.standard_normal((6, 6)).astype(np.float32)
    check(lambda x, y: tuple(o for p in progs for o in p(x, y)), [x, y], tol=dict(rtol=1e-4, atol=1e-5))


def test_w3_forward_is_one_loop_group():
    W = np.zeros((200, 16), np.float32)
    b = np.zeros((200, 16), np.float32)
    h = np.zeros(16, np.float32)

    def w3(h, W, b):
        for i in range(200):
            h = fg.tanh(h * W[i] + b[i])
        return h
    fused = fuse(graph_of(w3, [h, W, b]))
    assert len(fused.groups) == 1 and isinstance(fused.groups[0], LoopGroup), str(fused)
    assert str(fused).count("group ") == 1


def test_w1_forward_is_one_parallel_loop():
    x = np.zeros(1 << 22, np.float32)
    fused = fuse(graph_of(lambda x: (fg.sin(2 * x + 1) * fg.exp(-x * x) + fg.tanh(x)).sum(), [x]))
    (g,) = fused.groups
    assert isinstance(g, LoopGroup) and g.parallel and "parallel" in str(fused)


def test_boundary_checks_and_disk_cache(tmp_path, monkeypatch, rng):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernel_cache, "_MODULES", {})  # (another test may have loaded the same kernel)
    x = rng.standard_normal((2, 3))
    g = graph_of(lambda x: E.add(E.mul(x, 3.0), 1.0), [x])
    exe = CpuBackend().compile(g)
    with pytest.raises(ValueError):
        exe(x.astype(np.float32))
    with pytest.raises(ValueError):
        exe(np.zeros((3, 2)))
    np.testing.assert_allclose(exe(x)[0], x * 3 + 1)
    paths = [p for p in (tmp_path / "kernels").iterdir() if p.suffix == ".py"]
    assert len(paths) == 2  # the entry and the loop kernel it calls
    for path in paths:
        path.write_text("garbage(")
    monkeypatch.setattr(kernel_cache, "_MODULES", {})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        exe2 = CpuBackend().compile(g)
    assert any("corrupt" in str(m.message) for m in w)
    np.testing.assert_allclose(exe2(x)[0], x * 3 + 1)


def test_unsupported_raises():
    x = np.zeros((0, 3), np.float32)  # eager raises: the compiler must fall back, not guess
    with pytest.raises(Unsupported):
        CpuBackend().compile(graph_of(lambda x: R.argmax(x, axis=0, keepdims=False), [x]))


def _indexing(x, i, j, v, m):
    from fusegrad.ir.prims import indexing as I
    full = lambda s: ((0, s, 1),)  # noqa: E731
    outs = [I.index(x, i, key=("T",) + full(4) + full(5)),                       # x[i]
            I.index(x, i, j, key=((0, 3, 1), "T", "T")),                          # x[:, i, j] adjacent
            I.index(x, i, j, key=("T", (1, 4, 2), "T")),                          # x[i, 1:4:2, j] split
            I.index(x, j, key=(1, (0, 4, 1), "T")),                               # int + array, split
            I.index(x, j, key=(None, (0, 3, 1), 2, "T")),                          # newaxis, int adjacent
            I.index(x, L.slice_(i, key=((0, 2, 1), (0, 1, 1))), j, key=((0, 3, 1), "T", "T")),  # (2,1) x (2,)
            I.index(x, L.slice_(i, key=((0, 1, 1), (0, 2, 1))), key=((0, 3, 1), (0, 4, 1), "T")),  # last dim
            I.index_put(x, v, i, j, key=((0, 3, 1), "T", "T"), accumulate=True),
            I.index_put(x, v, i, j, key=((0, 3, 1), "T", "T"), accumulate=False),
            I.index_put(x, 2.5, i, key=("T",), accumulate=False),
            I.index_put(x, L.slice_(x, key=((1, 2, 1), (0, 4, 1), (0, 5, 1))), key=((0, 2, 1), (0, 4, 1), (0, 5, 1)),
                        accumulate=False),
            L.embed(m, key=((1, 4, 2), 2, (0, 5, 1)), shape=(4, 4, 5)),
            I.gather(L.reshape(x, shape=(3, 20)), E.cast(m % 3.0, dtype=np.dtype(np.int64)), axis=0),
            I.gather(L.reshape(x, shape=(12, 5)), L.slice_(E.cast((m * 2.0) % 5.0, dtype=np.dtype(np.int32)),
                                                               key=((0, 2, 1), (0, 3, 1))), axis=1),
            I.scatter_add(L.reshape(x, shape=(3, 20)), E.cast(m % 3.0, dtype=np.dtype(np.int64)), m, axis=0),
            I.scatter_add(L.reshape(x, shape=(12, 5)), L.slice_(E.cast(m % 5.0, dtype=np.dtype(np.int64)),
                                                                  key=((0, 1, 1), (0, 3, 1))),
                          L.reshape(m, shape=(2, 5)), axis=1),
            R.cumsum(x, axis=1), R.cumsum(E.cast(m, dtype=np.dtype(np.int64)), axis=0),
            R.argmax(x, axis=0, keepdims=False), R.argmin(x, axis=2, keepdims=True),
            R.argmax(L.reshape(x, shape=(60,)), axis=0, keepdims=False), R.argmin(m, axis=1, keepdims=False)]
    return tuple(outs)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_indexing_scans_and_arg_reductions(dt, rng):
    x = rng.standard_normal((3, 4, 5)).astype(dt)
    x[1, 2, 3] = np.nan  # argmax/argmin return the first NaN
    x[0, 0, :] = 7.0     # ties: first index wins
    i = np.array([[2, -1], [0, 1]], dtype=np.int64)   # negative indices wrap
    j = np.array([4, 0], dtype=np.int32)
    v = rng.standard_normal((2, 2)).astype(dt)
    m = np.abs(rng.standard_normal((2, 5)) * 3).astype(dt)
    check(_indexing, [x, i, j, v, m], tol=dict(rtol=1e-5 if dt == np.float32 else 1e-12, atol=1e-6))


def test_index_out_of_bounds_raises_before_reading():
    from fusegrad.ir.prims import indexing as I
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.array([0, 2], dtype=np.int64)
    g = graph_of(lambda x, i: (I.index(x, i, key=("T", (0, 4, 1))), I.gather(x, L.reshape(i, shape=(1, 2)), axis=1),
                               I.scatter_add(x, L.reshape(i, shape=(2, 1)), x, axis=0),
                               I.index_put(x, 1.0, i, key=((0, 3, 1), "T"), accumulate=True)), [x, i])
    exe = CpuBackend().compile(g)
    np.testing.assert_array_equal(exe(x, i)[0], x[i])
    for bad in ([0, 3], [-4, 0], [1 << 40, 0], [0, -(1 << 40)]):
        with pytest.raises(IndexError):
            exe(x, np.array(bad, dtype=np.int64))


def test_random_bit_identical_to_eager():
    def f(x):
        return fg.rand(3, 5) + x, fg.randn(7, dtype=fg.float64), fg.randn(4, 3) * x[0], fg.rand(2, dtype=fg.float64)
    x = fg.zeros(5)
    cf = fg.compile(f, backend="cpu")
    for seed in (0, 12345, 2 ** 62 + 7):
        fg.manual_seed(seed)
        want = [t.numpy() for t in f(x)]
        fg.manual_seed(seed)
        got = [t.numpy() for t in cf(x)]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    info = cf.cache_info()
    assert not info["fallbacks"] and info["compiles"] == 1, info


def test_w1_gradient_compiles_with_trig_guard():
    """Regression: the huge-argument sin/cos count inside a prange loop (two updates in one
    body) was not a legal Numba reduction; W1's gradient at 2^16 elements failed to compile."""
    def f(x):
        return (fg.sin(2 * x + 1) * fg.exp(-x * x) + fg.tanh(x)).sum()
    xs = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
    g = fg.compile(fg.func.grad(f), backend="cpu")
    x = fg.tensor(xs)
    got = g(x).numpy()
    assert g.cache_info()["fallbacks"] == 0
    np.testing.assert_allclose(got, fg.func.grad(f)(x).numpy(), rtol=1e-4, atol=1e-5)
    xs[7] = 1e15  # past fastmath's range: the exact rerun, still no fallback
    x = fg.tensor(xs)
    np.testing.assert_allclose(g(x).numpy(), fg.func.grad(f)(x).numpy(), rtol=1e-4, atol=1e-5)
    assert g.cache_info()["fallbacks"] == 0


def test_trig_guard_count_flags_each_huge_argument():
    """The fast kernel's count of sin/cos arguments past TRIG_MAX (a float32 reduction) is
    nonzero exactly when some argument is huge or infinite, wherever it sits, in a parallel
    loop (2^16 elements) and a serial one (64); NaN alone is not counted."""
    from fusegrad.codegen.fastmath import TRIG_MAX

    def fn(x):
        return (2 * x + 1).sin() * x.cos()
    for n in (1 << 16, 64):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        exe = CpuBackend().compile(graph_of(fn, [x], optimize=True))
        assert exe._exact is not None

        def count(xs):
            return exe._fn(xs.copy(), exe._prog, exe._kaddr, np.zeros(exe._n_blocks, np.int64))[-1]
        assert count(x) == 0
        for pos in (0, n // 2 + 3, n - 1):
            for big, counted in ((TRIG_MAX["float32"] * 4, True), (-np.inf, True), (np.nan, False),
                                 (-1e30, True)):
                xs = x.copy()
                xs[pos] = big
                assert (count(xs) != 0) == counted, (n, pos, big)
                np.testing.assert_allclose(exe(xs)[0], fn(fg.tensor(xs)).numpy(), rtol=1e-5, atol=1e-6)


def test_fastmath_variants_chosen_by_context(rng):
    """The kernel IR's variants pass picks fastmath's variants: exp of a value proved <= 0 (``-x*x``, softmax's
    shift) the "nonpositive" exp, whose subnormal and zero results still match; tanh in a
    long loop the vectorizable one, in a 16-element loop the "scalar" one; guarded sin the
    unclamped one."""
    from fusegrad.codegen import fastmath as fm

    def f(x, v):
        return (fg.exp(-x * x), fg.softmax(30 * x.reshape(64, 64), dim=1), fg.tanh(x), fg.tanh(v) * 2,
                fg.sin(x))
    x = (rng.standard_normal(4096) * 4).astype(np.float32)
    x[:4] = [11.0, 10.1, 9.5, np.nan]  # exp(-x*x): 0, subnormal, subnormal, nan
    v = rng.standard_normal(16).astype(np.float32)
    cf = fg.compile(f, backend="cpu")
    args = (fg.tensor(x), fg.tensor(v))
    src = cf.lower(*args).kernel_source()
    for sym in ("_fm_exp_float32_nonpositive", "_fm_tanh_float32", "_fm_tanh_float32_scalar", "_fm_sin_float32_guarded"):
        assert f"{sym}(" in src, sym
    assert "_fm_exp_float32(" not in src
    got = [t.numpy() for t in cf(*args)]
    assert got[0][1] > 0 and got[0][0] == 0
    # the transcendentals' arguments as the kernel rounds them (float32), their values in float64
    sq = (-x * x).astype(np.float64)
    for g, w in zip([got[0], got[2], got[3] / 2, got[4]], [np.exp(sq), np.tanh(x), np.tanh(v), np.sin(x)]):
        assert fm.ulp_error(g, np.asarray(w, np.float64), "float32").max() <= 4
    s_ = 30 * x.astype(np.float64).reshape(64, 64)  # |30x| up to ~500: 3e-5 absolute in float32
    e = np.exp(s_ - s_.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got[1], e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-30)


def test_trig_feeding_an_index_stays_bounded_past_its_range():
    """A graph that indexes with integers computed in the kernel keeps sin/cos clamped (in
    [-1, 1]) past TRIG_MAX: the index's range check runs in the fast kernel, before the
    exact rerun could replace the out-of-range sines."""
    def f(x, t):
        return t[((fg.sin(x) + 1) * 7.5).long()], fg.cos(x) * 2

    x = np.array([0.5, 1e10, -3.3e9, 2e5, 7.0, 1e20, 3.0, -2.0], dtype=np.float32)
    t = np.arange(16, dtype=np.float32) * 10
    cf = fg.compile(f, backend="cpu")
    args = (fg.tensor(x), fg.tensor(t))
    src = cf.lower(*args).kernel_source()
    assert "_fm_sin_float32(" in src and "_guarded" not in src
    for g, w in zip(cf(*args), f(*args)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)
    assert cf.cache_info()["fallbacks"] == 0


def test_guarded_kernel_writes_no_argument(monkeypatch, tmp_path):
    """A kernel whose fast sin may rerun exactly writes no argument (the rerun reads them
    again) though the donation is possible; each entry is lowered once. Without sin the
    output is computed into the argument."""
    from fusegrad.codegen import cpu
    from fusegrad.passes.memory import donations
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))  # generate, not read back
    lowered = []
    entry = cpu._entry
    monkeypatch.setattr(cpu, "_entry", lambda *a: lowered.append("kernel_exact" if a[7] else "kernel") or entry(*a))
    x = np.linspace(-3.0, 3.0, 64)
    for fn, trig in ((lambda x: x.sin() * 2.0 + 1.0, True), (lambda x: x * 2.0 + 1.0, False)):
        lowered.clear()
        g = graph_of(fn, [x], optimize=True)
        assert donations(fuse(g), {0: 0})
        exe = CpuBackend().compile(g, donate={0: 0})
        assert lowered == (["kernel", "kernel_exact"] if trig else ["kernel"])
        assert exe._written == (() if trig else (0,))
        for xs in (x, x * 1e15):  # huge arguments: the exact rerun
            arg = xs.copy()
            np.testing.assert_allclose(exe(arg)[0], fn(fg.tensor(xs)).numpy(), rtol=1e-10, atol=1e-12)
            if trig:
                np.testing.assert_array_equal(arg, xs)


def test_generated_source_is_reused_by_fingerprint(monkeypatch, tmp_path):
    """A graph traced again (new Var ids) with the same fingerprint reads its kernel source
    back instead of generating it; a corrupt record is regenerated with a warning."""
    from fusegrad.codegen import cpu
    from fusegrad.ir.fingerprint import fingerprint
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    generated = []
    gen = cpu.generate
    monkeypatch.setattr(cpu, "generate", lambda *a: generated.append(1) or gen(*a))

    def fn(x, w):
        return (x @ w).tanh() * 2.0 + x.sum()

    arrays = [np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(0, 2, 20).reshape(4, 5)]
    want = fn(*[fg.tensor(a) for a in arrays]).numpy()
    g1, g2 = graph_of(fn, arrays, optimize=True), graph_of(fn, arrays, optimize=True)
    assert fingerprint(g1) == fingerprint(g2) and g1.outputs[0].id != g2.outputs[0].id
    e1 = CpuBackend().compile(g1)
    e2 = CpuBackend().compile(g2)
    assert len(generated) == 1 and e1.kernel_source() == e2.kernel_source()
    for exe in (e1, e2):
        np.testing.assert_allclose(exe(*arrays)[0], want, rtol=1e-12)
    assert "loop[3,5]" in str(e2.stages["fused"])  # fused on demand for the listing
    record = next(tmp_path.rglob("g_*.json"))
    valid = record.read_text()
    for damaged in ("{not json", valid.replace("return", "retrun"), "[]"):  # garbage, edited, wrong type
        record.write_text(damaged)
        with pytest.warns(UserWarning, match="corrupt generated-code cache entry"):
            e3 = CpuBackend().compile(graph_of(fn, arrays, optimize=True))
        np.testing.assert_allclose(e3(*arrays)[0], want, rtol=1e-12)
    assert len(generated) == 4


def test_fingerprint_tells_apart_what_compiles_differently():
    from fusegrad.ir.fingerprint import fingerprint
    x = np.ones((2, 3))
    base = fingerprint(graph_of(lambda a: a * 2.0, [x]))
    assert base == fingerprint(graph_of(lambda a: a * 2.0, [x]))
    for other in (graph_of(lambda a: a * 3.0, [x]), graph_of(lambda a: a * 2, [x]),
                  graph_of(lambda a: a * 2.0, [x.astype(np.float32)]), graph_of(lambda a: a * 2.0, [x.T]),  # shape
                  graph_of(lambda a: a.sum(0) * 2.0, [x]), graph_of(lambda a: a.sum(1) * 2.0, [x])):
        assert fingerprint(other) != base


def test_groups_differing_only_in_sizes_share_one_kernel(rng):
    """An optimizer-like update of parameters of several shapes: the groups of equal rank
    compile one shape-symbolic kernel, called with each group's sizes; a group of another
    structure keeps its own. Values against NumPy."""
    def f(a, b, c, d):
        return tuple(E.sub(p, E.mul(E.add(E.mul(p, 0.9), 1.0), 0.01)) for p in (a, b, c, d))

    shapes = [(6, 25), (16, 150), (120, 4), (7,)]
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    g = graph_of(f, xs)
    exe = CpuBackend().compile(g)
    groups = [gr for gr in fuse(g, read_reshapes=True).groups if isinstance(gr, LoopGroup)]
    assert len(groups) == 4 and len(exe.kernels) == 2, exe.kernel_source()
    for got, x in zip(exe(*xs), xs):
        np.testing.assert_allclose(got, x - (x * np.float32(0.9) + 1) * np.float32(0.01), rtol=1e-6, atol=1e-6)


def test_donated_outputs_come_back_as_the_arguments(rng):
    """Outputs computed into a donated argument's array are not returned by the entry (the
    caller has them): the executable hands back the argument itself, in its output place,
    beside an output that materializes a view of an input and an ordinary one."""
    def f(a, b):
        return L.reshape(b, shape=(3,)), E.mul(a, 2.0), E.add(b, 1.0)

    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    exe = CpuBackend().compile(graph_of(f, [a, b]), donate={1: 0})
    assert exe._written == (0,)
    want = (b.copy(), a * 2, b + 1)
    arg = a.copy()
    got = exe(arg, b)
    assert np.shares_memory(got[1], arg)
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-6)


def test_an_entry_with_many_outputs_returns_them_in_lists_per_dtype(rng):
    """With cpu_program.LISTED outputs or more the entry allocates each dtype's outputs in a
    loop and returns lists; the executable puts every output back in its place: dtypes
    interleaved, one value returned twice, one computed into a donated argument; with a sin
    whose huge argument, the exact program's entry (lists too) reruns the graph."""
    from fusegrad.codegen.cpu_program import LISTED
    from fusegrad.ir.prims import reduce as R

    def f(a, b, c, last):
        s = E.add(a, 1.0)
        outs = [s, E.gt(a, 0.0), R.reduce_sum(a, axes=(0,), keepdims=False), E.mul(b, 2.0), s]
        outs += [E.add(b, float(k)) for k in range(LISTED)]
        return tuple(outs + [last(c)])

    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4)
    c = rng.standard_normal(5).astype(np.float32)  # (a domain of its own: donated alone)
    c[0] = 1e30  # past fastmath's range: the exact program runs
    want = [a + 1, a > 0, a.sum(0), b * 2, a + 1] + [b + k for k in range(LISTED)]
    for last, donate, w in ((lambda x: E.mul(x, 2.0), {LISTED + 5: 2}, c * 2),
                            (E.sin, None, np.sin(c.astype(np.float64)).astype(np.float32))):
        exe = CpuBackend().compile(graph_of(lambda x, y, z: f(x, y, z, last), [a, b, c]), donate=donate)
        assert exe._returns is not None and exe._written == ((2,) if donate else ())
        got = exe(a, b, c.copy())
        assert len(got) == len(want) + 1
        for k, (g_, w_) in enumerate(zip(got, want + [w])):
            assert g_.dtype == w_.dtype and g_.shape == w_.shape, k
            np.testing.assert_allclose(g_, w_, rtol=1e-6, err_msg=f"output {k}")


def test_a_concatenation_stays_whole_while_a_part_of_it_is_read(rng):
    """Parts computed into a concatenation's memory (a 2-layer GRU's first-layer steps) are
    read after the concatenation's own last use (its last step into h_n): the memory plan
    must not hand the concatenation's buffer to a later value (h_n[0] read a GEMM's result)."""
    def f(x, y, w):
        a, b = E.tanh(x), E.sin(x)
        whole = L.concatenate(a, b, axis=0)
        m = M.matmul(whole, w)
        later = M.matmul(y, w)  # the same size: the buffer the plan would have reused
        return L.concatenate(b, E.add(later, 1.0), axis=0), m

    x, y, w = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4), (4, 4), (4, 4)))
    check(f, [x, y, w], tol=dict(rtol=1e-5, atol=1e-6))


_VECTOR_PROBE = """
import os
import numpy as np
import numba
import fusegrad
import llvmlite.binding as llvm

@numba.njit(fastmath=True)
def twice(x, out):
    for i in range(x.size):
        out[i] = x[i] * np.float32(3.0) + np.float32(1.0)

twice(np.ones(64, np.float32), np.empty(64, np.float32))
asm = twice.inspect_asm(twice.signatures[0])
print(bool(llvm.get_host_cpu_features().get("avx512f")), os.environ.get("NUMBA_CPU_FEATURES", ""), "zmm" in asm, sep="|")
"""


@pytest.mark.parametrize("preset", [None, "+sse2"])
def test_avx512_hosts_get_full_width_vectors_unless_the_user_chose(preset):
    """Importing fusegrad before Numba compiles lets LLVM use 512-bit vectors on AVX-512
    hosts (it prefers 256 bits on recent Intel cores); a target the user set is left alone."""
    import subprocess
    import sys
    from helpers import subprocess_env
    env = subprocess_env()
    env.pop("NUMBA_CPU_NAME", None)
    env.pop("NUMBA_CPU_FEATURES", None)
    if preset:
        env["NUMBA_CPU_FEATURES"] = preset
    out = subprocess.run([sys.executable, "-c", _VECTOR_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    avx512, features, zmm = out.stdout.strip().split("|")
    if preset:  # (the vector width is then LLVM's choice for this CPU: 512 bits on AMD's Zen 4/5)
        assert features == preset
    elif avx512 == "True":
        assert features.endswith(",-prefer-256-bit") and "+avx512f" in features and zmm == "True"
    else:
        assert features == ""


def test_helper_processes_compile_kernels_that_this_process_loads(rng, tmp_path, monkeypatch):
    """With helpers on (codegen.cpu_helpers), a graph's new kernels are compiled partly by a
    helper process, whose machine code this process loads from Numba's disk cache, and the
    results are the graph's; a helper that cannot compile a kernel (here: pointed at a file
    that is not there) leaves it to this process, with the same results."""
    from fusegrad.codegen import cpu_helpers
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEGRAD_COMPILE_HELPERS", "1")
    monkeypatch.setattr(cpu_helpers, "MIN_KERNELS", 1)

    def f(x, y, k):  # loop groups of several structures (k: new kernel sources per case)
        a = (x * k).sin().sum(0)
        b = (y.exp() + k).amax(1)
        return (a[:, None] + b).tanh(), (x @ y).relu().sum() * k
    x, y = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 6)).astype(np.float32)

    def want(k):
        a = np.sin(x * k).sum(0)
        b = (np.exp(y) + k).max(1)
        return np.tanh(a[:, None] + b), np.maximum(x @ y, 0).sum() * k
    before = cpu_helpers.compiled_by_helpers()
    for k, broken in ((1.5, False), (2.5, True)):
        if broken:
            monkeypatch.setattr(cpu_helpers, "module_path", lambda source: str(tmp_path / "missing.py"))
            before = cpu_helpers.compiled_by_helpers()
        cf = fg.compile(lambda a, b: f(a, b, k))
        got = cf(fg.tensor(x), fg.tensor(y))
        for g, w in zip(got, want(k)):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)
        assert (cpu_helpers.compiled_by_helpers() > before) is not broken


_SCIPY_PROBE = """
import sys
import numpy as np
import fusegrad
f = fusegrad.compile(lambda x: (x @ x).sin().sum())
print(float(f(fusegrad.ones(3, 3))), "scipy.linalg" in sys.modules)
import scipy.linalg
import scipy.linalg.cython_blas
import numba
@numba.njit
def dot(a, b):
    return np.dot(a, b)
print(float(scipy.linalg.solve(np.eye(2) * 2, np.ones(2))[0]), float(dot(np.ones((2, 2)), np.ones(2))[0]),
      hasattr(scipy.linalg, "cython_blas"))
"""


def test_numba_starts_without_importing_scipy_linalg():
    """The first compiled call loads Numba's array support without importing all of
    scipy.linalg (runtime.numba_start); scipy.linalg imports as usual afterwards, and Numba
    code of the user's own that calls BLAS (np.dot) still compiles and runs."""
    import subprocess
    import sys
    from helpers import subprocess_env
    out = subprocess.run([sys.executable, "-c", _SCIPY_PROBE], env=subprocess_env(), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.split("\n")[:2]
    value, imported = first.split()
    assert abs(float(value) - 9 * np.sin(3.0)) < 1e-5 and imported == "False", out.stdout
    assert second.split() == ["0.5", "2.0", "True"], out.stdout


def test_parallel_loops_run_outlined_through_the_launcher(rng):
    """A kernel's top-level parallel loops render as chunk functions that the launcher runs
    (no prange: Numba's parfor passes cost 0.25-1.2 s per kernel), with the same results at
    1 and 2 threads: an elementwise loop with the trig guard's count folded per chunk, a
    chunked sum with its partials combined after the launch, and a rerolled chain whose
    scratch buffers are private to each iteration."""
    n = (1 << 16) + 3

    def elementwise(x):
        return (2 * x + 1).sin() * x.cos(), x.exp().sum()

    def chain(x, w, b):
        h = x
        for i in range(8):
            h = (h * w[i] + b[i]).tanh()
        return h.sum()

    x = rng.standard_normal(n).astype(np.float32)
    w, b = (1 + 0.1 * rng.standard_normal(8)).astype(np.float32), (0.1 * rng.standard_normal(8)).astype(np.float32)
    threads = fg.get_num_threads()
    try:
        for fn, args in ((elementwise, [x]), (fg.func.grad(chain, argnums=(1, 2)), [x, w, b])):
            exe = CpuBackend().compile(graph_of(fn, args, optimize=True))
            parallel = [src for src in exe.kernels if "for i0 in range(lo, hi)" in src]
            assert parallel and not any("prange(" in src for src in exe.kernels)
            assert all("CHUNKS = ((chunk0, 'fusegrad_chunk_" in src for src in parallel)
            # called only from native code: no wrappers for calls from Python or C
            assert all(src.count("no_cpython_wrapper=True, no_cfunc_wrapper=True") == src.count("@njit")
                       for src in exe.kernels)
            want = fn(*map(fg.tensor, args))
            for t in (1, 2):
                fg.set_num_threads(t)
                for got, ref in zip(exe(*args), want):
                    np.testing.assert_allclose(got, ref.numpy(), rtol=2e-5, atol=1e-5)
        xs = x.copy()
        xs[n - 1] = 1e30  # beyond fastmath's sin range, in the last chunk: the exact rerun
        exe = CpuBackend().compile(graph_of(elementwise, [x], optimize=True))
        assert exe._fn(xs.copy(), exe._prog, exe._kaddr, np.zeros(exe._n_blocks, np.int64))[-1] != 0
        np.testing.assert_allclose(exe(xs)[0], elementwise(fg.tensor(xs))[0].numpy(), rtol=1e-5, atol=1e-6)
    finally:
        fg.set_num_threads(threads)


def test_overlapping_agrees_with_numpys_bounds_test(rng):
    """runtime.overlap.overlapping skips pairs whose memory two different arrays own, and
    otherwise answers as np.may_share_memory: views of one owner, a view of a view, and
    arrays over one bytearray, which no ndarray owns."""
    from fusegrad.runtime.overlap import overlapping
    raw = bytearray(400)
    for trial in range(200):
        owners = [np.zeros(int(rng.integers(4, 40)), np.float32) for _ in range(3)]
        arrays = []
        for _ in range(int(rng.integers(2, 7))):
            kind = rng.integers(4)
            if kind == 3:
                lo = int(rng.integers(0, 50))
                arrays.append(np.frombuffer(raw, np.float32, count=int(rng.integers(1, 40)), offset=4 * lo))
                continue
            o = owners[int(rng.integers(3))]
            lo = int(rng.integers(0, o.size))
            v = o[lo:int(rng.integers(lo, o.size + 1))]
            arrays.append(o if kind == 0 else v if kind == 1 else v[::2].reshape(-1))
        want = [k for k in range(len(arrays))
                if any(j != k and np.may_share_memory(arrays[k], b) for j, b in enumerate(arrays))]
        assert overlapping(arrays, range(len(arrays))) == want, trial


def test_outlined_kernels_shared_across_sizes_take_their_sizes_through_the_launch(rng):
    """Loop groups differing only in sizes share one shape-symbolic kernel; when its loop
    is parallel and outlined, the chunk function reads the sizes from the launch's argument
    array: each group's result is right, at 1 and 2 threads."""
    def updates(a, ga, b, gb, c, gc):
        return tuple(E.sub(p, E.mul(E.exp(g), 0.1)) for p, g in ((a, ga), (b, gb), (c, gc)))
    args = [rng.standard_normal(s).astype(np.float32) for s in ((300, 200), (300, 200), (70001,), (70001,),
                                                                 (40000,), (40000,))]
    exe = CpuBackend().compile(graph_of(updates, args, optimize=True))
    assert any("range(lo, hi)" in src and "    n0 = prog[at + 9]" in src for src in exe.kernels)  # 3 buffers, then sizes
    threads = fg.get_num_threads()
    try:
        for t in (1, 2):
            fg.set_num_threads(t)
            for got, (p, g) in zip(exe(*args), zip(args[::2], args[1::2])):
                np.testing.assert_allclose(got, p - np.exp(g) * np.float32(0.1), rtol=1e-5, atol=1e-6)
    finally:
        fg.set_num_threads(threads)


def test_array_intrinsics_allocate_zero_and_view_like_numpy():
    """cpu_arrays' empty/zeros/tail as generated code uses them: dtypes, sizes (0 too),
    zeros really zero, tail a view writing through to its base."""
    import numba
    from fusegrad.codegen.cpu_arrays import empty, tail, zeros

    @numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy")
    def f(n, k):
        a = empty(n, np.float32)
        a[:] = 2.0
        z = zeros(n, np.int64)
        b = zeros(5, np.bool_)
        w = tail(a, k)
        w[0] = -1.0
        return a, z, b, w, empty(0, np.float64)

    a, z, b, w, e = f(7, 3)
    assert (a.dtype, z.dtype, b.dtype, w.dtype, e.dtype) == (np.float32, np.int64, np.bool_, np.float32, np.float64)
    assert a.flags.c_contiguous and a.shape == (7,) and e.shape == (0,)
    np.testing.assert_array_equal(a, [2, 2, 2, -1, 2, 2, 2])
    np.testing.assert_array_equal(z, np.zeros(7, np.int64))
    assert not b.any() and w.shape == (4,) and np.shares_memory(w, a)
    w[1] = 5.0
    assert a[4] == 5.0


def test_loop_groups_reading_slices_at_different_positions_share_one_kernel(rng):
    """An unrolled recurrence reads ``x[:, t]`` at every step: the loop groups differ only in
    where their slices start, and share one kernel taking the starts as arguments (each
    compiled a kernel of its own); every step's result is right."""
    def steps(x, h, w):
        outs = []
        for t in range(5):
            h = E.tanh(E.add(M.matmul(h, w), L.slice_(x, key=((0, 3, 1), t, (0, 4, 1)))))
            outs.append(h)
        return tuple(outs)
    x, h = rng.standard_normal((3, 5, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    w = (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)
    exe = CpuBackend().compile(graph_of(steps, [x, h, w], optimize=True))
    loops = [src for src in exe.kernels if "tanh" in src]
    assert len(loops) == 1 and "    n0 = prog[at + 9]" in loops[0], loops  # (the starts: arguments after 3 buffers)
    want = h
    for t, got in enumerate(exe(x, h, w)):
        want = np.tanh(want @ w + x[:, t])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_equal_kernel_sources_with_other_dtypes_compile_per_signature():
    """A library-call or loop kernel whose source is equal for buffers of two dtypes (a
    gather of floats and one of indices; a concatenate of float32 and of float64) is one
    module compiled for each signature, never called with the other's."""
    r = np.random.default_rng(0)
    x = fg.tensor(r.standard_normal((4, 7)).astype(np.float32))
    i = fg.tensor(np.argsort(r.standard_normal((4, 7)), 0))
    k = fg.tensor(r.integers(0, 4, (1, 7)))

    def f(x, i, k):
        return fg.gather(x, 0, fg.gather(i, 0, k))
    np.testing.assert_array_equal(fg.compile(f)(x, i, k).numpy(), f(x, i, k).numpy())

    def sh(w):
        return fg.cat([w[:1], w[:-1]], 0)

    def h(x):
        return sh((x + sh(x)).double())
    got = fg.compile(h)(x)
    assert got.dtype is fg.float64
    np.testing.assert_array_equal(got.numpy(), h(x).numpy())


def test_program_regions_share_memory_when_their_uses_do_not_overlap():
    """A chain of layers needs about its peak of live intermediates, not their sum: a
    buffer's memory is reused once the last operation reading it has run."""
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((n, m)) / np.sqrt(n) for n, m in [(64, 512), (512, 256), (256, 128), (128, 64), (64, 8)]]
    x = rng.standard_normal((128, 64))

    def chain(x, *ws):
        for w in ws:
            x = fg.tanh(x @ w)
        return x

    f = fg.compile(chain)
    args = [fg.tensor(a) for a in [x] + ws]
    want = x
    for w in ws:
        want = np.tanh(want @ w)
    np.testing.assert_allclose(f(*args).numpy(), want, rtol=1e-12, atol=1e-12)
    head = next(line for line in f.lower(*args).kernel_source().splitlines() if line.startswith("# program:"))
    buffers, blocks = (int(n) for n in re.findall(r"of (\d+) bytes", head))
    # the two widest layers' outputs are live together; every later one fits where they were
    assert blocks == (128 * 512 + 128 * 256) * 8 < buffers, head


def test_a_kernel_error_frees_the_calls_memory():
    """An index out of range raised inside a kernel still frees the blocks the call's
    program allocated (each failing call leaked them: 20 calls here leaked ~110 MB)."""
    import ctypes

    def rss() -> int:
        ctypes.CDLL(None).malloc_trim(0)
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096

    w = fg.randn(700, 700)
    f = fg.compile(lambda x, i: ((x @ w).exp() @ w).reshape(-1)[i] * 2)
    x, bad = fg.randn(700, 700), fg.tensor([1, 2, 10**8])
    assert f(x, fg.tensor([1, 2, 3])).shape == (3,)
    for _ in range(3):
        with pytest.raises(IndexError):
            f(x, bad)
    before = rss()
    for _ in range(20):
        with pytest.raises(IndexError):
            f(x, bad)
    assert rss() - before < 30 * 2**20
