"""Kernel IR passes that give loop kernels their fast forms (codegen.kir_passes,
codegen.kir_fastmath) and the lowering's column-sum form: structure asserted on the kernel
IR, the verifier run after each pass, semantics checked with the reference interpreter
(kir_interp) against NumPy. No compiles."""
import numpy as np
import pytest

from fusegrad.codegen import kir_passes
from fusegrad.codegen.cpu_render import prepare, render
from fusegrad.codegen.kir import Acc, Buffer, Let, Load, Loop, Op, Store, Update, stmt_values, stmts, values, verify
from fusegrad.codegen.kir_fastmath import GUARD, MAX_INLINED, choose_variants, trig_guard, variant
from fusegrad.codegen.kir_interp import run
from fusegrad.codegen.kir_lower import lower_group
from fusegrad.ir.prims import elementwise as E
from fusegrad.ir.prims import reduce as R
from fusegrad.passes import fusion
from fusegrad.passes.fusion import LoopGroup, fuse
from helpers import graph_of


def _lowered(fn, arrays, symbolic=False, by_rows=False):
    fused = fuse(graph_of(fn, arrays, optimize=True))
    return [(g, lower_group(fused, gi, symbolic=symbolic, by_rows=by_rows)) for gi, g in enumerate(fused.groups)
            if isinstance(g, LoopGroup)]


def _run(k, lg, arrays, syms=None, extra=()):
    """Outputs of kernel ``k`` (``lg``'s, after passes) on ``arrays`` bound by position to
    its input buffers; ``extra``: arrays for buffers the passes added."""
    ins = iter(arrays)
    bufs = {b.name: (np.ascontiguousarray(next(ins)).reshape(-1) if b.role == "in" else np.zeros(v.size, v.dtype))
            for b, v in zip(lg.kernel.params(), lg.binds)}
    bufs.update(extra)
    run(k, bufs, syms)
    return bufs


def _ops(k):
    return [v for s in stmts(k.body) for x in stmt_values(s) for v in values(x) if isinstance(v, Op)]


# ---------------------------------------------------------------- reductions
def _reductions(x, k):
    return (R.reduce_sum(E.tanh(x), axes=(0,), keepdims=False), R.reduce_max(x, axes=(0,), keepdims=False),
            R.reduce_min(x, axes=(0,), keepdims=False), R.reduce_sum(k, axes=(0,), keepdims=False))


@pytest.mark.parametrize("nan_at", [None, 9])
def test_parallel_reduction_runs_as_chunks_combined_in_order(rng, monkeypatch, nan_at):
    monkeypatch.setattr(fusion, "PARALLEL_MIN", 0)
    monkeypatch.setattr(kir_passes, "CHUNK", 4)
    x = rng.standard_normal(10).astype(np.float32)
    if nan_at is not None:
        x[nan_at] = np.nan  # in the last, short chunk
    n = rng.integers(-100, 100, 10).astype(np.int32)
    [(g, lg)] = _lowered(_reductions, [x, n])
    k = lg.kernel
    # lowering: with no kept axis, the reduction loop is the parallel one
    [loop] = [s for s in k.body if isinstance(s, Loop)]
    assert loop.kind == "parallel" and {s.name for s in stmts(loop.body) if isinstance(s, Update)} == \
        {s.name for s in k.body if isinstance(s, Acc)}
    counted = verify(kir_passes.count_nans(k))
    accs = [(s.op, np.dtype(s.dtype).name) for s in counted.body if isinstance(s, Acc)]
    assert sorted(accs) == sorted([("+", "float32"), ("fmax", "float32"), ("+", "int64"), ("fmin", "float32"),
                                   ("+", "int64"), ("+", "int64")])
    chunked = verify(kir_passes.chunk_reductions(counted))
    allocs = [b for b in chunked.buffers if b.role == "temp"]
    loops = [s for s in chunked.body if isinstance(s, Loop)]
    # a row of partials per chunk, one partial per accumulator, in a buffer per dtype
    assert sorted((np.dtype(a.dtype).name, a.size) for a in allocs) == [("float32", 9), ("int64", 9)]
    assert [(lp.kind, lp.extent) for lp in loops] == [("parallel", 3), ("serial", 3)]
    par, combine = loops
    assert [type(s) for s in par.body[:6]] == [Acc] * 6 and isinstance(par.body[6], Loop)
    assert isinstance(par.body[6].body[0], Let)  # the element index from chunk and lane
    assert {s.buf for s in par.body[7:] if isinstance(s, Store)} == {a.name for a in allocs}
    assert all(isinstance(s, Update) and isinstance(s.value, Load) for s in combine.body)
    # no update inside the parallel loop folds into an accumulator declared outside it
    inner = {s.name for s in stmts(par.body) if isinstance(s, Acc)}
    assert all(s.name in inner for s in stmts(par.body) if isinstance(s, Update))
    want = [np.tanh(x).sum(), x.max(), x.min(), n.astype(np.int64).sum()]
    for kernel in (k, counted, chunked, prepare(k)):
        out = _run(kernel, lg, [x, n])
        got = [out[b.name][0] for b, _ in zip(lg.kernel.buffers, lg.binds) if b.role == "out"]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_array_equal(got[1:], want[1:])


