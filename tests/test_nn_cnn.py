"""Convolution, pooling, resizing and normalization (functional and modules) against PyTorch
over parameter grids with edge cases; float64 gradcheck/gradgradcheck; vmap against a loop."""
import itertools

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.func as ff
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytestmark = pytest.mark.torch

RNG = np.random.default_rng(1234)


def arr(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def call(name, args, kwargs, lib):
    """``lib``'s functional ``name`` on ``args`` (arrays become ``lib`` tensors)."""
    fn = getattr(lib.nn.functional, name)
    return fn(*[lib.tensor(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)


def same(name, args, kwargs=None, tol=1e-10, constant=()):
    """Values, dtypes and shapes of fusegrad's ``name`` equal PyTorch's; so do the gradients
    of a random linear function of the outputs with respect to the array arguments (but
    those at the positions in ``constant``)."""
    kwargs = kwargs or {}
    ours, ref = call(name, args, kwargs, fg), call(name, args, kwargs, torch)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(ours, ref):
        assert tuple(a.shape) == tuple(b.shape), (name, kwargs)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=tol, atol=tol, err_msg=f"{name} {kwargs}")
    # gradients through the first output
    if ours[0].numel() == 0:
        return
    weights = arr(*ref[0].shape)
    ins_f = [fg.tensor(a, requires_grad=i not in constant) if isinstance(a, np.ndarray) else a
             for i, a in enumerate(args)]
    ins_t = [torch.tensor(a, requires_grad=i not in constant) if isinstance(a, np.ndarray) else a
             for i, a in enumerate(args)]
    out_f = getattr(F, name)(*ins_f, **kwargs)
    out_t = getattr(torch.nn.functional, name)(*ins_t, **kwargs)
    out_f = out_f[0] if isinstance(out_f, tuple) else out_f
    out_t = out_t[0] if isinstance(out_t, tuple) else out_t
    (out_f * fg.tensor(weights)).sum().backward()
    (out_t * torch.tensor(weights)).sum().backward()
    for a, b in zip(ins_f, ins_t):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol, err_msg=f"{name} grad")


# ---------------------------------------------------------------- convolution
CONV2D = [
    dict(),
    dict(stride=2),
    dict(stride=(3, 4)),                       # stride > kernel
    dict(padding=2),                            # padding larger than half the kernel
    dict(padding=(1, 0), dilation=(2, 1)),
    dict(padding="same", dilation=2),
    dict(padding="valid"),
    dict(groups=2),
    dict(groups=4, stride=2, padding=1),        # depthwise (groups = channels)
]


@pytest.mark.parametrize("kw", CONV2D)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(kw, bias):
    g = kw.get("groups", 1)
    w = arr(4 if g != 4 else 8, 4 // g, 3, 2)
    same("conv2d", [arr(2, 4, 7, 6), w, arr(w.shape[0]) if bias else None], kw)


@pytest.mark.parametrize("kw", [dict(), dict(stride=3, padding=2), dict(padding="same", dilation=3), dict(groups=3)])
def test_conv1d(kw):
    same("conv1d", [arr(2, 3, 9), arr(6, 3 // kw.get("groups", 1), 3), arr(6)], kw)


def test_conv_edge_cases():
    same("conv2d", [arr(0, 2, 5, 5), arr(3, 2, 3, 3), arr(3)])                       # empty batch
    same("conv2d", [arr(2, 5, 5), arr(3, 2, 3, 3), None])                            # unbatched
    x = arr(2, 6, 5, 3).transpose(0, 3, 2, 1)                                       # non-contiguous
    same("conv2d", [x, arr(4, 3, 2, 2), None], dict(stride=(1, 2)))
    same("conv2d", [arr(1, 1, 4, 4, dtype=np.float32), arr(2, 1, 3, 3, dtype=np.float32)], dict(padding=1), tol=1e-5)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(stride=2, padding=1, output_padding=1),
                                dict(stride=(3, 2), padding=(2, 0), dilation=2, groups=2, output_padding=(1, 0)),
                                dict(padding=3, stride=3)])
def test_conv_transpose2d(kw):
    g = kw.get("groups", 1)
    same("conv_transpose2d", [arr(2, 4, 5, 4), arr(4, 6 // g if g == 2 else 3, 3, 2), arr(6 if g == 2 else 3)], kw)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, output_padding=1, dilation=2), dict(groups=2, padding=1)])
def test_conv_transpose1d(kw):
    same("conv_transpose1d", [arr(2, 4, 6), arr(4, 3, 3), arr(3 * kw.get("groups", 1))], kw)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(mode):
    for n, shape in ((1, (2, 3, 7)), (2, (2, 3, 6, 5))):
        m = getattr(nn, f"Conv{n}d")(3, 4, 3, padding=2 if mode != "reflect" else 1, padding_mode=mode,
                                     dtype=fg.float64)
        t = getattr(torch.nn, f"Conv{n}d")(3, 4, 3, padding=2 if mode != "reflect" else 1, padding_mode=mode,
                                           dtype=torch.float64)
        t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
        x = arr(*shape)
        np.testing.assert_allclose(m(fg.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-10,
                                   atol=1e-10)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(3, 2), dilation=(1, 2), padding=1, stride=2),
                                dict(kernel_size=3, stride=4)])
def test_unfold_fold(kw):
    x = arr(2, 3, 7, 6)
    same("unfold", [x], kw)
    cols = torch.nn.functional.unfold(torch.tensor(x), **kw)
    same("fold", [arr(*cols.shape), (7, 6)], kw)
    c = arr(*cols.shape)
    np.testing.assert_allclose(nn.Fold((7, 6), **kw)(fg.tensor(c)).numpy(),
                               torch.nn.Fold((7, 6), **kw)(torch.tensor(c)).numpy(), rtol=1e-12, atol=1e-12)
    assert repr(nn.Fold((7, 6), **kw)) == repr(torch.nn.Fold((7, 6), **kw))


def test_conv_modules_init_and_repr():
    fg.manual_seed(0)
    m = nn.Conv2d(4, 8, (3, 5), stride=2, padding=1, groups=2, bias=True)
    assert tuple(m.weight.shape) == (8, 2, 3, 5) and tuple(m.bias.shape) == (8,)
    bound = 1 / np.sqrt(2 * 3 * 5)  # kaiming_uniform(a=sqrt(5)) gives U(+-1/sqrt(fan_in)) as the bias
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.bias.detach().numpy()).max() <= bound
    assert repr(m) == repr(torch.nn.Conv2d(4, 8, (3, 5), stride=2, padding=1, groups=2))
    t = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, bias=False)
    assert tuple(t.weight.shape) == (4, 3, 3, 3) and t.bias is None
    assert repr(t) == repr(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, bias=False))
    assert repr(nn.Conv1d(2, 3, 3, padding="same", padding_mode="circular")) == repr(
        torch.nn.Conv1d(2, 3, 3, padding="same", padding_mode="circular"))
    x = fg.randn(1, 4, 5, 5)
    out = t(x, output_size=(12, 12))
    assert tuple(out.shape) == (1, 6, 12, 12)


def test_conv_errors():
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv2d(fg.randn(1, 1, 2, 2), fg.randn(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match="to have 4 channels, but got 3"):
        F.conv2d(fg.randn(1, 3, 5, 5), fg.randn(2, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 2, 3, groups=2)


# ---------------------------------------------------------------- pooling and resizing
POOL2D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, stride=3),
          dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True),
          dict(kernel_size=3, stride=2, ceil_mode=True)]


