"""Rprop, ASGD, EmbeddingBag, 3-d convolution and pooling, LP pooling and max unpooling
against PyTorch: values and float64 gradients over small parameter grids, module reprs,
optimizer trajectories and state."""
import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytestmark = pytest.mark.torch

RNG = np.random.default_rng(4321)


def arr(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _as(lib, a, grad):
    if not isinstance(a, np.ndarray):
        return a
    return lib.tensor(a, requires_grad=grad and a.dtype.kind == "f")


def same(name, args, kwargs=None, tol=1e-10):
    """fusegrad's functional ``name`` equals PyTorch's in value, dtype and shape (every
    output), and so do the gradients of a random linear function of the first output with
    respect to the floating array arguments."""
    kwargs = kwargs or {}
    ins_f = [_as(fg, a, True) for a in args]
    ins_t = [_as(torch, a, True) for a in args]
    ours = getattr(F, name)(*ins_f, **kwargs)
    ref = getattr(torch.nn.functional, name)(*ins_t, **kwargs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert tuple(a.shape) == tuple(b.shape), (name, kwargs)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"{name} {kwargs}")
    if ref[0].numel() == 0 or not ref[0].requires_grad:
        return
    weights = arr(*ref[0].shape)
    (ours[0] * fg.tensor(weights)).sum().backward()
    (ref[0] * torch.tensor(weights)).sum().backward()
    for a, b in zip(ins_f, ins_t):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol,
                                       err_msg=f"{name} {kwargs} grad")


def raises_like(fn_args, exc, same_message=True):
    """Both libraries raise ``exc`` with the same message."""
    fn, args, kwargs = fn_args
    msgs = []
    for lib in (fg, torch):
        with pytest.raises(exc) as info:
            getattr(lib.nn.functional, fn)(*[_as(lib, a, False) for a in args],
                                           **{k: _as(lib, v, False) for k, v in kwargs.items()})
        msgs.append(str(info.value))
    # PyTorch's C++ checks append the offending tensor on a second line
    assert msgs[0].splitlines()[0] == msgs[1].splitlines()[0] or not same_message


# ---------------------------------------------------------------- optimizers
def trajectory(lib, cls, kwargs, steps=5, dtype="float64"):
    rng = np.random.default_rng(0)
    params = [lib.tensor(rng.standard_normal((3, 4)), dtype=getattr(lib, dtype), requires_grad=True),
              lib.tensor(rng.standard_normal(5), dtype=getattr(lib, dtype), requires_grad=True)]
    opt = getattr(lib.optim, cls)(params, **kwargs)
    out = []
    for i in range(steps):
        for p in params:
            # alternate signs so that Rprop's step sizes both grow and shrink
            p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)) * (1 if i % 2 else -1), dtype=getattr(lib, dtype))
        opt.step()
        out.append([p.detach().numpy().copy() for p in params])
    return out, opt


OPTIMIZERS = [
    ("Rprop", {}),
    ("Rprop", dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))),
    ("Rprop", dict(maximize=True)),
    ("ASGD", {}),
    ("ASGD", dict(lr=0.1, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1)),
    ("ASGD", dict(maximize=True, t0=0)),
]


@pytest.mark.parametrize("cls,kwargs", OPTIMIZERS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_optimizer_trajectory(cls, kwargs, dtype):
    ours, opt_f = trajectory(fg, cls, kwargs, dtype=dtype)
    ref, opt_t = trajectory(torch, cls, kwargs, dtype=dtype)
    tol = 1e-12 if dtype == "float64" else 1e-6
    for a, b in zip(ours, ref):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol)
    sf, st = opt_f.state_dict(), opt_t.state_dict()
    assert sorted(sf["param_groups"][0]) == sorted(st["param_groups"][0])
    for k in st["param_groups"][0]:
        if k != "params":
            assert sf["param_groups"][0][k] == st["param_groups"][0][k], k
    for i in st["state"]:
        assert sorted(sf["state"][i]) == sorted(st["state"][i])
        for k, v in st["state"][i].items():
            np.testing.assert_allclose(sf["state"][i][k].numpy(), v.numpy(), rtol=tol, atol=tol, err_msg=k)


