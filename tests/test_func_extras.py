"""fusegrad.func extras against torch.func: vmap randomness, autograd.grad with
is_grads_batched, linearize, functionalize and the transforms' torch signatures."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad
import fusegrad.func as ff
import fusegrad.nn.functional as fF

torch = pytest.importorskip("torch")
import torch.func as tf  # noqa: E402

pytestmark = pytest.mark.torch


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, **kw):
    np.testing.assert_allclose(_np(a), _np(b), **{"rtol": 1e-10, "atol": 1e-12, **kw})


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---------------------------------------------------------------- vmap randomness
def _error_message(lib, vmap):
    with pytest.raises(RuntimeError) as ex:
        vmap(lambda x: x + lib.rand(3))(lib.zeros(4, 3))
    return str(ex.value)


def test_randomness_error_mode_message_matches_torch():
    assert _error_message(fusegrad, ff.vmap) == _error_message(torch, tf.vmap)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_random_shapes_match_torch(randomness):
    def f(lib):
        return lambda x: (x.sum() + lib.rand(2, 3), lib.randn(5))
    got = ff.vmap(f(fusegrad), randomness=randomness)(fusegrad.zeros(4, 7))
    want = tf.vmap(f(torch), randomness=randomness)(torch.zeros(4, 7))
    assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]


def test_different_draws_independent_rows_and_calls():
    f = ff.vmap(lambda x: x + fusegrad.rand(2000), randomness="different")
    calls = [_np(f(fusegrad.zeros(3, 1))) for _ in range(4)]  # interpreted, then compiled
    rows = np.concatenate(calls)
    assert rows.shape == (12, 2000) and rows.min() >= 0 and rows.max() < 1
    # every row (of every call) is its own uniform sample: no row repeats another, means
    # near 1/2, pairwise correlations near 0 (sd of a correlation of 2000 pairs: ~0.022)
    assert len({r.tobytes() for r in rows}) == len(rows)
    assert np.all(np.abs(rows.mean(1) - 0.5) < 0.03)
    c = np.corrcoef(rows)
    assert np.max(np.abs(c[np.triu_indices(len(rows), 1)])) < 0.1


def test_different_normal_statistics():
    f = ff.vmap(lambda x: x + fusegrad.randn((), dtype=fusegrad.float64), randomness="different")
    z = _np(f(fusegrad.zeros(20000, dtype=fusegrad.float64)))
    assert len(np.unique(z)) == z.size
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03


def test_same_draws_one_sample_for_the_batch():
    f = ff.vmap(lambda x: x + fusegrad.rand(50), randomness="same")
    a, b = _np(f(fusegrad.zeros(6, 1))), _np(f(fusegrad.zeros(6, 1)))
    assert np.all(a == a[0]) and not np.array_equal(a[0], b[0])


def test_nested_different():
    f = ff.vmap(ff.vmap(lambda x: x + fusegrad.rand(()), randomness="different"), randomness="different")
    z = _np(f(fusegrad.zeros(5, 4)))
    assert z.shape == (5, 4) and len(np.unique(z)) == 20


def test_dropout_different_masks():
    x = np.ones((8, 400), dtype=np.float32)
    got = _np(ff.vmap(lambda r: fF.dropout(r, 0.5), randomness="different")(fusegrad.tensor(x)))
    want = tf.vmap(lambda r: torch.nn.functional.dropout(r, 0.5), randomness="different")(torch.tensor(x))
    assert got.shape == tuple(want.shape)
    assert set(np.unique(got)) <= {0.0, 2.0}
    assert np.all(np.abs((got == 0).mean(1) - 0.5) < 0.1)
    assert len({tuple(r) for r in got == 0}) == 8


# ---------------------------------------------------------------- is_grads_batched
def _batched_jacobian(lib, xn, create_graph=False):
    x = lib.tensor(xn, requires_grad=True)
    y = lib.sin(x) * (x * x).sum()
    j, = lib.autograd.grad(y, x, lib.eye(3, dtype=lib.float64), is_grads_batched=True, create_graph=create_graph)
    return x, j


def test_grads_batched_jacobian_matches_torch():
    xn = _arr(3)
    _close(_batched_jacobian(fusegrad, xn)[1], _batched_jacobian(torch, xn)[1])


def test_grads_batched_create_graph_matches_torch():
    xn = _arr(3, seed=1)
    got = [fusegrad.autograd.grad(j.sum(), x)[0] for x, j in [_batched_jacobian(fusegrad, xn, True)]]
    want = [torch.autograd.grad(j.sum(), x)[0] for x, j in [_batched_jacobian(torch, xn, True)]]
    _close(got[0], want[0])


def test_grads_batched_several_outputs_and_unused():
    an, bn, gn = _arr(4, seed=2), _arr(2, 4, seed=3), _arr(5, 2, seed=4)

    def run(lib):
        a, b, u = (lib.tensor(v, requires_grad=True) for v in (an, bn, an))
        outs = ((a * b).sum(1), a.exp())
        gs = (lib.tensor(gn), lib.tensor(np.tile(an, (5, 1))))
        return lib.autograd.grad(outs, (a, b, u), gs, is_grads_batched=True, allow_unused=True)
    got, want = run(fusegrad), run(torch)
    assert got[2] is None and want[2] is None
    for g, w in zip(got[:2], want[:2]):
        _close(g, w)


def test_grads_batched_shape_error():
    def msg(lib):
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError) as ex:
            lib.autograd.grad(x * 2, x, lib.ones(2, 4), is_grads_batched=True)
        return str(ex.value)
    head = "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch dimension."
    assert msg(fusegrad).startswith(head) and msg(torch).startswith(head)


# ---------------------------------------------------------------- linearize
_LINEARIZE = [
    (lambda lib: lambda x: lib.sin(x) * x.exp(), [(4,)]),
    (lambda lib: lambda x, w: lib.tanh(x @ w).sum(0), [(3, 4), (4, 2)]),
    (lambda lib: lambda x, y: (x * y, (x / (1 + y * y)).cumsum(0)), [(5,), (5,)]),
]


@pytest.mark.parametrize("case", range(len(_LINEARIZE)))
def test_linearize_matches_torch(case):
    make, shapes = _LINEARIZE[case]
    primals = [_arr(*s, seed=i) for i, s in enumerate(shapes)]
    got_out, got_fn = ff.linearize(make(fusegrad), *[fusegrad.tensor(p) for p in primals])
    want_out, want_fn = tf.linearize(make(torch), *[torch.tensor(p) for p in primals])
    for g, w in zip(_leaves(got_out), _leaves(want_out)):
        _close(g, w)
    for k in range(3):  # the same jvp_fn, new tangents each time
        tangents = [_arr(*s, seed=10 * k + i + 5) for i, s in enumerate(shapes)]
        got = got_fn(*[fusegrad.tensor(t) for t in tangents])
        want = want_fn(*[torch.tensor(t) for t in tangents])
        for g, w in zip(_leaves(got), _leaves(want)):
            _close(g, w)


def _leaves(x):
    return [l for v in x for l in _leaves(v)] if isinstance(x, (tuple, list)) else [x]


def test_linearize_checks_tangents():
    _, fn = ff.linearize(fusegrad.sin, fusegrad.ones(3))
    with pytest.raises(RuntimeError, match=r"tangent:0 with shape .* doesn't match the shape"):
        fn(fusegrad.ones(4))


# ---------------------------------------------------------------- functionalize
def _mutating(lib):
    def f(x):
        y = x.clone()
        y.add_(1)           # an intermediate
        y[0] = 7.0
        x.mul_(2)           # an input
        return (y * x).sin()
    return f


def test_functionalize_matches_torch_and_mutates_input():
    xn = _arr(3, 4)
    xg, xt = fusegrad.tensor(xn), torch.tensor(xn)
    _close(ff.functionalize(_mutating(fusegrad))(xg), tf.functionalize(_mutating(torch))(xt))
    _close(xg, xt)
    _close(xg, 2 * xn)


def test_functionalize_output_does_not_alias_input():
    def r(x):
        x.add_(1)
        return x
    for lib, fz in ((fusegrad, ff.functionalize), (torch, tf.functionalize)):
        a = lib.ones(2)
        out = fz(r)(a)
        assert out is not a and out.data_ptr() != a.data_ptr()
        _close(a, [2.0, 2.0])


def test_functionalize_under_vmap_matches_torch():
    xn = _arr(4, 3, 2)
    for _ in range(3):  # interpreted, then compiled
        xg, xt = fusegrad.tensor(xn), torch.tensor(xn)
        _close(ff.vmap(ff.functionalize(_mutating(fusegrad)))(xg), tf.vmap(tf.functionalize(_mutating(torch)))(xt))
        _close(xg, xt)


def test_vmap_writes_back_argument_updates():
    xn = _arr(3, 4)
    xg, xt = fusegrad.tensor(xn), torch.tensor(xn)
    _close(ff.vmap(_mutating(fusegrad), in_dims=1)(xg), tf.vmap(_mutating(torch), in_dims=1)(xt))
    _close(xg, xt)


def test_functionalize_under_grad_matches_torch():
    def g(lib):
        def f(x):
            y = x * 1
            y.mul_(3)
            y.add_(x.sin())
            return (y * y).sum()
        return f
    xn = _arr(5)
    _close(ff.grad(ff.functionalize(g(fusegrad)))(fusegrad.tensor(xn)),
           tf.grad(tf.functionalize(g(torch)))(torch.tensor(xn)))


def test_functionalize_bad_remove():
    for fz in (ff.functionalize, tf.functionalize):
        with pytest.raises(RuntimeError, match="received invalid argument for remove=x"):
            fz(lambda x: x, remove="x")


# ---------------------------------------------------------------- signatures
def test_jacobian_signatures_match_torch():
    xn = _arr(3)

    def f(lib):
        return lambda x: lib.sin(x) * x.sum()
    _close(ff.jacrev(f(fusegrad), chunk_size=1)(fusegrad.tensor(xn)),
           tf.jacrev(f(torch), chunk_size=1)(torch.tensor(xn)))
    _close(ff.jacfwd(f(fusegrad), randomness="same")(fusegrad.tensor(xn)),
           tf.jacfwd(f(torch), randomness="same")(torch.tensor(xn)))
    _close(ff.hessian(lambda x: f(fusegrad)(x).sum(), 0)(fusegrad.tensor(xn)),
           tf.hessian(lambda x: f(torch)(x).sum(), 0)(torch.tensor(xn)))


def test_vjp_has_aux_matches_torch():
    xn, cn = _arr(4), _arr(4, seed=1)

    def run(lib, vjp):
        out, fn, aux = vjp(lambda x: (x.exp() * x, {"s": x.sum()}), lib.tensor(xn), has_aux=True)
        return out, fn(lib.tensor(cn))[0], aux["s"]
    for g, w in zip(run(fusegrad, ff.vjp), run(torch, tf.vjp)):
        _close(g, w)


def test_grad_pytree_inputs_match_torch():
    pn = {"w": _arr(3, 2), "b": (_arr(2, seed=1), _arr(2, seed=2))}

    def run(lib, grad):
        p = {"w": lib.tensor(pn["w"]), "b": tuple(lib.tensor(b) for b in pn["b"])}
        x = lib.ones(4, 3, dtype=lib.float64)
        return grad(lambda p, x: ((x @ p["w"] + p["b"][0]) * p["b"][1]).tanh().sum())(p, x)
    got, want = run(fusegrad, ff.grad), run(torch, tf.grad)
    _close(got["w"], want["w"])
    for g, w in zip(got["b"], want["b"]):
        _close(g, w)


def test_argument_checks_match_torch():
    def err(call):
        with pytest.raises((ValueError, RuntimeError)) as ex:
            call()
        return type(ex.value), str(ex.value)
    for kw in (dict(chunk_size=0), dict(randomness="x")):
        assert err(lambda: ff.vmap(fusegrad.sin, **kw)(fusegrad.ones(2))) == \
            err(lambda: tf.vmap(torch.sin, **kw)(torch.ones(2)))
    assert err(lambda: ff.jacrev(fusegrad.sin, chunk_size=0)(fusegrad.ones(2))) == \
        err(lambda: tf.jacrev(torch.sin, chunk_size=0)(torch.ones(2)))


def test_jacfwd_has_aux_positional_as_torch():
    xn = _arr(3)
    got, gaux = ff.jacfwd(lambda x: (x.sin(), x.cos()), 0, True)(fusegrad.tensor(xn))
    want, waux = tf.jacfwd(lambda x: (x.sin(), x.cos()), 0, True)(torch.tensor(xn))
    _close(got, want)
    _close(gaux, waux)


def test_linearize_untraceable_function_runs_eagerly():
    xn = _arr(4)

    def f(x):  # data-dependent control flow: not traceable
        return 2 * x.sin() if x.sum().item() > -100 else x
    out, fn = ff.linearize(f, fusegrad.tensor(xn))
    _close(out, 2 * np.sin(xn))
    for k in range(2):
        tn = _arr(4, seed=k + 1)
        _close(fn(fusegrad.tensor(tn)), 2 * np.cos(xn) * tn)


def test_functional_call_ties_weights_and_checks_keys_as_torch():
    """functional_call replaces a tied weight under all its names (tie_weights=True, the
    default), not with tie_weights=False, and strict=True names unexpected and missing keys."""

    def run(lib):
        class Tied(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(2, 2, bias=False)
                self.b = lib.nn.Linear(2, 2, bias=False)
                self.b.weight = self.a.weight

            def forward(self, x):
                return self.b(self.a(x))
        m = Tied()
        with lib.no_grad():
            m.a.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        x, fc = lib.tensor([[1.0, 1.0]]), lib.func.functional_call
        out = [fc(m, {"a.weight": lib.eye(2) * 2}, (x,)).tolist(),
               fc(m, {"a.weight": lib.eye(2) * 2}, (x,), tie_weights=False).tolist()]
        for bad in ({"a.weight": lib.eye(2), "zzz": lib.ones(1)}, {}):
            with pytest.raises(RuntimeError) as e:
                fc(m, bad, (x,), strict=True)
            out.append(str(e.value))
        with pytest.raises(ValueError, match="tied"):
            fc(m, {"a.weight": lib.eye(2), "b.weight": lib.eye(2) * 3}, (x,))
        return out

    assert run(fusegrad) == run(torch)


def test_jacobians_of_distribution_methods_compile(monkeypatch):
    """compile(jacfwd/jacrev(...)) of a distribution's log_prob/entropy: argument validation
    breaks the graph, and the transforms' eager fallback builds its one-hot directions as
    constants (they were arrays written in place, a traced value's there), as PyTorch's.
    (The default SEGMENT_MIN_WORK: the first call runs in segments, later ones eagerly.)"""
    from fusegrad.runtime import segments
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", 1 << 16)
    D, TD = fusegrad.distributions, torch.distributions
    x0 = np.array([0.3, -1.2, 2.0])
    cases = [("jacfwd", lambda d: lambda x: d.Normal(x, 1.0).log_prob(x * 0.0)),
             ("jacrev", lambda d: lambda x: d.Categorical(logits=x).entropy())]
    for jac, make in cases:
        f = fusegrad.compile(lambda z: getattr(fusegrad.func, jac)(make(D))(z))
        want = getattr(torch.func, jac)(make(TD))(torch.tensor(x0)).numpy()
        for _ in range(2):
            np.testing.assert_allclose(f(fusegrad.tensor(x0)).numpy(), want, rtol=1e-12, atol=1e-15)


def test_jvp_and_a_call_of_the_same_function_compile(monkeypatch):
    """jvp(f) then f itself, f creating a tensor (ones) and solving (a graph break) inside
    one compiled function: the constants the transform's graph creates are computed at the
    break like every other tensor (they were "used after the trace ended")."""
    from fusegrad.runtime import segments
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", 1 << 16)
    s0 = np.array([[4.0, 1, 0], [1, 3, 0.5], [0, 0.5, 2]])

    def g(lib, a):
        f = lambda z: lib.linalg.solve(z, lib.ones(3, dtype=lib.float64))  # noqa: E731
        return lib.func.jvp(f, (a,), (a,))[1], f(a), lib.func.jacfwd(f)(a)
    want = g(torch, torch.tensor(s0))
    got = fusegrad.compile(lambda a: g(fusegrad, a))(fusegrad.tensor(s0))
    for ours, theirs in zip(got, want):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_vmap_out_dims_as_a_dict_matching_a_dict_output():
    """out_dims given as a pytree of the output's structure (a dict), as torch.func takes it."""
    f = lambda d, x: {"a": (d["w"] * x).sum(), "b": d["w"] + x}  # noqa: E731
    w = fusegrad.tensor(np.arange(6.0).reshape(3, 2))
    r = ff.vmap(f, in_dims=({"w": 0}, None), out_dims={"a": 0, "b": 1})({"w": w}, fusegrad.ones(2))
    assert tuple(r["a"].shape) == (3,) and tuple(r["b"].shape) == (2, 3)
    np.testing.assert_allclose(r["b"].numpy(), (w.numpy() + 1).T)
    np.testing.assert_allclose(r["a"].numpy(), w.numpy().sum(1))