@pytest.mark.parametrize("kw", POOL2D + [dict(kernel_size=(3, 2), dilation=(2, 1), padding=1, ceil_mode=True)])
def test_max_pool2d(kw):
    same("max_pool2d", [arr(2, 3, 9, 8)], dict(kw, return_indices=True))
    same("max_pool2d", [arr(3, 7, 7)], kw)


@pytest.mark.parametrize("kw", POOL2D)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(kw, count_include_pad):
    same("avg_pool2d", [arr(2, 3, 9, 8)], dict(kw, count_include_pad=count_include_pad))


def test_pool1d_and_divisor():
    same("max_pool1d", [arr(2, 3, 11)], dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, return_indices=True))
    same("avg_pool1d", [arr(2, 3, 11)], dict(kernel_size=4, stride=3, padding=2, ceil_mode=True,
                                              count_include_pad=False))
    same("avg_pool2d", [arr(2, 3, 6, 6)], dict(kernel_size=3, divisor_override=5))
    same("max_pool2d", [arr(0, 3, 6, 6)], dict(kernel_size=2))                      # empty batch


def test_max_pool_ties_send_gradient_to_the_first_maximum():
    x = np.zeros((1, 1, 4, 4))
    same("max_pool2d", [x], dict(kernel_size=2, return_indices=True))


@pytest.mark.parametrize("size", [(4, 3), (5, 7), (1, 1), (None, 2)])
def test_adaptive_pool2d(size):
    same("adaptive_avg_pool2d", [arr(2, 3, 9, 8)], dict(output_size=size))
    same("adaptive_max_pool2d", [arr(2, 3, 9, 8)], dict(output_size=size, return_indices=True))


