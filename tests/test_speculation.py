"""Values read inside compiled code (tracer.speculate, runtime.speculation): ``item()``
compared with a number and ``bool(tensor)`` are computed and guarded inside the compiled
function, a variant per outcome, no segments; every other use of the number, a number kept
after the call, random numbers before the read and changed hyperparameters run in segments,
with PyTorch's values, gradients and printed output."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _branchy(m):
    def f(x, w):
        h = m.tanh(x @ w)
        if h.sum().item() > 0:  # an output that carries a backward: the body recomputes h
            y = (h * 2).sin()
        else:
            y = h.cos()
        if y.max() > 0.5:  # bool(tensor)
            y = y * 3
        if (h > 0.9).sum().item():  # the number's truth
            y = y + 1
        return (y * y).sum()
    return f


def test_branches_on_item_and_bool_match_torch_values_and_gradients():
    f, ref = _branchy(fusegrad), _branchy(torch)
    cf = fusegrad.compile(f, backend="eager")
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal((4, 3)), np.abs(rng.standard_normal((3, 2)))
    for scale in (1.0, -1.0, 0.01, 1.0, -1.0, 0.01):
        x, w = fusegrad.tensor(scale * xa, requires_grad=True), fusegrad.tensor(wa, requires_grad=True)
        tx, tw = torch.tensor(scale * xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
        got, want = cf(x, w), ref(tx, tw)
        assert type(got.grad_fn).__name__ == "CompiledFunctionBackward"
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-14)
    info = cf.cache_info()
    # the three reads take at most 3 outcomes here (one per scale): one variant each
    assert info["segments"] == 0 and info["fallbacks"] == 0 and info["graph_breaks"] == [], info
    assert 2 <= info["compiles"] <= 3 and info["entries"] == 1, info


def _numbers(m, hist):
    def uses(x):
        s = (x * x).sum()
        print("s is", s.item())  # printing: a break (the number formatted, too)
        return x * s.item()  # an operand of a tensor op: a break

    def keeps(x):
        s = (x * 2).sum()
        hist.append(s.item())  # kept after the call: later calls run their Python
        return x + 1
    return uses, keeps


def test_numbers_used_as_numbers_or_kept_run_the_python_at_every_call():
    hist_got, hist_want = [], []
    (uses, keeps), (ruses, rkeeps) = _numbers(fusegrad, hist_got), _numbers(torch, hist_want)
    cu, ck = fusegrad.compile(uses, backend="eager"), fusegrad.compile(keeps, backend="eager")
    for k in range(3):
        xa = np.arange(3.0) + k
        out_got, out_want = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_got):
            got = cu(fusegrad.tensor(xa))
        with contextlib.redirect_stdout(out_want):
            want = ruses(torch.tensor(xa))
        assert out_got.getvalue() == out_want.getvalue()
        np.testing.assert_allclose(got.numpy(), want.numpy())
        np.testing.assert_allclose(ck(fusegrad.tensor(xa)).numpy(), rkeeps(torch.tensor(xa)).numpy())
    assert [float(h) for h in hist_got] == hist_want  # once per call, the first call's too
    used, kept = cu.cache_info(), ck.cache_info()
    assert any(r.startswith("print() at") for r in used["graph_breaks"]) and used["segments"] >= 2, used
    assert any("changes a list it names" in r for r in kept["graph_breaks"]), kept  # (a side effect)
    assert kept["segments"] >= 1 and kept["compiles"] == 0 and any("item()" in r for r in kept["graph_breaks"]), kept


def test_random_numbers_before_the_read_and_fullgraph_break():
    def f(x):
        y = fusegrad.nn.functional.dropout(x, 0.5, training=True)
        if y.sum().item() > 0:
            return y * 2
        return y
    cf = fusegrad.compile(f, backend="eager")
    fusegrad.manual_seed(0)
    got = cf(fusegrad.ones(64))
    fusegrad.manual_seed(0)
    want = f(fusegrad.ones(64))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert "random numbers" in " ".join(cf.cache_info()["graph_breaks"])
    with pytest.raises(RuntimeError, match="fullgraph=True"):
        fusegrad.compile(_branchy(fusegrad), fullgraph=True)(fusegrad.ones(4, 3), fusegrad.ones(3, 2))


def test_many_outcomes_end_in_segments_and_sizes_share_a_variant():
    def f(x):
        n = x.sum()
        for t in (1.0, 2.0, 3.0, 4.0, 5.0):
            if n.item() > t:  # six outcomes: VARIANT_LIMIT are compiled, the others run in segments
                x = x + t
        return x * 2
    cf = fusegrad.compile(f, backend="eager")
    for v in (0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 0.5, 5.5):
        np.testing.assert_allclose(cf(fusegrad.tensor([v])).numpy(), f(fusegrad.tensor([v])).numpy())
    info = cf.cache_info()
    assert info["compiles"] == 4 and info["segments"] >= 2, info
    assert any("outcomes" in n for n in info["notes"]), info
    # another size of the same signature family: symbolic kernels, the read still guarded
    cg = fusegrad.compile(f, backend="cpu", dynamic=True)
    for n in (2, 5, 0, 3):
        xa = np.linspace(-1, 1, n) * n
        np.testing.assert_allclose(cg(fusegrad.tensor(xa)).numpy(), f(fusegrad.tensor(xa)).numpy(), rtol=1e-12)
    assert cg.cache_info()["segments"] == 0, cg.cache_info()


def _clipped_step(lib, model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        scale = 2.0 if loss.item() > 0.9 else 1.0
        (loss * scale).backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)  # bool(isfinite(norm))
        opt.step()
        return loss
    return step


def test_training_step_with_reads_and_clipping_compiles_without_segments():
    rng = np.random.default_rng(1)
    xa, ya = rng.standard_normal((32, 4)), rng.standard_normal((32, 1))
    init = [rng.standard_normal(s) * 0.5 for s in ((8, 4), (8,), (1, 8), (1,))]
    res = {}
    for lib in (fusegrad, torch):
        model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1)).double()
        with lib.no_grad():
            for p, v in zip(model.parameters(), init):
                p.copy_(lib.tensor(v))
        opt = lib.optim.Adam(model.parameters(), lr=0.05)
        step = _clipped_step(lib, model, opt)
        if lib is fusegrad:
            step = cf = fusegrad.compile(step)
        x, y = lib.tensor(xa), lib.tensor(ya)
        res[lib.__name__] = [step(x, y).item() for _ in range(10)], [p.detach().numpy().copy() for p in model.parameters()]
    (got, gp), (want, wp) = res["fusegrad"], res["torch"]
    assert want[0] > 0.9 > want[-1]  # both scales taken
    np.testing.assert_allclose(got, want, rtol=1e-10)
    for a, b in zip(gp, wp):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    info = cf.cache_info()
    assert info["segments"] == 0 and info["graph_breaks"] == [] and info["compiles"] == 2, info


def test_a_captured_tensors_value_read_in_a_branch_is_read_at_every_call():
    """``flag.item()`` of a global tensor (captured, not an argument) is guarded like a
    computed value: updated in place between calls, the branch follows (it was fixed at
    the trace's value before)."""
    flag = fusegrad.tensor(1.0)

    def f(x, n):
        if n.item() > 0 and flag.item() > 0.5:  # (a short-circuit: the second read only when n > 0)
            return x * 2
        return x * 3
    cf = fusegrad.compile(f)
    for nv, fv in ((1.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (1.0, 1.0), (-1.0, 0.0)):
        flag.fill_(fv)
        x, n = fusegrad.arange(4.0), fusegrad.tensor(nv)
        np.testing.assert_array_equal(cf(x, n).numpy(), f(x, n).numpy())
    info = cf.cache_info()
    assert info["compiles"] == 3 and info["segments"] == 0 and info["fallbacks"] == 0, info
    low = cf.lower(x, n)  # the body of the variant last run; .check: what computes the values read
    assert "mul(" in low.ir("optimized") and "mul(" not in low.check.ir("optimized")


def test_a_returned_number_is_an_output_of_the_compiled_code():
    """``return loss.item()`` (alone or in a tuple, an int from an integer tensor too): a
    Python number computed by the compiled code at each call, no segments; one also kept
    in a list is not replayed."""
    kept = []

    def f(x):
        s = (x * 2).sum()
        return x + 1, s.item(), (x > 1).sum().item()

    def g(x):
        return (x * x).mean().item()

    def h(x):
        v = x.sum().item()
        kept.append(v)
        return v
    cf, cg, ch = (fusegrad.compile(fn, backend="eager") for fn in (f, g, h))
    for k in range(3):
        xa = np.arange(4.0) + k
        got, want = cf(fusegrad.tensor(xa)), f(torch.tensor(xa))
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
        assert got[1:] == want[1:] and type(got[2]) is int and type(got[1]) is float
        assert cg(fusegrad.tensor(xa)) == g(torch.tensor(xa))
        assert ch(fusegrad.tensor(xa)) == xa.sum()
    for c in (cf, cg):
        info = c.cache_info()
        assert info["compiles"] == 1 and info["segments"] == 0 and info["graph_breaks"] == [], info
    assert [float(v) for v in kept] == [6.0, 10.0, 14.0] and ch.cache_info()["segments"] >= 1


def test_any_and_all_of_traced_values_are_traced_and_guarded():
    """``all``/``any`` (with dim, keepdim, of empty tensors) trace as primitives, so
    ``if (x > 0).all():`` is a guarded read, not a graph break."""
    def reductions(L, x):
        return (L.all(x > 0), L.any(x > 2), (x > -5).all(), x.any(), L.all(x > 0, dim=1),
                L.any(x > 2, 0, keepdim=True), L.all(x[:0] > 0), L.any(x[:0] > 0), L.all(x[:0] > 0, dim=0))

    def g(x):
        if (x > 0).all():
            return x * 2
        return x * 3
    xa = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    cf, cg = fusegrad.compile(lambda x: reductions(fusegrad, x)), fusegrad.compile(g)
    for got, want in zip(cf(fusegrad.tensor(xa)), reductions(torch, torch.tensor(xa))):
        assert got.dtype == fusegrad.bool and got.numpy().tolist() == want.numpy().tolist(), (got, want)
    for v in (xa, np.abs(xa), xa):
        np.testing.assert_array_equal(cg(fusegrad.tensor(v)).numpy(), g(torch.tensor(v)).numpy())
    for c in (cf, cg):
        assert c.cache_info()["graph_breaks"] == [] and c.cache_info()["segments"] == 0, c.cache_info()


def test_a_graph_with_a_backward_runs_whole_and_writes_nothing_for_another_outcome():
    """A read in a graph whose output carries a backward: with no op that can raise or draw
    random numbers, the graph runs whole and its guards are checked after it (no check part:
    ``lower().check`` is None), and a call with another outcome writes nothing (batch norm's
    running statistics update once per call, as in eager); with an indexing op the values
    are computed first (a check part). Values, gradients and statistics against torch."""
    def make(lib):
        bn = lib.nn.BatchNorm1d(3).double()

        def f(x, idx):
            y = bn(x)
            if y.abs().max() > 1.5:
                y = y * 0.5
            return y.tanh(), (y[idx] if (x.sum() > 0).item() else -y[idx]).sum()
        return bn, f
    (bn, f), (tbn, tf) = make(fusegrad), make(torch)
    cf = fusegrad.compile(f)
    rng = np.random.default_rng(3)
    lows = []
    for k, scale in enumerate((0.1, 3.0, 0.1, -3.0, 3.0)):
        xa = rng.standard_normal((5, 3)) * scale + (0.0 if k % 2 else 1.0)
        xa[0, 0] += 4.0 * (k == 1)
        ia = np.array([4, 0, 2])
        x, tx = fusegrad.tensor(xa, requires_grad=True), torch.tensor(xa, requires_grad=True)
        (a, s), (ta, ts) = cf(x, fusegrad.tensor(ia)), tf(tx, torch.tensor(ia))
        (a * a).sum().backward()
        (ta * ta).sum().backward()
        np.testing.assert_allclose(a.detach().numpy(), ta.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(s.item(), ts.item(), rtol=1e-10)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(bn.running_mean.numpy(), tbn.running_mean.numpy(), rtol=1e-12)
        np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-12)
        lows.append(cf.lower(x, fusegrad.tensor(ia)))
    assert lows[0].check is not None  # the index op: the values first
    info = cf.cache_info()
    assert info["segments"] == 0 and info["graph_breaks"] == [], info

    def g(x):
        y = bn(x)
        return y * 0.5 if x.abs().max() > 1.5 else y
    cg = fusegrad.compile(g)
    for scale in (0.1, 3.0, 0.1):
        xa = rng.standard_normal((5, 3)) * scale
        xa[0, 0] += 4.0 * (scale > 1)
        x = fusegrad.tensor(xa, requires_grad=True)
        np.testing.assert_allclose(cg(x).detach().numpy(), g(fusegrad.tensor(xa)).detach().numpy(), rtol=1e-12)
        assert cg.lower(x).check is None  # run whole, checked after
    assert cg.cache_info()["compiles"] == 2


def test_number_used_as_an_operand_is_a_python_number():
    """The call that found item()'s number used in arithmetic computes with that number as a
    Python float (a weak scalar): it was a float32 tensor, rounding a float64 result."""
    xa = np.array([1.0 / 3, 2.0 / 7, 5.0 / 11])

    def f(x):
        return x * (x * 2).sum().item()

    cf = fusegrad.compile(f)
    for _ in range(2):
        got = cf(fusegrad.tensor(xa))
        assert got.dtype == fusegrad.float64
        np.testing.assert_allclose(got.numpy(), f(torch.tensor(xa)).numpy(), rtol=1e-15)


def _scaled(m):
    def f(x, q):
        s = x.sum().item()  # detached: no gradient flows through it
        scale = 1.0 / (abs(s) + 1e-3)  # arithmetic on the number: computed in the graph too
        n = (q > 0).sum().item()  # an int: a weak operand beside int and float tensors
        return (x * scale).tanh() * s + q * n + n / 2, -s * 2 + 1
    return f


def test_item_as_an_operand_and_in_arithmetic_replays_one_graph_fullgraph_too():
    """item()'s number as a tensor op's operand and in arithmetic with numbers is computed
    in the graph at every call (with PyTorch's dtypes and gradients: item() detaches), so
    the function compiles once, no segments, and fullgraph=True accepts it; a branch on the
    number is what fullgraph refuses, naming the line."""
    f, ref = _scaled(fusegrad), _scaled(torch)
    for fullgraph in (False, True):
        cf = fusegrad.compile(f, fullgraph=fullgraph)
        rng = np.random.default_rng(0)
        for k in range(3):
            xa, qa = rng.standard_normal(5), rng.integers(-3, 4, 5)
            x, xt = fusegrad.tensor(xa, requires_grad=True), torch.tensor(xa, requires_grad=True)
            (got, g_num), (want, w_num) = cf(x, fusegrad.tensor(qa)), ref(xt, torch.tensor(qa))
            assert got.dtype == fusegrad.float64 and type(g_num) is float
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
            assert g_num == pytest.approx(w_num, rel=1e-12)
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
            q32 = fusegrad.tensor(qa.astype(np.int32))
            assert cf(x, q32)[0].dtype == fusegrad.float64
        info = cf.cache_info()
        assert info["segments"] == 0 and info["graph_breaks"] == [] and info["notes"] == [], info

    def branchy(x):
        if x.sum().item() * 2 > 1:
            return x + 1
        return x - 1
    with pytest.raises(RuntimeError, match=r"data-dependent branching: the number Tensor\.item\(\) returned at "
                                           r".*test_speculation\.py:\d+, compared \(> 1\)"):
        fusegrad.compile(branchy, fullgraph=True)(fusegrad.ones(3))


def test_fullgraph_runs_data_dependent_sizes_in_segments_as_torch_compiles_them():
    """Under fullgraph=True, PyTorch's graph captures data-dependent sizes (a boolean mask's
    selection, nonzero, bincount, a tensor's value as a slice bound); fusegrad runs such a
    function in segments with PyTorch's values, naming the read (it raised Unsupported)."""
    def f(m, e, x):
        e = e[:, e[0] != e[1]]  # (a GNN's remove_self_loops)
        deg = m.bincount(e[1], minlength=4).float()
        return (x[e[0]] / deg[e[1]][:, None]).sum(0) + x[: int(deg.max())].sum(), (x > 0).nonzero()
    e, x = np.array([[0, 1, 2, 2, 3], [1, 1, 0, 2, 1]]), np.random.default_rng(0).standard_normal((4, 3))
    cf = fusegrad.compile(lambda e, x: f(fusegrad, e, x), fullgraph=True)
    for k in range(2):
        got, want = cf(fusegrad.tensor(e), fusegrad.tensor(x + k)), f(torch, torch.tensor(e), torch.tensor(x + k))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)
    assert "needs a concrete value" in cf.cache_info()["graph_breaks"][0], cf.cache_info()


def test_a_read_number_divides_a_float64_tensor_in_float64():
    """A float argument read at each call (a DynamicFloat, from the third call on) divides
    a float64 tensor in float64: it was cast to the default float32."""
    cf = fusegrad.compile(lambda x, lr: (x / lr, lr / x, x // lr))
    x = fusegrad.tensor([1.0, 2.5, -3.0], dtype=fusegrad.float64)
    for lr in (2.0, 3.0, 0.7):
        for got, want in zip(cf(x, lr), (x.numpy() / lr, lr / x.numpy(), np.floor_divide(x.numpy(), lr))):
            assert got.dtype == fusegrad.float64
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-15)


def test_print_in_compiled_code_prints_at_every_call():
    """``print`` of text (not of a tensor) in a compiled function: a named graph break, so it
    prints at every call as torch.compile's graph break does; fullgraph=True refuses it."""
    def program(lib, **kw):
        def f(x):
            y = x * 2
            print("step", tuple(y.shape))
            return y + 1
        cf = lib.compile(f, **kw)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            outs = [cf(lib.ones(300_000))[:2].tolist() for _ in range(3)]
        return outs, buf.getvalue()
    mine, ref = program(fusegrad), program(torch)
    assert mine == ref and ref[1] == "step (300000,)\n" * 3
    with pytest.raises(RuntimeError, match=r"print\(\) at .*test_speculation.py"):
        program(fusegrad, fullgraph=True)
