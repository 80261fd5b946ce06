"""A primitive defined in one place, here in this file, works in every mode: eager,
autograd (first and second order), jvp, vmap (by its kind, no batching rule written) and
compile (the cpu backend lowers its scalar operation), with nothing else edited."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck
from fusegrad.func import jvp, vmap
from fusegrad.ir.primitive import PRIMS, Primitive
from fusegrad.passes import batching


def _ref(x):
    return np.sin(x)


def _dref(x):
    return np.cos(x)


@pytest.fixture(scope="module")
def sine():
    """sin, defined again from scratch: its derivative cos(x) = sin(x + pi/2) written in
    primitives, its per-element semantics the scalar operation "sin"; unregistered
    afterwards (other tests sweep the registry for fusegrad's own primitives)."""
    p = Primitive("test_sine", np.sin, abstract=lambda avals, params: avals[0],
                  vjp=lambda g, ins, out, needs: (g * p(ins[0] + np.pi / 2),),
                  jvp=lambda ts, ins, out: None if ts[0] is None else ts[0] * p(ins[0] + np.pi / 2),
                  saves="in", kind="elementwise", scalar="sin", node_name="SineBackward0")
    yield p
    del PRIMS[p.name]


def test_eager_autograd_and_jvp(sine, rng):
    x = rng.standard_normal((3, 4))
    t = fg.tensor(x, requires_grad=True)
    y = sine(t)
    np.testing.assert_allclose(y.detach().numpy(), _ref(x), rtol=1e-12)
    assert type(y.grad_fn).__name__ == "SineBackward0"
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), _dref(x), rtol=1e-12, atol=1e-15)
    assert gradcheck(sine, (fg.tensor(x, requires_grad=True),))
    assert gradgradcheck(sine, (fg.tensor(x, requires_grad=True),))
    v = rng.standard_normal((3, 4))
    _, tan = jvp(sine, (fg.tensor(x),), (fg.tensor(v),))
    np.testing.assert_allclose(tan.numpy(), v * _dref(x), rtol=1e-12, atol=1e-15)


def test_vmap_uses_the_elementwise_rule(sine, rng):
    x = rng.standard_normal((5, 3))
    before = batching.STATS["fallback"]
    out = vmap(lambda r: sine(r).sum())(fg.tensor(x))
    assert batching.STATS["fallback"] == before  # batched by kind, not looped
    np.testing.assert_allclose(out.numpy(), _ref(x).sum(1), rtol=1e-12)


def test_compiled_on_cpu(sine, rng):
    x = rng.standard_normal((6, 7)).astype(np.float32)

    def f(a):
        return sine(a * 3.0) * 2.0

    cf = fg.compile(f, backend="cpu", fullgraph=True)
    got = cf(fg.tensor(x))
    np.testing.assert_allclose(got.numpy(), 2 * _ref(x * np.float32(3)), rtol=1e-5, atol=1e-6)
    info = cf.cache_info()
    assert info["compiles"] == 1 and info["fallbacks"] == 0 and not info["notes"], info