def test_adaptive_pool1d():
    same("adaptive_avg_pool1d", [arr(2, 3, 10)], dict(output_size=4))
    same("adaptive_max_pool1d", [arr(2, 3, 10)], dict(output_size=3, return_indices=True))


@pytest.mark.parametrize("kw", [dict(size=(13, 5), mode="nearest"), dict(scale_factor=2.5, mode="nearest"),
                                dict(size=(13, 5), mode="bilinear", align_corners=True),
                                dict(scale_factor=1.7, mode="bilinear", align_corners=False),
                                dict(size=(3, 2), mode="bilinear", align_corners=False),
                                dict(scale_factor=(2, 0.5), mode="bilinear", align_corners=True)])
def test_interpolate(kw):
    same("interpolate", [arr(2, 3, 6, 5)], kw)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "area", "bilinear", "bicubic", "aa-bilinear",
                                  "aa-bicubic", "linear", "trilinear"])
def test_interpolate_modes_match_torch(mode):
    """Every mode over sizes that grow and shrink, both corner conventions, 1-3 spatial dims,
    values and the input gradient against PyTorch's; zero output sizes raise as PyTorch."""
    aa = mode.startswith("aa-")
    mode = mode[3:] if aa else mode
    n = {"linear": 1, "trilinear": 3}.get(mode, 2)
    corners = (None,) if mode in ("nearest", "nearest-exact", "area") else (False, True)
    for sz, kw, ac in itertools.product([(7, 5, 4)[:n], (3, 9, 3)[:n]],
                                        [dict(scale_factor=2), dict(scale_factor=0.45), dict(size=(4, 11, 5)[:n]),
                                         dict(scale_factor=1.7)], corners):
        x = arr(2, 3, *sz)
        outs = []
        for lib in (fg, torch):
            t = lib.tensor(x, requires_grad=True)
            y = lib.nn.functional.interpolate(t, mode=mode, align_corners=ac, antialias=aa, **kw)
            (y * lib.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)))).sum().backward()
            outs.append((y.detach().numpy(), t.grad.numpy()))
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"{mode} {sz} {kw} {ac} {aa}")
    with pytest.raises(RuntimeError, match="sizes should be greater than 0"):
        F.interpolate(fg.zeros((1, 1) + (3,) * n), scale_factor=0.3, mode="nearest")
    with pytest.raises(NotImplementedError, match="needs 3D input"):
        F.interpolate(fg.zeros(1, 1, 3, 3), scale_factor=2, mode="linear")


def test_composite_outputs_are_laid_out_as_torch():
    """Convolutions, pools, resizing and attention give their results in PyTorch's memory
    layout (C order; attention follows the query), so ``view`` works on them as in PyTorch,
    and so does an input gradient from ``autograd.grad`` (a gradient penalty's view)."""
    def layouts(lib):
        F_, nn_ = lib.nn.functional, lib.nn
        lib.manual_seed(0)
        x = lib.tensor(arr(2, 4, 8, 8))
        q = lib.tensor(arr(2, 5, 2, 4)).transpose(1, 2)
        xr = lib.tensor(arr(3, 3, 8, 8), requires_grad=True)
        g, = lib.autograd.grad(nn_.Conv2d(3, 4, 4, 2, 1).double()(xr).sum(), xr, create_graph=True)
        outs = [F_.avg_pool2d(x, 4), F_.avg_pool1d(x[0], 2), nn_.Conv2d(4, 4, 3).double()(x),
                nn_.Conv2d(4, 4, 3, groups=2).double()(x), nn_.ConvTranspose2d(4, 2, 3, stride=2).double()(x),
                nn_.Conv1d(4, 3, 3).double()(x[0, :, 0]), F_.interpolate(x, scale_factor=2),
                F_.interpolate(x, scale_factor=2, mode="bilinear"), F_.adaptive_avg_pool2d(x, (2, 2)),
                F_.scaled_dot_product_attention(q, q, q), g]
        outs[-2] = outs[-2].transpose(1, 2).reshape(2, 5, 8)  # (a view when laid out as the query)
        return [t.stride() for t in outs], [t.reshape(t.shape[0], -1).shape for t in outs[:-2]] + \
            [outs[-2].view(10, 8).shape, g.view(3, -1).shape]
    assert layouts(fg) == layouts(torch)


def test_interpolate_linear_and_pixel_shuffle():
    same("interpolate", [arr(2, 3, 6)], dict(size=11, mode="linear"))
    same("pixel_shuffle", [arr(2, 8, 3, 4)], dict(upscale_factor=2))
    same("pixel_unshuffle", [arr(2, 2, 6, 4)], dict(downscale_factor=2))


