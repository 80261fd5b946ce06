"""Loop rerolling (codegen/kir_reroll.py, a kernel-IR pass): long chains of repeated steps
become loops over the steps with the lanes innermost. Random chains (forward and
gradient) are lowered to kernel IR, rerolled, verified, checked for the loop over the
repetitions and interpreted (kir_interp) against the kernel before rerolling and the
whole graph against eager; a few run compiled by Numba, including W3's shape, sin's
exact range and a parallel group."""
import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import kir_interp
from fusegrad.codegen.cpu import CpuBackend, _Concats, _Modules, _shared_kernels
from fusegrad.codegen.kir import (Assign, Buffer, Kernel, Let, Load, Loop, Op, Ref, Scratch, Store, Sym, Update, iadd,
                                  stmts, verify)
from fusegrad.codegen.kir_lower import lower_group
from fusegrad.codegen import kir_passes
from fusegrad.codegen.kir_passes import CHUNK, optimize
from fusegrad.codegen.kir_reroll import COPY_GROUP, MIN_BODY, TILE, reroll
from fusegrad.func import grad
from fusegrad.passes import fusion
from fusegrad.passes.fusion import LoopGroup, fuse
from helpers import graph_of

F64 = np.dtype(np.float64)

STEPS = {
    "affine": lambda h, w, b, h0, hp: h * w + b,
    "tanh": lambda h, w, b, h0, hp: (h * w + b).tanh(),
    "sin": lambda h, w, b, h0, hp: (h * w).sin() + b,
    "invariant": lambda h, w, b, h0, hp: h * w + h0 * b,
    "two_back": lambda h, w, b, h0, hp: (h * w + hp * b).tanh(),
    "max": lambda h, w, b, h0, hp: fg.maximum(h * w, b),
    "where": lambda h, w, b, h0, hp: fg.where(h > 0, h * w, b * h),
    "exp": lambda h, w, b, h0, hp: (h - (w * 0.1).exp() * 0.05) * w + b,
    "scalar": lambda h, w, b, h0, hp: h * w + b[:1],  # one element of b's row, broadcast
}


def _chain(kinds, order, out):
    def fn(W, b, h):
        h0, hp, hs = h, h, []
        n = W.shape[0]
        for i in range(n):
            k = i if order == "up" else n - 1 - i
            new = h
            for kind in kinds:
                new = STEPS[kind](new, W[k], b[k], h0, hp)
            h, hp = new, h
            hs.append(h)
        return {"sum": h.sum(), "last": h * 2.0, "all": fg.stack(hs) * 0.5}[out]
    return fn


def _case(seed):
    rng = np.random.default_rng(seed)
    kinds = list(rng.choice(sorted(STEPS), size=int(rng.integers(1, 3)), replace=False))
    steps, lanes = int(rng.integers(16, 30)), int(rng.integers(2, 7))
    dt = np.float64 if seed % 2 else np.float32
    W = (1.0 + 0.1 * rng.standard_normal((steps, lanes))).astype(dt)
    b = (0.1 * rng.standard_normal((steps, lanes))).astype(dt)
    h = rng.standard_normal(lanes).astype(dt)
    order = "up" if seed % 5 else "down"
    out = ("sum", "last", "all")[seed % 3]
    return _chain(kinds, order, out), [W, b, h], (kinds, steps, lanes, dt.__name__, order, out)


def _rerolled_loops(k: Kernel) -> list:
    """The loops over repetitions of ``k``: serial loops whose body is one lane loop (after
    the index arithmetic kir_passes.hoist_index binds and the step's loads the same in
    every lane, read once before it)."""
    return [s for s in stmts(k.body) if isinstance(s, Loop) and s.kind == "serial" and s.body
            and isinstance(s.body[-1], Loop) and s.body[-1].kind in ("vector", "parallel")
            and all(isinstance(t, (Let, Assign)) for t in s.body[:-1])]


def _random_buffers(k: Kernel, rng) -> dict:
    return {b.name: (rng.standard_normal(b.size) if b.role == "in" else np.zeros(b.size)).astype(b.dtype)
            for b in k.params()}


def _same_results(before: Kernel, after: Kernel, rng) -> None:
    """``after`` computes exactly what ``before`` does (interpreted on random inputs)."""
    bufs = _random_buffers(before, rng)
    want = kir_interp.run(before, {n: a.copy() for n, a in bufs.items()})
    got = kir_interp.run(after, {n: a.copy() for n, a in bufs.items()})
    for n in want:
        np.testing.assert_array_equal(got[n], want[n], err_msg=n)


