"""The kernel IR (fusegrad.codegen.kir): lowering of fused loop groups, the reference
interpreter against eager NumPy (no compiles), the verifier, the structural hash, shape-
symbolic kernels at sizes 0, 1 and several, and primitives without a scalar lowering."""
import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.codegen.kir import (Acc, Assign, Buffer, Const, Kernel, KernelError, Load, Loop, Op, Ref, Scratch, Store,
                                  Sym, Update, isyms, stmts, structural_hash, verify)
from fusegrad.codegen.kir_interp import run, run_fused
from fusegrad.codegen.kir_lower import lower_group
from fusegrad.ir.primitive import PRIMS, Primitive
from fusegrad.ir.prims import elementwise as E
from fusegrad.ir.prims import layout as L
from fusegrad.ir.prims import reduce as R
from fusegrad.passes.fusion import LoopGroup, fuse
from helpers import graph_of

F32 = np.dtype(np.float32)


def _eager(fn, arrays):
    out = fn(*[fg.tensor(a) for a in arrays])
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else [out])]


def _interpreted(fn, arrays, symbolic=False):
    fused = fuse(graph_of(fn, arrays, optimize=True))
    return run_fused(fused, arrays, symbolic=symbolic)


def _kernels(fn, arrays, symbolic=False):
    fused = fuse(graph_of(fn, arrays, optimize=True))
    return [lower_group(fused, gi, symbolic=symbolic).kernel
            for gi, g in enumerate(fused.groups) if isinstance(g, LoopGroup)]


def _softmax_mix(x, y):
    a = E.add(E.mul(E.sin(x), 2.0), y)
    m = R.reduce_max(a, axes=(1,), keepdims=True)
    e = E.exp(E.sub(a, m))
    s = E.div(e, R.reduce_sum(e, axes=(1,), keepdims=True))
    t = L.transpose(s, perm=(1, 0))
    return (R.reduce_sum(s, axes=(0,), keepdims=False), E.exp(t),
            R.reduce_sum(E.cast(E.gt(x, 0.0), dtype=F32), axes=(0, 1), keepdims=False))


def _elementwise_all(a, b):
    outs = [p(a) for p in E.ELEMENTWISE_UNARY if p.name not in ("log", "sqrt", "rsqrt")]
    outs += [p(E.abs_(a) + 0.5) for p in (E.log, E.sqrt, E.rsqrt)]
    outs += [p(a, b) for p in E.ELEMENTWISE_BINARY if p.name != "pow"]
    outs.append(E.pow_(E.abs_(a) + 0.1, b))
    ca, cb = E.gt(a, 0.0), E.lt(b, 0.5)
    outs += [E.logical_and(ca, cb), E.logical_or(ca, cb), E.logical_xor(ca, cb), E.logical_not(ca),
             E.isnan(E.log(a)), E.where(ca, a, b), E.where(cb, 1.5, a), E.cast(E.mul(b, 10.0), dtype=np.dtype(np.int32)),
             R.reduce_max(a, axes=(0, 2), keepdims=False), R.reduce_min(b, axes=(0,), keepdims=True),
             R.reduce_prod(a, axes=(2,), keepdims=False)]
    return tuple(outs)


def _views(x):
    f = L.flip(x, axes=(1,))
    r = L.reshape(x, shape=(2, 6))
    s = x[1:, ::2]
    return E.exp(f), E.neg(r), E.mul(s, 3.0), E.add(L.broadcast_to(x[:, :1], shape=(3, 4)), 1.0)


@pytest.mark.parametrize("fn,shapes", [(_softmax_mix, [(3, 5), (5,)]), (_elementwise_all, [(4, 1, 5), (3, 1)]),
                                       (_views, [(3, 4)])])
def test_interpreter_matches_eager(fn, shapes, rng):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    arrays[0].flat[0] = np.nan if fn is _elementwise_all else arrays[0].flat[0]  # max/min propagate NaN
    for got, ref in zip(_interpreted(fn, arrays), _eager(fn, arrays)):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6, equal_nan=True)


def test_kernel_structure_of_softmax():
    x, y = np.ones((3, 5), np.float32), np.ones(5, np.float32)
    k = _kernels(_softmax_mix, [x, y])[0]
    loops = [s for s in stmts(k.body) if isinstance(s, Loop)]
    # rows outside, one inner loop per reduction phase (max, sum, normalize), lanes innermost
    assert [(lp.var, lp.extent) for lp in loops] == [("i0", 3), ("i1", 5), ("i1", 5), ("i1", 5)]
    assert loops[0].kind == "serial" and all(lp.kind == "vector" for lp in loops[1:])
    accs = [s.op for s in stmts(k.body) if isinstance(s, Acc)]
    assert accs == ["max", "+"]
    ops = {v.op for s in stmts(k.body) if isinstance(s, Assign) for v in [s.value] if isinstance(v, Op)}
    assert {"sin", "mul", "add", "sub", "exp", "div"} <= ops
    assert [b.role for b in k.buffers][:2] == ["in", "in"] and {b.role for b in k.buffers[2:]} == {"out"}
    text = str(k)
    assert text.startswith("kernel k0(") and "acc " in text and "<-" in text


