"""Float arguments that change between calls are read at each call (tracer.dynamic_float):
one compile for the first values, one for every later value, with PyTorch's results,
dtypes and gradients; a comparison guards the graph, any other use compiles each value."""
from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad
from fusegrad.runtime import compiled

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
XA = np.linspace(0.1, 1.0, 8)


def test_float_arguments_compile_twice_and_match_torch():
    def f(x, s):
        return (x * s).sin().sum() + (s * x).mean() + (x - s).exp().sum() / 3 + (x / s).sum()

    cf = fusegrad.compile(f)
    x = fusegrad.tensor(XA.astype(np.float32))
    for i in range(10):
        s = 0.1 * i + 0.05
        got = cf(x, s)
        assert got.dtype == fusegrad.float32
        np.testing.assert_allclose(got.item(), f(torch.tensor(XA.astype(np.float32)), s).item(), rtol=2e-6)
    info = cf.cache_info()
    assert info["compiles"] == 2 and info["hits"] == 8, info


def test_weak_promotion_and_gradients_read_each_calls_value():
    """An integer tensor times a float is of the default dtype; a gradient computed after
    later calls uses its own call's value (the float is a saved input, not a shared holder)."""
    m = fusegrad.compile(lambda x, s: x * s)
    for s in (0.5, 1.5, 2.5):
        got = m(fusegrad.tensor([1, 2, 3]), s)
        assert got.dtype == fusegrad.float32
        np.testing.assert_allclose(got.numpy(), torch.tensor([1, 2, 3]) * s)
    k = fusegrad.compile(lambda x, s: (x * s).sin())
    x = fusegrad.tensor(XA, requires_grad=True)
    tx = torch.tensor(XA, requires_grad=True)
    scales = (0.5, 1.5, 2.5, 3.5)
    sum(k(x, s).sum() for s in scales).backward()
    sum((tx * s).sin().sum() for s in scales).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
    assert k.cache_info()["compiles"] == 2


def test_a_comparison_guards_and_other_uses_compile_each_value():
    def g(x, s):
        return x * s if s > 0.5 else x - s

    cg = fusegrad.compile(g)
    x = fusegrad.tensor(XA)
    for s in (0.1, 0.2, 0.7, 0.9, 0.3, 0.8, 0.4):
        np.testing.assert_allclose(cg(x, s).numpy(), g(torch.tensor(XA), s).numpy(), rtol=1e-15)
    assert cg.cache_info()["compiles"] == 3  # the first value, then one graph per outcome
    h = fusegrad.compile(lambda x, s: x * math.sqrt(s))
    for s in (0.1, 0.2, 0.7):
        np.testing.assert_allclose(h(x, s).numpy(), XA * math.sqrt(s), rtol=1e-15)
    info = h.cache_info()
    assert info["compiles"] == 3 and any("used as a number" in n for n in info["notes"]), info
    for s in (0.3, 0.4, 0.2):  # (compiled.VALUE_LIMIT: new values run eagerly; a seen one is compiled)
        np.testing.assert_allclose(h(x, s).numpy(), XA * math.sqrt(s), rtol=1e-15)
    info = h.cache_info()
    assert info["compiles"] == 3 and info["fallbacks"] == 2 and info["hits"] == 1, info
    assert any("new values run eagerly" in n for n in info["notes"]), info
    kept = []
    keep = fusegrad.compile(lambda x, s: (kept.append(s), x * s)[1])
    for s in (0.1, 0.2, 0.7):
        np.testing.assert_allclose(keep(x, s).numpy(), XA * s, rtol=1e-15)
    assert kept == [0.1, 0.2, 0.7]  # (a side effect: the Python runs at every call)
    static = fusegrad.compile(lambda x, s: x * s, dynamic=False)
    for s in (0.1, 0.2, 0.7):
        np.testing.assert_allclose(static(x, s).numpy(), XA * s, rtol=1e-15)
    assert static.cache_info()["compiles"] == 3


def test_a_training_step_taking_its_learning_rate():
    def make(T, seed):
        g = np.random.default_rng(seed)
        w = T.tensor(g.standard_normal((4, 3)), requires_grad=True)
        return w, T.tensor(g.standard_normal((16, 4))), T.tensor(g.standard_normal((16, 3)))

    def step(w, x, y, lr):
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with w.__class__.__module__.startswith("torch") and torch.no_grad() or fusegrad.no_grad():
            w -= lr * w.grad
        w.grad = None
        return loss

    cstep = fusegrad.compile(step)
    (w, x, y), (tw, tx, ty) = make(fusegrad, 0), make(torch, 0)
    for i in range(6):
        lr = 0.1 / (i + 1)
        np.testing.assert_allclose(cstep(w, x, y, lr).item(), step(tw, tx, ty, lr).item(), rtol=1e-13)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-13)
    assert cstep.cache_info()["compiles"] <= 3, cstep.cache_info()