@pytest.mark.parametrize("seed", range(30))
def test_random_chains_rerolled_match(seed):
    fn, arrays, desc = _case(seed)
    gfn = grad(lambda W, b, h: fn(W, b, h).sum(), argnums=(0, 1))
    tol = dict(rtol=2e-4, atol=2e-5) if arrays[0].dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)
    rng = np.random.default_rng(seed)
    for f in (fn, gfn):
        g = graph_of(f, arrays, optimize=True)
        fused = fuse(g)
        rerolled = {}
        for gi, grp in enumerate(fused.groups):
            if isinstance(grp, LoopGroup):
                k = lower_group(fused, gi).kernel
                rerolled[gi] = verify(reroll(k))
                if _rerolled_loops(rerolled[gi]):
                    _same_results(k, rerolled[gi], rng)
        assert any(_rerolled_loops(k) for k in rerolled.values()), desc
        got = kir_interp.run_fused(fused, list(arrays) + [np.asarray(h._data) for _, h in g.consts],
                                   kernels=rerolled)
        ref = f(*[fg.tensor(a) for a in arrays])
        ref = ref if isinstance(ref, tuple) else (ref,)
        assert len(got) == len(ref), desc
        for x, r in zip(got, ref):
            np.testing.assert_allclose(np.asarray(x).reshape(r.shape), r.numpy(), err_msg=str(desc), **tol)