@pytest.mark.parametrize("size", [0, 1, 9])
def test_chunked_symbolic_sum_at_any_size(rng, monkeypatch, size):
    monkeypatch.setattr(fusion, "PARALLEL_MIN", 0)
    monkeypatch.setattr(kir_passes, "CHUNK", 4)
    x = rng.standard_normal(12).astype(np.float32)
    [(g, lg)] = _lowered(lambda x: R.reduce_sum(E.exp(x), axes=(0,), keepdims=False), [x], symbolic=True)
    k = prepare(lg.kernel)
    assert [s.kind for s in k.body if isinstance(s, Loop)] == ["parallel", "serial"]
    xs = x[:size]
    bufs = {lg.kernel.buffers[0].name: xs.copy(), lg.kernel.buffers[1].name: np.zeros(1, np.float32)}
    run(k, bufs, {"n0": size})
    np.testing.assert_allclose(bufs[lg.kernel.buffers[1].name][0], np.exp(xs.astype(np.float64)).sum(), rtol=1e-5)


def test_column_sums_accumulate_row_by_row(rng):
    """A serial sum over the leading axis (a bias gradient) walks rows contiguously into a
    temp buffer over the kept axis, then one loop finishes the sums and their users."""
    x = rng.standard_normal((6, 5)).astype(np.float32)
    f = lambda x: E.exp(R.reduce_sum(E.mul(x, 2.0), axes=(0,), keepdims=False))
    [(g, lg)] = _lowered(f, [x], by_rows=True)
    assert not any(b.role == "temp" for b in _lowered(f, [x])[0][1].kernel.buffers)  # a backend's choice
    k = lg.kernel
    [acc] = [b for b in k.buffers if b.role == "temp"]
    zero, first, second = [s for s in k.body if isinstance(s, Loop)]
    assert acc.size == 5 and zero.extent == 5 and zero.body[0].buf == acc.name and zero.body[0].value.value == 0
    assert (first.var, first.extent, first.body[0].var, first.body[0].extent) == ("i0", 6, "i1", 5)
    [st] = [s for s in stmts(first.body) if isinstance(s, Store) and s.buf == acc.name]
    assert st.value.op == "add" and Load(acc.name, st.index, acc.dtype) in st.value.args
    assert (second.var, second.extent) == ("i1", 5) and not any(isinstance(s, Loop) for s in second.body)
    for kernel in (k, prepare(k)):
        out = _run(kernel, lg, [x])
        [y] = [out[b.name] for b in lg.kernel.buffers if b.role == "out"]
        np.testing.assert_allclose(y, np.exp((x * 2).sum(0)), rtol=1e-5)


