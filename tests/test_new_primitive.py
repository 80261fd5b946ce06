"""A primitive defined in one place, here in this file, works in every mode: eager,
autograd (first and second order), jvp, vmap (by its kind, no batching rule written) and
compile (the cpu backend lowers its scalar template), with nothing else edited."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck
from fusegrad.func import jvp, vmap
from fusegrad.ir.primitive import PRIMS, Primitive
from fusegrad.passes import batching



@pytest.fixture(scope="module")
def cube_plus():
    """x**3 + x, its derivative 3x**2 + 1 written in primitives; unregistered afterwards
    (other tests sweep the registry for fusegrad's own primitives)."""
    p = Primitive(
        "test_cube_plus", lambda x: x * x * x + x, abstract=lambda avals, params: avals[0],
        vjp=lambda g, ins, out, needs: (g * (ins[0] * ins[0] * 3.0 + 1.0),),
        jvp=lambda ts, ins, out: None if ts[0] is None else ts[0] * (ins[0] * ins[0] * 3.0 + 1.0),
        saves="in", kind="elementwise", scalar="({0} * {0} * {0} + {0})", node_name="CubePlusBackward0")
    yield p
    del PRIMS[p.name]


def _ref(x):
    return x ** 3 + x


def test_eager_autograd_and_jvp(cube_plus, rng):
    x = rng.standard_normal((3, 4))
    t = fg.tensor(x, requires_grad=True)
    y = cube_plus(t)
    np.testing.assert_allclose(y.detach().numpy(), _ref(x), rtol=1e-12)
    assert type(y.grad_fn).__name__ == "CubePlusBackward0"
    y.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), 3 * x ** 2 + 1, rtol=1e-12)
    assert gradcheck(cube_plus, (fg.tensor(x, requires_grad=True),))
    assert gradgradcheck(cube_plus, (fg.tensor(x, requires_grad=True),))
    v = rng.standard_normal((3, 4))
    _, tan = jvp(cube_plus, (fg.tensor(x),), (fg.tensor(v),))
    np.testing.assert_allclose(tan.numpy(), v * (3 * x ** 2 + 1), rtol=1e-12)


def test_vmap_uses_the_elementwise_rule(cube_plus, rng):
    x = rng.standard_normal((5, 3))
    before = batching.STATS["fallback"]
    out = vmap(lambda r: cube_plus(r).sum())(fg.tensor(x))
    assert batching.STATS["fallback"] == before  # batched by kind, not looped
    np.testing.assert_allclose(out.numpy(), _ref(x).sum(1), rtol=1e-12)


def test_compiled_on_cpu(cube_plus, rng):
    x = rng.standard_normal((6, 7)).astype(np.float32)

    def f(a):
        return cube_plus(a.sin()) * 2.0

    cf = fg.compile(f, backend="cpu", fullgraph=True)
    got = cf(fg.tensor(x))
    np.testing.assert_allclose(got.numpy(), 2 * _ref(np.sin(x)), rtol=1e-5, atol=1e-6)
    info = cf.cache_info()
    assert info["compiles"] == 1 and info["fallbacks"] == 0 and not info["notes"], info