def test_lowered_ir_kernel_stage():
    f = fg.compile(lambda x: (x.exp() * 2).sum(1), backend="cpu")
    x = fg.randn(4, 6)
    f(x)
    text = f.lower(x).ir("kernel")
    assert "kernel k0(" in text and "exp(" in text and "identity(+)" in text


# ---------------------------------------------------------------- verifier
def _ok_kernel():
    i = Sym("i0")
    body = [Loop("i0", Sym("n"), "vector", [Assign("m0", Op("exp", (Load("x", i, F32),), F32)),
                                           Store("y", i, Ref("m0", F32))])]
    return Kernel("k", [Buffer("x", F32, Sym("n"), "in"), Buffer("y", F32, Sym("n"), "out")], ("n",), body)


def _scratch_read_after_its_body(k):
    """A temp allocated inside the loop (kir.Scratch), then read after it."""
    k.buffers.append(Buffer("z", F32, 4, "temp"))
    k.body[0].body.insert(0, Scratch("z"))
    k.body.append(Loop("i1", 4, "serial", [Assign("q", Load("z", Sym("i1"), F32))]))


@pytest.mark.parametrize("breakage,message", [
    (lambda k: k.body[0].body.reverse(), "read before it is defined"),
    (lambda k: setattr(k.body[0], "kind", "diagonal"), "kind"),
    (lambda k: k.body[0].body.__setitem__(0, Assign("m0", Op("mysin", (Load("x", Sym("i0"), F32),), F32))),
     "unknown scalar operation 'mysin'"),
    (lambda k: k.body[0].body.__setitem__(0, Assign("m0", Op("add", (Const(1.0, F32),), F32))), "takes 2 operands"),
    (lambda k: k.body.append(Store("y", Sym("i0"), Const(0.0, F32))), "reads 'i0'"),
    (lambda k: k.body[0].body.append(Store("x", Sym("i0"), Ref("m0", F32))), "not an output buffer"),
    (lambda k: k.body[0].body.append(Store("y", Sym("i0"), Const(0, np.dtype(np.int64)))), "store of int64"),
    (lambda k: k.body[0].body.append(Assign("m0", Const(0.0, F32))), "defined twice"),
    (lambda k: k.body[0].body.append(Update("m0", Const(0.0, F32))), "not a declared accumulator"),
    (lambda k: k.body.append(Acc("a", "xor", F32)), "unknown op"),
    (lambda k: k.body.insert(0, Scratch("x")), "each a temp buffer"),
    (lambda k: _scratch_read_after_its_body(k), "load from unknown buffer z"),
])
def test_verifier_rejects(breakage, message):
    k = _ok_kernel()
    verify(k)
    breakage(k)
    with pytest.raises(KernelError, match=message):
        verify(k)


# ---------------------------------------------------------------- structural hash
def test_hash_equal_up_to_renaming_and_distinguishes_structure():
    a, b = _ok_kernel(), _ok_kernel()
    b.name, b.syms = "other", ("size",)
    b.buffers = [Buffer("p", F32, Sym("size"), "in"), Buffer("q", F32, Sym("size"), "out")]
    j = Sym("j")
    b.body = [Loop("j", Sym("size"), "vector", [Assign("t", Op("exp", (Load("p", j, F32),), F32)),
                                                Store("q", j, Ref("t", F32))])]
    verify(b)
    assert structural_hash(a) == structural_hash(b)
    b.body[0].body[0] = Assign("t", Op("log", (Load("p", j, F32),), F32))
    assert structural_hash(a) != structural_hash(b)


def _layers(x, *ws):
    for w in ws:  # a matmul between layers: one loop group per layer
        x = E.tanh(E.add(x @ w, 1.0))
        x = E.div(x, R.reduce_sum(E.mul(x, x), axes=(1,), keepdims=True))
    return x


