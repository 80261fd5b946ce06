"""float16 and bfloat16 as PyTorch's CPU kernels compute them: norms, var and std accumulate
in float32 and round once (squares of float16 overflowed at 256: clip_grad_norm_ zeroed the
gradients), tanh's and sigmoid's gradients round once; the ops autocast runs in float32
(polar, fake quantization with number parameters, local_response_norm's 3-d average); finfo
and iinfo compare by value; NumPy's overflow warnings stay inside fusegrad."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fusegrad as fg

rng = np.random.default_rng(0)


def _numbers(x):
    return x.detach().float().numpy().tolist() if hasattr(x, "detach") else x


def test_half_norms_var_std_accumulate_in_float32_as_torch():
    big = rng.uniform(-600, 600, (3, 40)).astype(np.float32)
    small = np.full(3000, 0.1, np.float32)
    got = []
    for T in (fg, torch):
        F = T.nn.functional
        row = []
        for dt in (T.float16, T.bfloat16):
            x, s = T.tensor(big).to(dt), T.tensor(small).to(dt)
            row += [x.norm(), T.linalg.vector_norm(x, 3, dim=1), s.norm(), x.std(1), x.var(), x.std(), T.dist(x, x * 0),
                    F.normalize(x, dim=-1), F.cosine_similarity(x, x * 0.5), T.linalg.matrix_norm(x[:, :3])]
        w = T.nn.Parameter(T.zeros(3, 40, dtype=T.float16))
        w.grad = T.tensor(big).half()
        row += [T.nn.utils.clip_grad_norm_([w], 1.0), w.grad]
        x = T.tensor(big[0]).half().requires_grad_()
        x.norm().backward()
        row.append(x.grad)
        got.append([_numbers(v) for v in row])
    assert got[0] == got[1]


def test_tanh_and_sigmoid_gradients_round_as_torch():
    x_np = rng.uniform(-2, 2, 2048).astype(np.float32)
    g_np = (rng.standard_normal(2048) * 100).astype(np.float32)
    got = []
    for T in (fg, torch):
        row = []
        for dt, f in ((T.bfloat16, T.tanh), (T.float16, T.tanh), (T.bfloat16, T.sigmoid), (T.float16, T.sigmoid)):
            x = T.tensor(x_np).to(dt).requires_grad_()
            f(x).backward(T.tensor(g_np).to(dt))
            row.append(_numbers(x.grad))
        got.append(row)
    assert got[0] == got[1]


def test_autocast_float32_ops_and_type_info_equality_as_torch():
    h_np = np.arange(2 * 8 * 3 * 3, dtype=np.float32).reshape(2, 8, 3, 3) / 50
    got = []
    for T in (fg, torch):
        F = T.nn.functional
        h = T.tensor(h_np).bfloat16()
        q = T.tensor([[0.1, 0.37, -1.2]]).bfloat16()
        with T.autocast("cpu", dtype=T.bfloat16):
            outs = [F.local_response_norm(h, 5), F.local_response_norm(h[:, :, 0], 3),
                    T.polar(T.ones(3).bfloat16(), T.tensor([0.5, 1.0, 2.0]).bfloat16()),
                    T.fake_quantize_per_tensor_affine(q, 0.05, 0, 0, 255),
                    T.fake_quantize_per_tensor_affine(q, T.tensor(0.05), T.tensor(0, dtype=T.int32), 0, 255)]
        row = [(str(o.dtype).split(".")[-1], np.round(T.view_as_real(o) if o.is_complex() else o.float(), 3).tolist())
               for o in outs]
        row += [T.finfo(T.float32) == T.finfo(T.float32), T.finfo(T.float16) == T.finfo(T.float32),
                T.iinfo(T.int8) == T.iinfo(T.int8), T.iinfo(T.int8) == T.iinfo(T.uint8)]
        got.append(row)
    assert got[0] == got[1]


def test_numpy_overflow_warnings_stay_inside_fusegrad():
    """(In a fresh process: pytest restores the warning filters that importing fusegrad set.)"""
    program = ("import numpy as np, fusegrad as fg\n"
               "y, inf = fg.tensor([300.0, 400.0]).half(), fg.tensor([float('inf'), 1.0])\n"
               "v = [y * y, inf - inf, fg.tensor([1.0]) / 0, fg.tensor([-1.0]).log()]\n"
               "print(np.concatenate([t.float().numpy() for t in v]).tolist())\n"
               "np.float16(300) * np.float16(400)\n")  # (the user's own NumPy code still warns)
    run = subprocess.run([sys.executable, "-W", "default", "-c", program], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(fg.__file__).parents[1])}, timeout=120)
    assert run.stdout.strip() == "[inf, inf, nan, 0.0, inf, nan]", run.stderr
    assert run.stderr.count("RuntimeWarning") == 1 and "scalar multiply" in run.stderr, run.stderr


def test_float16_arithmetic_with_python_numbers_rounds_as_torch():
    """float16 times or divided by a Python number computes in float32 and rounds once (NumPy
    rounded the number to float16 first: 1 ulp off in ~40% of elements); plus and minus round
    the number first, as PyTorch's kernels do (found rerunning zx24)."""
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float16)
    got = []
    for T in (fg, torch):
        t = T.tensor(x)
        got.append([_numbers(v) for v in (t * 0.7, t / 0.7, 0.3 * t, t + 0.1, t - 0.1, t.bfloat16() * 0.7)])
    assert got[0] == got[1]


