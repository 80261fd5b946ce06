"""Fusion by dependency (passes/fusion.py): loop groups over the same domain merge when no
cycle between groups results, whatever the trace order, and a value read only inside its
own loop is never stored. Structure is checked on ``fuse``'s output; values against eager
in one compiled graph."""
from __future__ import annotations

import numpy as np

import fusegrad as fg
from fusegrad.passes.fusion import COPY, CallGroup, LoopGroup, fuse
from helpers import check, graph_of


def _loops(fused) -> list:
    return [g for g in fused.groups if isinstance(g, LoopGroup)]


def _stored(fused) -> set:
    """Ids of the values some group writes to memory."""
    return {v.id for gi in range(len(fused.groups)) for v in fused.outputs_of(gi)}


def _producer(graph, prim):
    return next(e.out for e in graph.eqns if e.prim is prim)


def _across_call(x, y, w):
    a = fg.sin(x)
    b = fg.exp(y @ w)  # a library call between a and its reader
    return b, a * 2


def test_a_loop_moves_past_an_unrelated_call():
    g = graph_of(_across_call, [np.ones((5, 5), np.float32)] * 3)
    fused = fuse(g)
    assert len(_loops(fused)) == 1 and len(fused.groups) == 2, str(fused)
    assert isinstance(fused.groups[0], CallGroup)  # the merged loop runs after the matmul it reads
    assert _producer(g, fg.ir.prims.sin).id not in _stored(fused), str(fused)


def _interleaved(x, z):
    a = fg.sin(x)
    b = fg.exp(z)  # another domain in between
    return b, a * 2


def test_independent_domains_do_not_split_a_loop():
    g = graph_of(_interleaved, [np.ones((4, 5), np.float32), np.ones(3, np.float32)])
    fused = fuse(g)
    assert sorted(len(lg.eqns) for lg in _loops(fused)) == [1, 2], str(fused)
    assert _producer(g, fg.ir.prims.sin).id not in _stored(fused), str(fused)


def _independent(x, y, w):
    p = fg.tanh(x)
    m = w @ w
    q = fg.cos(y)
    return p, m, q


def test_independent_loops_over_one_domain_merge():
    fused = fuse(graph_of(_independent, [np.ones((3, 4), np.float32), np.ones((3, 4), np.float32),
                                         np.ones((4, 4), np.float32)]))
    assert len(_loops(fused)) == 1 and len(fused.groups) == 2, str(fused)


def _cycle(x, w):
    a = fg.sin(x)
    m = a @ w  # reads a, and the loop after reads m: a and c cannot share a loop
    return fg.exp(m) + a


def test_no_merge_through_a_group_between():
    g = graph_of(_cycle, [np.ones((4, 4), np.float32)] * 2)
    fused = fuse(g)
    kinds = [type(gr).__name__ for gr in fused.groups]
    assert kinds == ["LoopGroup", "CallGroup", "LoopGroup"], str(fused)


def _two_reductions(x, y):
    return x.sum(0), y.sum(1), y.amax(0)  # the amax may join the first sum, not the second


def test_reductions_over_other_axes_stay_apart():
    fused = fuse(graph_of(_two_reductions, [np.ones((4, 5), np.float32)] * 2))
    loops = _loops(fused)
    assert len(loops) == 2, str(fused)
    assert sorted(lg.red_axes for lg in loops) == [(0,), (1,)], str(fused)


def _everything(x, y, w, z):
    return _across_call(x, y, w) + _interleaved(x, z) + _independent(x, y, w) + (_cycle(x, w),) \
        + _two_reductions(x, y)


def test_merged_groups_compute_what_eager_does(rng):
    arrs = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3)] + \
           [rng.standard_normal(3).astype(np.float32)]
    check(_everything, arrs, tol=dict(rtol=2e-5, atol=2e-6))


def _reshaped_operands(x, w):
    a = fg.tanh(x)                                     # a loop group's output
    m = a.reshape(6, 4) @ w                            # a call reading its reshape
    n = m.reshape(2, 12).reshape(3, 8) @ x.reshape(8, 3)  # a chain of reshapes; an argument's reshape
    t = a.t().reshape(4, 6) @ x.reshape(6, 4)          # a transpose moves elements: copied
    return n, t