def test_column_sums_that_are_outputs_accumulate_in_their_buffers(rng, monkeypatch):
    """A column sum the group outputs in its own dtype accumulates straight into its output
    buffer (no temp, no copy loop); a second output that reads it still gets a last loop,
    which loads the sum from there; a float64 accumulation of float32 sums keeps its temp."""
    x = rng.standard_normal((6, 5)).astype(np.float32)
    alone = lambda x: R.reduce_sum(E.mul(x, 2.0), axes=(0,), keepdims=False)
    [(g, lg)] = _lowered(alone, [x], by_rows=True)
    k = lg.kernel
    [out] = [b for b in k.buffers if b.role == "out"]
    assert not any(b.role == "temp" for b in k.buffers)
    zero, rows = k.body
    assert zero.body[0].buf == out.name and zero.body[0].value.value == 0
    [st] = [s for s in stmts(rows.body) if isinstance(s, Store)]
    assert st.buf == out.name and Load(out.name, st.index, out.dtype) in st.value.args
    for kernel in (k, prepare(k)):
        np.testing.assert_allclose(_run(kernel, lg, [x])[out.name], (x * 2).sum(0), rtol=1e-5)

    both = lambda x: (lambda s: (s, E.exp(s)))(R.reduce_sum(E.mul(x, 2.0), axes=(0,), keepdims=False))
    [(g, lg)] = _lowered(both, [x], by_rows=True)
    k = lg.kernel
    assert not any(b.role == "temp" for b in k.buffers) and len(k.body) == 3
    for kernel in (k, prepare(k)):
        res = _run(kernel, lg, [x])
        got = {v.id: res[b.name] for b, v in zip(k.params(), lg.binds) if b.role == "out"}
        s = (x * 2).sum(0)
        np.testing.assert_allclose(sorted(map(tuple, got.values())), sorted([tuple(s), tuple(np.exp(s))]), rtol=1e-5)

    monkeypatch.setattr(fusion, "PARALLEL_MIN", 1 << 30)  # (a serial group, so summed by rows)
    wide = rng.standard_normal((1 << 15, 2)).astype(np.float32)
    [(g, lg)] = _lowered(alone, [wide], by_rows=True)
    [acc] = [b for b in lg.kernel.buffers if b.role == "temp"]
    assert acc.dtype == np.float64


def test_parallel_column_sums_split_the_first_kept_axis(rng, monkeypatch):
    """A parallel group's column sums also go row by row: with two kept axes the threads
    split the first of them (each owns its columns' accumulators), with one the nest is
    serial; a sum over a middle axis runs the kept axes before it outside; a few long
    columns (under COLUMNS_MIN) keep a thread per column."""
    from fusegrad.codegen import kir_lower
    monkeypatch.setattr(fusion, "PARALLEL_MIN", 0)
    f = lambda x: R.reduce_sum(E.mul(x, x), axes=(0,), keepdims=False)
    x3 = rng.standard_normal((5, 8, 16)).astype(np.float32)
    [(g, lg)] = _lowered(f, [x3], by_rows=True)
    assert g.parallel
    zero, rows = [s for s in lg.kernel.body if isinstance(s, Loop)]
    nest = [s for s in stmts([rows]) if isinstance(s, Loop)]
    assert [(s.var, s.kind) for s in nest] == [("i1", "parallel"), ("i0", "serial"), ("i2", "vector")]
    x2 = rng.standard_normal((5, 64)).astype(np.float32)
    [(g2, lg2)] = _lowered(f, [x2], by_rows=True)
    assert [(s.var, s.kind) for s in stmts(lg2.kernel.body) if isinstance(s, Loop)] == \
        [("i1", "vector"), ("i0", "serial"), ("i1", "vector")]  # (the zeroing loop first)
    mid = lambda x: R.reduce_sum(E.mul(x, x), axes=(1,), keepdims=False)  # a mean over time's sum
    xm = rng.standard_normal((3, 4, 64)).astype(np.float32)
    [(g4, lg4)] = _lowered(mid, [xm], by_rows=True)
    assert [(s.var, s.kind) for s in stmts(lg4.kernel.body) if isinstance(s, Loop)][2:] == \
        [("i0", "parallel"), ("i1", "serial"), ("i2", "vector")]
    for kernel in (lg4.kernel, prepare(lg4.kernel)):
        [out] = [b for b in lg4.kernel.buffers if b.role == "out"]
        np.testing.assert_allclose(_run(kernel, lg4, [xm])[out.name], (xm * xm).sum(1).ravel(), rtol=1e-5)
    for (lg_, x) in ((lg, x3), (lg2, x2)):
        for kernel in (lg_.kernel, prepare(lg_.kernel)):
            [out] = [b for b in lg_.kernel.buffers if b.role == "out"]
            np.testing.assert_allclose(_run(kernel, lg_, [x])[out.name], (x * x).sum(0).ravel(), rtol=1e-5)
    narrow = rng.standard_normal((5, kir_lower.COLUMNS_MIN - 1)).astype(np.float32)
    [(_, lg3)] = _lowered(f, [narrow], by_rows=True)
    assert not any(isinstance(s, Store) and any(isinstance(v, Load) and v.buf == s.buf for v in values(s.value))
                   for s in stmts(lg3.kernel.body))