def test_irregular_bodies_stay_unrolled():
    """Offsets that do not advance by a fixed step (rows 0, 1, 3, 6, ...) leave no loop."""
    def fn(W, h):
        for i in range(20):
            h = (h * W[i * (i + 1) // 2 % 40]).tanh()
        return h
    arrays = [np.random.default_rng(0).standard_normal((40, 3)), np.ones(3)]
    fused = fuse(graph_of(fn, arrays, optimize=True))
    k = lower_group(fused, 0).kernel
    assert len(k.body[0].body) >= MIN_BODY and str(reroll(k)) == str(k)


def _two_back(lanes: int, n: int, kind: str = "vector", lead: list = ()) -> Kernel:
    """m_k = m_(k-1) * x1[row k] + m_(k-2) * x1[k] (a constant-index load) on ``lanes``
    lanes, m_0 and m_1 read from x0; stored to y0; ``lead``: statements first."""
    i = Sym("i0")
    body = list(lead) + [Assign("m0", Load("x0", i, F64)), Assign("m1", Load("x0", iadd(i, lanes), F64))]
    for k in range(2, n):
        prod = Op("mul", (Ref(f"m{k - 1}", F64), Load("x1", iadd(i, lanes * k), F64)), F64)
        body.append(Assign(f"m{k}", Op("add", (prod, Op("mul", (Ref(f"m{k - 2}", F64), Load("x1", k, F64)), F64)), F64)))
    body.append(Store("y0", i, Ref(f"m{n - 1}", F64)))
    bufs = [Buffer("x0", F64, 2 * lanes, "in"), Buffer("x1", F64, lanes * n, "in"), Buffer("y0", F64, lanes, "out")]
    return verify(Kernel("two_back", bufs, (), [Loop("i0", lanes, kind, body)]))


def test_blocks_reading_two_back_peel_two_blocks():
    """The loop starts at block 2 and reads block zq - 2 from a stack; constant-index loads
    advance too; temps are the kernel's own buffers."""
    k = _two_back(3, 40)
    new = verify(reroll(k))
    loops = _rerolled_loops(new)
    # m2..m39 are 38 blocks; the first two stay before the loop (m2 reads m0, two back)
    assert len(loops) == 1 and loops[0].extent == 38 - 2, new
    assert sum(1 for _ in stmts(new.body)) < 20 and any(b.role == "temp" for b in new.buffers)
    _same_results(k, new, np.random.default_rng(0))


def test_unsafe_bodies_stay_unrolled():
    """A body whose stores do not end it is left as it is."""
    k = _two_back(3, 40)
    body = k.body[0].body
    early = Kernel(k.name, k.buffers, k.syms, [Loop("i0", 3, "vector", [body[-1]] + body[:-1])])
    assert str(reroll(early)) == str(early)


def test_every_step_stored_copies_rows_a_few_to_a_loop():
    """A chain that stores every step to its own buffer (remat="none"'s saved activations):
    rerolled, the stack rows go to the outputs in loops of COPY_GROUP stores (one loop
    storing dozens of streams stays scalar); results as before rerolling."""
    k = _two_back(5, 40)
    (loop,) = k.body
    stores = [Store(f"y{j}", Sym("i0"), Ref(f"m{j}", F64)) for j in range(2, 40)]
    bufs = [b for b in k.buffers if b.name != "y0"] + [Buffer(f"y{j}", F64, 5, "out") for j in range(2, 40)]
    k = verify(Kernel(k.name, bufs, k.syms, [Loop("i0", 5, "vector", loop.body[:-1] + stores)]))
    new = verify(reroll(k))
    assert len(_rerolled_loops(new)) == 1
    copies = [s for s in stmts(new.body) if isinstance(s, Loop) and s.kind == "vector"
              and all(isinstance(t, Store) for t in s.body)]
    assert all(len(c.body) <= COPY_GROUP for c in copies)
    # the first blocks' values stay in the straight-line loop
    assert sum(len(c.body) for c in copies) >= len(stores) - 2, new
    _same_results(k, new, np.random.default_rng(3))


def test_lane_loop_in_a_parallel_loop_uses_its_scratch():
    """A lane loop inside a parallel loop rerolls with its temps allocated by each
    iteration of that loop (kir.Scratch, first in its body), never shared between
    iterations; a long one runs TILE lanes at a time (a serial loop over tiles around the
    rerolled code, its temps TILE lanes wide); results as before rerolling."""
    for lanes, tiled in ((3, False), (TILE + 37, True)):
        k = _two_back(lanes, 40)
        inner = verify(Kernel(k.name, k.buffers, k.syms, [Loop("j", 2, "parallel", k.body)]))
        new = verify(reroll(inner))
        (par,) = new.body
        temps = {b.name: b for b in new.buffers if b.role == "temp"}
        scratch = [s.buf for s in par.body if isinstance(s, Scratch)]
        assert temps and sorted(scratch) == sorted(temps) and par.body[:len(scratch)] == [Scratch(n) for n in scratch]
        assert len(_rerolled_loops(new)) == 1
        widths = {b.size for b in temps.values() if b.size % (TILE if tiled else lanes) == 0}
        assert widths == {b.size for b in temps.values()}, temps
        tile_loops = [s for s in par.body if isinstance(s, Loop) and s.kind == "serial"
                      and any(isinstance(t, Loop) and t.kind == "serial" for t in s.body)]
        assert len(tile_loops) == int(tiled)
        _same_results(inner, new, np.random.default_rng(lanes))


def test_reduction_chunks_reroll_compiled():
    """W5's shape on 40 steps over a vector of 3 reduction chunks (kir_passes.CHUNK), the
    last one short: the chunked gradient kernel rerolls inside each chunk, TILE lanes at a
    time, and its rows are addressed through views in the lane loops that store
    (cpu_render); gradients as float64 NumPy by hand."""
    rng = np.random.default_rng(8)
    n, steps = 2 * CHUNK + 1000, 40
    w = (1.0 + 0.05 * rng.standard_normal(steps)).astype(np.float32)
    b = (0.05 * rng.standard_normal(steps)).astype(np.float32)
    h = rng.standard_normal(n).astype(np.float32)
    gfn = grad(lambda w, b: _w3(fg, w, b, fg.tensor(h)), argnums=(0, 1))
    g = graph_of(gfn, [w, b], optimize=True)
    kernels = _shared(g)
    assert any(_rerolled_loops(k) for k in kernels.values())
    assert any(isinstance(s, Scratch) for k in kernels.values() for s in stmts(k.body))
    consts = [np.asarray(c._data) for _, c in g.consts]
    gw, gb = CpuBackend().compile(g)(w, b, *consts)
    hs, x = [], h.astype(np.float64)  # by hand: forward, then the chain rule backward
    for i in range(steps):
        hs.append(x)
        x = np.tanh(x * w[i] + b[i])
    dx, want_w, want_b = np.ones(n), np.zeros(steps), np.zeros(steps)
    for i in reversed(range(steps)):
        dpre = dx * (1 - np.tanh(hs[i] * w[i] + b[i]) ** 2)
        want_w[i], want_b[i] = (dpre * hs[i]).sum(), dpre.sum()
        dx = dpre * w[i]
    np.testing.assert_allclose(gw, want_w, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(gb, want_b, rtol=1e-4, atol=1e-2)



@pytest.mark.parametrize("chunked", [False, True])
def test_many_sums_fold_into_rows_of_a_temp(monkeypatch, chunked):
    """W5's gradient shape (2 x 40 sums over the lanes in one loop): each rerolled block
    folds into an accumulator of its own, added to a row of a temp (kir_reroll); a
    parallel reduction's chunks store their partials in one buffer
    (kir_passes.chunk_reductions), and the rows are combined and stored by loops
    (kir_straight). A few updates and straight-line stores remain, not one per sum;
    results as before the passes (interpreted, float64: sums in another order)."""
    monkeypatch.setattr(fusion, "PARALLEL_MIN", 0 if chunked else 1 << 40)
    monkeypatch.setattr(kir_passes, "CHUNK", 64)
    rng = np.random.default_rng(3)
    steps, n = 40, 150
    w, b = 1.0 + 0.05 * rng.standard_normal(steps), 0.05 * rng.standard_normal(steps)
    h = rng.standard_normal(n)
    g = graph_of(grad(lambda w, b: _w3(fg, w, b, fg.tensor(h)), argnums=(0, 1)), [w, b], optimize=True)
    fused = fuse(g)
    lowered = {gi: lower_group(fused, gi) for gi, grp in enumerate(fused.groups) if isinstance(grp, LoopGroup)}
    shared = _shared_kernels(lowered, dict(nonpositive=frozenset(), bounded_trig=False), _Concats(fused, set()),
                             _Modules())
    (k,) = [lg.kernel for gi, (lg, _, _) in shared.items() if fused.groups[gi].red_axes]  # outputs: concat parts
    assert sum(isinstance(s, Update) for s in stmts(k.body)) == 2 * steps
    assert any(lp.kind == "parallel" for lp in stmts(k.body) if isinstance(lp, Loop)) == chunked
    new = optimize(k)
    assert sum(isinstance(s, Update) for s in stmts(new.body)) <= 12, str(new)
    assert sum(isinstance(s, Store) for s in new.body) <= 8, str(new)  # outside any loop
    if chunked:
        (par,) = [s for s in new.body if isinstance(s, Loop) and s.kind == "parallel"]
        assert sum(isinstance(s, Store) for s in par.body) <= 8
        assert len({b.name for b in new.buffers if b.role == "temp" and not any(
            isinstance(s, Scratch) and s.buf == b.name for s in stmts(new.body))}) <= 2  # partials and rows
    bufs = _random_buffers(k, rng)
    want = kir_interp.run(k, {n_: a.copy() for n_, a in bufs.items()})
    got = kir_interp.run(new, {n_: a.copy() for n_, a in bufs.items()})
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)

def test_parallel_lane_loop_rerolls_around_parallel_lanes():
    """A flat parallel loop becomes a serial loop over the blocks around a parallel loop
    over the lanes (each lane its own temp elements)."""
    k = _two_back(5, 40, kind="parallel")
    new = verify(reroll(k))
    (loop,) = _rerolled_loops(new)
    assert loop.body[-1].kind == "parallel"
    _same_results(k, new, np.random.default_rng(1))


def _w3(T, W, b, h):
    for i in range(W.shape[0]):
        h = T.tanh(h * W[i] + b[i])
    return h.sum()


def _shared(g) -> dict:
    """The loop groups of ``g`` the cpu entry calls as kernels (group index -> kernel, optimized
    as rendered)."""
    fused = fuse(g)
    lowered = {gi: lower_group(fused, gi) for gi, grp in enumerate(fused.groups) if isinstance(grp, LoopGroup)}
    shared = _shared_kernels(lowered, dict(nonpositive=frozenset(), bounded_trig=False), _Concats(fused, set()),
                             _Modules())
    return {gi: optimize(lg.kernel) for gi, (lg, _, _) in shared.items()}


def test_w3_shape_compiled_forward_and_gradient():
    """W3's chain (here 60 steps on 16 lanes, float32) compiled by Numba: its loop groups
    run as kernels rendered from kernel IR, one rerolled loop per chain (the gradient's
    400 rows of its concatenation addressed in one buffer: kir_views), the fastmath tanh
    inlined again, values and gradients as eager."""
    rng = np.random.default_rng(3)
    W = (1.0 + 0.1 * rng.standard_normal((60, 16))).astype(np.float32)
    b = (0.1 * rng.standard_normal((60, 16))).astype(np.float32)
    h = rng.standard_normal(16).astype(np.float32)

    def both(W, b, h):
        val = _w3(fg, W, b, h)
        gW, gb = grad(lambda W, b: _w3(fg, W, b, h), argnums=(0, 1))(W, b)
        return val, gW, gb

    g = graph_of(both, [W, b, h], optimize=True)
    kernels = _shared(g)
    assert sum(len(_rerolled_loops(k)) for k in kernels.values()) >= 3
    assert all(sum(1 for _ in stmts(k.body)) < 200 for k in kernels.values())
    exe = CpuBackend().compile(g)
    assert all("_fmc_" not in src for src in exe.kernels)  # the outlined calls: none left
    consts = [np.asarray(c._data) for _, c in g.consts]
    ref = both(*map(fg.tensor, (W, b, h)))
    for x, r in zip(exe(W, b, h, *consts), ref):
        np.testing.assert_allclose(x, r.numpy(), rtol=2e-5, atol=2e-6)


def test_w3_calls_the_scalar_tanh():
    """W3's 200 steps: the rerolled body is short again, so it calls fastmath's inlined
    tanh, as the "scalar" variant since the 16-lane loop stays scalar."""
    rng = np.random.default_rng(4)
    W = (1.0 + 0.1 * rng.standard_normal((200, 16))).astype(np.float32)
    b = (0.1 * rng.standard_normal((200, 16))).astype(np.float32)
    h = rng.standard_normal(16).astype(np.float32)
    cf = fg.compile(lambda W, b, h: _w3(fg, W, b, h))
    args = [fg.tensor(a) for a in (W, b, h)]
    np.testing.assert_allclose(cf(*args).numpy(), _w3(fg, *args).numpy(), rtol=2e-5, atol=2e-5)
    (src,) = [s for s in cf.lower(*args).kernel_source().split("# generated by") if "tanh" in s]
    assert "_fm_tanh_float32_scalar(" in src and "_fmc_" not in src


def test_sin_chain_with_huge_arguments_compiled():
    """A sin chain's rerolled kernel takes libm's sin past fastmath's exact range (the
    renderer's exact lowering): huge arguments give eager's values."""
    rng = np.random.default_rng(5)
    W = (1.0 + 0.1 * rng.standard_normal((40, 5))).astype(np.float64)
    h = rng.standard_normal(5)

    def fn(W, h):
        for i in range(W.shape[0]):
            h = (h * W[i]).sin() * 0.9 + 0.1  # contracting: rounding does not grow
        return h

    g = graph_of(fn, [W, h], optimize=True)
    assert any(_rerolled_loops(k) for k in _shared(g).values())
    exe = CpuBackend().compile(g)
    for scale in (1.0, 1e12):
        Ws = W * scale
        Ws[1:] = W[1:]  # only the first step sees huge arguments
        np.testing.assert_allclose(exe(Ws, h)[0], fn(fg.tensor(Ws), fg.tensor(h)).numpy(), rtol=1e-10, atol=1e-12)


def test_concatenation_parts_written_in_place_or_copied():
    """W5's shape (scalar w, b per layer on a long h): the gradient's 2 x 8 one-element
    parts come from a parallel reduction group, copied into their concatenations element
    by element unless that group is a kernel writing them in place (as W3's are,
    above); values as eager."""
    rng = np.random.default_rng(6)
    w = (1.0 + 0.1 * rng.standard_normal(8)).astype(np.float32)
    b = (0.1 * rng.standard_normal(8)).astype(np.float32)
    h = rng.standard_normal(1 << 16).astype(np.float32)  # past fusion.PARALLEL_MIN
    gfn = grad(lambda w, b: _w3(fg, w, b, fg.tensor(h)), argnums=(0, 1))
    g = graph_of(gfn, [w, b], optimize=True)
    consts = [np.asarray(c._data) for _, c in g.consts]
    for x, r in zip(CpuBackend().compile(g)(w, b, *consts), gfn(fg.tensor(w), fg.tensor(b))):
        np.testing.assert_allclose(x, r.numpy(), rtol=1e-4, atol=1e-4)
