"""``nn.functional.grid_sample`` (bilinear, nearest, bicubic; 4-D and 5-D) and ``affine_grid`` against PyTorch: values and float64
gradients over modes x padding modes x align_corners (grids with points outside [-1, 1], on
pixel centres and exactly between pixels), errors and warnings, gradcheck, vmap, and a
compiled spatial-transformer step against eager."""
import itertools
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.func as ff
import fusegrad.nn.functional as F
from fusegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytestmark = pytest.mark.torch

RNG = np.random.default_rng(2024)
TOL = 1e-12


def _grid(n, ho, wo):
    """Random points in [-1.6, 1.6], a quarter of them multiples of 1/8 (which land exactly on
    pixels and half-way between them for the sizes used here), a few far out (several reflections)."""
    g = RNG.uniform(-1.6, 1.6, (n, ho, wo, 2))
    exact = RNG.random((n, ho, wo, 2)) < 0.25
    g[exact] = RNG.integers(-12, 13, exact.sum()) / 8
    g[0, 0, :3] = [[-1.0, 1.0], [3.7, -4.2], [-2.9, 5.3]]
    return g


X = RNG.standard_normal((2, 3, 5, 4))  # non-square, batch 2
GRID = _grid(2, 3, 6)


def _pair(a, requires_grad=True):
    return fg.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


@pytest.mark.parametrize("mode,padding_mode,align_corners",
                         list(itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"],
                                                [False, True])))
def test_grid_sample_values_and_gradients(mode, padding_mode, align_corners):
    out, g = _against_torch(X, GRID, dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners))
    assert tuple(out.shape) == (2, 3, 3, 6)
    if mode == "nearest":
        assert not g.grad.numpy().any()


def _against_torch(x, grid, kw):
    """grid_sample of arrays ``x`` and ``grid`` with ``kw``: the node's name, values and both
    gradients (of a random weighting) as torch's; fusegrad's output and grid tensor."""
    (a, at), (g, gt) = _pair(x), _pair(grid)
    out, ref = F.grid_sample(a, g, **kw), torch.nn.functional.grid_sample(at, gt, **kw)
    assert tuple(out.shape) == tuple(ref.shape)
    assert type(out.grad_fn).__name__ == type(ref.grad_fn).__name__
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=TOL, atol=TOL)
    w = RNG.standard_normal(ref.shape)
    (out * fg.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(g.grad.numpy(), gt.grad.numpy(), rtol=TOL, atol=TOL)
    return out, g


def test_grid_sample_float32_and_single_pixel_axes():
    """float32 (nearest's ties decided in float32 as PyTorch's kernel does) and size-1 axes,
    where align_corners' unnormalization and reflection degenerate."""
    x, g = RNG.standard_normal((1, 2, 1, 3)).astype(np.float32), _grid(1, 4, 5).astype(np.float32)
    for mode, padding_mode, align_corners in itertools.product(["bilinear", "nearest", "bicubic"],
                                                               ["zeros", "border", "reflection"], [False, True]):
        kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        out = F.grid_sample(fg.tensor(x), fg.tensor(g), **kw)
        ref = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(g), **kw)
        assert out.dtype == fg.float32
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6, err_msg=str(kw))


def test_gradcheck():
    x = fg.tensor(RNG.standard_normal((1, 2, 3, 4)), requires_grad=True)
    g = fg.tensor(RNG.uniform(-1.2, 1.2, (1, 2, 3, 2)), requires_grad=True)
    for mode, padding_mode in (("bilinear", "zeros"), ("bilinear", "reflection"), ("bicubic", "border")):
        def f(x, g):
            return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=False)
        assert gradcheck(f, (x, g))
        assert gradgradcheck(f, (x, g))


def test_affine_grid_values_and_theta_gradient():
    for size, align_corners in itertools.product([(2, 3, 4, 5), (2, 1, 3, 1), (2, 3, 2, 3, 4)], [False, True]):
        k = len(size) - 2
        th, tht = _pair(RNG.standard_normal((2, k, k + 1)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # size-1 axes with align_corners warn (checked below)
            out = F.affine_grid(th, size, align_corners=align_corners)
            ref = torch.nn.functional.affine_grid(tht, size, align_corners=align_corners)
        assert tuple(out.shape) == tuple(ref.shape)
        assert type(out.grad_fn).__name__ == type(ref.grad_fn).__name__
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=TOL, atol=TOL)
        w = RNG.standard_normal(ref.shape)
        (out * fg.tensor(w)).sum().backward()
        (ref * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(th.grad.numpy(), tht.grad.numpy(), rtol=TOL, atol=TOL)


def test_spatial_transformer_theta_gradient():
    """theta -> affine_grid -> grid_sample: the gradient reaches theta as in PyTorch (also by ``func.grad``)."""
    (x, xt), (th, tht) = _pair(X), _pair(np.array([[0.9, -0.3, 0.1], [0.2, 1.1, -0.2]]) + 0.3 * RNG.random((2, 2, 3)))
    out = F.grid_sample(x, F.affine_grid(th, (2, 3, 6, 7), align_corners=True), padding_mode="reflection",
                        align_corners=True)
    ref = torch.nn.functional.grid_sample(xt, torch.nn.functional.affine_grid(tht, (2, 3, 6, 7), align_corners=True),
                                          padding_mode="reflection", align_corners=True)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=TOL, atol=TOL)
    (out ** 2).sum().backward()
    (ref ** 2).sum().backward()
    np.testing.assert_allclose(th.grad.numpy(), tht.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=TOL, atol=TOL)

    def loss(theta):
        return (F.grid_sample(x.detach(), F.affine_grid(theta, (2, 3, 6, 7), align_corners=True),
                              padding_mode="reflection", align_corners=True) ** 2).sum()
    np.testing.assert_allclose(ff.grad(loss)(th.detach()).numpy(), tht.grad.numpy(), rtol=1e-10, atol=1e-10)


def _raised(fn, lib):
    """The type and message of what ``fn(lib)`` raises, fusegrad's reprs of dtypes and sizes
    spelled as PyTorch's."""
    try:
        fn(lib)
    except Exception as e:  # noqa: BLE001 - the type and message are what is compared
        return type(e).__name__, str(e).replace("fusegrad.", "torch.")
    raise AssertionError("no exception")


@pytest.mark.parametrize("x_shape,g_shape,kw", [
    ((2, 3, 4, 5), (3, 6, 7, 2), {}),
    ((2, 3, 4, 5), (2, 6, 7, 3), {}),
    ((2, 3, 4, 5), (2, 6, 2), {}),
    ((2, 3, 0, 5), (2, 6, 7, 2), {}),
    ((3, 4), (3, 2), {}),
    ((2, 3, 4, 5, 6, 7), (2, 1, 1, 1, 1, 4), {}),
    ((2, 3, 4, 5, 6), (2, 1, 1, 1, 3), dict(mode="bicubic")),
    ((2, 3, 4, 5), (2, 6, 7, 2), dict(mode="linear")),
    ((2, 3, 4, 5), (2, 6, 7, 2), dict(padding_mode="circular")),
])
def test_grid_sample_errors(x_shape, g_shape, kw):
    def run(lib):
        return lib.nn.functional.grid_sample(lib.zeros(x_shape), lib.zeros(g_shape), align_corners=False, **kw)
    assert _raised(run, fg) == _raised(run, torch)


def test_grid_sample_dtype_errors_and_unsupported():
    def mixed(lib):
        return lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 1, 1, 2, dtype=lib.float64),
                                             align_corners=False)
    assert _raised(mixed, fg) == _raised(mixed, torch)