def test_optimizer_state_dict_roundtrip():
    for cls in ("Rprop", "ASGD"):
        full, _ = trajectory(fg, cls, dict(lr=0.05), steps=4)
        # 2 steps, save, load into a fresh optimizer on copies, 2 more steps
        rng = np.random.default_rng(0)
        params = [fg.tensor(rng.standard_normal((3, 4)), requires_grad=True),
                  fg.tensor(rng.standard_normal(5), requires_grad=True)]
        opt = getattr(fg.optim, cls)(params, lr=0.05)
        grads = []
        for i in range(4):
            grads.append([rng.standard_normal(tuple(p.shape)) * (1 if i % 2 else -1) for p in params])
        for i in range(2):
            for p, g in zip(params, grads[i]):
                p.grad = fg.tensor(g)
            opt.step()
        saved = opt.state_dict()
        params2 = [fg.tensor(p.detach().numpy(), requires_grad=True) for p in params]
        opt2 = getattr(fg.optim, cls)(params2, lr=0.05)
        opt2.load_state_dict(saved)
        for i in range(2, 4):
            for p, g in zip(params2, grads[i]):
                p.grad = fg.tensor(g)
            opt2.step()
        for x, y in zip(params2, full[-1]):
            np.testing.assert_allclose(x.detach().numpy(), y, rtol=1e-12, atol=1e-12)