def test_calls_read_reshapes_of_stored_values_in_place(rng):
    arrs = [rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)]
    # (optimized as the cpu backend's graphs are: the trace copies the transpose before its
    # reshape, as eager's reshape does, and the simplifier leaves the copy to fusion)
    fused = fuse(graph_of(_reshaped_operands, arrs, optimize=True), read_reshapes=True)
    copies = [e for lg in _loops(fused) for e in lg.eqns if e.prim is COPY]
    assert len(copies) == 1, str(fused)  # only the transposed operand is materialized
    assert fused.aliases[copies[0].inputs[0].id].prim is fg.ir.prims.reshape  # of the transpose
    check(_reshaped_operands, arrs, tol=dict(rtol=2e-5, atol=2e-5))


def _view_chain(rng, arr: np.ndarray) -> tuple:
    """A random chain of view equations (transpose, slice, reshape, broadcast) over a
    stored value of ``arr``'s shape: (aliases, the last view's Var, NumPy's view)."""
    from fusegrad.ir.graph import Eqn, Var
    from fusegrad.ir.prims.layout import encode_key
    P = fg.ir.prims
    v, a, aliases = Var(arr.shape, np.float32), arr, {}
    for _ in range(rng.integers(1, 4)):
        kind = rng.integers(0, 4)
        if kind == 0:
            perm = tuple(int(p) for p in rng.permutation(a.ndim))
            a2, prim, params = a.transpose(perm), P.transpose, {"perm": perm}
        elif kind == 1:
            key = []
            for s in a.shape:
                start = int(rng.integers(0, s))
                key.append(slice(start, int(rng.integers(start + 1, s + 1)), int(rng.integers(1, 3))))
            if a.ndim > 1 and rng.random() < 0.3:
                key[-1] = int(rng.integers(0, a.shape[-1]))
            if rng.random() < 0.3:
                key.insert(int(rng.integers(0, len(key) + 1)), None)
            a2, prim, params = a[tuple(key)], P.slice_, {"key": encode_key(tuple(key), a.shape)}
        elif kind == 2:
            n = a.size
            d = int(rng.choice([d for d in range(1, n + 1) if n % d == 0]))
            new = ((d, n // d) if rng.random() < 0.5 else (n,)) + ((1,) if rng.random() < 0.3 else ())
            a2, prim, params = a.reshape(new), P.reshape, {"shape": new}
        else:
            new = (2,) + a.shape
            a2, prim, params = np.broadcast_to(a, new), P.broadcast_to, {"shape": new}
        out = Var(a2.shape, np.float32)
        aliases[out.id] = Eqn(prim, (v,), params, out)
        v, a = out, a2
    return aliases, v, a


def test_strided_views_read_what_numpy_views_read(rng):
    """passes.strides.strided_view: where it gives a layout, that layout reads the same
    elements as NumPy's view; it declines only reshapes NumPy would copy (never a view NumPy
    keeps, so no alias that could be read in place is copied)."""
    from fusegrad.passes.strides import strided_view
    declined = 0
    for _ in range(400):
        shape = tuple(int(s) for s in rng.integers(1, 5, rng.integers(1, 4)))
        arr = np.arange(int(np.prod(shape))).reshape(shape)
        aliases, v, a = _view_chain(rng, arr)
        got = strided_view(aliases, v)
        if got is None:
            declined += 1
            continue
        _, off, strides = got
        idx = np.indices(a.shape).reshape(a.ndim, -1)
        lin = off + (np.array(strides, dtype=np.int64)[:, None] * idx).sum(0)
        np.testing.assert_array_equal(arr.ravel()[lin].reshape(a.shape), a)
    assert 0 < declined < 100


def _attention(x, B=3, T=5, H=2, D=4):
    q, k, v = x.reshape(B, T, 3 * H * D).split(H * D, dim=2)
    q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
    y = (q @ k.transpose(-2, -1)).softmax(-1) @ v
    return y.transpose(1, 2).reshape(B, T, H * D), x[:, 2:7] @ x[1:6, 3:9:2]


def test_matmuls_read_strided_views_in_place(rng):
    """Attention heads sliced out of a fused QKV projection are read by their batched GEMMs
    in place, transposed or not, through leading dimensions (fuse with read_strided, as the
    cpu backend does); an operand with no unit-stride dim (a step of 2) is copied."""
    x = rng.standard_normal((15, 24)).astype(np.float32)
    fused = fuse(graph_of(_attention, [x]), read_reshapes=True, read_strided=True)
    copies = [e for lg in _loops(fused) for e in lg.eqns if e.prim is COPY]
    # copied: the stepped slice, and the output (heads merged back: a layout of its own)
    assert sorted(c.out.shape for c in copies) == [(3, 5, 8), (5, 3)], str(fused)
    calls = [g.eqn for g in fused.groups if isinstance(g, CallGroup)]
    layouts = [e.params.get("strided") for e in calls]
    assert layouts[0] == ((0, (120, 4), 24, False), (8, (120, 4), 24, True))  # q @ k.T
    assert layouts[1][1] == (16, (120, 4), 24, False)  # probabilities @ v
    assert layouts[2] == ((2, (), 24, False), None)
    check(_attention, [x], tol=dict(rtol=2e-5, atol=2e-6))


def test_scatters_into_a_fill_read_only_there_fill_their_output(rng):
    """A gather's backward scatters into zeros: where nothing else reads those zeros, the
    index_put / scatter_add takes the fill value as its base (fuse with fill_bases, as the
    cpu backend does), so no loop computes and stores the fill; a fill two scatters share
    is stored once. Gradients match eager's."""
    idx = fg.tensor(np.array([0, 2, 2, 1]))
    x = fg.tensor(rng.standard_normal((4, 4)).astype(np.float32))
    P = fg.ir.prims

    def run(shared: bool, compiled: bool):
        w = fg.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, requires_grad=True)
        v = w if shared else fg.tensor(np.arange(10, dtype=np.float32).reshape(5, 2) / 3, requires_grad=True)

        def step(x):
            loss = (w[idx] * x).sum() + (v.gather(1, idx.reshape(4, 1)[:3] % 2) ** 2).sum()
            loss.backward()
            return loss
        fn = fg.compile(step) if compiled else step
        loss = fn(x)
        return fn, [loss.detach().numpy(), w.grad.numpy(), v.grad.numpy()]

    for shared in (False, True):
        fn, got = run(shared, True)
        for g, r in zip(got, run(shared, False)[1]):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
        fused = fn.lower(x).fused()
        fills = [e for lg in _loops(fused) for e in lg.eqns if e.prim is P.full]
        scatters = [g.eqn for g in fused.groups if isinstance(g, CallGroup)
                    and g.eqn.prim in (P.index_put, P.scatter_add)]
        assert len(scatters) == 2, str(fused)
        assert len(fills) == shared, str(fused)
        assert all(isinstance(e.inputs[0], fg.ir.graph.Var) == shared for e in scatters), str(fused)


def test_independent_updates_of_many_arrays_stay_apart_and_share_a_kernel(rng):
    """Adam's per-parameter updates are independent loops over one domain; fusion by
    dependency would put them side by side in one loop over dozens of arrays, which LLVM
    does not vectorize. Such a wide group is split into its independent parts: each
    parameter's update is a loop group of its own, and the identical updates share one
    kernel module. Parameters after two compiled steps match eager's."""
    def run(compiled: bool):
        ps = [fg.tensor(np.random.default_rng(i).standard_normal((5, 4)).astype(np.float32), requires_grad=True)
              for i in range(3)]
        opt = fg.optim.Adam(ps, lr=0.1)

        def step(x):
            loss = sum(((x @ p) ** 2).sum() for p in ps)  # gradients from GEMMs, updates over (5, 4)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        fn = fg.compile(step) if compiled else step
        for _ in range(3):  # eager warm-up creates Adam's state, then two compiled steps
            fn(x)
        return fn, ps
    x = fg.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    fn, got = run(True)
    for g, r in zip(got, run(False)[1]):
        np.testing.assert_allclose(g.detach().numpy(), r.detach().numpy(), rtol=1e-5, atol=1e-6)
    lowered = fn.lower(x)
    fused = lowered.fused()
    updates = [lg for lg in _loops(fused)
               if lg.domain == (5, 4) and any(e.prim is fg.ir.prims.sqrt for e in lg.eqns)]
    assert len(updates) == 3, str(fused)
    loops_with_sqrt = [m for m in lowered.kernel_source().split("# generated by") if "np.sqrt(" in m and "for i0 in" in m]
    assert len(loops_with_sqrt) == 1, lowered.kernel_source()
