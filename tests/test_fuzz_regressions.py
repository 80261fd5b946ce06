"""Regressions for bugs the fuzzer found, as standalone checks (cpu backend vs eager)."""
import numpy as np
import pytest

import fusegrad as fg


def _check(f, *arrays):
    xs = [fg.tensor(a, requires_grad=True) for a in arrays]
    ys = [fg.tensor(a, requires_grad=True) for a in arrays]
    got, want = fg.compile(f, backend="cpu")(*xs), f(*ys)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    got.sum().backward()
    want.sum().backward()
    for x, y in zip(xs, ys):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_fuzz_seed_36_transpose_not_in_place():
    """Fuzz seed 36 (cpu): memory planning let a transpose loop group write over the
    buffer it was reading (the backward of ``v @ v``), giving wrong gradients."""
    _check(lambda x: fg.stack([x, x], dim=-2) @ fg.stack([x, x], dim=-2),
           np.array([-0.9357168553011646, 2.396839606169428]))


@pytest.mark.parametrize("n", [2, 3, 5])
def test_transposed_intermediate_into_matmul(n):
    rng = np.random.default_rng(n)
    _check(lambda a, b: ((a @ b).t() * 2.0) @ a + fg.cat([a, a], 0)[:n].t() @ b,
           rng.standard_normal((n, n)), rng.standard_normal((n, n)))


_X28 = np.array([[[-0.8609841113017683], [0.9946377568886589], [2.2128594920053968], [0.5337550683665419]],
                 [[-1.5836741903041132], [0.11642832881110018], [0.03895547198361195], [-0.010276009351101957]],
                 [[-1.15515103984567], [1.8848983642574817], [-1.4748059096464532], [-2.077740437379764]]])


def _prog28(x):
    return fg.atan2(x, x * x + 1.0).amax(2, keepdim=False).softmax(1)


@pytest.mark.parametrize("remat", ["none", "max", "auto"])
def test_fuzz_seed_28_max_mask_under_remat(remat):
    """Fuzz seed 28 (cpu): the amax VJP's mask eq(v, amax(v)) compared a value the backward
    kernel recomputed with the max the forward kernel saved; under fastmath the two differed
    in the last bit. The partition now saves operands of such comparisons."""
    ct = np.random.default_rng(0).standard_normal((3, 4))
    x, y = fg.tensor(_X28, requires_grad=True), fg.tensor(_X28, requires_grad=True)
    (fg.compile(_prog28, backend="cpu", remat=remat)(x) * fg.tensor(ct)).sum().backward()
    (_prog28(y) * fg.tensor(ct)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_fuzz_seed_199_prelu_keeps_a_scalar_input_0d(pt):
    """Fuzz seed 199 (after the nn op families joined the generator): prelu of a 0-d input with a
    one-element weight returned shape (1,) where PyTorch keeps the input's shape."""
    for shape in [(), (3,), (2, 3)]:
        x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
        got = fg.nn.functional.prelu(fg.tensor(x), fg.tensor([0.25], dtype=fg.float64))
        want = pt.nn.functional.prelu(pt.tensor(x), pt.tensor([0.25], dtype=pt.float64))
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.torch
def test_fuzz_masked_attention_compiles_without_a_graph_break(pt):
    """Fuzz batches 0-9 (cpu): scaled_dot_product_attention with an attn_mask broke the compiled graph
    (its dead-row test called all(), which needs concrete values); one graph now, values and
    gradients as PyTorch's, fully masked rows included."""
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 4))
    w = rng.standard_normal((2, 3, 4))
    mask = np.array([[True, False, True, False], [False, False, False, False], [True, True, True, True]])

    def attn(F, t, q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=t.tensor(mask)) * t.tensor(w)).sum()
    f = fg.compile(lambda q, k, v: attn(fg.nn.functional, fg, q, k, v), backend="cpu")
    xs = [fg.tensor(a, requires_grad=True) for a in (q, k, v)]
    ts = [pt.tensor(a, requires_grad=True) for a in (q, k, v)]
    got, want = f(*xs), attn(pt.nn.functional, pt, *ts)
    assert f.cache_info()["graph_breaks"] == []
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    got.backward()
    want.backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)