# ---------------------------------------------------------------- fastmath passes
def _trig(x):
    u = E.add(E.mul(x, 2.0), 1.0)
    return E.add(E.mul(E.sin(u), E.exp(E.neg(E.mul(x, x)))), E.cos(u))


def test_trig_guard_fast_counts_each_huge_argument_once(rng, monkeypatch):
    monkeypatch.setattr(fusion, "PARALLEL_MIN", 0)
    x = rng.standard_normal(8).astype(np.float32)
    [(g, lg)] = _lowered(_trig, [x])
    fast = verify(trig_guard(lg.kernel, "fast"))
    assert fast.buffers[-1] == Buffer(GUARD, np.dtype(np.float32), 1, "inout")
    [par] = [s for s in fast.body if isinstance(s, Loop)]
    assert par.kind == "parallel" and isinstance(par.body[0], Acc) and par.body[0].op == "max"
    private = par.body[0].name
    # sin and cos of one value: one count, into the iteration's private flag
    assert [s.name for s in stmts(par.body) if isinstance(s, Update)] == [private, "trig_n"]
    assert {variant(v) for v in _ops(fast) if v.op in ("sin", "cos")} == {"guarded"}
    for big, want in ((False, 0), (True, 2)):
        y = x.copy()
        if big:
            y[[2, 5]] = [1e6, -np.inf]
        out = _run(fast, lg, [y], extra={GUARD: np.ones(1, np.float32)})
        assert out[GUARD][0] == 1 + want  # added to what the buffer held
    bounded = trig_guard(lg.kernel, "fast", bounded=True)
    assert {variant(v) for v in _ops(bounded) if v.op in ("sin", "cos")} == {None}


def test_trig_guard_exact_selects_libm_beyond_the_range(rng):
    x = rng.standard_normal(8).astype(np.float32)
    x[3] = 3e5
    [(g, lg)] = _lowered(_trig, [x])
    exact = verify(trig_guard(lg.kernel, "exact"))
    assert len(exact.buffers) == len(lg.kernel.buffers)
    sel = [v for v in _ops(exact) if v.op == "where"]
    assert len(sel) == 2 and all(variant(w.args[1]) == "libm" and variant(w.args[2]) == "guarded" for w in sel)
    prepared = prepare(lg.kernel, "exact")
    assert {variant(v) for v in _ops(prepared) if v.op in ("sin", "cos")} == {"libm", "guarded"}
    out = _run(prepared, lg, [x])
    [y] = [out[b.name] for b in lg.kernel.buffers if b.role == "out"]
    u = x * np.float32(2) + np.float32(1)
    np.testing.assert_allclose(y, np.sin(u) * np.exp(-(x * x)) + np.cos(u), rtol=1e-5, atol=1e-6)