def test_pool_modules_repr_and_values():
    for ours, ref in ((nn.MaxPool2d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
                      (nn.AvgPool2d(2), torch.nn.AvgPool2d(2)), (nn.AdaptiveAvgPool2d((2, 3)),
                                                                torch.nn.AdaptiveAvgPool2d((2, 3))),
                      (nn.AdaptiveMaxPool2d(2), torch.nn.AdaptiveMaxPool2d(2)), (nn.MaxPool1d(2), torch.nn.MaxPool1d(2)),
                      (nn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear")),
                      (nn.PixelShuffle(2), torch.nn.PixelShuffle(2)), (nn.Unfold(2, padding=1),
                                                                       torch.nn.Unfold(2, padding=1))):
        assert repr(ours) == repr(ref)
        x = arr(2, 4, 6, 6) if not isinstance(ours, nn.MaxPool1d) else arr(2, 4, 6)
        np.testing.assert_allclose(ours(fg.tensor(x)).numpy(), ref(torch.tensor(x)).numpy(), rtol=1e-10, atol=1e-10)


def test_pool_errors():
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(fg.randn(1, 1, 5, 5), 2, padding=2)


# ---------------------------------------------------------------- normalization
def _pair(ours, ref, x, steps=3):
    """Run both modules on the same inputs; compare outputs, input grads and buffers."""
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    for i in range(steps):
        xi = x * (1 + i)
        a, b = fg.tensor(xi, requires_grad=True), torch.tensor(xi, requires_grad=True)
        oa, ob = ours(a), ref(b)
        np.testing.assert_allclose(oa.detach().numpy(), ob.detach().numpy(), rtol=1e-9, atol=1e-9)
        w = arr(*ob.shape)
        (oa * fg.tensor(w)).sum().backward()
        (ob * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-9)
    for (k, v), (k2, v2) in zip(ours.state_dict().items(), ref.state_dict().items()):
        assert k == k2
        np.testing.assert_allclose(v.numpy(), v2.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.3, affine=False), dict(momentum=None),
                                dict(track_running_stats=False)])
@pytest.mark.parametrize("n,shape", [(1, (5, 3)), (1, (4, 3, 6)), (2, (4, 3, 5, 2))])
def test_batch_norm_train_and_eval(kw, n, shape):
    ours = getattr(nn, f"BatchNorm{n}d")(3, dtype=fg.float64, **kw)
    ref = getattr(torch.nn, f"BatchNorm{n}d")(3, dtype=torch.float64, **kw)
    if ours.affine:
        ours.weight.data = fg.tensor(arr(3))
        ours.bias.data = fg.tensor(arr(3))
    x = arr(*shape)
    _pair(ours, ref, x)
    ours.eval(), ref.eval()
    _pair(ours, ref, x, steps=1)
    assert repr(ours) == repr(ref)


def test_batch_norm_functional_and_errors():
    x = arr(4, 3, 5)
    rm, rv = arr(3), np.abs(arr(3)) + 0.5
    same("batch_norm", [x, rm, rv, arr(3), arr(3)], dict(training=False, eps=1e-3), constant=(1, 2))
    same("batch_norm", [x, None, None], dict(training=True))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(fg.randn(1, 3))
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(fg.randn(2, 3, 4))


@pytest.mark.parametrize("kw", [dict(), dict(affine=True), dict(track_running_stats=True)])
@pytest.mark.parametrize("n,shape", [(1, (2, 3, 6)), (2, (2, 3, 4, 5)), (2, (3, 4, 5))])
def test_instance_norm(kw, n, shape):
    ours = getattr(nn, f"InstanceNorm{n}d")(3, dtype=fg.float64, **kw)
    ref = getattr(torch.nn, f"InstanceNorm{n}d")(3, dtype=torch.float64, **kw)
    _pair(ours, ref, arr(*shape))
    ours.eval(), ref.eval()
    _pair(ours, ref, arr(*shape), steps=1)


@pytest.mark.parametrize("groups,affine", [(1, True), (2, True), (6, False)])
def test_group_norm(groups, affine):
    ours, ref = nn.GroupNorm(groups, 6, affine=affine, dtype=fg.float64), torch.nn.GroupNorm(groups, 6, affine=affine,
                                                                                             dtype=torch.float64)
    if affine:
        ours.weight.data, ours.bias.data = fg.tensor(arr(6)), fg.tensor(arr(6))
    _pair(ours, ref, arr(2, 6, 3, 2), steps=1)
    assert repr(ours) == repr(ref)


