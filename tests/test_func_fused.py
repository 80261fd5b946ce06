"""The function transforms without ``compile`` capture their whole computation per signature
as one closed graph (fusegrad.func.fused): a later call with an equal signature reuses it
(no trace), interpreted on the second call and compiled by the cpu backend on the third; results against torch.func (float64);
captured values that change still give fresh results; ``vmap`` of ``jacrev`` over a model is
one batched computation; calls that need eager autograd run directly. Also the two rewrites
that make the batched Jacobians fast: an outer-product matmul as a broadcast multiply, a
transpose pushed through an elementwise op."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad
import fusegrad.func as ff
from fusegrad.func import transforms as TR
from fusegrad.ir import prims as P
from helpers import graph_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

W_NP = np.random.default_rng(0).standard_normal((4, 4)) / 2
W = fusegrad.tensor(W_NP)
SCALE = 2.0


def vec(m, w):
    return lambda x: m.tanh(w @ x) * x * SCALE


def scalar(m, w):
    return lambda x: (m.tanh(w @ x) * x * SCALE).sum()


def _call(lib, name: str, x):
    """Transform ``name`` of the test functions (written against ``lib``) at ``x``."""
    t = torch.func if lib is torch else ff
    w = torch.tensor(W.numpy()) if lib is torch else W
    if name == "jvp":
        return t.jvp(vec(lib, w), (x,), (lib.ones_like(x),))[1]
    if name == "vmap_jacrev":
        return t.vmap(t.jacrev(vec(lib, w)))(lib.stack([x, 2 * x]))
    if name == "vmap_grad":
        return t.vmap(t.grad(scalar(lib, w)))(lib.stack([x, 2 * x]))
    if name in ("grad", "hessian"):
        return getattr(t, name)(scalar(lib, w))(x)
    return getattr(t, name)(vec(lib, w))(x)


NAMES = ["grad", "jacrev", "jacfwd", "hessian", "jvp", "vmap_jacrev", "vmap_grad"]


@pytest.mark.parametrize("name", NAMES)
def test_later_calls_reuse_the_closed_graph_and_the_third_runs_it_compiled(name):
    w = W
    fn = vec(fusegrad, w) if name not in ("grad", "hessian", "vmap_grad") else scalar(fusegrad, w)
    t = {"grad": lambda: ff.grad(fn), "hessian": lambda: ff.hessian(fn), "jacrev": lambda: ff.jacrev(fn),
         "jacfwd": lambda: ff.jacfwd(fn), "vmap_jacrev": lambda: ff.vmap(ff.jacrev(fn)),
         "vmap_grad": lambda: ff.vmap(ff.grad(fn)), "jvp": None}[name]
    xs = [np.linspace(-1, 1, 4) * k for k in (1.0, 0.5, -2.0)]
    traces = None
    for i, x in enumerate(xs):
        if name == "jvp":
            got = ff.jvp(fn, (fusegrad.tensor(x),), (fusegrad.ones(4, dtype=fusegrad.float64),))[1]
        elif name.startswith("vmap"):
            got = t()(fusegrad.tensor(np.stack([x, 2 * x])))
        else:
            got = t()(fusegrad.tensor(x))  # a wrapper built anew each call shares the cache
        want = _call(torch, name, torch.tensor(x))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
        if i == 0:
            traces = TR.STATS["traces"]
    assert TR.STATS["traces"] == traces  # nothing traced after the first call
    if name != "jvp":
        info = t().cache_info()
        assert (info["captures"], info["hits"], info["compiles"]) == (1, 2, 1), info
        assert (info["interpreted_calls"], info["fused_calls"], info["direct_calls"]) == (2, 1, 0), info


def test_two_calls_interpret_and_the_policy_compiles_on_the_third():
    f = lambda x: (x.sin() * x).sum()  # noqa: E731
    g = ff.grad(f)
    for _ in range(2):
        g(fusegrad.tensor(np.ones(3)))
    assert g.cache_info()["compiles"] == 0 and g.cache_info()["interpreted_calls"] == 2
    g(fusegrad.tensor(np.ones(3)))
    assert g.cache_info()["compiles"] == 1 and g.cache_info()["fused_calls"] == 1
    g(fusegrad.tensor(np.ones(5)))  # another signature: its own first call
    assert g.cache_info()["captures"] == 2 and g.cache_info()["compiles"] == 1


def test_compiled_variant_follows_changed_values():
    global SCALE
    h = fusegrad.tensor(W_NP.copy())
    g = ff.grad(scalar(fusegrad, h))
    x = np.linspace(-1, 1, 4)

    def want():
        return torch.func.grad(scalar(torch, torch.tensor(h.numpy())))(torch.tensor(x)).numpy()
    try:
        for _ in range(4):  # the third and fourth calls run compiled
            np.testing.assert_allclose(g(fusegrad.tensor(x)).numpy(), want(), rtol=1e-10)
        assert g.cache_info()["fused_calls"] == 2
        SCALE = 3.0  # a global number: the guard fails, traced again
        np.testing.assert_allclose(g(fusegrad.tensor(x)).numpy(), want(), rtol=1e-10)
        assert g.cache_info()["captures"] == 2
        SCALE = 2.0  # back to the compiled variant
        with fusegrad.no_grad():
            h.mul_(-0.5)  # a captured tensor updated in place: the compiled code reads it at call time
        np.testing.assert_allclose(g(fusegrad.tensor(x)).numpy(), want(), rtol=1e-10)
        assert g.cache_info()["captures"] == 2 and g.cache_info()["fused_calls"] == 3
    finally:
        SCALE = 2.0


def _mlp(lib, widths=(5, 7, 7, 3)):
    g = np.random.default_rng(1)
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers += [lib.nn.Linear(a, b)] + ([lib.nn.Tanh()] if i < len(widths) - 2 else [])
    net = lib.nn.Sequential(*layers)
    params = {k: g.standard_normal(tuple(v.shape)) for k, v in net.named_parameters()}
    return net.double(), params


def _ntk_jac(lib, net, params):
    f = lambda p, x: lib.func.functional_call(net, p, (x.unsqueeze(0),)).squeeze(0)  # noqa: E731
    return lambda x: lib.func.vmap(lib.func.jacrev(f), (None, 0))(params, x)


def test_vmap_of_jacrev_over_a_model_is_one_batched_computation():
    net, p = _mlp(fusegrad)
    tnet, _ = _mlp(torch)
    params = {k: fusegrad.tensor(v) for k, v in p.items()}
    tparams = {k: torch.tensor(v) for k, v in p.items()}
    jac, tjac = _ntk_jac(fusegrad, net, params), _ntk_jac(torch, tnet, tparams)
    counts = []
    for n in (2, 6):
        x = np.random.default_rng(n).standard_normal((n, 5))
        g = graph_of(lambda t: list(jac(t).values()), [x])
        counts.append(sum(e.prim is P.matmul for e in g.eqns))
        for call in range(3):  # interpreted twice, then compiled
            got, want = jac(fusegrad.tensor(x)), tjac(torch.tensor(x))
            for k in want:
                assert tuple(got[k].shape) == tuple(want[k].shape)
                np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-10, atol=1e-12)
                if call == 2 and k.endswith("weight"):  # computed in the layout returned: flatten is free
                    assert got[k].numpy().flags.c_contiguous, k
    assert counts[0] == counts[1] and counts[0] > 0  # no per-example loop


def test_inputs_requiring_grad_run_directly_and_stay_differentiable():
    f = scalar(fusegrad, W)
    g = ff.grad(f)
    x = fusegrad.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    tx = torch.tensor(np.linspace(-1, 1, 4), requires_grad=True)
    for _ in range(2):
        g(x).sum().backward()
    torch.func.grad(scalar(torch, torch.tensor(W_NP)))(tx).sum().backward()
    torch.func.grad(scalar(torch, torch.tensor(W_NP)))(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    assert g.cache_info()["direct_calls"] == 0 and g.cache_info()["captures"] == 0


def test_captured_parameter_requiring_grad_is_interpreted_with_autograd():
    w = fusegrad.tensor(W_NP, requires_grad=True)
    tw = torch.tensor(W_NP, requires_grad=True)
    g = ff.grad(scalar(fusegrad, w))
    x = np.linspace(-1, 1, 4)
    for _ in range(2):
        g(fusegrad.tensor(x)).sum().backward()
        torch.func.grad(scalar(torch, tw))(torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)
    info = g.cache_info()
    assert info["hits"] == 1 and info["compiles"] == 0 and info["interpreted_calls"] == 2


def test_a_function_that_breaks_runs_directly_and_counts_one_fallback():
    def f(x):
        return (x ** 2).sum() if x.sum() > 0 else x.sin().sum()
    g = ff.grad(f)
    for sign in (1.0, -1.0, 1.0):
        fb = TR.STATS["fallbacks"]
        x = sign * np.linspace(0.1, 1, 3)
        tf = (lambda t: (t ** 2).sum() if t.sum() > 0 else t.sin().sum())
        np.testing.assert_allclose(g(fusegrad.tensor(x)).numpy(), torch.func.grad(tf)(torch.tensor(x)).numpy())
        assert TR.STATS["fallbacks"] == fb + 1
    assert g.cache_info()["direct_calls"] == 3 and g.cache_info()["compiles"] == 0


# ------------------------------------------------------------------ the two rewrites
def test_outer_product_matmul_becomes_a_broadcast_multiply():
    a, b = np.random.default_rng(2).standard_normal((2, 3, 5, 1)), np.random.default_rng(3).standard_normal((3, 1, 4))
    g = graph_of(lambda u, v: (u @ v).transpose(2, 3) * 2.0, [a, b], optimize=True)
    assert not any(e.prim is P.matmul for e in g.eqns)
    f = fusegrad.compile(lambda u, v: (u @ v).transpose(2, 3) * 2.0)
    np.testing.assert_allclose(f(fusegrad.tensor(a), fusegrad.tensor(b)).numpy(),
                               np.swapaxes(np.matmul(a, b), 2, 3) * 2.0, rtol=1e-14)


def test_transpose_of_an_elementwise_result_moves_to_its_operands():
    a, b = np.random.default_rng(4).standard_normal((3, 1, 6)), np.random.default_rng(5).standard_normal((3, 5, 6))
    fn = lambda u, v: (u * v + 1.0).permute(0, 2, 1)  # noqa: E731
    g = graph_of(fn, [a, b], optimize=True)
    last = g.eqns[-1]
    assert last.prim is not P.transpose and last.out is g.outputs[0]  # computed in the output's order
    np.testing.assert_allclose(fusegrad.compile(fn)(fusegrad.tensor(a), fusegrad.tensor(b)).numpy(),
                               np.transpose(a * b + 1.0, (0, 2, 1)), rtol=1e-14)
    def used_twice(u, v):  # the product is not computed twice
        m = u * v
        return m.permute(0, 2, 1), m
    g2 = graph_of(used_twice, [a, b], optimize=True)
    assert sum(e.prim is P.mul for e in g2.eqns) == 1


def test_ntk_under_compile_contracts_factored_jacobians():
    """compile of the neural tangent kernel (jacobians of each example contracted with each
    other): the weight Jacobians (outer products) are never formed; values as eager and as
    torch.func."""
    net, p = _mlp(fusegrad)
    tnet, _ = _mlp(torch)
    params = {k: fusegrad.tensor(v) for k, v in p.items()}
    tparams = {k: torch.tensor(v) for k, v in p.items()}

    def make(lib, net, params):
        jac = _ntk_jac(lib, net, params)

        def ntk(x1, x2):
            j1, j2 = jac(x1), jac(x2)
            return lib.stack([lib.einsum("Naf,Mbf->NMab", j1[k].flatten(2), j2[k].flatten(2)) for k in j1]).sum(0)
        return ntk
    rng = np.random.default_rng(7)
    x1, x2 = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    ntk = make(fusegrad, net, params)
    want = make(torch, tnet, tparams)(torch.tensor(x1), torch.tensor(x2)).numpy()
    c = fusegrad.compile(ntk)
    np.testing.assert_allclose(c(fusegrad.tensor(x1), fusegrad.tensor(x2)).numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ntk(fusegrad.tensor(x1), fusegrad.tensor(x2)).numpy(), want, rtol=1e-10, atol=1e-12)
    opt = c.lower(fusegrad.tensor(x1), fusegrad.tensor(x2)).ir("optimized")
    # a weight Jacobian of the batch of 4: (4, 3 outputs, 7, 7) or (4, 3, 7, 5) values
    assert "f64[4,3,7,7]" not in opt and "f64[4,3,7,5]" not in opt and "f64[4,3,3,7]" not in opt


def test_factored_contraction_of_outer_products():
    """A @ B.T with A, B reshapes of broadcast products p*q (factors in either order):
    two small matmuls and a product, equal to the direct contraction."""
    from fusegrad.passes.factor import factor_contractions
    rng = np.random.default_rng(8)
    p1, q1 = rng.standard_normal((3, 2, 4, 1)), rng.standard_normal((3, 1, 1, 5))
    p2, q2 = rng.standard_normal((1, 1, 5)), rng.standard_normal((6, 2, 4, 1))  # p2 broadcast over rows

    def fn(a, b, c, d):
        left = (a * b).reshape(6, 20)
        right = (c * d).reshape(12, 20)  # factors the other way round
        return left @ right.T
    g = graph_of(fn, [p1, q1, p2, q2])
    f = factor_contractions(g)
    big = [e for e in f.eqns if e.prim is P.matmul]
    assert len(big) == 2 and {e.inputs[0].shape[1] for e in big} == {4, 5}
    from fusegrad.passes.dce import dce
    from fusegrad.runtime.interpreter import run_arrays
    got = run_arrays(dce(f), [p1, q1, p2, q2])[0]
    np.testing.assert_allclose(got, (p1 * q1).reshape(6, 20) @ (q2 * p2).reshape(12, 20).T, rtol=1e-12)


def test_vjp_reuses_and_compiles_its_forward_and_backward_graphs():
    fn, tfn = vec(fusegrad, W), vec(torch, torch.tensor(W_NP))
    traces = None
    for i, k in enumerate((1.0, -0.5, 2.0)):
        x, ct = np.linspace(-1, 1, 4) * k, np.arange(4.0) - k
        out, f = ff.vjp(fn, fusegrad.tensor(x))
        tout, tf = torch.func.vjp(tfn, torch.tensor(x))
        np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)
        np.testing.assert_allclose(f(fusegrad.tensor(ct))[0].numpy(), tf(torch.tensor(ct))[0].numpy(), rtol=1e-10)
        if i == 0:
            traces = TR.STATS["traces"]
    assert TR.STATS["traces"] == traces
    e = next(iter(TR._CACHE[fn]._by_key.values()))[0]
    runners = [v for k, v in e.derived.items() if "runner" in str(k)]
    assert len(runners) == 2 and all(r.counts["compiles"] == 1 and r.counts["fused_calls"] == 1 for r in runners)


def test_transform_inside_compile_is_recorded_whole_where_binding_would_only_record(monkeypatch):
    """Inside compile's trace a transform's graph is appended in one step
    (runtime.interpreter._recorded) unless binding its ops one by one does more: operands
    that require grad, no_grad, outputs that are views of one base. Either way the compiled
    results and gradients are eager's."""
    from fusegrad.runtime import interpreter
    taken = []
    real = interpreter._recorded
    def recorded(graph, values):
        out = real(graph, values)
        taken.append(out is not None)
        return out
    monkeypatch.setattr(interpreter, "_recorded", recorded)
    x_np = np.random.default_rng(3).standard_normal((3, 4))
    f = lambda r: (r.sin() * r).sum()  # noqa: E731

    def compiled_once(fn, *args):
        taken.clear()
        return fusegrad.compile(fn)(*args), list(taken)

    g, path = compiled_once(lambda x: ff.vmap(ff.grad(f))(x) * 2, fusegrad.tensor(x_np))
    np.testing.assert_allclose(g.numpy(), 2 * (np.cos(x_np) * x_np + np.sin(x_np)), rtol=1e-12)
    assert path and all(path)

    w_np = np.linspace(-1.0, 1.0, 4)
    w = fusegrad.tensor(w_np, requires_grad=True)  # a captured parameter: its gradient is recorded op by op
    out, path = compiled_once(lambda x: ff.vmap(ff.grad(lambda r: (r.sin() * w).sum()))(x).sum(),
                              fusegrad.tensor(x_np))
    out.backward()
    np.testing.assert_allclose(out.item(), (np.cos(x_np) * w_np).sum(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), np.cos(x_np).sum(0), rtol=1e-12)
    assert path and not any(path)

    def under_no_grad(x):
        with fusegrad.no_grad():
            return ff.vmap(ff.grad(f))(x)
    g, path = compiled_once(under_no_grad, fusegrad.tensor(x_np))
    np.testing.assert_allclose(g.numpy(), np.cos(x_np) * x_np + np.sin(x_np), rtol=1e-12)
    assert path and not any(path)

    def loss_and_views(r):  # aux: a value and a view of it
        a = r * 2
        return (r * r).sum(), (a, a[:2])
    (g, (a, part)), path = compiled_once(lambda x: ff.grad(loss_and_views, has_aux=True)(x), fusegrad.tensor(x_np))
    np.testing.assert_allclose(g.numpy(), 2 * x_np, rtol=1e-12)
    np.testing.assert_allclose(part.numpy(), 2 * x_np[:2], rtol=1e-12)
    assert path and not any(path)