def test_number_divided_by_a_tensor_is_reciprocal_times_number_as_torch():
    """``c / t`` is ``t.reciprocal() * c``, as PyTorch's Tensor.__rtruediv__ computes it (two
    roundings): bit-equal values in float32 and float16 (a single division differed by 1 ulp)."""
    x = np.random.default_rng(1).standard_normal(4096)
    got = []
    for T in (fg, torch):
        got.append([_numbers(0.7 / T.tensor(x, dtype=dt)) for dt in (T.float32, T.float16, T.float64)])
    assert got[0] == got[1]


def test_half_times_or_divided_by_a_0d_tensor_of_another_dtype_rounds_once_as_torch():
    """A 0-d tensor of another dtype as the second operand of mul or div (each rounding mode,
    in place too) is read at its own value in float32 and the result rounded once, as PyTorch's
    CPU kernels; as the first operand, and in add, sub or pow, it is rounded to the tensor's
    dtype first. The tensor's gradient too; the 0-d operand's is summed in float32 (PyTorch sums
    it in the tensor's dtype: a few ulp of float16 apart)."""
    x = np.random.default_rng(2).uniform(-3, 7, 4001).astype(np.float32)
    got, scale_grads = [], []
    for T in (fg, torch):
        row = []
        for dt in (T.float16, T.bfloat16):
            t = T.tensor(x).to(dt)
            for value, sdt in ((1 / 3, T.float64), (0.1, T.float32), (2049, T.int64)):
                s = T.tensor(value, dtype=sdt)
                row += [t * s, s * t, t / s, t.div(s, rounding_mode="floor"), t.div(s, rounding_mode="trunc"),
                        t.clone().mul_(s), t.clone().div_(s), t + s, t - s, t ** s]
            w = T.tensor(0.3, requires_grad=True)
            h = t.clone().requires_grad_()
            (h * w).sum().backward()
            row.append(h.grad)
            scale_grads.append(float(w.grad))
        got.append([_numbers(v) for v in row])
    for g, w in zip(*got):  # (t ** s has NaN for t < 0)
        np.testing.assert_array_equal(g, w)
    assert scale_grads[:2] == pytest.approx(scale_grads[2:], rel=2e-3)


def test_half_tensor_to_a_number_power_as_torch():
    """float16/bfloat16 ``x ** e``: the exponent rounded to the tensor's dtype, the power in
    float32, rounded once; bfloat16 cubes and inverse squares (the tanh GELU's pow(x, 3)) as
    products rounded at each step; gradients as PyTorch's pow_backward (the exponent unrounded
    there). (Compiled, half graphs compute in float32 as torch.compile's: passes.upcast.)"""
    h = np.linspace(-5, 60, 999).astype(np.float32)
    gelu = lambda T, x: 0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * T.pow(x, 3.0))))  # noqa: E731
    got = []
    for T in (fg, torch):
        row = []
        for dt in (T.float16, T.bfloat16):
            for e in (3.0, -2.0, 0.7, 1 / 2.2, 2, -1.5):
                x = T.tensor(h).to(dt).requires_grad_()
                y = x ** e
                y.backward(T.tensor(np.cos(h)).to(dt))
                row += [y, x.grad]
            x = T.tensor(h / 10).to(dt)
            row += [gelu(T, x), T.pow(x, 0.7), x.clone().pow_(1 / 3)]
        got.append([_numbers(v) for v in row])
    for g, w in zip(*got):
        np.testing.assert_array_equal(g, w)


def test_half_models_ops_round_once_as_torch():
    """float16/bfloat16 as PyTorch's kernels compute them, in float32 with one rounding: a 0-d
    nn.Parameter scale (as a 0-d tensor), add/sub with alpha (alpha rounded to the dtype first:
    SGD's update of half parameters), round(decimals=), log2, log10, hypot, dot; batch norm of
    a half model in eval and training (its batch statistics rounded to the dtype, then
    x * alpha + beta; in bfloat16 PyTorch's 1 / std of a channel can be one bfloat16 ulp
    apart from the rounded exact one, so those are compared within two of its ulps)."""
    r = np.random.default_rng(3)
    a, b = r.standard_normal(512).astype(np.float32) * 3, r.standard_normal(512).astype(np.float32) * 3
    x = r.normal(0, 1, (4, 8, 6, 6)).astype(np.float32)
    stats = [r.normal(0, .2, 8), r.uniform(.5, 1.5, 8), r.normal(1, .3, 8), r.normal(0, .3, 8)]
    got, bf16_trained = [], []
    for T in (fg, torch):
        row = []
        for dt in (T.float16, T.bfloat16):
            p, q = T.tensor(a).to(dt), T.tensor(b).to(dt)
            scale = T.nn.Parameter(T.tensor(1.3))
            row += [p * scale, p / scale, T.add(p, q, alpha=0.37), T.sub(p, q, alpha=-0.01), p.clone().add_(q, alpha=-0.01),
                    T.round(p, decimals=1), T.log2(p.abs()), T.log10(p.abs()), T.hypot(p, q * 0.7), T.dot(p, q)]
            m, v, w, bias = (T.tensor(s, dtype=T.float32).to(dt) for s in stats)
            xh = T.tensor(x).to(dt)
            row.append(T.nn.functional.batch_norm(xh, m, v, w, bias, training=False))
            trained = [T.nn.functional.batch_norm(xh, m.clone(), v.clone(), w, bias, training=True),
                       T.nn.functional.batch_norm(xh, None, None, None, None, training=True)]
            (row if dt == T.float16 else bf16_trained).extend(trained)
        got.append([_numbers(t) for t in row])
    for g, w in zip(*got):
        np.testing.assert_array_equal(g, w)
    for g, w in zip(bf16_trained[:2], bf16_trained[2:]):
        np.testing.assert_allclose(_numbers(g), _numbers(w), rtol=2 ** -6, atol=2 ** -9)


