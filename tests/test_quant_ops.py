"""fake_quantize_per_tensor_affine / per_channel_affine against torch: values bit for bit
(ties rounded to even, the reciprocal scale in float32), the straight-through gradient that
is zero where the grid clamps, eager and compiled."""
import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _run(lib, x, compiled=False):
    def f(t):
        a = lib.fake_quantize_per_tensor_affine(t, 0.5, 3, 0, 15)
        b = lib.fake_quantize_per_tensor_affine(t, lib.tensor([0.1]), lib.tensor([-2], dtype=lib.int32), -8, 7)
        c = lib.fake_quantize_per_channel_affine(t, lib.tensor([0.1, 0.2, 0.3, 0.4]),
                                                 lib.tensor([0, 1, -1, 2], dtype=lib.int32), 1, -128, 127)
        return a, b, c
    t = lib.tensor(x, requires_grad=True)
    outs = (fg.compile(f) if compiled else f)(t)
    (outs[0] + outs[1] * 2 + outs[2] * 3).sum().backward()
    return [o.detach().numpy() for o in outs] + [t.grad.numpy()]


def test_fake_quantize_matches_torch_eager_and_compiled():
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32) * 3
    x[0, 0, :4] = [0.25, 0.75, -0.25, 1.25]  # ties of the 0.5 grid
    want = _run(torch, x)
    for compiled in (False, True):
        for got, ref in zip(_run(fg, x, compiled), want):
            np.testing.assert_array_equal(got, ref)
    for lib in (torch, fg):
        with pytest.raises(RuntimeError, match="quant_min"):
            lib.fake_quantize_per_tensor_affine(lib.ones(2), 0.5, 0, 5, 1)
