"""Differentiation as IR passes and compiled training: vjp_graph / jvp_graph, the
forward/backward partition under each remat policy, and CompiledFunctionBackward."""
import numpy as np
import pytest

import fusegrad as torch
from fusegrad.ir.verify import verify
from fusegrad.passes import optimize
from fusegrad.passes.autodiff import jvp_graph, vjp_graph
from fusegrad.passes.mincut import FlowGraph
from fusegrad.passes.partition import partition
from fusegrad.runtime.interpreter import run_arrays

REMATS = ["none", "max", "auto"]


def mlp(x, w1, b1, w2):
    h = torch.tanh(x @ w1 + b1)
    return ((h @ w2).sigmoid() * 2.0).sum()


def chain(x, y):
    z = torch.exp(x) * torch.sin(y) + x * x / (y.abs() + 1.0)
    return torch.relu(z - 0.5).sum(1)  # non-scalar output


def _params(rng, dtype=np.float64):
    shapes = [(5, 4), (4, 8), (8,), (8, 3)]
    return [torch.from_numpy(rng.standard_normal(s).astype(dtype)) for s in shapes]


def _leaf(t):
    return t.detach().clone().requires_grad_(True)


def _graph(fn, *args):
    g = torch.make_ir(fn)(*args)
    return verify(optimize(g))


# ------------------------------------------------------------------ the transforms
def test_vjp_graph_matches_eager(rng):
    args = _params(rng)
    g = _graph(mlp, *args)
    joint = verify(optimize(vjp_graph(g, [0, 1, 2, 3])))
    res = run_arrays(joint, [a.numpy() for a in args] + [np.float64(1.0)])
    leaves = [_leaf(a) for a in args]
    mlp(*leaves).backward()
    np.testing.assert_allclose(res[0], mlp(*args).numpy())
    for r, l in zip(res[1:], leaves):
        np.testing.assert_allclose(r, l.grad.numpy(), rtol=1e-12)


def test_jvp_graph_matches_vjp(rng):
    args = _params(rng)[:2]
    f = lambda x, w: torch.tanh(x @ w).exp()  # noqa: E731
    g = _graph(f, *args)
    tx, tw = rng.standard_normal((5, 4)), rng.standard_normal((4, 8))
    jv = run_arrays(verify(optimize(jvp_graph(g, [0, 1]))), [args[0].numpy(), args[1].numpy(), tx, tw])[1]
    ct = rng.standard_normal((5, 8))
    gx, gw = run_arrays(verify(optimize(vjp_graph(g, [0, 1]))), [a.numpy() for a in args] + [ct])[1:]
    np.testing.assert_allclose((jv * ct).sum(), (gx * tx).sum() + (gw * tw).sum(), rtol=1e-10)


def test_unused_input_gets_zero_grad(rng):
    g = _graph(lambda a, b: a.exp(), torch.ones(3), torch.ones(2))
    res = run_arrays(verify(vjp_graph(g, [1])), [np.ones(3, np.float32), np.ones(2, np.float32), np.ones(3, np.float32)])
    np.testing.assert_array_equal(res[1], np.zeros(2))


@pytest.mark.parametrize("remat", REMATS)
def test_partition_runs_and_saves_per_policy(remat, rng):
    args = _params(rng)
    joint = optimize(vjp_graph(_graph(chain, args[0], args[0] + 1), [0, 1]))
    fwd, bwd = partition(joint, 2, 1, remat)
    verify(fwd), verify(bwd)
    x, y = args[0].numpy(), args[0].numpy() + 1
    out = run_arrays(fwd, [x, y])
    grads = run_arrays(bwd, list(out[1:]) + [np.ones(5)])
    want = run_arrays(joint, [x, y, np.ones(5)])
    np.testing.assert_allclose(grads[0], want[1]), np.testing.assert_allclose(grads[1], want[2])
    saved = len(fwd.outputs) - 1
    if remat == "none":
        assert saved > 2
    else:  # an elementwise chain recomputes from its two inputs
        assert saved == 2 and {v.id for v in fwd.outputs[1:]} == {v.id for v in fwd.inputs}


def test_auto_saves_matmul_results_not_inputs_to_recompute_through(rng):
    args = _params(rng)
    joint = optimize(vjp_graph(_graph(mlp, *args), [0, 1, 2, 3]))
    fwd, bwd = partition(joint, 4, 1, "auto")
    prims = {e.out.id: e.prim.name for e in fwd.eqns}
    assert all(prims.get(v.id, "input") in ("input", "matmul", "add", "tanh", "sigmoid", "mul")
               for v in fwd.outputs[1:])
    assert not any(e.prim.name == "matmul" and e.out.id in prims for e in bwd.eqns)


def test_mincut_small():
    fg = FlowGraph()
    fg.add_edge("s", "a", 3), fg.add_edge("s", "b", 2), fg.add_edge("a", "t", 1)
    fg.add_edge("a", "b", 5), fg.add_edge("b", "t", 4)
    assert fg.min_cut("s", "t") == {"s"}  # max flow 5 saturates both source edges


