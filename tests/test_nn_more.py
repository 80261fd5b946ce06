"""More of nn against PyTorch: in-place activations, shrinkage, thresholds, rrelu, gumbel_softmax,
bilinear, local_response_norm, pdist, channel_shuffle, the deprecated upsample_* and the *_with_indices
pools, the likelihood and multi-class margin losses, the padding/distance/shuffle modules, and
nn.init's orthogonal_, trunc_normal_, dirac_, eye_, sparse_ and deprecated aliases; one compiled graph."""
import math
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.nn import init

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
TF = torch.nn.functional


def np_of(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _x(shape=(3, 4), seed=0, scale=2.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape) * scale


def both(array, requires_grad=True):
    """The same float64 (or integer) array as a fusegrad and a torch tensor."""
    array = np.asarray(array)
    rg = requires_grad and array.dtype.kind == "f"
    return fg.tensor(array, requires_grad=rg), torch.tensor(array, requires_grad=rg)


def check_same(f_fn, t_fn, arrays, rtol=1e-10, atol=1e-12, grad_name=True):
    """``f_fn`` on fusegrad tensors against ``t_fn`` on torch tensors of ``arrays``: values, the
    gradients of a random weighting of the result (float inputs), and the grad_fn name."""
    fs, ts = zip(*(both(a) for a in arrays))
    fo, to = f_fn(*fs), t_fn(*ts)
    np.testing.assert_allclose(np_of(fo), np_of(to), rtol=rtol, atol=atol)
    if grad_name:
        assert type(fo.grad_fn).__name__ == type(to.grad_fn).__name__
    w = np.random.default_rng(9).standard_normal(tuple(to.shape))
    (fo * fg.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    for f, t in zip(fs, ts):
        if t.requires_grad:
            np.testing.assert_allclose(np_of(f.grad), np_of(t.grad), rtol=rtol, atol=atol)


def raises_like(f_call, t_call):
    """Both calls raise the same exception type with the same message."""
    with pytest.raises(Exception) as te:
        t_call()
    with pytest.raises(type(te.value)) as fe:
        f_call()
    assert str(fe.value) == str(te.value)


# ---------------------------------------------------------------- in-place activations
INPLACE = [("relu_", ()), ("elu_", (0.7,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.8)), ("celu_", (0.6,)),
           ("selu_", ()), ("threshold_", (0.1, -3.0)), ("rrelu_", (0.1, 0.4))]


@pytest.mark.parametrize("name, args", INPLACE)
def test_inplace_activation_functions(name, args):
    """F.<name>_ writes into its argument and returns it: values, grad_fn and gradients as PyTorch's;
    on a leaf that requires grad, PyTorch's error."""
    a = _x((3, 5), seed=1)
    fx, tx = both(a)
    fy, ty = fx * 1.0, tx * 1.0
    assert getattr(F, name)(fy, *args) is fy
    assert getattr(TF, name)(ty, *args) is ty
    np.testing.assert_allclose(np_of(fy), np_of(ty), rtol=1e-7 if name == "celu_" else 1e-12)
    assert type(fy.grad_fn).__name__ == type(ty.grad_fn).__name__
    fy.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(np_of(fx.grad), np_of(tx.grad), rtol=1e-7 if name == "celu_" else 1e-12)
    raises_like(lambda: getattr(F, name)(fx, *args), lambda: getattr(TF, name)(tx, *args))


@pytest.mark.parametrize("name, kw", [("threshold", dict(threshold=0.3, value=5.0)), ("rrelu", {}),
                                      ("selu", {}), ("celu", dict(alpha=2.0)), ("hardtanh", {})])
def test_inplace_keyword_forms(name, kw):
    fx, tx = both(_x((4, 3), seed=2))
    fy, ty = fx * 1.0, tx * 1.0
    assert getattr(F, name)(fy, inplace=True, **kw) is fy
    getattr(TF, name)(ty, inplace=True, **kw)
    np.testing.assert_allclose(np_of(fy), np_of(ty), rtol=1e-7)
    assert type(fy.grad_fn).__name__ == type(ty.grad_fn).__name__


# ---------------------------------------------------------------- elementwise activations
@pytest.mark.parametrize("name, args", [("threshold", (0.1, 20.0)), ("threshold", (-1.0, 0.0)),
                                        ("hardshrink", ()), ("hardshrink", (1.5,)), ("softshrink", ()),
                                        ("softshrink", (0.0,)), ("softshrink", (1.2,)), ("rrelu", ()),
                                        ("rrelu", (0.2, 0.2)), ("celu", (0.5,))])
def test_elementwise_activations_match_torch(name, args):
    a = _x((4, 6), seed=3)
    a[0, :3] = [0.0, 0.5, -0.5]  # on the kinks: PyTorch's strict comparisons decide the gradient
    tol = dict(rtol=1e-7, atol=1e-9) if name == "celu" else {}  # PyTorch rounds celu's alpha to float32
    check_same(lambda x: getattr(F, name)(x, *args), lambda x: getattr(TF, name)(x, *args), [a], **tol)


def test_activation_errors():
    x, t = fg.randn(3), torch.randn(3)
    raises_like(lambda: F.softshrink(x, -0.5), lambda: TF.softshrink(t, -0.5))
    raises_like(lambda: F.softshrink(x.double(), -1.0), lambda: TF.softshrink(t.double(), -1.0))
    raises_like(lambda: F.rrelu(x, 0.5, 0.1), lambda: TF.rrelu(t, 0.5, 0.1))
    raises_like(lambda: F.celu(x, 0.0), lambda: TF.celu(t, 0.0))


def test_rrelu_training_draws_slopes_in_range():
    """In training, each negative element is scaled by its own slope in [lower, upper] (so is its
    gradient); positive elements pass; the module follows train()/eval()."""
    a = _x((200,), seed=4)
    x = fg.tensor(a, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    y.sum().backward()
    neg = a < 0
    slope = np_of(y)[neg] / a[neg]
    assert slope.min() >= 0.1 and slope.max() <= 0.3 and slope.std() > 0.03
    np.testing.assert_allclose(np_of(x.grad)[neg], slope, rtol=1e-12)
    np.testing.assert_array_equal(np_of(y)[~neg], a[~neg])
    m = nn.RReLU(0.1, 0.3)
    assert not np.allclose(np_of(m(fg.tensor(a)))[neg] / a[neg], 0.2)
    m.eval()
    np.testing.assert_allclose(np_of(m(fg.tensor(a)))[neg] / a[neg], 0.2)
    z = fg.tensor(a)
    F.rrelu_(z, 0.1, 0.3, training=True)
    assert np.all((np_of(z)[neg] / a[neg] >= 0.1) & (np_of(z)[neg] / a[neg] <= 0.3))


def test_gumbel_softmax():
    """Soft samples are distributions; hard ones are the one-hot of the soft sample's argmax with its
    gradient (straight-through); the deprecated eps warns as PyTorch's."""
    logits = fg.tensor(_x((5, 4), seed=5), requires_grad=True)
    fg.manual_seed(3)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(np_of(soft).sum(1), 1.0, rtol=1e-12)
    w = fg.tensor(_x((5, 4), seed=6))
    (gs,) = fg.autograd.grad((soft * w).sum(), [logits])
    fg.manual_seed(3)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True, dim=1)
    np.testing.assert_array_equal(np_of(hard), np.eye(4)[np_of(soft).argmax(1)])
    (gh,) = fg.autograd.grad((hard * w).sum(), [logits])
    np.testing.assert_allclose(np_of(gh), np_of(gs), rtol=1e-10, atol=1e-12)
    hard0 = F.gumbel_softmax(logits, hard=True, dim=0)
    np.testing.assert_array_equal(np_of(hard0).sum(0), 1.0)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect."):
        F.gumbel_softmax(logits, eps=1e-5)


# ---------------------------------------------------------------- bilinear, local_response_norm, pdist, shuffles
@pytest.mark.parametrize("shape1, shape2, bias", [((4, 3), (4, 5), True), ((4, 3), (4, 5), False),
                                                  ((2, 3, 3), (2, 3, 5), True), ((3,), (5,), True)])
def test_bilinear_matches_torch(shape1, shape2, bias):
    arrays = [_x(shape1, 1), _x(shape2, 2), _x((2, 3, 5), 3)] + ([_x((2,), 4)] if bias else [])
    check_same(F.bilinear, TF.bilinear, arrays, grad_name=False)


def test_bilinear_errors():
    f = [fg.randn(4, 5), fg.randn(4, 6), fg.randn(3, 5, 5), fg.randn(4, 5), fg.randn(3, 5), fg.randn(4)]
    t = [torch.tensor(a.numpy()) for a in f]
    raises_like(lambda: F.bilinear(f[0], f[1], f[2]), lambda: TF.bilinear(t[0], t[1], t[2]))
    raises_like(lambda: F.bilinear(f[0], f[4], f[2]), lambda: TF.bilinear(t[0], t[4], t[2]))
    raises_like(lambda: F.bilinear(f[0], f[3], f[2], f[5]), lambda: TF.bilinear(t[0], t[3], t[2], t[5]))


@pytest.mark.parametrize("shape, size", [((2, 5, 4), 3), ((2, 6, 3, 2), 5), ((1, 4, 2, 2, 3), 2), ((2, 3, 4), 1)])
def test_local_response_norm_matches_torch(shape, size):
    check_same(lambda x: F.local_response_norm(x, size, alpha=0.1, beta=0.6, k=1.5),
               lambda x: TF.local_response_norm(x, size, alpha=0.1, beta=0.6, k=1.5), [_x(shape, 7)])
    m, tm = nn.LocalResponseNorm(size), torch.nn.LocalResponseNorm(size)
    assert repr(m) == repr(tm)
    np.testing.assert_allclose(np_of(m(fg.tensor(_x(shape)))), np_of(tm(torch.tensor(_x(shape)))), rtol=1e-12)


def test_local_response_norm_edges():
    raises_like(lambda: F.local_response_norm(fg.randn(3, 4), 2), lambda: TF.local_response_norm(torch.randn(3, 4), 2))
    assert tuple(F.local_response_norm(fg.randn(0, 3, 4), 2).shape) == (0, 3, 4)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, 0.0, math.inf])