def test_identical_layers_give_identical_kernels(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    ws = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(4)]
    ks = _kernels(_layers, [x] + ws)
    assert len(ks) == 4
    assert len({structural_hash(k) for k in ks}) == 1
    got = _interpreted(_layers, [x] + ws)[0]
    np.testing.assert_allclose(got, _eager(_layers, [x] + ws)[0], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- symbolic shapes
def _bias_softmax(x, b):
    a = E.add(x, b)
    return E.div(E.exp(a), R.reduce_sum(E.exp(a), axes=(1,), keepdims=True)), R.reduce_sum(a, axes=(0,), keepdims=False)


def test_symbolic_kernel_serves_every_size(rng):
    """One symbolic kernel set (lowered once, at 4x5) runs at sizes 0, 1 and several."""
    x, b = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    fused = fuse(graph_of(_bias_softmax, [x, b], optimize=True))
    kernels = {gi: lower_group(fused, gi, symbolic=True).kernel
               for gi, g in enumerate(fused.groups) if isinstance(g, LoopGroup)}
    assert kernels and all(k.syms for k in kernels.values())
    for n, m in [(0, 5), (1, 1), (1, 5), (4, 5), (7, 3), (3, 0)]:
        xs, bs = rng.standard_normal((n, m)).astype(np.float32), rng.standard_normal(m).astype(np.float32)
        other = fuse(graph_of(_bias_softmax, [xs, bs], optimize=True))
        same_pattern = n != 1 and m != 1  # a size-1 dim broadcasts: another kernel
        if same_pattern:  # this size's graph lowers to the same kernels...
            assert {gi: structural_hash(lower_group(other, gi, symbolic=True).kernel) for gi in kernels} == \
                {gi: structural_hash(k) for gi, k in kernels.items()}
        # ...and the ones lowered at 4x5 compute it
        got = run_fused(other, [xs, bs], symbolic=True, kernels=kernels if same_pattern else None)
        for g, r in zip(got, _eager(_bias_softmax, [xs, bs])):
            assert g.shape == r.shape
            np.testing.assert_allclose(g, r, rtol=2e-6, atol=2e-6)


def test_linear_at_five_batch_sizes_is_one_symbolic_kernel_set(rng):
    """nn.Linear(4, 2)'s forward and backward kernels, lowered symbolically, are the same
    kernels at batch sizes 8..12 (the front end can then compile them once)."""
    lin = nn.Linear(4, 2)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()

    def step(x, w, b):
        out = E.add(x @ L.transpose(w, perm=(1, 0)), b)
        return E.tanh(out), R.reduce_sum(E.mul(out, out), axes=(0,), keepdims=False)

    sets = []
    for batch in (8, 9, 10, 11, 12):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        sets.append(tuple(structural_hash(k) for k in _kernels(step, [x, w, b], symbolic=True)))
        got = _interpreted(step, [x, w, b], symbolic=True)
        for g, r in zip(got, _eager(step, [x, w, b])):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    assert len(set(sets)) == 1 and sets[0]


def _views(x, w):
    b, t, c = x.shape
    return (E.exp(L.reshape(x, shape=(b * t, c))),  # split: x's dims from one index
            E.neg(L.reshape(w, shape=(b, t, c))),  # merge: w's dim from two indices
            E.exp(L.slice_(x, key=L.encode_key((slice(None), slice(1, None), slice(0, None, 2)), x.shape))),
            E.neg(L.flip(x, axes=(1,))))


def test_symbolic_kernels_read_through_views_at_every_size(rng):
    """Reshapes that split or merge dims, slices and flips lower symbolically (the view
    source's dims and a slice's starts are symbols): the kernels lowered at one size
    compute every other size with the same pattern."""
    def args(b, t):
        return [rng.standard_normal((b, t, 6)).astype(np.float32), rng.standard_normal((b * t, 6)).astype(np.float32)]
    fused = fuse(graph_of(_views, args(2, 5), optimize=True))
    kernels = {gi: lower_group(fused, gi, symbolic=True).kernel
               for gi, g in enumerate(fused.groups) if isinstance(g, LoopGroup)}
    assert len(kernels) >= 2 and all(k.syms for k in kernels.values())
    for b, t in [(3, 4), (4, 7), (2, 5), (1, 3), (3, 1), (0, 4)]:
        xs = args(b, t)
        other = fuse(graph_of(_views, xs, optimize=True))
        same_pattern = b not in (0, 1) and t not in (0, 1, 2)  # size 1 dims (also the slice's) are literal
        if same_pattern:
            assert {gi: structural_hash(lower_group(other, gi, symbolic=True).kernel) for gi in kernels} == \
                {gi: structural_hash(k) for gi, k in kernels.items()}
        got = run_fused(other, xs, symbolic=True, kernels=kernels if same_pattern else None)
        for g, r in zip(got, _eager(_views, xs)):
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- primitives and their lowering
@pytest.fixture
def scratch_prims():
    """Primitives a test defines leave the registry afterwards (coverage tests list it)."""
    before = set(PRIMS)
    yield
    for name in set(PRIMS) - before:
        del PRIMS[name]


def test_primitive_with_unknown_scalar_op_is_rejected_when_defined(scratch_prims):
    with pytest.raises(ValueError, match="mysin"):
        Primitive("kir_test_bad", np.sin, abstract=lambda a, p: a[0], kind="elementwise", scalar="mysin")
    with pytest.raises(ValueError, match="needs scalar="):
        Primitive("kir_test_none", np.sin, abstract=lambda a, p: a[0], kind="elementwise")


def test_primitive_without_lowering_runs_eagerly_between_segments_with_its_reason(scratch_prims):
    """A primitive without a lowering is a graph break for the cpu backend: it runs eagerly,
    the code around it in compiled segments (it made the whole call eager before)."""
    noisy = Primitive("kir_test_nolower", np.sin, abstract=lambda a, p: a[0], kind="elementwise",
                      no_lowering="kir test: deliberately none", nondiff=True)

    @fg.compile(backend="cpu")
    def f(x):
        return noisy(x * 2) + 1

    x = fg.randn(5)
    for _ in range(2):
        np.testing.assert_allclose(f(x).numpy(), np.sin(x.numpy() * 2) + 1, rtol=1e-6)
    info = f.cache_info()
    assert any("kir_test_nolower has no kernel lowering: kir test: deliberately none" in r
               for r in info["graph_breaks"]), info
    assert info["fallbacks"] == 0 and info["segments"] == 2, info


# ---------------------------------------------------------------- passes
def test_hoist_index_binds_outer_arithmetic_before_inner_loops(rng):
    from fusegrad.codegen.kir import Let
    from fusegrad.codegen.kir_index import simplify_index
    from fusegrad.codegen.kir_passes import hoist_index, optimize
    from fusegrad.codegen.kir_straight import straighten

    def f(x):
        return E.exp(L.transpose(x, perm=(2, 0, 1))), R.reduce_sum(x, axes=(2,), keepdims=False)

    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    fused = fuse(graph_of(f, [x], optimize=True))
    for gi, g in enumerate(fused.groups):
        if not isinstance(g, LoopGroup):
            continue
        for symbolic in (False, True):
            k = lower_group(fused, gi, symbolic=symbolic).kernel
            h = optimize(k)  # verified after the pass
            lets = [s for s in stmts(h.body) if isinstance(s, Let)]
            assert lets, str(h)
            # every let sits before the loop whose iterations share it, and reads no inner variable
            for lp in [s for s in stmts(h.body) if isinstance(s, Loop)]:
                inner = {t.var for t in stmts(lp.body) if isinstance(t, Loop)}
                for s in lp.body:
                    if isinstance(s, Let):
                        assert not (set(isyms(s.expr)) & inner)
            assert structural_hash(hoist_index(straighten(simplify_index(k)))) == structural_hash(h)  # others: no-ops
    got = run_fused(fused, [x])
    for g_, r in zip(got, _eager(f, [x])):
        np.testing.assert_allclose(g_, r, rtol=1e-6, atol=1e-6)
    # the interpreter runs hoisted kernels to the same results
    for gi, g in enumerate(fused.groups):
        if isinstance(g, LoopGroup):
            lg = lower_group(fused, gi, symbolic=True)
            bufs = {b.name: (np.ascontiguousarray(x).reshape(-1) if b.role == "in" else np.zeros(v.size, v.dtype))
                    for b, v in zip(lg.kernel.buffers, lg.binds)}
            syms = {f"n{a}": s for a, s in enumerate(g.domain) if s != 1}
            plain = {n: a.copy() for n, a in bufs.items()}
            run(lg.kernel, plain, syms)
            run(optimize(lg.kernel), bufs, syms)
            for n in bufs:
                np.testing.assert_array_equal(bufs[n], plain[n])


# ---------------------------------------------------------------- shared kernels (cpu backend)
def test_identical_layers_compile_one_shared_kernel(rng):
    """The cpu backend's entry calls elementwise loop groups as kernels rendered from
    kernel IR: six identical layers (and another graph with three) use one compiled kernel."""
    from fusegrad.codegen.cpu import CpuBackend
    from fusegrad.runtime.kernel_cache import load_module

    def layers(x, *ws):
        for w in ws:
            x = E.tanh(E.add(x @ w, 1.0))
            x = E.mul(x, E.exp(x))
        return x

    x = rng.standard_normal((64, 64)).astype(np.float32)
    ws = [(0.1 * rng.standard_normal((64, 64))).astype(np.float32) for _ in range(6)]
    exes = [CpuBackend().compile(graph_of(layers, [x] + ws[:n], optimize=True)) for n in (6, 3)]
    assert len(exes[0].kernels) == 1 and exes[0].kernels == exes[1].kernels
    for n, exe in zip((6, 3), exes):
        np.testing.assert_allclose(exe(x, *ws[:n])[0], _eager(layers, [x] + ws[:n])[0], rtol=1e-4, atol=1e-5)
    # compiled once for both (or not at all in this process: entries loaded from Numba's
    # disk cache carry the kernel's code linked in)
    assert len(load_module(exes[0].kernels[0]).kernel.signatures) <= 1