@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm_and_normalize(eps):
    ours, ref = nn.RMSNorm((4, 3), eps=eps, dtype=fg.float64), torch.nn.RMSNorm((4, 3), eps=eps, dtype=torch.float64)
    ours.weight.data = fg.tensor(arr(4, 3))
    _pair(ours, ref, arr(2, 4, 3), steps=1)
    assert repr(ours) == repr(ref)
    same("normalize", [arr(3, 5)], dict(p=1.0, dim=0))
    same("rms_norm", [arr(2, 5)], dict(normalized_shape=(5,)))


# ---------------------------------------------------------------- float64 finite differences
GRAD_CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2)), [(2, 2, 5, 6), (3, 2, 2, 2),
                                                                                         (3,)]),
    "conv2d_groups": (lambda x, w: F.conv2d(x, w, groups=2, padding="same"), [(1, 4, 4, 4), (4, 2, 3, 3)]),
    "conv1d_reflect": (lambda x, w: nn.functional.conv1d(F.pad(x, (2, 2), mode="reflect"), w), [(2, 2, 5), (2, 2, 3)]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
                         [(1, 2, 3, 3), (2, 2, 3, 3)]),
    "fold": (lambda c: F.fold(c, (4, 4), 2, stride=1), [(1, 8, 9)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 1, ceil_mode=True), [(1, 2, 4, 4)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [(1, 2, 5, 5)]),
    "adaptive_max": (lambda x: F.adaptive_max_pool2d(x, (2, 3)), [(1, 2, 5, 4)]),
    "adaptive_avg": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [(1, 2, 5, 4)]),
    "bilinear": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"), [(1, 1, 3, 4)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(3, 2, 2, 2), (2,), (2,)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 3), (4,), (4,)]),
    "instance_norm": (lambda x: F.instance_norm(x), [(2, 2, 5)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (3,), w), [(2, 3), (3,)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck_and_gradgradcheck(name):
    fn, shapes = GRAD_CASES[name]
    ins = [fg.tensor(arr(*s), requires_grad=True) for s in shapes]
    assert gradcheck(fn, ins, eps=1e-6, atol=1e-6)
    assert gradgradcheck(fn, ins, eps=1e-6, atol=1e-5)


# ---------------------------------------------------------------- vmap against a loop
VMAP_CASES = {
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, groups=2), [(3, 2, 4, 5, 5), (4, 2, 3, 3)], (0, None)),
    "conv2d_batched_weight": (lambda x, w: F.conv2d(x, w, stride=2), [(3, 1, 2, 5, 5), (3, 3, 2, 2, 2)], (0, 0)),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=2), [(3, 1, 2, 4), (2, 3, 3)], (0, None)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, ceil_mode=True), [(3, 2, 2, 5, 5)], (0,)),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1), [(3, 2, 2, 7)], (0,)),
    "batch_norm": (lambda x: F.batch_norm(x, None, None, training=True), [(3, 4, 2, 3)], (0,)),
    "group_norm": (lambda x: F.group_norm(x, 2), [(3, 2, 4, 3)], (0,)),
    "interpolate": (lambda x: F.interpolate(x, size=(4, 5), mode="bilinear", align_corners=True),
                    [(3, 1, 2, 3, 3)], (0,)),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap_matches_loop(name):
    fn, shapes, in_dims = VMAP_CASES[name]
    xs = [fg.tensor(arr(*s)) for s in shapes]
    got = ff.vmap(fn, in_dims=in_dims)(*xs)
    want = fg.stack([fn(*[x[i] if d == 0 else x for x, d in zip(xs, in_dims)]) for i in range(3)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_index_put_accumulate_along_one_axis_matches_numpy_add_at():
    """The sorted-segment path that convolution gradients take (duplicates, negative and
    int32 indices, a broadcast value) against ``np.add.at``; a boolean mask keeps add.at."""
    from fusegrad.ir.prims.indexing import _index_put_impl
    x = arr(3, 7, 2)
    key = ((0, 3, 1), "T", (0, 2, 1))
    for idx, v in ((np.array([[0, -1, 3], [3, 3, 6]]), arr(3, 2, 3, 2)),
                   (np.array([1, 1, -7], dtype=np.int32), arr(3, 1, 2)), (np.array([2, 2]), 1.5)):
        want = x.copy()
        np.add.at(want, (slice(None), idx, slice(None)), v)
        np.testing.assert_allclose(_index_put_impl(x, v, idx, key=key, accumulate=True), want, rtol=1e-13)
    mask = np.array([True, False] * 3 + [True])
    want = x.copy()
    np.add.at(want, (slice(None), mask, slice(None)), 1.0)
    np.testing.assert_array_equal(_index_put_impl(x, 1.0, mask, key=key, accumulate=True), want)


def test_channels_last_layouts_match_torch():
    """The channels-last tutorial's layouts: ``to``/``contiguous``/``clone``/``empty``/``*_like``
    with ``memory_format``, ``is_contiguous(memory_format=...)``, a convolution following a
    channels-last input, elementwise ops keeping it, gradients back in C order."""
    w, b, xs, zs = arr(5, 3, 3, 3), arr(5), arr(4, 3, 8, 8), arr(4, 3, 8, 8)

    def run(lib):
        seen = []
        x = lib.empty(4, 3, 8, 8).to(memory_format=lib.channels_last)
        seen += [x.stride(), x.is_contiguous(), x.is_contiguous(memory_format=lib.channels_last)]
        x = lib.empty(4, 3, 8, 8, memory_format=lib.channels_last)
        seen += [x.stride(), x.contiguous(memory_format=lib.channels_last) is x]
        y = lib.tensor(xs).contiguous(memory_format=lib.channels_last)
        seen += [y.clone().stride(), y.clone(memory_format=lib.contiguous_format).stride(),
                 lib.empty_like(y).stride(), lib.zeros_like(y).stride()]
        # flip, roll, pads (but circular) and pixel_unshuffle keep a channels-last layout
        F_ = lib.nn.functional
        seen += [y.flip(3).stride(), y.roll(1, 3).stride(), F_.pad(y, (1, 1, 1, 1)).stride(),
                 F_.pad(y, (1, 1, 1, 1), mode="reflect").stride(), F_.pad(y, (1, 1, 1, 1), mode="replicate").stride(),
                 F_.pad(y, (1, 1, 1, 1), mode="circular").stride(), F_.pixel_unshuffle(y, 2).stride(),
                 lib.zeros(3, 4).t().flip(0).stride()]
        # *_like keep the order of any input's strides (preserve_format), dense or not
        v = lib.zeros(2, 3, 4, 5)
        for t in (v.permute(0, 2, 3, 1), v[:, :, ::2], v.permute(3, 2, 1, 0)[1:], lib.zeros(3, 1).expand(3, 4),
                  y[:, :2], lib.zeros(3, 4).t()):
            seen += [lib.zeros_like(t).stride(), lib.empty_like(t, dtype=lib.float64).stride(),
                     lib.full_like(t, 2).stride(), lib.ones_like(t, memory_format=lib.contiguous_format).stride()]
        conv = lib.nn.Conv2d(3, 5, 3).double()
        with lib.no_grad():
            conv.weight.copy_(lib.tensor(w))
            conv.bias.copy_(lib.tensor(b))
        out = conv(y)
        seen += [out.stride(), lib.relu(out).stride(), (out * 2).stride()]
        z = lib.tensor(zs, requires_grad=True)
        zc = z.to(memory_format=lib.channels_last)
        (conv(zc) ** 2).sum().backward()
        seen += [z.grad.stride(), type(zc.grad_fn).__name__, lib.ones(1, 3, 1, 1).is_contiguous(
            memory_format=lib.channels_last)]
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            lib.ones(2, 3).to(memory_format=lib.channels_last)
        return seen, conv(y).detach().numpy(), z.grad.numpy()
    ours, theirs = run(fg), run(torch)
    assert ours[0] == theirs[0]
    for a, b_ in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(a, b_, rtol=1e-10, atol=1e-12)


def test_module_to_channels_last_and_grad_layouts_match_torch():
    """``model.to(memory_format=channels_last)`` lays out its 4-d parameters so; gradients
    accumulate in their leaf's layout (PyTorch's layout contract), channels-last or transposed."""
    def run(lib):
        m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.ReLU(), lib.nn.Conv2d(4, 2, 3)).double()
        m = m.to(memory_format=lib.channels_last)
        y = m(lib.tensor(arr(2, 3, 7, 7)).to(memory_format=lib.channels_last))
        y.sum().backward()
        a = lib.tensor(arr(3, 4)).t().requires_grad_()
        (a * 2).sum().backward()
        return [m[0].weight.stride(), m[0].bias.stride(), y.stride(), m[0].weight.grad.stride(),
                m[2].weight.grad.stride(), a.grad.stride()]
    assert run(fg) == run(torch)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_nn_grad_conv_input_and_weight_match_torch(nd):
    """torch.nn.grad's convolution gradients (a custom Function's conv backward calls them)."""
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 4) + (7,) * nd)
    w = rng.standard_normal((6, 2) + (3,) * nd)
    kw = dict(stride=2, padding=1, dilation=1, groups=2)
    out = getattr(torch.nn.functional, f"conv{nd}d")(torch.tensor(x), torch.tensor(w), **kw)
    g = rng.standard_normal(tuple(out.shape))
    for which in ("input", "weight"):
        f_fn, t_fn = getattr(fg.nn.grad, f"conv{nd}d_{which}"), getattr(torch.nn.grad, f"conv{nd}d_{which}")
        if which == "input":
            got = f_fn(x.shape, fg.tensor(w), fg.tensor(g), **kw)
            want = t_fn(x.shape, torch.tensor(w), torch.tensor(g), **kw)
        else:
            got = f_fn(fg.tensor(x), w.shape, fg.tensor(g), **kw)
            want = t_fn(torch.tensor(x), w.shape, torch.tensor(g), **kw)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


