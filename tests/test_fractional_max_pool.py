"""Fractional max pooling (``F.fractional_max_pool2d/3d``, ``nn.FractionalMaxPool2d/3d``)
against PyTorch: with the same ``_random_samples`` the values, indices and input gradients are
PyTorch's, bit for bit; float64 gradcheck; the samples drawn when none are given; errors."""
import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn.functional as F
from fusegrad.autograd import gradcheck

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytestmark = pytest.mark.torch

# (dims, input shape, kernel_size, size argument): batched and unbatched, output_size and output_ratio
GRID = [
    (2, (2, 3, 9, 11), 2, dict(output_size=(4, 5))),
    (2, (3, 10, 7), 3, dict(output_size=4)),
    (2, (2, 2, 13, 6), (3, 2), dict(output_ratio=(0.5, 0.7))),
    (2, (2, 8, 8), 2, dict(output_size=(1, 7))),
    (3, (2, 2, 7, 8, 9), 2, dict(output_size=3)),
    (3, (2, 6, 7, 5), (2, 3, 1), dict(output_ratio=(0.5, 0.6, 0.7))),
    (3, (1, 3, 5, 9, 4), 2, dict(output_size=(2, 5, 2))),
]


def _samples(rng, shape, n, dtype):
    lead = (shape[0], shape[1]) if len(shape) == n + 2 else (1, shape[0])
    return rng.random(lead + (n,)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, shape, kernel, size", GRID)
def test_values_indices_and_gradients_equal_torch(n, shape, kernel, size, dtype):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    u = _samples(rng, shape, n, dtype)
    results = []
    for lib in (torch, fg):
        xt = lib.tensor(x, requires_grad=True)
        pool = getattr(lib.nn.functional, f"fractional_max_pool{n}d")
        out, idx = pool(xt, kernel, return_indices=True, _random_samples=lib.tensor(u), **size)
        g = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(dtype)
        out.backward(lib.tensor(g))
        results.append((out.detach().numpy(), idx.numpy(), xt.grad.numpy()))
    (want, want_idx, want_grad), (got, got_idx, got_grad) = results
    assert got.dtype == want.dtype and got_idx.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_idx, want_idx)
    np.testing.assert_array_equal(got_grad, want_grad)


def test_region_starts_match_torch_over_many_sizes():
    """The start of each region is PyTorch's (a truncation in the input's dtype) over random
    sizes, kernels and samples, float32 and float64."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        h, w = (int(v) for v in rng.integers(4, 50, 2))
        k = int(rng.integers(1, 4))
        size = (int(rng.integers(1, h - k + 2)), int(rng.integers(1, w - k + 2)))
        dtype = (np.float32, np.float64)[trial % 2]
        x = rng.standard_normal((2, 3, h, w)).astype(dtype)
        u = rng.random((2, 3, 2)).astype(dtype)
        want = torch.nn.functional.fractional_max_pool2d(torch.tensor(x), k, size, return_indices=True,
                                                         _random_samples=torch.tensor(u))[1]
        got = F.fractional_max_pool2d(fg.tensor(x), k, size, return_indices=True, _random_samples=fg.tensor(u))[1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("n, shape, size", [(2, (1, 2, 7, 6), dict(output_size=(3, 4))),
                                            (3, (2, 5, 4, 6), dict(output_ratio=(0.5, 0.5, 0.5)))])
def test_gradcheck_float64(n, shape, size):
    rng = np.random.default_rng(3)
    x = fg.tensor(rng.permutation(np.prod(shape)).reshape(shape) / 7.0, requires_grad=True)  # (no ties)
    u = fg.tensor(_samples(rng, shape, n, np.float64))
    pool = getattr(F, f"fractional_max_pool{n}d")
    assert gradcheck(lambda t: pool(t, 2, _random_samples=u, **size), (x,))


@pytest.mark.parametrize("n", [2, 3])
def test_modules_equal_torch(n):
    rng = np.random.default_rng(n)
    shape = (2, 3) + (8,) * n
    x = rng.standard_normal(shape)
    u = rng.random((2, 3, n))
    outs = []
    for lib in (torch, fg):
        cls = getattr(lib.nn, f"FractionalMaxPool{n}d")
        m = cls(3, output_ratio=0.5, return_indices=True, _random_samples=lib.tensor(u))
        assert "_random_samples" in dict(m.named_buffers()) and m.kernel_size == (3,) * n
        assert m.output_ratio == (0.5,) * n and m.output_size is None
        outs.append([t.numpy() for t in m(lib.tensor(x))])
        sized = cls((2,) * n, output_size=5, _random_samples=lib.tensor(u))
        outs[-1].append(sized(lib.tensor(x)).numpy())
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [2, 3])
def test_samples_drawn_with_rand_when_not_given(n):
    """Without ``_random_samples`` the call draws ``rand(N, C, n)`` in the input's dtype (one
    batch for an unbatched input), from fusegrad's generator."""
    x = fg.tensor(np.random.default_rng(0).standard_normal((3,) + (9,) * n))
    pool = getattr(F, f"fractional_max_pool{n}d")
    fg.manual_seed(5)
    u = fg.rand(1, 3, n, dtype=fg.float64)
    want = pool(x, 2, output_size=4, _random_samples=u)
    fg.manual_seed(5)
    got = pool(x, 2, output_size=4)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    m = getattr(fg.nn, f"FractionalMaxPool{n}d")(2, output_size=4)
    assert tuple(m(x).shape) == (3,) + (4,) * n


def test_compiled_matches_eager():
    x = fg.tensor(np.random.default_rng(2).standard_normal((2, 3, 10, 9)), requires_grad=True)
    u = fg.tensor(np.random.default_rng(3).random((2, 3, 2)))
    f = fg.compile(lambda t, s: (F.fractional_max_pool2d(t, 2, output_ratio=(0.5, 0.5), _random_samples=s) ** 2).sum())
    got = f(x, u)
    (gx,) = fg.autograd.grad(got, x)
    want = (F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), _random_samples=u) ** 2).sum()
    (wx,) = fg.autograd.grad(want, x)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    np.testing.assert_array_equal(gx.numpy(), wx.numpy())


def test_errors_as_torch():
    x = fg.zeros(1, 2, 6, 6)
    with pytest.raises(ValueError, match="requires specifying either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="pool height 3 too large relative to input height 6"):
        F.fractional_max_pool2d(x, 3, output_size=(5, 2))
    with pytest.raises(RuntimeError):
        F.fractional_max_pool3d(x, 2, output_size=2)
    with pytest.raises(RuntimeError, match="pool width 2 too large relative to input width 6"):
        F.fractional_max_pool3d(fg.zeros(1, 2, 6, 6, 6), 2, output_size=(2, 2, 5))
    with pytest.raises(RuntimeError, match="same dtype as input"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=fg.zeros(1, 2, 2, dtype=fg.float64))
    with pytest.raises(RuntimeError, match="size.1. equals to input channel size"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=fg.zeros(1, 3, 2))
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        fg.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        fg.nn.FractionalMaxPool3d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="requires specifying either an output size, or a pooling ratio"):
        fg.nn.FractionalMaxPool2d(2)
