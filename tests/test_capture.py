"""The capture layer shared by compile and the function transforms: a transform or compiled
function built once follows the Python values its function names (global numbers and flags,
rebound tensors, a tensor read as a number and updated in place, a module's training mode), also through a helper function, under every
transform; against torch.func on the same values (float64)."""
from __future__ import annotations

import argparse
import types

import numpy as np
import pytest

import fusegrad
import fusegrad.func as ff
from fusegrad.func import transforms as TR

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

SCALE = 3.0
FLAG = True
W0 = W = fusegrad.tensor(np.linspace(0.5, 1.5, 3))
GAIN = fusegrad.tensor(1.5, dtype=fusegrad.float64)  # read as a number, updated in place


class Mode(fusegrad.nn.Module):
    """Doubles in training mode, triples in eval mode."""

    def forward(self, x):
        return x * (2.0 if self.training else 3.0)


MOD = Mode()


def _core(x):  # a helper: what it names is guarded too
    return x * SCALE * W


def f(x):
    y = MOD(_core(x)) * float(GAIN)
    return (y.sin() if FLAG else y.cos()).sum()


def ref(x):
    """f on the current values, in torch."""
    y = x * SCALE * torch.tensor(W.numpy()) * (2.0 if MOD.training else 3.0) * float(GAIN)
    return (y.sin() if FLAG else y.cos()).sum()


X = np.array([0.3, -0.7, 1.1])
XB = np.array([[0.3, -0.7, 1.1], [0.2, 0.4, -0.9]])


def _apply(lib, func, name: str):
    """Run ``name`` (a transform, or compile) of ``func`` with library ``lib``."""
    t = lib.func if lib is torch else ff
    x = lib.tensor(X, dtype=lib.float64)
    if name == "vjp":
        out, fn = t.vjp(func, x)
        return fn(lib.ones_like(out))[0]
    if name == "jvp":
        return t.jvp(func, (x,), (lib.ones_like(x),))[1]
    if name == "vmap":
        return t.vmap(func)(lib.tensor(XB, dtype=lib.float64))
    if name == "compile":  # compile of the function and of its gradient
        return (func(x), t.grad(func)(x)) if lib is torch else (
            _COMPILED["f"](x), _COMPILED["g"](x))
    return getattr(t, name)(func)(x)


_COMPILED: dict = {}


def _set(scale=3.0, flag=True, w=None, training=True, gain=1.5):
    global SCALE, FLAG, W
    SCALE, FLAG = scale, flag
    GAIN.fill_(gain)
    W = W0 if w is None else w
    MOD.train(training)


def _np(r):
    if isinstance(r, tuple):
        return [_np(x) for x in r]
    return r.detach().numpy()