def test_cumulative_batch_norm_compiles_without_a_break():
    """momentum=None averages over the batches seen: the factor is computed from the counter
    as a tensor, so compiled code reads it each call instead of breaking on float()."""
    ours = nn.BatchNorm1d(3, momentum=None, dtype=fg.float64)
    ref = torch.nn.BatchNorm1d(3, momentum=None, dtype=torch.float64)
    step = fg.compile(lambda x: ours(x).square().sum(), backend="eager")
    for i in range(3):
        x = arr(6, 3) * (i + 1)
        np.testing.assert_allclose(step(fg.tensor(x)).item(), ref(torch.tensor(x)).square().sum().item(), rtol=1e-12)
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-12, err_msg=k)
    assert step.cache_info()["graph_breaks"] == []


def test_batch_norm_loads_a_state_dict_without_its_counter_as_torch():
    """A state dict with no version metadata (rebuilt by a comprehension, an old checkpoint)
    and no num_batches_tracked loads strictly: the module keeps its counter, as PyTorch's."""
    for lib in (torch, fg):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        sd = {k: v for k, v in m.state_dict().items() if "num_batches" not in k}
        res = m.load_state_dict(sd, strict=False)
        assert list(res.missing_keys) == [] and list(res.unexpected_keys) == []
        m.load_state_dict(sd)
    with pytest.raises(RuntimeError, match="num_batches_tracked"):  # (with version 2 metadata it is missing)
        kept = fg.nn.BatchNorm1d(3).state_dict()
        del kept["num_batches_tracked"]
        fg.nn.BatchNorm1d(3).load_state_dict(kept)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_convolutions_with_bias_round_once_as_torch(dtype):
    """float16/bfloat16 convolutions with a bias (and under CPU autocast) bit for bit with
    torch: the product and the bias are summed in float32 and rounded once; rounding the
    product first and then its sum with the bias was off by an ulp in a third of the outputs."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 8, 16)), rng.standard_normal((4, 8, 3)) * 0.3, rng.standard_normal(4),
              rng.standard_normal((2, 4, 9, 9)), rng.standard_normal((6, 2, 3, 3)) * 0.3, rng.standard_normal(6)]

    def run(lib):
        dt = getattr(lib, dtype)
        x, w, b, x2, w2, b2 = (lib.tensor(a, dtype=dt) for a in arrays)
        F_ = lib.nn.functional
        outs = [F_.conv1d(x, w, b, padding=1), F_.conv2d(x2, w2, b2, groups=2, stride=2), F_.conv1d(x, w, None)]
        with lib.autocast("cpu", dtype=dt):
            outs.append(F_.conv1d(x.float(), w.float(), b.float(), padding=1))
        f = lib.compile(lambda x, w, b: F_.conv1d(x, w, b, padding=1) * 2) if lib is fg else None
        if f is not None:
            outs.append(f(x, w, b))
        return [o.float().detach().numpy() for o in outs]
    got, want = run(fg), run(torch)
    want.append(want[0] * 2)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_integer_average_pooling_as_torch():
    """avg_pool on int64 keeps the dtype and truncates each window's integer sum by its
    divisor (it returned float32 averages); other integer dtypes raise torch's error."""
    m = np.array([[[[0, 1, 2, 2], [1, 0, 2, 1], [-3, 1, 2, 2], [0, 0, 1, 1]]]])
    cases = [lambda L, F: F.avg_pool2d(L.tensor(m), 2), lambda L, F: F.avg_pool1d(L.tensor(m[0]), 2),
             lambda L, F: F.avg_pool2d(L.tensor(m), 3, 1, 1, count_include_pad=False),
             lambda L, F: F.avg_pool2d(L.tensor(m), 2, divisor_override=3),
             lambda L, F: F.avg_pool3d(L.tensor(m), (1, 2, 2)), lambda L, F: F.avg_pool2d(L.tensor(m).int(), 2)]
    for case in cases:
        got = []
        for lib in (fg, torch):
            try:
                r = case(lib, lib.nn.functional)
                got.append((str(r.dtype).split(".")[-1], r.tolist()))
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                got.append((type(e).__name__, str(e)))
        assert got[0] == got[1], got