def test_variants_by_sign_fact_loop_length_and_count(rng):
    long_, short = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    f = lambda x: (E.exp(E.neg(E.mul(x, x))), E.tanh(x))
    for x, tanh_variant in ((long_, "fast"), (short, "scalar")):
        [(g, lg)] = _lowered(f, [x])
        neg = next(v.args[0].name for v in _ops(lg.kernel) if v.op == "exp")  # the local -x*x
        k = verify(choose_variants(lg.kernel, frozenset({neg})))
        got = {v.op: variant(v) for v in _ops(k) if v.op in ("exp", "tanh")}
        assert got == {"exp": "nonpositive", "tanh": tanh_variant}
        assert {variant(v) for v in _ops(choose_variants(lg.kernel)) if v.op == "exp"} == {"fast"}
        # the module binds exactly the functions the variants name
        src = render(k)
        assert f"_fm_exp_float32_nonpositive = " in src and "_fm_exp_float32 = " not in src
        assert (f"_fm_tanh_float32_scalar = " in src) == (tanh_variant == "scalar")
    many = lambda x: tuple(E.tanh(E.add(x, float(i))) for i in range(MAX_INLINED + 1))
    [(g, lg)] = _lowered(many, [long_])
    k = choose_variants(lg.kernel)
    assert {variant(v) for v in _ops(k) if v.op == "tanh"} == {"call"}
    assert "add" in {v.op for v in _ops(k) if variant(v) is None}  # no fastmath function: no variant


# ---------------------------------------------------------------- straight-line code
def test_straighten_propagates_inlines_and_rerolls_straight_line_code():
    """kir_straight: copies propagated, locals read once inlined, repeated blocks rerolled
    into a serial loop; a load from a parameter never moves past a store to another (they
    may share memory: computed in place), so an in-place reversal keeps its order."""
    from fusegrad.codegen.kir import Assign, Const, Kernel, Ref, Sym
    from fusegrad.codegen.kir_straight import straighten
    f64 = np.dtype(np.float64)
    x, y = Buffer("x0", f64, 16, "in"), Buffer("y1", f64, 16, "out")
    temp = Buffer("zt", f64, 16, "temp")
    fill = Loop("i", 16, "serial", [Store("zt", Sym("i"), Op("mul", (Load("x0", Sym("i"), f64), Const(2.0, f64)), f64))])
    body = [fill] + [Assign(f"m{i}", Load("zt", i, f64)) for i in range(16)] + \
        [Assign(f"c{i}", Ref(f"m{i}", f64)) for i in range(16)] + \
        [Store("y1", 15 - i, Op("add", (Ref(f"c{i}", f64), Const(1.0, f64)), f64)) for i in range(16)]
    k = verify(Kernel("k", [x, y, temp], (), body))
    new = verify(straighten(k))
    assert [type(s) for s in new.body] == [Loop, Loop], str(new)
    (store,) = new.body[1].body
    assert isinstance(store, Store) and store.buf == "y1" and isinstance(store.value.args[0], Load), str(new)
    xs = np.arange(16.0)
    for kernel in (k, new):
        out = run(kernel, {"x0": xs.copy(), "y1": np.zeros(16)})
        np.testing.assert_array_equal(out["y1"], xs[::-1] * 2 + 1)
    # in place: y1 is x0's memory; the loads all run before the stores, as written
    body = [Assign(f"m{i}", Load("x0", i, f64)) for i in range(16)] + [Store("y1", 15 - i, Ref(f"m{i}", f64))
                                                                       for i in range(16)]
    k = verify(Kernel("k", [x, y], (), body))
    new = verify(straighten(k))
    assert sum(isinstance(s, Assign) for s in new.body) == 15, str(new)  # the first store's alone moved
    for kernel in (k, new):
        mem = np.arange(16.0)
        run(kernel, {"x0": mem, "y1": mem})
        np.testing.assert_array_equal(mem, np.arange(16.0)[::-1])