@pytest.mark.parametrize("name", ["grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "compile"])
def test_changed_python_values_give_fresh_results(name):
    _COMPILED.update(f=fusegrad.compile(f, backend="eager"), g=fusegrad.compile(ff.grad(f), backend="eager"))
    states = [dict(), dict(scale=5.0), dict(scale=5.0, flag=False),
              dict(scale=5.0, flag=False, w=fusegrad.tensor(np.array([2.0, -1.0, 0.25]))),
              dict(scale=5.0, flag=False, training=False), dict(scale=5.0, gain=-0.5), dict()]
    try:
        for st in states:
            _set(**st)
            for _ in range(2):  # the second call reuses what the first traced
                got, want = _np(_apply(fusegrad, f, name)), _np(_apply(torch, ref, name))
                for a, b in (zip(got, want) if name == "compile" else [(got, want)]):
                    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{name} after {st}")
    finally:
        _set()


class Knobs:
    K = 1.0  # a class attribute the function reads


class Schedule:
    """A plain object: a tensor attribute and a method whose value depends on its state."""

    def __init__(self):
        self.t = 0
        self.w = fusegrad.tensor(np.linspace(0.5, 1.5, 3))

    def beta(self):
        return min(1.0, 0.5 + self.t)


class Scaled(fusegrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = types.SimpleNamespace(k=1.0)  # hyperparameters of the module, in a plain object
        self.ws = [1.0, 2.0]

    def forward(self, x):
        return x * self.cfg.k * self.ws[1]


CFG = argparse.Namespace(temp=1.0, sub=types.SimpleNamespace(beta=2.0))
HOLD, SMOD = Schedule(), Scaled()


def h(x):
    return (SMOD(x) * CFG.temp * CFG.sub.beta * Knobs.K * HOLD.beta() * HOLD.w).sin().sum()


def href(x):
    return (x * SMOD.cfg.k * SMOD.ws[1] * CFG.temp * CFG.sub.beta * Knobs.K * HOLD.beta()
            * torch.tensor(HOLD.w.numpy())).sin().sum()


@pytest.mark.parametrize("name", ["grad", "vjp", "jvp", "jacrev", "vmap", "compile"])
def test_changed_attributes_of_objects_give_fresh_results(name):
    """What the function reads of objects (argparse's Namespace and nested settings, a class
    attribute, a schedule's method, a tensor attribute rebound, a module's settings object
    and list of numbers) is guarded as torch.compile guards it: a change gives the new result."""
    _COMPILED.update(f=fusegrad.compile(h, backend="eager"), g=fusegrad.compile(ff.grad(h), backend="eager"))
    changes = [lambda: None, lambda: setattr(CFG, "temp", 2.0), lambda: setattr(CFG.sub, "beta", 0.5),
               lambda: setattr(Knobs, "K", 3.0), lambda: setattr(HOLD, "t", 1),
               lambda: setattr(HOLD, "w", fusegrad.tensor(np.array([2.0, -1.0, 0.25]))),
               lambda: setattr(SMOD.cfg, "k", 4.0), lambda: SMOD.ws.__setitem__(1, 5.0)]
    try:
        for k, change in enumerate(changes):
            change()
            for _ in range(2):
                got, want = _np(_apply(fusegrad, h, name)), _np(_apply(torch, href, name))
                for a, b in (zip(got, want) if name == "compile" else [(got, want)]):
                    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{name} after change {k}")
    finally:
        CFG.temp, CFG.sub.beta, Knobs.K, HOLD.t, SMOD.cfg.k, SMOD.ws[1] = 1.0, 2.0, 1.0, 0, 1.0, 2.0
        HOLD.w = fusegrad.tensor(np.linspace(0.5, 1.5, 3))


def test_unchanged_values_reuse_the_trace_and_every_change_is_one_retrace():
    g = ff.grad(f)
    x = fusegrad.tensor(X)
    try:
        g(x)
        t0 = TR.STATS["traces"]
        g(x)
        assert TR.STATS["traces"] == t0
        _set(scale=7.0)  # a value not seen before
        np.testing.assert_allclose(g(x).numpy(), torch.func.grad(ref)(torch.tensor(X)).numpy(), rtol=1e-12)
        g(x)
        assert TR.STATS["traces"] == t0 + 1
        _set(scale=3.0)  # back: the first variant is still cached
        g(x)
        assert TR.STATS["traces"] == t0 + 1
    finally:
        _set()


def _views_after_update(lib):
    def f(x):
        y = x * 1.0
        head = y[:2]  # a view of y, and a detached alias of it, taken before y changes
        d = y.detach()
        y.mul_(3)  # eager: head and d see the update (they share y's memory)
        return (head * head).sum() + d.sum() + head[1]
    return f


def test_views_taken_before_an_in_place_update_follow_it_under_every_capture():
    """A view of a value that traced code then updates in place is derived again from the
    updated value, as its shared memory makes it in eager: the value, and the gradient
    through the view (not through the detached alias), match torch under eager, compile
    and func.grad."""
    xa = np.array([0.5, -1.25, 2.0, 0.75])
    tx = torch.tensor(xa, requires_grad=True)
    want = _views_after_update(torch)(tx)
    want.backward()
    f = _views_after_update(fusegrad)
    for run in ("eager", "compile", "grad"):
        x = fusegrad.tensor(xa, requires_grad=True)
        if run == "grad":
            got_grad = ff.grad(f)(fusegrad.tensor(xa)).numpy()
        else:
            out = (f if run == "eager" else fusegrad.compile(f, backend="eager"))(x)
            np.testing.assert_allclose(out.item(), want.item(), rtol=1e-12, err_msg=run)
            out.backward()
            got_grad = x.grad.numpy()
        np.testing.assert_allclose(got_grad, tx.grad.numpy(), rtol=1e-12, err_msg=run)


def test_python_and_numpy_random_draws_are_fresh_at_every_call():
    """A function that draws from ``random``, ``numpy.random`` or a NumPy generator it names:
    compiled, it runs its Python at every call (segments) with the generators as eager code
    leaves them, and a transform runs directly: each call gets new numbers (a replayed graph
    repeated the first call's), equal to eager's with the same seeds."""
    import random

    def run(wrap, seed):
        random.seed(seed)
        np.random.seed(seed)
        gen = np.random.default_rng(seed)

        def f(x):
            h = fusegrad.tensor(np.random.randn(3))
            return (x * h * random.random() + float(gen.normal())).sum()
        g = wrap(f)
        x = fusegrad.tensor(X)
        return [g(x).detach().numpy() for _ in range(3)], g

    want, _ = run(lambda f: f, 0)
    got, cf = run(lambda f: fusegrad.compile(f, backend="eager"), 0)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert len({float(v) for v in got}) == 3
    assert "draws Python or NumPy random numbers" in cf.cache_info()["graph_breaks"][0]
    grads, _ = run(ff.grad, 1)
    np.random.seed(1)
    random.seed(1)
    gen = np.random.default_rng(1)
    expected = []
    for _ in range(3):
        h = np.random.randn(3)
        expected.append(h * random.random())
        gen.normal()
    np.testing.assert_allclose(np.array(grads), np.array(expected), rtol=1e-12)