def test_pdist_matches_torch(p):
    """Duplicate rows (zero distances) and tied coordinates included: their gradients are PyTorch's."""
    a = _x((5, 3), seed=8)
    a[3] = a[1]
    a[4, 0] = a[0, 0]
    a[2] = a[0] + np.array([1.5, -1.5, 0.5])
    check_same(lambda x: F.pdist(x, p), lambda x: TF.pdist(x, p), [a])


def test_pdist_shapes_and_errors():
    assert tuple(F.pdist(fg.randn(1, 3)).shape) == (0,) and tuple(F.pdist(fg.randn(0, 3)).shape) == (0,)
    for f, t in [(fg.randn(2, 3, 4), torch.randn(2, 3, 4)), (fg.randn(3), torch.randn(3)),
                 (fg.ones(3, 3, dtype=fg.int64), torch.ones(3, 3, dtype=torch.long)),
                 (fg.ones(3, 2, dtype=fg.bfloat16), torch.ones(3, 2, dtype=torch.bfloat16)),
                 (fg.ones(3, 2, dtype=fg.float16), torch.ones(3, 2, dtype=torch.float16))]:
        raises_like(lambda: F.pdist(f), lambda: TF.pdist(t))
    raises_like(lambda: F.pdist(fg.randn(3, 2), -1.0), lambda: TF.pdist(torch.randn(3, 2), -1.0))