def test_channels_last_layout_follows_through_the_layers_pytorch_keeps_it_in():
    """A channels-last input gives channels-last outputs from the layers PyTorch keeps the layout
    in (a decoder's convT(x).permute(0, 2, 3, 1).view(-1, C) works), with PyTorch's strides."""
    x = np.random.default_rng(0).standard_normal((2, 8, 5, 6)).astype(np.float32)
    layers = [lambda nn: nn.ConvTranspose2d(8, 4, 2, stride=2), lambda nn: nn.MaxPool2d(2), lambda nn: nn.GroupNorm(2, 8),
              lambda nn: nn.Upsample(scale_factor=2), lambda nn: nn.Upsample(scale_factor=2, mode="bilinear"),
              lambda nn: nn.AvgPool2d(2), lambda nn: nn.AdaptiveAvgPool2d(3), lambda nn: nn.AdaptiveMaxPool2d(2),
              lambda nn: nn.PixelShuffle(2)]
    for make in layers:
        strides = []
        for T in (fg, torch):
            T.manual_seed(0)
            t = T.tensor(x).to(memory_format=T.channels_last)
            y = make(T.nn).to(memory_format=T.channels_last)(t)
            strides.append(tuple(y.stride()))
        assert strides[0] == strides[1], (make, strides)
    t = fg.tensor(x).to(memory_format=fg.channels_last)
    assert all(f(t, d).is_contiguous() for f in (fg.softmax, fg.log_softmax) for d in (1, -1))  # (C order, as PyTorch's)
    assert fg.cat([t, t], 1).is_contiguous(memory_format=fg.channels_last)
    assert fg.cat([t, t.contiguous()], 1).is_contiguous()
    y = fg.nn.ConvTranspose2d(8, 4, 2, stride=2)(t)
    assert tuple(y.permute(0, 2, 3, 1).view(-1, 4).shape) == (240, 4)