# ------------------------------------------------------------------ compiled backward
@pytest.mark.parametrize("remat", REMATS)
def test_compiled_mlp_grads_match_eager(remat, rng):
    args = _params(rng)
    cf = torch.compile(mlp, backend="eager", remat=remat)
    c_leaves, e_leaves = [_leaf(a) for a in args], [_leaf(a) for a in args]
    hooked = []
    c_leaves[1].register_hook(lambda g: hooked.append(g) or g * 2)
    e_leaves[1].register_hook(lambda g: g * 2)
    for _ in range(2):  # .grad accumulates across calls
        out = cf(*c_leaves)
        assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
        out.backward()
        mlp(*e_leaves).backward()
    assert len(hooked) == 2 and cf.cache_info()["compiles"] == 1 and cf.cache_info()["hits"] == 1
    for c, e in zip(c_leaves, e_leaves):
        np.testing.assert_allclose(c.grad.numpy(), e.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("remat", REMATS)
def test_compiled_chain_partial_requires_grad(remat, rng):
    x, y = _params(rng)[0], _params(rng)[0] * 0.5
    cf = torch.compile(chain, backend="eager", remat=remat)
    cx, ex = _leaf(x), _leaf(x)
    gout = torch.from_numpy(rng.standard_normal(5))
    cf(cx, y).backward(gout)
    chain(ex, y).backward(gout)
    np.testing.assert_allclose(cx.grad.numpy(), ex.grad.numpy(), rtol=1e-10)


def test_outputs_without_grad_and_multiple_outputs(rng):
    def fn(a, b):
        return a * 2, b + 1, (a > 0)
    cf = torch.compile(fn, backend="eager")
    a, b = _leaf(torch.ones(3)), torch.ones(3)
    p, q, m = cf(a, b)
    assert p.requires_grad and not q.requires_grad and not m.requires_grad
    (p * 3).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [6, 6, 6])


def test_retain_graph_and_freed_error():
    cf = torch.compile(lambda a: (a * a).sum(), backend="eager")
    a = _leaf(torch.tensor([1.0, 2.0]))
    out = cf(a)
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [4, 8])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_create_graph_through_compiled_function():
    cf = torch.compile(lambda a: (a ** 3).sum(), backend="eager")
    a = _leaf(torch.tensor([1.0, 2.0], dtype=torch.float64))
    (g,) = torch.autograd.grad(cf(a), [a], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [3, 12])
    g.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [6, 12])


def test_grad_mode_is_part_of_the_signature():
    cf = torch.compile(lambda a: a.exp(), backend="eager")
    a = _leaf(torch.ones(2))
    with torch.no_grad():
        assert not cf(a).requires_grad
    assert cf(a).requires_grad
    assert cf.cache_info()["compiles"] == 2


@pytest.mark.parametrize("remat", REMATS)
def test_compiled_module_trains_like_eager(remat):
    torch.manual_seed(0)
    make = lambda: torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))  # noqa: E731
    m_c, m_e = make(), make()
    m_e.load_state_dict(m_c.state_dict())
    cm = torch.compile(m_c, backend="eager", remat=remat)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    for model, run in ((m_c, cm), (m_e, m_e)):
        for _ in range(3):
            loss = ((run(x) - y) ** 2).mean()
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
    for pc, pe in zip(m_c.parameters(), m_e.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert cm.cache_info()["compiles"] == 1 and cm.cache_info()["hits"] == 2


# ------------------------------------------------------------------ whole training steps
@pytest.mark.parametrize("clear_grad", [True, False])
def test_whole_step_compiles_without_graph_break(clear_grad):
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    w0 = torch.randn(4, 1)

    def run(compiled):
        w = _leaf(w0)

        def step(x, y):
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                w.sub_(0.1 * w.grad)
            if clear_grad:
                w.grad = None
            return loss.detach()
        f = torch.compile(step, backend="eager") if compiled else step
        losses = [f(x, y).item() for _ in range(4)]
        return losses, w, f
    (lc, wc, f), (le, we, _) = run(True), run(False)
    np.testing.assert_allclose(lc, le, rtol=1e-6)
    np.testing.assert_allclose(wc.detach().numpy(), we.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(wc.grad.numpy() if wc.grad is not None else 0, we.grad.numpy() if we.grad is not None else 0, rtol=1e-6)
    info = f.cache_info()
    assert not info["graph_breaks"] and info["fallbacks"] == 0


def test_min_cut_is_the_smallest_minimum_cut_by_enumeration():
    """Random small graphs (finite and infinite capacities, parallel and reverse edges):
    the side returned holds the source, not the sink, its cut has the minimum capacity over
    every source side (all enumerated), and it lies inside each side of that capacity."""
    import itertools
    import random
    inf = float("inf")
    for trial in range(150):
        r = random.Random(trial)
        n = r.randint(1, 6)
        nodes = ["s", "t"] + list(range(n))
        edges = [(r.choice(nodes), r.choice(nodes), r.choice([inf, r.randint(1, 9)])) for _ in range(r.randint(1, 14))]
        edges = [(u, v, c) for u, v, c in edges if u != v]
        g = FlowGraph()
        for u, v, c in edges:
            g.add_edge(u, v, c)

        def cut(side):
            return sum(c for u, v, c in edges if u in side and v not in side)
        sides = [{"s", *sub} for k in range(n + 1) for sub in itertools.combinations(range(n), k)]
        best = min(cut(x) for x in sides)
        if best == inf:
            with pytest.raises(ValueError):
                g.min_cut("s", "t")
            continue
        got = g.min_cut("s", "t") & set(nodes)
        assert "s" in got and "t" not in got and cut(got) == best
        assert all(got <= x for x in sides if cut(x) == best)