def test_half_softmax_gradients_from_the_rounded_output_as_torch():
    """softmax, log_softmax and cross_entropy of float16/bfloat16 logits: the gradient from the
    rounded output, in float32, rounded once, as PyTorch's backward kernels (the float32
    inner graph's gradient was 1-30 ulp off in 30-60% of elements, so half training drifted
    from the first step); under create_graph the float32 graph's, whose second derivative
    stays right. (A half softmax along another dim than the last differs from PyTorch's by 1
    ulp in ~30% of elements already in its forward value, whose rounding is PyTorch's own.)"""
    r = np.random.default_rng(4)
    a, g = r.normal(0, 1.5, (8, 12)).astype(np.float32), r.normal(0, 1, (8, 12)).astype(np.float32)
    fns = [lambda T, x: T.softmax(x, -1), lambda T, x: T.log_softmax(x, -1), lambda T, x: T.log_softmax(x, 0),
           lambda T, x: T.nn.functional.cross_entropy(x, T.arange(8)) * T.ones(8, 12, dtype=x.dtype)]
    got = []
    for T in (fg, torch):
        row = []
        for dt in (T.float16, T.bfloat16):
            for f in fns:
                x = T.tensor(a).to(dt).requires_grad_()
                f(T, x).backward(T.tensor(g).to(dt))
                row.append(x.grad)
        got.append([_numbers(v) for v in row])
    for gg, w in zip(*got):
        np.testing.assert_array_equal(gg, w)
    x = fg.tensor(a).to(fg.float16).requires_grad_()
    (gx,) = fg.autograd.grad((fg.softmax(x, -1) * fg.tensor(g).half()).sum(), x, create_graph=True)
    (hx,) = fg.autograd.grad(gx.float().pow(2).sum(), x)
    x64 = torch.tensor(a).to(torch.float16).double().requires_grad_()
    (gt,) = torch.autograd.grad((torch.softmax(x64, -1) * torch.tensor(g).half().double()).sum(), x64, create_graph=True)
    (ht,) = torch.autograd.grad(gt.pow(2).sum(), x64)
    np.testing.assert_allclose(hx.float().numpy(), ht.numpy(), rtol=0.02, atol=0.02)


def test_half_layer_norm_input_gradient_from_the_saved_statistics_as_torch():
    """layer_norm of float16/bfloat16 input (and weight and bias): the input's gradient by
    PyTorch's formula in float32 from the mean and 1 / std rounded to the input's dtype (it
    saves them so), rounded once: all but a rare element (the order of float32 sums) equal
    PyTorch's, where the float32 graph's gradient was 1 ulp off in 30-40% of elements. (The
    weight's and bias's gradients are float32 sums rounded once; PyTorch's accumulate
    otherwise.)"""
    r = np.random.default_rng(1)
    a, g = r.normal(0, 1.5, (6, 5, 32)).astype(np.float32), r.normal(0, 1, (6, 5, 32)).astype(np.float32)
    w, b = r.normal(1, .2, 32).astype(np.float32), r.normal(0, .2, 32).astype(np.float32)
    for dtn in ("float16", "bfloat16"):
        grads, values = [], []
        for T in (fg, torch):
            dt = getattr(T, dtn)
            for affine in (False, True):
                x = T.tensor(a).to(dt).requires_grad_()
                args = (T.tensor(w).to(dt), T.tensor(b).to(dt)) if affine else ()
                y = T.nn.functional.layer_norm(x, (32,), *args)
                y.backward(T.tensor(g).to(dt))
                grads.append(_numbers(x.grad))
                values.append(_numbers(y))
        for k in range(2):
            np.testing.assert_array_equal(values[k], values[k + 2])
            differ = np.asarray(grads[k]) != np.asarray(grads[k + 2])
            assert differ.mean() < 0.01, (dtn, k, differ.mean())
            np.testing.assert_allclose(grads[k], grads[k + 2], rtol=2 ** -7)