def test_optimizer_errors():
    w = fg.zeros(2, requires_grad=True)
    for cls, kwargs, msg in [("Rprop", dict(lr=-1), "Invalid learning rate: -1"),
                             ("Rprop", dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
                             ("ASGD", dict(lr=-0.1), "Invalid learning rate: -0.1"),
                             ("ASGD", dict(weight_decay=-1), "Invalid weight_decay value: -1")]:
        with pytest.raises(ValueError, match=msg):
            getattr(fg.optim, cls)([w], **kwargs)
        with pytest.raises(ValueError, match=msg):
            getattr(torch.optim, cls)([torch.zeros(2, requires_grad=True)], **kwargs)


def test_optimizers_compiled():
    """One compiled training step per optimizer follows the eager one (and PyTorch's)."""
    for cls, kwargs in [("Rprop", dict(lr=0.1)), ("ASGD", dict(lr=0.1, t0=1))]:
        results = []
        for lib, compiled in ((torch, False), (fg, False), (fg, True)):
            w = lib.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
            opt = getattr(lib.optim, cls)([w], **kwargs)

            def step():
                opt.zero_grad()
                (w * w * w).sum().backward()
                opt.step()
            if compiled:
                step = fg.compile(step)
            for _ in range(4):
                step()
            results.append(w.detach().numpy())
        np.testing.assert_allclose(results[1], results[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(results[2], results[0], rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- embedding bags
IDX = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 4])
EMBEDDING_BAG = [
    dict(offsets=np.array([0, 2, 2, 7])),                           # an empty bag
    dict(offsets=np.array([0, 3, 6, 10]), include_last_offset=True),
    dict(offsets=np.array([0, 3, 3, 10]), include_last_offset=True),
    dict(offsets=np.array([0, 4]), padding_idx=4),
    dict(offsets=np.array([0, 1, 3]), padding_idx=-6),
    dict(offsets=np.array([0, 5])),
]


@pytest.mark.parametrize("kw", EMBEDDING_BAG)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets(kw, mode):
    kw = dict(kw)
    offsets = kw.pop("offsets")
    same("embedding_bag", [IDX, arr(10, 3), offsets], dict(mode=mode, **kw))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_2d(mode, padding_idx):
    idx = np.array([[1, 2, 2, 0], [3, 2, 3, 2], [2, 2, 2, 2]])
    same("embedding_bag", [idx, arr(6, 4)], dict(mode=mode, padding_idx=padding_idx))


@pytest.mark.parametrize("two_d", [False, True])
def test_embedding_bag_per_sample_weights(two_d):
    if two_d:
        idx, psw, kw = IDX.reshape(2, 5), arr(2, 5), {}
        args = [idx, arr(10, 3), None]
    else:
        idx, psw = IDX, arr(10)
        args = [idx, arr(10, 3), np.array([0, 3, 3, 8])]
    same("embedding_bag", args, dict(mode="sum", per_sample_weights=None))
    ins_f = [_as(fg, a, True) for a in args]
    ins_t = [_as(torch, a, True) for a in args]
    pf, pt = fg.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    of = F.embedding_bag(*ins_f, mode="sum", per_sample_weights=pf, padding_idx=4)
    ot = torch.nn.functional.embedding_bag(*ins_t, mode="sum", per_sample_weights=pt, padding_idx=4)
    np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = arr(*ot.shape)
    (of * fg.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(pf.grad.numpy(), pt.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ins_f[1].grad.numpy(), ins_t[1].grad.numpy(), rtol=1e-12, atol=1e-12)


def test_embedding_bag_scale_grad_by_freq():
    """Values only: how PyTorch scales the gradient by frequency here was not matched."""
    for mode in ("sum", "mean"):
        w, off = arr(10, 3), np.array([0, 4, 7])
        of = F.embedding_bag(fg.tensor(IDX), fg.tensor(w), fg.tensor(off), mode=mode, scale_grad_by_freq=True)
        ot = torch.nn.functional.embedding_bag(torch.tensor(IDX), torch.tensor(w), torch.tensor(off), mode=mode,
                                               scale_grad_by_freq=True)
        np.testing.assert_allclose(of.numpy(), ot.numpy(), rtol=1e-12, atol=1e-12)


def test_embedding_bag_errors():
    w = arr(10, 3)
    raises_like(("embedding_bag", [IDX, w], {}), ValueError)
    raises_like(("embedding_bag", [IDX.reshape(2, 5), w, np.array([0, 1])], {}), ValueError,
                same_message=False)  # the message names the offsets' class
    raises_like(("embedding_bag", [IDX, w, np.array([0, 1])], dict(mode="prod")), ValueError)
    raises_like(("embedding_bag", [IDX, w, np.array([0, 1])], dict(mode="max", scale_grad_by_freq=True)),
                ValueError)
    raises_like(("embedding_bag", [IDX, w, np.array([0, 1])], dict(mode="mean", per_sample_weights=arr(10))),
                NotImplementedError)
    raises_like(("embedding_bag", [IDX, w, np.array([0, 1])], dict(per_sample_weights=arr(9))), ValueError,
                same_message=False)  # the message prints the shapes' classes
    raises_like(("embedding_bag", [IDX, w, np.array([1, 3])], {}), RuntimeError)
    raises_like(("embedding_bag", [IDX, w, np.array([0, 11])], {}), RuntimeError)
    raises_like(("embedding_bag", [IDX, w, np.array([0, 2])], dict(padding_idx=10)), RuntimeError)
    raises_like(("embedding_bag", [IDX, arr(10), np.array([0, 2])], {}), ValueError)


def test_embedding_bag_module():
    for kwargs in [{}, dict(mode="sum", padding_idx=-1, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True),
                   dict(mode="max", include_last_offset=True)]:
        mf, mt = nn.EmbeddingBag(10, 3, **kwargs), torch.nn.EmbeddingBag(10, 3, **kwargs)
        assert repr(mf) == repr(mt)
        assert mf.weight.shape == (10, 3)
        if kwargs.get("padding_idx") is not None:
            assert float(mf.weight[9].abs().sum()) == 0
        w = arr(10, 3)
        with fg.no_grad():
            mf.weight.copy_(fg.tensor(w))
        with torch.no_grad():
            mt.weight.copy_(torch.tensor(w))
        off = np.array([0, 3, 8]) if not kwargs.get("include_last_offset") else np.array([0, 3, 8, 10])
        of, ot = mf(fg.tensor(IDX), fg.tensor(off)), mt(torch.tensor(IDX), torch.tensor(off))
        np.testing.assert_allclose(of.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mf.weight.detach().numpy(), mt.weight.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)  # max_norm renormalised the same rows
    pre = nn.EmbeddingBag.from_pretrained(fg.tensor(arr(4, 2)), mode="sum")
    assert not pre.weight.requires_grad and repr(pre) == "EmbeddingBag(4, 2, mode='sum')"


# ---------------------------------------------------------------- 3-d convolution
@pytest.mark.parametrize("kw", [dict(), dict(stride=(1, 2, 2), padding=1), dict(dilation=(2, 1, 1), groups=2),
                                dict(padding="same")])
def test_conv3d(kw):
    g = kw.get("groups", 1)
    same("conv3d", [arr(2, 4, 5, 4, 6), arr(4, 4 // g, 2, 3, 2), arr(4)], kw)


def test_conv3d_unbatched_no_bias():
    same("conv3d", [arr(2, 3, 3, 4), arr(3, 2, 1, 2, 2)], dict(stride=2))


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2),
                                dict(stride=(1, 2, 3), output_padding=(0, 1, 2))])
def test_conv_transpose3d(kw):
    g = kw.get("groups", 1)
    same("conv_transpose3d", [arr(2, 4, 3, 2, 3), arr(4, 6 // g, 2, 2, 3), arr(6 // g * g)], kw)


def test_conv3d_modules():
    for kwargs in [dict(), dict(stride=2, padding=1, groups=2, bias=False), dict(padding=1, padding_mode="reflect")]:
        mf, mt = nn.Conv3d(2, 4, 3, **kwargs), torch.nn.Conv3d(2, 4, 3, **kwargs)
        assert repr(mf) == repr(mt)
        assert tuple(mf.weight.shape) == tuple(mt.weight.shape)
        with torch.no_grad():
            mt.weight.copy_(torch.tensor(mf.weight.detach().numpy()))
            if mt.bias is not None:
                mt.bias.copy_(torch.tensor(mf.bias.detach().numpy()))
        x = arr(1, 2, 4, 5, 4, dtype=np.float32)
        np.testing.assert_allclose(mf(fg.tensor(x)).detach().numpy(), mt(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
    mf = nn.ConvTranspose3d(2, 4, (1, 2, 3), stride=2, output_padding=1, groups=2, bias=False)
    mt = torch.nn.ConvTranspose3d(2, 4, (1, 2, 3), stride=2, output_padding=1, groups=2, bias=False)
    assert repr(mf) == repr(mt) and tuple(mf.weight.shape) == tuple(mt.weight.shape)
    with torch.no_grad():
        mt.weight.copy_(torch.tensor(mf.weight.detach().numpy()))
    x = arr(1, 2, 2, 3, 3, dtype=np.float32)
    for size in (None, (4, 7, 8)):
        np.testing.assert_allclose(mf(fg.tensor(x), output_size=size).detach().numpy(),
                                   mt(torch.tensor(x), output_size=size).detach().numpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- 3-d pooling
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(1, 2, 3), stride=1, padding=(0, 1, 1)),
                                dict(kernel_size=2, stride=2, ceil_mode=True), dict(kernel_size=2, dilation=2)])
def test_max_pool3d(kw):
    same("max_pool3d", [arr(2, 2, 5, 5, 6)], dict(return_indices=True, **kw))
    same("max_pool3d", [arr(2, 5, 5, 6)], kw)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
                                dict(kernel_size=(1, 2, 2), divisor_override=3)])
def test_avg_pool3d(kw):
    same("avg_pool3d", [arr(2, 2, 5, 5, 6)], kw)


@pytest.mark.parametrize("size", [2, (3, None, 2), (1, 4, 5)])
def test_adaptive_pool3d(size):
    same("adaptive_avg_pool3d", [arr(2, 2, 5, 4, 6)], dict(output_size=size))
    same("adaptive_max_pool3d", [arr(2, 2, 5, 4, 6)], dict(output_size=size, return_indices=True))
    same("adaptive_max_pool3d", [arr(2, 5, 4, 6)], dict(output_size=size))


def test_pool3d_modules():
    x = arr(1, 2, 4, 5, 6)
    assert repr(nn.MaxPool3d((1, 2, 3), stride=1, padding=1, dilation=2, return_indices=True, ceil_mode=True)) == \
        repr(torch.nn.MaxPool3d((1, 2, 3), stride=1, padding=1, dilation=2, return_indices=True, ceil_mode=True))
    for mods in [lambda m: m.MaxPool3d(2), lambda m: m.MaxPool3d((1, 2, 3), stride=1, padding=(0, 1, 1), dilation=2,
                                                                  return_indices=True, ceil_mode=True),
                 lambda m: m.AvgPool3d(2), lambda m: m.AvgPool3d(3, 2, 1, True, False, 4),
                 lambda m: m.AdaptiveAvgPool3d((2, None, 3)), lambda m: m.AdaptiveMaxPool3d(2, return_indices=True)]:
        mf, mt = mods(nn), mods(torch.nn)
        assert repr(mf) == repr(mt)
        of, ot = mf(fg.tensor(x)), mt(torch.tensor(x))
        of = of if isinstance(of, tuple) else (of,)
        ot = ot if isinstance(ot, tuple) else (ot,)
        for a, b in zip(of, ot):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- LP pooling
@pytest.mark.parametrize("norm_type", [1, 2, 3.0, 1.5, float("inf")])
@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=2, stride=1), dict(kernel_size=2, ceil_mode=True)])
def test_lp_pool1d(norm_type, kw):
    x = np.abs(arr(2, 3, 7)) + 0.1 if norm_type in (1.5, 3.0) else arr(2, 3, 7)
    same("lp_pool1d", [x], dict(norm_type=norm_type, **kw))


@pytest.mark.parametrize("norm_type", [1, 2, 1.5, float("inf")])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(1, 2)),
                                dict(kernel_size=2, ceil_mode=True)])
