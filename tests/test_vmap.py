"""fusegrad.func.vmap (the batching pass) against torch.func.vmap."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad
import fusegrad.func as ff
import fusegrad.nn.functional  # noqa: F401  (m.nn.functional below)
from fusegrad.passes import batching
from helpers import tensors

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _arr(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def _leaves(x):
    if isinstance(x, dict):
        return [l for v in x.values() for l in _leaves(v)]
    if isinstance(x, (tuple, list)):
        return [l for v in x for l in _leaves(v)]
    return [x]


def check(make, *inputs, no_fallback=True, **kw):
    """Compare vmap(make(lib)) for fusegrad and torch on the same inputs (float64)."""
    before = batching.STATS["fallback"]
    ours = ff.vmap(make(fusegrad), **kw)(*tensors(inputs, fusegrad))
    used = batching.STATS["fallback"] - before
    ref = torch.func.vmap(make(torch), **kw)(*tensors(inputs, torch))
    for a, b in zip(_leaves(ours), _leaves(ref), strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-8)
    if no_fallback:
        assert used == 0, "a rule-covered primitive took the generic fallback"


def test_elementwise_broadcast_scalars():
    check(lambda m: lambda x, y: m.exp(x) * y + 2.0 - m.tanh(y) / 3, _arr(4, 3, 2), _arr(4, 2))
    check(lambda m: lambda x, y: m.where(x > 0, x, y * 0.5), _arr(5, 3), _arr(3), in_dims=(0, None))


def test_reductions():
    check(lambda m: lambda x: (x.sum(0), x.sum(-1, keepdim=True), x.amax(1), x.mean()), _arr(4, 3, 5))
    check(lambda m: lambda x: (x.argmax(1), x.cumsum(0), x.prod(-1)), _arr(4, 3, 5))


def test_matmul_family():
    check(lambda m: lambda a, b: a @ b, _arr(4, 3, 5), _arr(4, 5, 2))
    check(lambda m: lambda a, b: a @ b, _arr(4, 3, 5), _arr(5, 2), in_dims=(0, None))
    check(lambda m: lambda a, b: a @ b, _arr(3, 5), _arr(2, 4, 5, 2), in_dims=(None, 1))
    check(lambda m: lambda a, b: (m.dot(a, b), m.outer(a, b)), _arr(6, 3), _arr(6, 3))
    check(lambda m: lambda a, b: m.bmm(a, b), _arr(4, 2, 3, 5), _arr(4, 2, 5, 2))


def test_indexing_and_layout():
    check(lambda m: lambda x: (x[1:, ::2], x[0], x.T, x.reshape(-1), x.flip(0)), _arr(3, 4, 6))
    check(lambda m: lambda x: (m.cat([x, x * 2], 1), m.nn.functional.pad(x, (1, 2))), _arr(3, 4, 6))
    idx = np.array([[0, 2], [1, 1], [3, 0]])
    check(lambda m: lambda x: m.gather(x, 1, m.tensor(idx)), _arr(5, 3, 4))
    check(lambda m: lambda x: x[m.tensor([2, 0, 1])], _arr(5, 3, 4))
    check(lambda m: lambda x: x.unsqueeze(0).expand(2, 4, 6), _arr(3, 4, 6))


def test_softmax_family():
    check(lambda m: lambda x: (m.softmax(x, -1), m.log_softmax(x, 0)), _arr(4, 3, 5))


def test_in_dims_out_dims():
    check(lambda m: lambda x, y: x * y.sum(), _arr(3, 4), _arr(4, 3), in_dims=(1, 0))
    check(lambda m: lambda x: (x * 2, x.sum()), _arr(4, 3), out_dims=(1, 0))
    check(lambda m: lambda x, y: x + 1, _arr(4, 3), _arr(2), in_dims=(0, None))


def test_nested():
    check(lambda m: m.func.vmap(lambda x, y: (x * y).sum()), _arr(3, 4, 5), _arr(3, 4, 5))
    check(lambda m: lambda x: m.func.vmap(lambda r: r @ x)(x), _arr(3, 4, 4))


def test_per_sample_grad():
    w = _arr(3, 2)

    def make(m):
        def loss(p, x, y):
            return ((m.tanh(x @ p) - y) ** 2).sum()
        return m.func.grad(loss)
    check(make, w, _arr(6, 3), _arr(6, 2), in_dims=(None, 0, 0))


def test_jacrev():
    check(lambda m: m.func.jacrev(lambda x: m.sin(x) * x.sum()), _arr(4, 3))


def test_dict_inputs():
    check(lambda m: lambda d: d["a"] @ d["b"] + d["c"],
          {"a": _arr(4, 2, 3), "b": _arr(4, 3, 2), "c": _arr(2)}, in_dims=({"a": 0, "b": 0, "c": None},))


def test_fallback_untraceable_and_errors():
    def f(x):
        return x * 2 if float(x.sum()) > 0 else -x
    x = fusegrad.tensor(_arr(5, 3))
    ref = torch.stack([f(r) for r in torch.tensor(x.numpy())])
    np.testing.assert_allclose(ff.vmap(f)(x).numpy(), ref.numpy())
    with pytest.raises(ValueError):
        ff.vmap(lambda a, b: a + b)(x, fusegrad.tensor(_arr(4, 3)))
    with pytest.raises(ValueError):
        ff.vmap(lambda a: a, in_dims=(0, 0))(x)


def test_generic_fallback_counts():
    before = batching.STATS["fallback"]
    x = fusegrad.tensor(_arr(4, 3))
    out = batching.fallback(fusegrad.ir.prims.exp, [x], [0], {})[0]
    np.testing.assert_allclose(out.numpy(), np.exp(x.numpy()))
    assert batching.STATS["fallback"] == before + 1


def test_grad_through_vmap():
    x = fusegrad.tensor(_arr(4, 3), requires_grad=True)
    ff.vmap(lambda r: (r * r).sum())(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


def test_vmap_under_outer_trace():
    """vmap inside a traced (compiled) function records the batched primitives only."""
    from fusegrad.runtime.interpreter import run_arrays
    from fusegrad.tracer.trace import trace_function
    w = fusegrad.tensor(_arr(3, 5))
    x = fusegrad.tensor(_arr(4, 3))
    before = batching.STATS["fallback"]
    tr, _, out = trace_function(ff.vmap(lambda a: fusegrad.tanh(a @ w).sum(-1)), [x])
    tr.graph.outputs = [out._data]
    assert batching.STATS["fallback"] == before and tuple(out.shape) == (4,)
    got = run_arrays(tr.graph, [x.numpy()] + [c.numpy() for _, c in tr.graph.consts])[0]
    np.testing.assert_allclose(got, np.tanh(x.numpy() @ w.numpy()).sum(-1), rtol=1e-6)


def test_in_place_updates_of_captured_tensors_happen_once_or_raise_as_torch():
    """The mapped function runs once, as torch.func's: an unbatched update of a captured
    tensor (a counter) is applied once; a batched one (a buffer summing the examples,
    batch norm's running statistics in training) raises RuntimeError (a loop over the
    examples applied it per example, silently)."""
    torch = pytest.importorskip("torch")
    results = []
    for lib in (fusegrad, torch):
        func = ff if lib is fusegrad else torch.func
        cnt = lib.zeros(1)

        def f(t):
            cnt.add_(1)
            return t * cnt
        out = func.vmap(f)(lib.ones(4, 2))
        results.append((out.tolist(), cnt.tolist()))
        buf = lib.zeros(3)

        def g(t):
            buf.add_(t)
            return t * 2
        with pytest.raises(RuntimeError):
            func.vmap(g)(lib.ones(4, 3))
        bn = lib.nn.BatchNorm1d(2)
        with pytest.raises(RuntimeError):
            func.vmap(bn)(lib.arange(12.0).view(3, 2, 2))
        results.append(bn.running_mean.tolist())
    assert results[:2] == results[2:]


def test_the_per_example_loop_keeps_the_randomness_flag():
    """A function vmap cannot trace (a custom autograd.Function) runs per example; its
    random draws still follow ``randomness``: "same" gives every example one draw,
    "different" independent ones, "error" raises as torch.func does."""
    class Sq(fusegrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            return 2 * ctx.saved_tensors[0] * g

    def f(t):
        return fusegrad.nn.functional.dropout(Sq.apply(t), 0.5) + fusegrad.rand(6)

    x = fusegrad.ones(4, 6)
    same = ff.vmap(f, randomness="same")(x)
    assert bool((same == same[0]).all())
    different = ff.vmap(f, randomness="different")(x)
    assert not bool((different == different[0]).all())
    with pytest.raises(RuntimeError, match="randomness error mode"):
        ff.vmap(f)(x)


def test_out_dims_non_tensor_outputs_range_and_type_as_torch_func():
    """torch.func's out_dims rules: a non-tensor output comes back as it is where its out_dims
    is None (else the ValueError), an out_dims outside an output's dims raises IndexError,
    and one that is no int, None or collection of them raises ValueError."""
    torch = pytest.importorskip("torch")

    def run(m):
        x = m.ones(4, 3)
        out = [m.func.vmap(lambda t: 3, out_dims=None)(x)]
        r, n = m.func.vmap(lambda t: (t * 2, t.shape[0]), out_dims=(0, None))(x)
        out += [list(r.shape), n, list(m.func.vmap(lambda t: t * 2, out_dims=-2)(x).shape)]
        for f, od in ((lambda t: (t * 2, 3), 0), (lambda t: t * 2, 2), (lambda t: t * 2, -3), (lambda t: t.sum(), 1),
                      (lambda t: t * 2, "0"), (lambda t: (t, t), (1, 1))):
            try:
                res = m.func.vmap(f, out_dims=od)(x)
                out.append([list(o.shape) for o in res] if isinstance(res, tuple) else list(res.shape))
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
        return out
    assert run(fusegrad) == run(torch)