def test_int_arguments_and_arithmetic_on_number_arguments():
    """A step taking a learning rate and a step index that change every call (a warm-up
    factor computed from both in Python): a few compiles, not one per value, with torch's
    results; an int argument keeps an integer tensor's dtype; an int used as an index
    compiles per value."""
    def make(T):
        w = T.tensor(np.linspace(-1.0, 1.0, 12).reshape(4, 3), requires_grad=True)

        def step(x, lr, t):
            warm = min(1.0, (t + 1) / 3) * (2 - lr) ** 2 / (1 + t % 2) + t // 4 - abs(-lr)
            loss = ((x @ w) ** 2).mean() * warm
            (g,) = T.autograd.grad(loss, w)
            with T.no_grad():
                w.sub_(lr * g)
            return loss.detach()
        return w, step

    (w, step), (tw, tstep) = make(fusegrad), make(torch)
    cstep = fusegrad.compile(step)
    x = np.linspace(0.5, 1.5, 8).reshape(2, 4)
    for t in range(12):
        got = cstep(fusegrad.tensor(x), 0.5 / (1 + t), t)
        want = tstep(torch.tensor(x), 0.5 / (1 + t), t)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12)
    info = cstep.cache_info()
    assert info["compiles"] <= 3 and info["fallbacks"] == 0, info

    ints = fusegrad.compile(lambda a, k: a * k + k)
    for k in (2, 3, 4):
        got = ints(fusegrad.tensor([1, 2], dtype=fusegrad.int32), k)
        assert got.dtype == fusegrad.int32 and got.tolist() == [k + k, 2 * k + k]
    assert ints.cache_info()["compiles"] == 2
    index = fusegrad.compile(lambda a, k: a[k] * 2)
    for k in (0, 1, 2):
        assert index(fusegrad.tensor([1.0, 2.0, 3.0]), k).item() == 2.0 * (k + 1)
    assert any("used as a number" in n for n in index.cache_info()["notes"])


BETA = 0.0


def _annealed(x, w):
    return (x * w).pow(2).mean() + BETA * (x * w).abs().mean() * min(1.0, 2 * BETA)


def test_a_global_number_changed_every_call_is_read_at_each_call():
    """A global float changed before every call (a KL-annealing weight) is read at each call
    after its first change: 2 compiles with torch's results (it compiled at every call, then
    ran eagerly); a closure variable too; one used as an index compiles per value."""
    global BETA
    f = fusegrad.compile(_annealed)
    x, w = fusegrad.tensor(XA), fusegrad.tensor(XA[::-1].copy())
    for it in range(10):
        BETA = it / 12
        np.testing.assert_allclose(f(x, w).item(), _annealed(torch.tensor(XA), torch.tensor(XA[::-1].copy())).item(),
                                   rtol=1e-12)
    assert f.cache_info()["compiles"] <= 3 and f.cache_info()["fallbacks"] == 0, f.cache_info()

    def make():
        k = 0
        g = fusegrad.compile(lambda t: t[k] * 2)

        def call(value):
            nonlocal k
            k = value
            return g(x).item()
        return call, g
    call, g = make()
    assert [call(i) for i in range(4)] == [2 * XA[i] for i in range(4)]
    assert any("used as a number" in n for n in g.cache_info()["notes"]), g.cache_info()


def test_a_decoding_position_with_a_growing_cache_stops_compiling():
    """A KV-cache decoding step: the position (a slice bound) and the cache's length change
    together at every call. The int is seen to be needed as a number across sizes, so
    new values run eagerly after VALUE_LIMIT compiles (not one compile per step)."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((32, 3))

    def step(lib, x, pos, cache):
        cache = lib.cat([cache, x], dim=1)
        return (cache * lib.tensor(table)[pos:pos + 1].unsqueeze(0)).sum(1), cache

    cs = fusegrad.compile(lambda x, pos, cache: step(fusegrad, x, pos, cache))
    c0 = rng.standard_normal((2, 4, 3))
    caches = {lib: lib.tensor(c0) for lib in (fusegrad, torch)}
    for pos in range(4, 16):
        x = rng.standard_normal((2, 1, 3))
        got, caches[fusegrad] = cs(fusegrad.tensor(x), pos, caches[fusegrad])
        want, caches[torch] = step(torch, torch.tensor(x), pos, caches[torch])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    info = cs.cache_info()
    assert info["compiles"] == 1 + compiled.VALUE_LIMIT and info["fallbacks"] == 12 - info["compiles"], info


def test_an_int_used_as_a_slice_bound_beside_a_changing_float():
    """A float that changes every call beside an int that bounds a slice (and an int
    computed from it): the int compiles per value, the float is read at each call (the
    whole signature compiled per value until the limit, then ran eagerly)."""
    def f(x, alpha, n):
        return (x[:n] * alpha).sum() + x[: n * 2 - 1].mean() * alpha

    cf = fusegrad.compile(f)
    x = XA.astype(np.float32)
    for i in range(12):
        alpha, n = 0.1 * i + 0.05, 3 + (i >= 8)
        np.testing.assert_allclose(cf(fusegrad.tensor(x), alpha, n).item(), f(torch.tensor(x), alpha, n).item(),
                                   rtol=2e-6)
    info = cf.cache_info()
    assert info["compiles"] == 3 and info["fallbacks"] == 0, info