@pytest.mark.parametrize("theta_shape,size,dtype", [
    ((2, 3, 4), (2, 3, 4, 5), "float32"),
    ((2, 2, 3), (2, 3, 4, 5, 6), "float32"),
    ((2, 2, 3), (2, 3, 4), "float32"),
    ((2, 2, 3), (2, 3, 0, 5), "float32"),
    ((2, 2, 3), (2, 3, 4, 5), "int64"),
])
def test_affine_grid_errors(theta_shape, size, dtype):
    def run(lib):
        return lib.nn.functional.affine_grid(lib.zeros(theta_shape, dtype=getattr(lib, dtype)), size,
                                             align_corners=False)
    assert _raised(run, fg) == _raised(run, torch)


def test_align_corners_warnings():
    for lib in (fg, torch):
        with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior") as rec:
            lib.nn.functional.grid_sample(lib.zeros(1, 1, 2, 2), lib.zeros(1, 1, 1, 2))
            lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), (1, 1, 2, 2))
        assert len(rec) == 2 and all(r.filename == __file__ for r in rec)
        with pytest.warns(UserWarning, match="unit-size grids"):
            lib.nn.functional.affine_grid(lib.zeros(1, 2, 3), (1, 1, 1, 3), align_corners=True)


def test_vmap_matches_loop():
    xs, gs = fg.tensor(RNG.standard_normal((3, 2, 3, 5, 4))), fg.tensor(_grid(6, 4, 3).reshape(3, 2, 4, 3, 2))
    got = ff.vmap(lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=True))(xs, gs)
    want = fg.stack([F.grid_sample(xs[i], gs[i], padding_mode="border", align_corners=True) for i in range(3)])
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_compiled_spatial_transformer_step():
    """A localization layer predicts theta from the image; the compiled step (forward and
    backward) matches eager, with no graph break."""
    x = fg.tensor(X, requires_grad=True)
    w = fg.tensor(0.1 * RNG.standard_normal((20, 6)), requires_grad=True)
    b = fg.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0], requires_grad=True)

    def step(x, w, b):
        theta = (x.reshape(2, -1)[:, :20] @ w + b).view(2, 2, 3)
        grid = F.affine_grid(theta, (2, 3, 6, 7), align_corners=False)
        return F.grid_sample(x, grid, padding_mode="border", align_corners=False).sum()

    compiled = fg.compile(step, backend="cpu")
    results = []
    for fn in (step, compiled):
        loss = fn(x, w, b)
        loss.backward()
        results.append([loss.item()] + [t.grad.numpy().copy() for t in (x, w, b)])
        x.grad = w.grad = b.grad = None
    for eager, comp in zip(*results):
        np.testing.assert_allclose(comp, eager, rtol=1e-12, atol=1e-12)
    info = compiled.cache_info()
    assert info["compiles"] == 1 and info["fallbacks"] == 0 and info["graph_breaks"] == []



@pytest.mark.parametrize("mode,padding_mode,align_corners",
                         list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"],
                                                [False, True])))
def test_volumetric_grid_sample_values_and_gradients(mode, padding_mode, align_corners):
    """5-D input (N, C, D, H, W) sampled at a (N, D_out, H_out, W_out, 3) grid: trilinear
    (8 taps) or nearest, every padding mode; values, input and grid gradients against torch
    (it raised NotImplementedError)."""
    g = RNG.uniform(-1.5, 1.5, (2, 3, 2, 4, 3))
    g.reshape(-1, 3)[:4] = np.round(g.reshape(-1, 3)[:4] * 4) / 4  # on pixels and half-way between
    out, _ = _against_torch(RNG.standard_normal((2, 3, 4, 5, 3)), g,
                            dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners))
    assert out.ndim == 5