def test_derivatives_simplified_to_an_argument_are_new_tensors():
    """The gradient of ``(x * y).sum()`` with respect to x simplifies to y, and the tangent of
    ``x * 1.0`` to the tangent: each comes back as a tensor of its own (updating it leaves y
    alone) on the direct, interpreted and compiled calls and under compile, as PyTorch's
    does; the tangent of an identity is still the tangent passed in, as in PyTorch. Two
    results that CSE merged do not share memory either."""
    def run(lib, call):
        x, y = lib.arange(3.0), lib.arange(3.0) + 10
        gx, gy = call(lib, x, y)
        gx.add_(100.0)
        _, t = lib.func.jvp(lambda v: v * 1.0, (x,), (y,))
        _, t_id = lib.func.jvp(lambda v: v, (x,), (y,))
        return y.numpy().copy(), gx.numpy().copy(), gy.numpy().copy(), t is y, t_id is y

    grad = lambda lib, x, y: lib.func.grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x, y)  # noqa: E731
    # aux values that CSE merges into one (one of them a slice): still two tensors of their own
    pair = fusegrad.func.grad(lambda r: ((r * r).sum(), (r * 2, (r * 2)[:2])), has_aux=True)
    for call in range(3):  # direct, interpreted, compiled
        _, (a, b) = pair(fusegrad.arange(6.0))
        b.add_(100.0)
        np.testing.assert_array_equal(a.numpy(), 2 * np.arange(6.0))
    want = run(torch, grad)
    assert want[3:] == (False, True)
    compiled = fusegrad.compile(lambda x, y: grad(fusegrad, x, y))
    for call in [grad] * 3 + [lambda lib, x, y: compiled(x, y)] * 2:
        got = run(fusegrad, call)
        for a, b in zip(got[:3], want[:3]):
            np.testing.assert_array_equal(a, b)
        assert got[3:] == want[3:]


def test_print_and_side_effects_in_transformed_functions_run_once_per_call():
    """``print`` and a list append in a function under ``func.grad`` (first and later calls)
    run once per call as in torch.func (the capture's trace printed, then its fallback again)."""
    import contextlib
    import io
    calls = []

    def loss(w):
        calls.append(1)
        print("loss called")
        return (w.sin() ** 2).sum()
    g = fusegrad.func.grad(loss)
    for _ in range(3):
        before, buf = len(calls), io.StringIO()
        with contextlib.redirect_stdout(buf):
            g(fusegrad.ones(5))
        assert len(calls) - before == 1 and buf.getvalue() == "loss called\n"