def test_channel_shuffle_matches_torch():
    check_same(lambda x: F.channel_shuffle(x, 3), lambda x: TF.channel_shuffle(x, 3), [_x((2, 6, 2, 3))])
    check_same(lambda x: nn.ChannelShuffle(2)(x), lambda x: torch.nn.ChannelShuffle(2)(x), [_x((2, 4, 5))])
    assert repr(nn.ChannelShuffle(2)) == repr(torch.nn.ChannelShuffle(2))
    for shape, g in [((4, 6), 2), ((1, 4, 3), 0), ((1, 5, 3), 2)]:
        raises_like(lambda: F.channel_shuffle(fg.randn(*shape), g),
                    lambda: TF.channel_shuffle(torch.randn(*shape), g))


@pytest.mark.parametrize("name, kw", [("upsample_nearest", dict(scale_factor=2)), ("upsample_nearest", dict(size=5)),
                                      ("upsample_bilinear", dict(scale_factor=2)),
                                      ("upsample_bilinear", dict(size=(3, 5)))])
def test_deprecated_upsample_aliases(name, kw):
    a = _x((1, 2, 3, 4))
    with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate`"):
        out = getattr(F, name)(fg.tensor(a), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = getattr(TF, name)(torch.tensor(a), **kw)
    np.testing.assert_allclose(np_of(out), np_of(ref), rtol=1e-12)


def test_pools_with_indices():
    a = _x((2, 3, 7, 6))
    fx, tx = fg.tensor(a), torch.tensor(a)
    calls = [("max_pool2d_with_indices", (fx, 3), (tx, 3), dict(stride=2, padding=1)),
             ("max_pool1d_with_indices", (fx[0],), (tx[0],), dict(kernel_size=2, ceil_mode=True)),
             ("adaptive_max_pool2d_with_indices", (fx, (3, 4)), (tx, (3, 4)), {}),
             ("adaptive_max_pool1d_with_indices", (fx[0],), (tx[0],), dict(output_size=4))]
    for name, fargs, targs, kw in calls:
        (fv, fi), (tv, ti) = getattr(F, name)(*fargs, **kw), getattr(TF, name)(*targs, **kw)
        np.testing.assert_array_equal(np_of(fv), np_of(tv))
        np.testing.assert_array_equal(np_of(fi), np_of(ti))


# ---------------------------------------------------------------- losses
@pytest.mark.parametrize("var_shape", [(4, 3), (4,), (4, 1), (1, 3)])
@pytest.mark.parametrize("full, reduction", [(False, "mean"), (True, "sum"), (False, "none")])
def test_gaussian_nll_loss_matches_torch(var_shape, full, reduction):
    var = np.abs(_x(var_shape, 11)) + 0.1
    var.flat[0] = 1e-9  # below eps: clamped, its gradient passed through as PyTorch's
    check_same(lambda i, t, v: F.gaussian_nll_loss(i, t, v, full=full, reduction=reduction),
               lambda i, t, v: TF.gaussian_nll_loss(i, t, v, full=full, reduction=reduction),
               [_x((4, 3), 12), _x((4, 3), 13), var], grad_name=False)


def test_gaussian_nll_loss_number_var_and_errors():
    check_same(lambda i, t: F.gaussian_nll_loss(i, t, 0.5), lambda i, t: TF.gaussian_nll_loss(i, t, 0.5),
               [_x((4, 3), 1), _x((4, 3), 2)], grad_name=False)
    f, t = fg.randn(4, 3), torch.randn(4, 3)
    for fv, tv in [(-fg.ones(4, 3), -torch.ones(4, 3)), (-1.0, -1.0), (fg.ones(3), torch.ones(3)),
                   (fg.ones(1, 1), torch.ones(1, 1))]:
        raises_like(lambda: F.gaussian_nll_loss(f, f, fv), lambda: TF.gaussian_nll_loss(t, t, tv))
    raises_like(lambda: F.gaussian_nll_loss(f, f, fg.ones(4, 3), reduction="x"),
                lambda: TF.gaussian_nll_loss(t, t, torch.ones(4, 3), reduction="x"))


@pytest.mark.parametrize("log_input, full", [(True, False), (False, False), (True, True), (False, True)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_poisson_nll_loss_matches_torch(log_input, full, reduction):
    inp = _x((3, 4), 14) if log_input else np.abs(_x((3, 4), 14)) + 0.05
    target = np.floor(np.abs(_x((3, 4), 15)) * 2)  # counts 0, 1 and above: Stirling's term where > 1
    check_same(lambda i: F.poisson_nll_loss(i, fg.tensor(target), log_input, full, reduction=reduction),
               lambda i: TF.poisson_nll_loss(i, torch.tensor(target), log_input, full, reduction=reduction),
               [inp], grad_name=False)


MM_CASES = [dict(), dict(p=2), dict(margin=0.4), dict(p=2, margin=2.0, weight=True), dict(weight=True)]


@pytest.mark.parametrize("kw", MM_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss_matches_torch(kw, reduction):
    kw = dict(kw)
    target = np.array([0, 3, 2, 3, 1])
    weight = np.abs(_x((4,), 16)) if kw.pop("weight", False) else None  # PyTorch takes no gradient for it

    def call(lib, fn):
        return lambda x: fn(x, lib.tensor(target), weight=None if weight is None else lib.tensor(weight),
                            reduction=reduction, **kw)
    check_same(call(fg, F.multi_margin_loss), call(torch, TF.multi_margin_loss), [_x((5, 4), 17)])


def test_multi_margin_loss_vector_input_empty_batch_and_errors():
    check_same(lambda x: F.multi_margin_loss(x, fg.tensor(2), reduction="none"),
               lambda x: TF.multi_margin_loss(x, torch.tensor(2), reduction="none"), [_x((5,), 1)])
    check_same(lambda x: F.multi_margin_loss(x, fg.tensor([2])), lambda x: TF.multi_margin_loss(x, torch.tensor([2])),
               [_x((5,), 1)])
    empty = F.multi_margin_loss(fg.randn(0, 5), fg.zeros(0, dtype=fg.int64), reduction="none")
    assert tuple(empty.shape) == (0,)
    x, t = fg.randn(4, 5), torch.randn(4, 5)
    tgt = [0, 1, 2, 3]
    for fkw, tkw in [(dict(p=3), dict(p=3)), (dict(weight=fg.ones(5, 1)), dict(weight=torch.ones(5, 1))),
                     (dict(weight=fg.ones(4)), dict(weight=torch.ones(4))), (dict(reduction="x"), dict(reduction="x"))]:
        raises_like(lambda: F.multi_margin_loss(x, fg.tensor(tgt), **fkw),
                    lambda: TF.multi_margin_loss(t, torch.tensor(tgt), **tkw))
    for bad in ([0, 1, 2], [0, 1, 2, 7], [0, 1, -1, 2], [0.0, 1.0, 2.0, 3.0]):
        raises_like(lambda: F.multi_margin_loss(x, fg.tensor(bad)), lambda: TF.multi_margin_loss(t, torch.tensor(bad)))
    raises_like(lambda: F.multi_margin_loss(fg.randn(2, 5, 1), fg.tensor([1, 2])),
                lambda: TF.multi_margin_loss(torch.randn(2, 5, 1), torch.tensor([1, 2])))
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, weighted", [((4, 5), False), ((4, 5), True), ((5,), False), ((2, 3, 5), True)])
def test_multilabel_soft_margin_loss_matches_torch(reduction, shape, weighted):
    target = (np.random.default_rng(18).random(shape) > 0.5).astype(np.float64)
    extra = [np.abs(_x((5,), 19))] if weighted else []

    def call(lib, fn):
        def go(x, *w):
            return fn(x, lib.tensor(target), weight=w[0] if w else None, reduction=reduction)
        return go
    check_same(call(fg, F.multilabel_soft_margin_loss), call(torch, TF.multilabel_soft_margin_loss),
               [_x(shape, 20)] + extra, grad_name=False)


MLM_TARGETS = [np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [4, 4, 1, -1, -1], [-1, 2, 3, 0, 0]]),  # dups, empty
               np.array([2, 0, -1, 4, 1])]


@pytest.mark.parametrize("target", MLM_TARGETS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_matches_torch(target, reduction):
    check_same(lambda x: F.multilabel_margin_loss(x, fg.tensor(target), reduction=reduction),
               lambda x: TF.multilabel_margin_loss(x, torch.tensor(target), reduction=reduction),
               [_x(target.shape, 21, scale=0.5)])


def test_multilabel_margin_loss_errors_and_empty():
    assert float(F.multilabel_margin_loss(fg.randn(0, 5), fg.zeros(0, 5, dtype=fg.int64), reduction="sum")) == 0
    x, t = fg.randn(2, 5), torch.randn(2, 5)
    for bad in (np.zeros((2, 4), np.int64), np.array([[1, -2, 0, 0, 0], [0] * 5]),
                np.array([[1, -1, 7, 0, 0], [0] * 5]), np.zeros((2, 5))):
        raises_like(lambda: F.multilabel_margin_loss(x, fg.tensor(bad)),
                    lambda: TF.multilabel_margin_loss(t, torch.tensor(bad)))
    raises_like(lambda: F.multilabel_margin_loss(fg.randn(2, 5, 1), fg.zeros(2, 5, 1, dtype=fg.int64)),
                lambda: TF.multilabel_margin_loss(torch.randn(2, 5, 1), torch.zeros(2, 5, 1, dtype=torch.long)))


LOSS_MODULES = [("GaussianNLLLoss", dict(full=True, eps=1e-3), 3), ("PoissonNLLLoss", dict(log_input=False), 2),
                ("MultiMarginLoss", dict(p=2, margin=0.5), 2), ("MultiLabelSoftMarginLoss", dict(reduction="sum"), 2),
                ("MultiLabelMarginLoss", dict(reduction="none"), 2)]


@pytest.mark.parametrize("name, kw, nargs", LOSS_MODULES)
def test_loss_modules_match_torch(name, kw, nargs):
    fm, tm = getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(fm) == repr(tm)
    x = np.abs(_x((4, 5), 22)) + 0.1
    second = {"MultiMarginLoss": np.array([0, 4, 2, 1]), "MultiLabelMarginLoss": MLM_TARGETS[0],
              "MultiLabelSoftMarginLoss": (x > 1).astype(np.float64)}.get(name, np.abs(_x((4, 5), 23)))
    args = [x, second, np.abs(_x((4, 5), 24))][:nargs]
    check_same(fm, tm, args, grad_name=False)


# ---------------------------------------------------------------- modules
PAD_MODULES = [("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad2d", ((1, 2, 0, 2),), (1, 2, 3, 4)),
               ("ReflectionPad3d", (1,), (1, 1, 3, 3, 3)), ("ReplicationPad1d", ((3, 1),), (2, 4)),
               ("ReplicationPad2d", (2,), (1, 2, 3, 4)), ("ReplicationPad3d", ((1, 0, 2, 1, 0, 1),), (1, 2, 2, 3, 2)),
               ("ZeroPad1d", ((1, -1),), (2, 3, 4)), ("ZeroPad2d", (2,), (2, 3, 4)),
               ("ZeroPad3d", (1,), (1, 2, 2, 2)), ("ConstantPad1d", (2, 3.5), (2, 3, 4)),
               ("ConstantPad2d", ((1, 0, 2, 3), -1.0), (1, 2, 3)), ("ConstantPad3d", (1, 2.0), (1, 2, 2, 2)),
               ("CircularPad1d", (2,), (2, 3, 4)), ("CircularPad2d", ((1, 2, 2, 0),), (2, 3, 4)),
               ("CircularPad3d", (1,), (1, 2, 2, 3, 2))]


@pytest.mark.parametrize("name, args, shape", PAD_MODULES)
def test_padding_modules_match_torch(name, args, shape):
    fm, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(fm) == repr(tm) and fm.padding == tm.padding
    check_same(fm, tm, [_x(shape, 25)], grad_name=False)


def test_circular_pad_checks_rank():
    raises_like(lambda: nn.CircularPad2d(1)(fg.randn(2, 3)), lambda: torch.nn.CircularPad2d(1)(torch.randn(2, 3)))


MODULE_REPRS = [("Bilinear", (3, 4, 5)), ("Bilinear", (3, 4, 5, False)), ("CosineSimilarity", ()),
                ("PairwiseDistance", (1.0, 1e-3, True)), ("LogSigmoid", ()), ("Softmax2d", ()),
                ("Threshold", (0.1, 20)), ("Threshold", (0.1, 20.0, True)), ("Hardshrink", ()), ("Softshrink", (0.3,)),
                ("RReLU", ()), ("RReLU", (0.1, 0.3, True)), ("UpsamplingNearest2d", (None, 2)),
                ("UpsamplingBilinear2d", ((3, 4),)), ("LocalResponseNorm", (3,)), ("GaussianNLLLoss", ()),
                ("PoissonNLLLoss", ()), ("MultiMarginLoss", ()), ("MultiLabelSoftMarginLoss", ()),
                ("MultiLabelMarginLoss", ()), ("ChannelShuffle", (2,))]


@pytest.mark.parametrize("name, args", MODULE_REPRS)
def test_module_reprs_and_state_dicts(name, args):
    fm, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(fm) == repr(tm)
    assert {k: tuple(v.shape) for k, v in fm.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}


@pytest.mark.parametrize("name, args, shape", [("CosineSimilarity", (), (3, 4)), ("CosineSimilarity", (0,), (3, 4)),
                                               ("PairwiseDistance", (1.0, 1e-3, True), (3, 4)),
                                               ("LogSigmoid", (), (3, 4)), ("Softmax2d", (), (2, 3, 2, 2)),
                                               ("Threshold", (0.1, 20.0), (3, 4)), ("Hardshrink", (0.7,), (3, 4)),
                                               ("Softshrink", (0.3,), (3, 4)), ("RReLU", (), (3, 4)),
                                               ("UpsamplingNearest2d", (None, 2), (1, 2, 3, 3)),
                                               ("UpsamplingBilinear2d", ((4, 5),), (1, 2, 3, 3))])
def test_modules_forward_match_torch(name, args, shape):
    fm, tm = getattr(nn, name)(*args).eval(), getattr(torch.nn, name)(*args).eval()
    arrays = [_x(shape, 26)] + ([_x(shape, 27)] if name in ("CosineSimilarity", "PairwiseDistance") else [])
    check_same(fm, tm, arrays, grad_name=False)


def test_softmax2d_rank_error():
    raises_like(lambda: nn.Softmax2d()(fg.randn(2, 3)), lambda: torch.nn.Softmax2d()(torch.randn(2, 3)))


def test_bilinear_module_default_init_and_torch_weights():
    """PyTorch's parameter names and shapes, its U(+-1/sqrt(in1)) initialization, and its output
    with its weights loaded."""
    fg.manual_seed(0)
    fm, tm = nn.Bilinear(20, 3, 30).double(), torch.nn.Bilinear(20, 3, 30).double()
    bound = 1 / math.sqrt(20)
    for p in (fm.weight, fm.bias):
        a = np_of(p)
        assert a.min() >= -bound and a.max() <= bound and a.max() - a.min() > 1.5 * bound
    fm.load_state_dict({k: fg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    check_same(fm, tm, [_x((2, 4, 20), 28), _x((2, 4, 3), 29)], grad_name=False)
    with pytest.raises(ValueError, match=r"in1_features must be > 0, but got \(in1_features=0\)"):
        nn.Bilinear(0, 3, 2)


# ---------------------------------------------------------------- nn.init
@pytest.mark.parametrize("shape, gain", [((6, 4), 1.0), ((3, 7), 2.0), ((4, 2, 3), 0.5), ((5, 5), 1.0)])
def test_orthogonal_is_orthogonal(shape, gain):
    t = fg.empty(*shape, dtype=fg.float64)
    assert init.orthogonal_(t, gain=gain) is t
    m = np_of(t).reshape(shape[0], -1)
    gram = m @ m.T if m.shape[0] < m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, gain ** 2 * np.eye(len(gram)), atol=1e-12)


def test_orthogonal_q_is_pytorchs_for_the_same_matrix():
    """The QR (Householder) with Q's columns signed by R's diagonal, as PyTorch's orthogonal_ computes
    from its normal draws."""
    for shape in [(6, 4), (5, 5)]:
        a = _x(shape, 30)
        q, r = torch.linalg.qr(torch.tensor(a))
        np.testing.assert_allclose(np_of(init._orthonormal_columns(fg.tensor(a))), (q * r.diagonal().sign()).numpy(),
                                   atol=1e-12)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(fg.empty(3))
    assert tuple(init.orthogonal_(fg.empty(0, 3)).shape) == (0, 3)


@pytest.mark.parametrize("mean, std, a, b", [(0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 1.0), (0.0, 1.0, 1.0, 3.0)])
def test_trunc_normal_within_bounds(mean, std, a, b):
    """Both of PyTorch's samplers (normal redraws; uniform proposals when [a, b] holds little mass):
    within bounds, with the truncated normal's mean."""
    fg.manual_seed(1)
    t = init.trunc_normal_(fg.empty(200, 100, dtype=fg.float64), mean, std, a, b)
    v = np_of(t)
    assert v.min() >= a and v.max() <= b
    al, be = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    expected = mean + std * (pdf(al) - pdf(be)) / (cdf(be) - cdf(al))
    assert abs(v.mean() - expected) < 4 * std / math.sqrt(v.size)


def test_trunc_normal_warns_far_mean():
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        init.trunc_normal_(fg.empty(10), mean=10.0, std=1.0, a=-1.0, b=1.0)


@pytest.mark.parametrize("shape, groups", [((6, 4, 3), 2), ((4, 6, 3, 3), 1), ((4, 4, 3, 2, 3), 2), ((3, 2, 5), 3)])
def test_dirac_matches_torch(shape, groups):
    f, t = fg.empty(*shape), torch.empty(*shape)
    assert init.dirac_(f, groups) is f
    torch.nn.init.dirac_(t, groups)
    np.testing.assert_array_equal(np_of(f), t.numpy())


def test_dirac_eye_sparse_errors_and_structure():
    for fn, args in [(init.dirac_, ((3, 3),)), (init.eye_, ((3,),)), (init.sparse_, ((3,), 0.1))]:
        shape, *rest = args
        raises_like(lambda: fn(fg.empty(*shape), *rest),
                    lambda: getattr(torch.nn.init, fn.__name__)(torch.empty(*shape), *rest))
    raises_like(lambda: init.dirac_(fg.empty(5, 2, 3), 2), lambda: torch.nn.init.dirac_(torch.empty(5, 2, 3), 2))
    f, t = fg.empty(3, 5, requires_grad=True), torch.empty(3, 5, requires_grad=True)
    init.eye_(f)
    torch.nn.init.eye_(t)
    np.testing.assert_array_equal(np_of(f), t.detach().numpy())
    assert f.requires_grad and f.grad_fn is None
    s = init.sparse_(fg.empty(40, 30), sparsity=0.3, std=0.5)
    zeros = (np_of(s) == 0).sum(0)
    np.testing.assert_array_equal(zeros, np.full(30, math.ceil(0.3 * 40)))
    assert 0.4 < np_of(s)[np_of(s) != 0].std() < 0.6


@pytest.mark.parametrize("old, args", [("uniform", ()), ("normal", ()), ("constant", (0.5,)), ("eye", ()),
                                       ("xavier_uniform", ()), ("xavier_normal", ()), ("kaiming_uniform", ()),
                                       ("kaiming_normal", ()), ("orthogonal", ()), ("sparse", (0.5,)),
                                       ("dirac", ())])
def test_deprecated_init_aliases_warn(old, args):
    t = fg.empty(4, 4, 3) if old == "dirac" else fg.empty(4, 3)
    msg = f"`nn.init.{old}` is now deprecated in favor of `nn.init.{old}_`."
    with pytest.warns(FutureWarning, match=msg.replace(".", r"\.")):
        assert getattr(init, old)(t, *args) is t
    assert getattr(init, old).__name__ == old


# ---------------------------------------------------------------- func transforms and compile
def test_func_grad_and_vmap_through_new_ops():
    """func.grad equals autograd's gradient; vmap over a batch equals the per-sample results."""
    x = fg.tensor(_x((4, 3), 33))
    w = fg.tensor(_x((2, 3, 3), 34))
    fns = [lambda x: F.pdist(x).sum(), lambda x: F.bilinear(x, x, w).sum(),
           lambda x: F.multi_margin_loss(x, fg.tensor([0, 1, 2, 1]), p=2),
           lambda x: F.local_response_norm(x.reshape(1, 4, 3), 3).sum(),
           lambda x: F.gaussian_nll_loss(x, x * 0.3, x.abs() + 0.1)]
    for f in fns:
        leaf = x.detach().requires_grad_()
        f(leaf).backward()
        np.testing.assert_allclose(np_of(fg.func.grad(f)(x)), np_of(leaf.grad), rtol=1e-12)
        batched = fg.func.vmap(f)(fg.stack([x, x * 2]))
        np.testing.assert_allclose(np_of(batched), [np_of(f(x)), np_of(f(x * 2))], rtol=1e-12)


def test_new_ops_in_one_compiled_graph():
    """bilinear, softshrink, threshold, local_response_norm, channel_shuffle, pdist and the margin and
    likelihood losses traced into one cpu graph: values and gradients equal eager's, no graph break."""
    fg.manual_seed(0)
    w = fg.randn(4, 6, 6, dtype=fg.float64, requires_grad=True)
    target = fg.tensor([0, 3, 2, 1, 3])
    labels = fg.tensor([[1, 2, -1, 0], [0, -1, 0, 0], [3, 1, 2, -1], [2, -1, 0, 0], [0, 3, -1, 0]])

    def f(x, var):
        h = F.bilinear(x, x, w)
        h = F.softshrink(h, 0.1) + F.threshold(h, 0.2, -1.0)
        h = F.channel_shuffle(F.local_response_norm(h.reshape(5, 4, 1), 3), 2).reshape(5, 4)
        loss = F.multi_margin_loss(h, target, p=2) + F.multilabel_margin_loss(h, labels)
        loss = loss + F.gaussian_nll_loss(h, h.detach() * 0.5, var) + 0.1 * F.pdist(x).sum()
        return loss

    x = fg.tensor(_x((5, 6), 31, scale=0.5), requires_grad=True)
    var = fg.tensor(np.abs(_x((5, 4), 32)) + 0.1, requires_grad=True)
    compiled = fg.compile(f, backend="cpu")
    le = f(x, var)
    ge = fg.autograd.grad(le, [x, var, w])
    lc = compiled(x, var)
    gc = fg.autograd.grad(lc, [x, var, w])
    np.testing.assert_allclose(np_of(lc), np_of(le), rtol=1e-10)
    for a, b in zip(gc, ge):
        np.testing.assert_allclose(np_of(a), np_of(b), rtol=1e-9, atol=1e-12)
    assert compiled.cache_info()["graph_breaks"] == []


def test_parameter_container_reprs_match_torch():
    import torch

    def run(lib):
        nn = lib.nn
        plist = nn.ParameterList([nn.Parameter(lib.zeros(2)), lib.zeros(2, 3, dtype=lib.float64), 5])
        pdict = nn.ParameterDict({"a": nn.Parameter(lib.zeros(2)), "b": nn.Parameter(lib.zeros(2, 3, dtype=lib.float64))})
        return [repr(plist).replace("fusegrad.", "torch."), repr(pdict)]

    assert run(fg) == run(torch)


def test_interpolate_resizes_uint8_images_as_torch():
    """torchvision's Resize on uint8 tensors: bilinear/bicubic (antialiased or not, corners aligned
    or not, any number of channels, channels_last too, eager and compiled) equal PyTorch's
    to the last unit: its integer kernels' weights of limited precision, rounded by a shift,
    the width first and a dim that keeps its size skipped (in float they were off by 1).
    The modes PyTorch has no uint8 kernel for raise as its do."""
    rng = np.random.default_rng(0)
    resize = lambda T, x, mode, ac, aa, kw: T.nn.functional.interpolate(  # noqa: E731
        x, mode=mode, align_corners=ac, antialias=aa, **kw)
    compiled = fg.compile(lambda x, mode, ac, aa, kw: resize(fg, x, mode, ac, aa, kw))
    for c in (3, 5):
        x = rng.integers(0, 256, (2, c, 7, 9)).astype(np.uint8)
        for mode in ("bilinear", "bicubic"):
            for ac, aa in ((False, False), (True, False), (False, True)):
                for kw in ({"size": (4, 5)}, {"size": (13, 17)}, {"size": (7, 20)}, {"scale_factor": 1.7}):
                    want = resize(torch, torch.tensor(x), mode, ac, aa, kw).numpy()
                    got = resize(fg, fg.tensor(x), mode, ac, aa, kw)
                    assert got.dtype == fg.uint8
                    np.testing.assert_array_equal(got.numpy(), want)
        cl = lambda T: T.tensor(x).contiguous(memory_format=T.channels_last)  # noqa: E731
        want = resize(torch, cl(torch), "bilinear", False, True, {"size": (4, 13)})
        for got in (resize(fg, cl(fg), "bilinear", False, True, {"size": (4, 13)}),
                    compiled(cl(fg), "bilinear", False, True, {"size": (4, 13)})):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert resize(fg, cl(fg), "bilinear", False, True, {"size": (4, 13)}).is_contiguous(
            memory_format=fg.channels_last)
    for mode, what in (("area", "adaptive_avg_pool2d"), ("bilinear", "compute_indices_weights_linear")):
        with pytest.raises(NotImplementedError, match=what):
            F.interpolate(fg.tensor(x.astype(np.int64) if mode == "bilinear" else x),
                                               size=(4, 5), mode=mode)


def test_nearest_interpolate_picks_torchs_source_pixels():
    """Nearest and nearest-exact resizing by a scale factor or to a size, 1-d to 3-d: source
    indices in float32 as PyTorch's kernels, and 2-d nearest's shortcut for sizes that stay or
    double (a 4-row image scaled by 2.2 reads rows 0 0 1 1 2 2 3 3 there, not 0 0 0 1 ...).
    Gradients follow the forward's picks (2-d: as PyTorch's)."""
    rng = np.random.default_rng(0)
    for nd in (1, 2, 3):
        shape = (1, 2) + (5, 6, 7)[:nd]
        x = rng.standard_normal(shape)
        calls = [dict(scale_factor=sf, mode=m, recompute_scale_factor=rc) for sf in (2.2, 1.1, 1 / 3, 2.0, 0.45)
                 for m in ("nearest", "nearest-exact") for rc in (None, True)]
        calls += [dict(size=size[:nd], mode=m) for size in ((10, 12, 14), (3, 13, 20)) for m in ("nearest", "nearest-exact")]
        for kw in calls:
            want = torch.nn.functional.interpolate(torch.tensor(x), **kw).numpy()
            np.testing.assert_array_equal(F.interpolate(fg.tensor(x), **kw).numpy(), want)
    x = rng.standard_normal((1, 1, 4, 5))
    grads = []
    for T in (fg, torch):
        t = T.tensor(x, requires_grad=True)
        T.nn.functional.interpolate(t, scale_factor=2.2, mode="nearest").sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(*grads)