def test_lp_pool2d(norm_type, kw):
    x = np.abs(arr(2, 3, 5, 7)) + 0.1 if norm_type == 1.5 else arr(2, 3, 5, 7)
    same("lp_pool2d", [x], dict(norm_type=norm_type, **kw))
    same("lp_pool2d", [x[0]], dict(norm_type=norm_type, **kw))


def test_lp_pool_modules():
    for mods, x in [(lambda m: m.LPPool1d(2, 3), arr(2, 3, 7)),
                    (lambda m: m.LPPool2d(1.5, (2, 3), stride=1, ceil_mode=True), np.abs(arr(2, 3, 5, 7))),
                    (lambda m: m.LPPool3d(2, 2), arr(1, 2, 4, 4, 4))]:
        mf, mt = mods(nn), mods(torch.nn)
        assert repr(mf) == repr(mt)
        np.testing.assert_allclose(mf(fg.tensor(x)).detach().numpy(), mt(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- max unpooling
def _pooled(n, x, **kw):
    vals, idx = getattr(torch.nn.functional, f"max_pool{n}d")(torch.tensor(x), return_indices=True, **kw)
    return vals.numpy(), idx.numpy()


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, output_size=[5, 7]), dict(kernel_size=2, stride=1)])
def test_max_unpool2d(kw):
    kw = dict(kw)
    out_size = kw.pop("output_size", None)
    shape = (2, 3, 4, 6) if kw == dict(kernel_size=2) and out_size is None else (2, 3, 5, 7)
    v, i = _pooled(2, arr(*shape), **kw)
    same("max_unpool2d", [v, i], dict(output_size=out_size, **kw))
    same("max_unpool2d", [v[0], i[0]], dict(output_size=out_size, **kw))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, output_size=[7])])