def _random_index_expr(rng, depth: int, names: list):
    from fusegrad.codegen.kir import IBin, Sym
    if depth == 0 or rng.random() < 0.25:
        return Sym(rng.choice(names)) if rng.random() < 0.7 else int(rng.integers(-3, 10))
    op = rng.choice(["+", "+", "*", "//", "%", "min"])
    a = _random_index_expr(rng, depth - 1, names)
    if op in ("//", "%"):
        b = int(rng.choice([1, 2, 3, 4, 6, 8, 12, 16])) if rng.random() < 0.9 else Sym("s")
    elif op == "*":
        b = int(rng.integers(-4, 13)) if rng.random() < 0.8 else _random_index_expr(rng, depth - 1, names)
    else:
        b = _random_index_expr(rng, depth - 1, names)
    return IBin(op, a, b)


def test_simplify_index_is_exact_over_random_expressions(rng):
    """kir_index.simplify against evaluating the expression as written, at random points of
    the variables' ranges; the split-and-rejoin forms views produce (``n*(x//n) + x%n``,
    ``(g*b + r) // (g*m)``) are mixed in."""
    from fusegrad.codegen.kir import IBin, ieval
    from fusegrad.codegen.kir_index import simplify
    shorter = 0
    for _ in range(3000):
        extents = {v: int(rng.integers(1, 14)) for v in "ijk"}
        e = _random_index_expr(rng, 4, list(extents))
        x = _random_index_expr(rng, 3, list(extents))
        n, c, g = int(rng.choice([2, 4, 6, 12])), int(rng.integers(1, 4)), int(rng.choice([2, 4, 8]))
        roll = rng.random()
        if roll < 0.3:
            e = IBin("+", IBin("*", IBin("//", x, n), n * c), IBin("+", IBin("*", IBin("%", x, n), c), e))
        elif roll < 0.5:
            e = IBin(rng.choice(["//", "%"]), IBin("+", IBin("*", x, g), IBin("%", e, g)), g * n)
        ranges = {v: (0, m - 1) for v, m in extents.items()}
        ranges["s"] = (1, None)
        got = simplify(e, ranges)
        shorter += len(str(got)) < len(str(e))
        for _ in range(8):
            env = {v: int(rng.integers(0, m)) for v, m in extents.items()}
            env["s"] = int(rng.integers(1, 10))
            assert ieval(got, env) == ieval(e, env), (str(e), str(got), env)
    assert shorter > 1500


def test_view_index_arithmetic_simplifies_to_plain_strides(rng):
    """A GEMM result read back through a reshape and a transpose (a convolution's output in
    NCHW): the reshape merges dims, so the lowering indexes it with plain strides (no
    division), and so does the kernel after the passes, computing the same values."""
    from fusegrad.codegen.kir_passes import each_index
    from fusegrad.ir.prims import layout as L

    def f(y, b):
        nchw = L.transpose(L.reshape(y, shape=(6, 7, 7, 4)), perm=(3, 0, 1, 2))
        return (E.relu(E.add(nchw, L.reshape(b, shape=(1, 6, 1, 1)))),)

    y, b = rng.standard_normal((6, 196)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    ((_, lg),) = _lowered(f, [y, b])
    ops = []
    each_index(lg.kernel.body, lambda e: ops.extend(_index_ops(e)))
    assert not {"//", "%"} & set(ops), str(lg.kernel)
    k = kir_passes.optimize(lg.kernel)
    ops = []
    each_index(k.body, lambda e: ops.extend(_index_ops(e)))
    assert not {"//", "%"} & set(ops), str(k)
    out = _run(k, lg, [y, b])
    want = np.maximum(y.reshape(6, 7, 7, 4).transpose(3, 0, 1, 2) + b.reshape(1, 6, 1, 1), 0)
    (name,) = [bf.name for bf in lg.kernel.params() if bf.role == "out"]
    np.testing.assert_array_equal(out[name].reshape(want.shape), want)


def _index_ops(e) -> list:
    from fusegrad.codegen.kir import IBin
    return [e.op] + _index_ops(e.a) + _index_ops(e.b) if isinstance(e, IBin) else []