class Close:
    """An array that compares equal to another within float32 rounding."""

    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        return self.a.shape == other.a.shape and np.allclose(self.a, other.a, rtol=1e-5, atol=1e-4)

    def __repr__(self):
        return repr(self.a)


def test_stacked_permuted_images_interpolation_of_kept_sizes_and_pool_checks_as_torch():
    """A batch stacked from permuted HWC images is C-ordered, so view flattens it (PyTorch's
    channels-last test counts a size-1 batch dim's stride: it was taken for channels last);
    linear/bilinear/trilinear interpolation copies a dim that keeps its size (a 1.1 scale
    on 4 pixels); pooling, pixel (un)shuffle and a size-0 interpolation refuse as PyTorch."""
    img = np.arange(108, dtype=np.float32).reshape(6, 6, 3)
    data = {shape: arr(*shape).astype(np.float32) for shape in ((1, 1, 4, 10), (1, 1, 4), (1, 1, 4, 4, 4))}

    def run(lib):
        F_ = lib.nn.functional
        items = [lib.from_numpy(img + i).permute(2, 0, 1) for i in range(4)]
        out = []
        for xb in (lib.stack(items), lib.cat([t.unsqueeze(0) for t in items])):
            out += [xb.stride(), xb.is_contiguous(), xb.view(4, -1).sum().item()]
        for mode, shape in (("bilinear", (1, 1, 4, 10)), ("linear", (1, 1, 4)), ("trilinear", (1, 1, 4, 4, 4)),
                            ("bicubic", (1, 1, 4, 10))):
            x = lib.tensor(data[shape], requires_grad=True)
            y = F_.interpolate(x, scale_factor=1.1, mode=mode)
            (y * lib.arange(y.numel()).reshape(y.shape)).sum().backward()
            out += [tuple(y.shape), Close(y.detach().numpy()), Close(x.grad.numpy())]
        t = lib.rand(1, 4, 7, 7)
        for f in (lambda: F_.interpolate(t, size=(0, 4), mode="bilinear"),
                  lambda: F_.interpolate(t, scale_factor=(0.1, 1.0), mode="bilinear", recompute_scale_factor=True),
                  lambda: F_.pixel_shuffle(t, 0), lambda: F_.pixel_unshuffle(t, 0),
                  lambda: F_.max_pool2d(t, 3, 1, padding=2, dilation=2), lambda: F_.max_pool2d(t, 3, 1, 1, 2)):
            try:
                f()
                out.append("ok")
            except Exception as e:  # noqa: BLE001
                out.append((type(e).__name__, str(e)[:40]))
        return out
    assert run(fg) == run(torch)