def test_max_unpool1d(kw):
    kw = dict(kw)
    out_size = kw.pop("output_size", None)
    v, i = _pooled(1, arr(2, 3, 7), **kw)
    same("max_unpool1d", [v, i], dict(output_size=out_size, **kw))


def test_max_unpool_roundtrip_and_modules():
    x = arr(1, 2, 4, 6)
    for lib in (fg, torch):
        pool, unpool = lib.nn.MaxPool2d(2, return_indices=True), lib.nn.MaxUnpool2d(2)
        v, i = pool(lib.tensor(x))
        out = unpool(v, i, output_size=(1, 2, 5, 7))
        assert tuple(out.shape) == (1, 2, 5, 7)
    assert repr(nn.MaxUnpool1d(2)) == repr(torch.nn.MaxUnpool1d(2))
    assert repr(nn.MaxUnpool2d((2, 3), stride=1, padding=1)) == repr(torch.nn.MaxUnpool2d((2, 3), stride=1, padding=1))
    v, i = _pooled(1, arr(1, 2, 8), kernel_size=2)
    of = nn.MaxUnpool1d(2)(fg.tensor(v), fg.tensor(i))
    ot = torch.nn.MaxUnpool1d(2)(torch.tensor(v), torch.tensor(i))
    np.testing.assert_allclose(of.numpy(), ot.numpy())


def test_max_unpool_errors():
    v, i = _pooled(2, arr(1, 1, 4, 4), kernel_size=2)
    bad = i.copy()
    bad[0, 0, 0, 0] = 100
    raises_like(("max_unpool2d", [v, bad, 2], {}), RuntimeError)
    raises_like(("max_unpool2d", [v, i[0], 2], {}), RuntimeError)
    raises_like(("max_unpool2d", [v[0, 0], i[0, 0], 2], {}), RuntimeError)
    raises_like(("max_unpool2d", [v, i, 2], dict(output_size=(9, 9))), ValueError)
    raises_like(("max_unpool2d", [v, i, 2], dict(output_size=(1, 4))), ValueError)
