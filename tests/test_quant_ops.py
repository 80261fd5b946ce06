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


def test_fake_quantize_half_inputs_float_zero_points_and_range():
    """A half input computed in float32 and rounded once; a float zero point (learnable
    quantization's) added before the rounding; an integer zero point outside the range refused."""
    def program(lib):
        h = lib.fake_quantize_per_tensor_affine(lib.tensor([0.26, -0.74, 3.3], dtype=lib.float16), 0.1, 0, -128, 127)
        b = lib.fake_quantize_per_tensor_affine(lib.tensor([0.26, -0.74], dtype=lib.bfloat16), 0.1, 2, -8, 7)
        x = lib.tensor([[-1.957, -1.696, -1.435, -1.174], [0.3, 0.9, 1.1, 2.6]], requires_grad=True)
        c = lib.fake_quantize_per_channel_affine(x, lib.tensor([0.5, 0.25]), lib.tensor([1.5, -0.5]), 0, -4, 3)
        c.sum().backward()
        for call in (lambda: lib.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255),
                     lambda: lib.fake_quantize_per_channel_affine(x, lib.tensor([0.1, 0.1]),
                                                                  lib.tensor([0, 300], dtype=lib.int32), 0, 0, 255)):
            with pytest.raises(RuntimeError, match="`zero_point` must be between `quant_min` and `quant_max`"):
                call()
        return [t.detach().float().numpy() for t in (h, b, c, x.grad)] + [h.dtype == lib.float16]
    for got, want in zip(program(fg), program(torch)):
        np.testing.assert_array_equal(got, want)
