"""Activations, dropouts, losses and parameter containers against PyTorch; gradchecks; vmap; compile."""
import itertools

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
TF = torch.nn.functional


def np_of(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _x(shape=(3, 4), seed=0, scale=3.0):
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    x[np.isclose(np.abs(x), 3.0, atol=1e-3)] += 0.01  # keep off hardswish's kinks
    return x


def both(array, requires_grad=True):
    array = np.asarray(array)
    rg = requires_grad and array.dtype.kind == "f"
    return fg.tensor(array, requires_grad=rg), torch.tensor(array, requires_grad=rg)


def assert_same(fo, po, fg_leaves, pt_leaves, rtol=1e-10, atol=1e-12, check_grads=None):
    """Values equal; gradients of a random weighting equal (where ``check_grads(torch_grad)`` holds)."""
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=rtol, atol=atol)
    w = np.random.default_rng(9).standard_normal(tuple(po.shape))
    (fo * fg.tensor(w)).sum().backward()
    (po * torch.tensor(w)).sum().backward()
    for f, p in zip(fg_leaves, pt_leaves):
        keep = check_grads(np_of(p.grad)) if check_grads else slice(None)
        np.testing.assert_allclose(np_of(f.grad)[keep], np_of(p.grad)[keep], rtol=rtol, atol=atol)


ACTIVATIONS = [("SELU", {}), ("CELU", {"alpha": 0.7}), ("Mish", {}), ("Hardtanh", {}),
               ("Hardtanh", {"min_val": -0.5, "max_val": 2.0}), ("ReLU6", {}), ("Hardswish", {}),
               ("Hardsigmoid", {}), ("Softsign", {}), ("Tanhshrink", {}), ("LeakyReLU", {"negative_slope": 0.2}),
               ("ELU", {"alpha": 0.5}), ("SiLU", {}), ("Softplus", {"beta": 2.0, "threshold": 3.0}),
               ("GLU", {}), ("GLU", {"dim": 0}), ("Softmax", {"dim": 1}), ("LogSoftmax", {"dim": 0}),
               ("Softmin", {"dim": -1}), ("PReLU", {}), ("PReLU", {"num_parameters": 4})]


@pytest.mark.parametrize("name, kw", ACTIVATIONS)
def test_activation_modules_match_torch(name, kw):
    fm, pm = getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw)
    fm.double(), pm.double()
    assert repr(fm) == repr(pm)
    fx, px = both(_x((4, 4, 2)))
    # PyTorch rounds CELU's alpha and Hardsigmoid's 1/6 to float32 (relative 1e-7)
    tol = dict(rtol=1e-7, atol=1e-9) if name in ("CELU", "Hardsigmoid") else {}
    assert_same(fm(fx), pm(px), [fx, *fm.parameters()], [px, *pm.parameters()], **tol)


@pytest.mark.parametrize("name", ["selu", "mish", "hardswish", "relu6", "hardtanh", "celu", "elu", "leaky_relu",
                                  "silu"])
def test_inplace_functional_forms(name):
    x = _x((5,), seed=3)
    f, p = fg.tensor(x), torch.tensor(x)
    getattr(F, name)(f, inplace=True)
    getattr(TF, name)(p, inplace=True)
    np.testing.assert_allclose(f.numpy(), p.numpy(), rtol=1e-12)


def test_activation_gradcheck_gradgradcheck_and_vmap():
    x = fg.tensor(_x((2, 4), seed=1, scale=2.0), requires_grad=True)
    w = fg.tensor([0.1, 0.2, 0.3, 0.4], dtype=fg.float64, requires_grad=True)
    for f in (F.selu, F.mish, F.hardswish, lambda t: F.glu(t, -1), lambda t: F.celu(t, 0.5)):
        assert gradcheck(f, (x,)) and gradgradcheck(f, (x,))
    assert gradcheck(lambda x, w: F.prelu(x, w), (x, w)) and gradgradcheck(lambda x, w: F.prelu(x, w), (x, w))
    xs = fg.tensor(_x((3, 2, 4)))
    for f in (F.mish, F.hardswish, lambda t: F.glu(t)):
        np.testing.assert_allclose(np_of(fg.func.vmap(f)(xs)), np.stack([np_of(f(t)) for t in xs.unbind(0)]),
                                   rtol=1e-12)


def test_activation_errors():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(fg.randn(3, 5))
    with pytest.raises(RuntimeError, match="channel size"):
        F.prelu(fg.randn(2, 3), fg.randn(4))
    with pytest.raises(ValueError, match="min_val"):
        nn.Hardtanh(1.0, 0.0)


@pytest.mark.parametrize("name, shape", [("dropout1d", (4, 6, 50)), ("dropout1d", (6, 50)),
                                         ("dropout2d", (4, 6, 5, 10))])
def test_channel_dropout_zeroes_whole_channels(name, shape):
    fg.manual_seed(0)
    x = fg.ones(*shape, dtype=fg.float64, requires_grad=True)
    out = getattr(F, name)(x, 0.5)
    flat = np_of(out).reshape(*shape[:len(shape) - (1 if name == "dropout1d" else 2)], -1)
    per_channel = np.unique(flat, axis=-1)
    assert per_channel.shape[-1] == 1 and set(np.unique(per_channel)) <= {0.0, 2.0}
    assert 0.2 < np.mean(per_channel == 0.0) < 0.8
    out.sum().backward()
    np.testing.assert_array_equal(np_of(x.grad), np_of(out))
    assert getattr(F, name)(x, 0.5, training=False) is x
    m = {"dropout1d": nn.Dropout1d, "dropout2d": nn.Dropout2d}[name](0.3)
    assert repr(m) == repr({"dropout1d": torch.nn.Dropout1d, "dropout2d": torch.nn.Dropout2d}[name](0.3))
    m.eval()
    assert m(x) is x


def test_alpha_dropout_keeps_mean_and_variance():
    fg.manual_seed(0)
    x = fg.randn(200000, dtype=fg.float64)
    out = np_of(F.alpha_dropout(x, 0.3, training=True))
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1.0) < 0.02
    alpha, p = -1.7580993408473766, 0.3
    a = ((1 - p) * (1 + p * alpha ** 2)) ** -0.5
    dropped = np.isclose(out, a * alpha - a * alpha * p)  # the value every dropped entry takes
    assert abs(dropped.mean() - p) < 0.01
    assert F.alpha_dropout(x, 0.3) is x  # training defaults to False
    assert nn.AlphaDropout(0.2).eval()(x) is x
    fm = nn.AlphaDropout(0.2)
    assert repr(fm) == repr(torch.nn.AlphaDropout(0.2))


REDUCTIONS = ["mean", "sum", "none"]


def _pairs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [both(rng.standard_normal(s)) for s in shapes]


@pytest.mark.parametrize("reduction, log_target", itertools.product(REDUCTIONS + ["batchmean"], [False, True]))
def test_kl_div_matches_torch(reduction, log_target):
    (fi, pi), = _pairs((3, 5))
    t = np.random.default_rng(1).random((3, 5))
    t[0, :2] = 0.0  # zero targets contribute zero
    if log_target:
        t = np.log(t + 0.1)
    ft, pt = both(t)
    kw = dict(reduction=reduction, log_target=log_target)
    with pytest.warns(UserWarning) if reduction == "mean" else _no_warning():
        fo = F.kl_div(fi, ft, **kw)
    po = TF.kl_div(pi, pt, **kw)
    assert_same(fo, po, [fi, ft], [pi, pt], check_grads=lambda p: np.isfinite(p))
    if not log_target:  # d/dt t log t is -inf at t = 0: PyTorch's NaN there, a finite value here
        assert np.all(np.isfinite(np_of(ft.grad)))
    fo2 = nn.KLDivLoss(**kw)(fi.detach(), ft.detach()) if reduction != "mean" else None
    if fo2 is not None:
        np.testing.assert_allclose(np_of(fo2), np_of(po), rtol=1e-10)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("reduction, margin, shape", itertools.product(REDUCTIONS, [0.0, 0.3], [(4, 3), (3,)]))
def test_cosine_embedding_and_margin_ranking_match_torch(reduction, margin, shape):
    (f1, p1), (f2, p2) = _pairs(shape, shape, seed=2)
    y = np.array([1.0, -1.0, 1.0, -1.0][:shape[0]]) if len(shape) == 2 else np.array(1.0)
    fy, py = both(y, requires_grad=False)
    fo = nn.CosineEmbeddingLoss(margin=margin, reduction=reduction)(f1, f2, fy)
    po = torch.nn.CosineEmbeddingLoss(margin=margin, reduction=reduction)(p1, p2, py)
    assert_same(fo, po, [f1, f2], [p1, p2])
    (f1, p1), (f2, p2) = _pairs((6,), (6,), seed=3)
    fy, py = both(np.array([1.0, -1, 1, -1, 1, 1]), requires_grad=False)
    fo = nn.MarginRankingLoss(margin=margin, reduction=reduction)(f1, f2, fy)
    po = torch.nn.MarginRankingLoss(margin=margin, reduction=reduction)(p1, p2, py)
    assert_same(fo, po, [f1, f2], [p1, p2])


@pytest.mark.parametrize("reduction, p, swap, shape", itertools.product(REDUCTIONS, [1.0, 2.0, 3.0], [False, True],
                                                                      [(4, 5), (5,)]))
def test_triplet_margin_loss_matches_torch(reduction, p, swap, shape):
    (fa, pa), (fp, pp), (fn, pn) = _pairs(shape, shape, shape, seed=4)
    kw = dict(margin=1.5, p=p, swap=swap, reduction=reduction)
    assert_same(nn.TripletMarginLoss(**kw)(fa, fp, fn), torch.nn.TripletMarginLoss(**kw)(pa, pp, pn),
                [fa, fp, fn], [pa, pp, pn], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["hinge_embedding_loss", "soft_margin_loss"])
def test_hinge_and_soft_margin_match_torch(name):
    (fi, pi), = _pairs((3, 4), seed=5)
    y = np.where(np.random.default_rng(6).random((3, 4)) < 0.5, 1.0, -1.0)
    fy, py = both(y, requires_grad=False)
    for reduction in REDUCTIONS:
        fi.grad = pi.grad = None
        assert_same(getattr(F, name)(fi, fy, reduction=reduction), getattr(TF, name)(pi, py, reduction=reduction),
                    [fi], [pi])


def test_cosine_similarity_and_pairwise_distance_match_torch():
    (f1, p1), (f2, p2) = _pairs((3, 4), (1, 4), seed=7)
    assert_same(F.cosine_similarity(f1, f2), TF.cosine_similarity(p1, p2), [f1, f2], [p1, p2])
    f1.grad = f2.grad = p1.grad = p2.grad = None
    assert_same(F.pairwise_distance(f1, f2, p=1.0, keepdim=True), TF.pairwise_distance(p1, p2, p=1.0, keepdim=True),
                [f1, f2], [p1, p2])


# ignore_index applies to class-index targets only
CE_GRID = [c for c in itertools.product(REDUCTIONS, [False, True], [None, -100, 1], [0.0, 0.2], ["index", "probs"])
           if c[4] == "index" or c[2] is None]


@pytest.mark.parametrize("reduction, weighted, ignore_index, smoothing, targets", CE_GRID)
def test_cross_entropy_options_match_torch(reduction, weighted, ignore_index, smoothing, targets):
    rng = np.random.default_rng(8)
    fi, pi = both(rng.standard_normal((5, 4, 2)))  # (N, C, d1): a class dim that is not last
    if targets == "index":
        t = rng.integers(0, 4, (5, 2))
        t[0, 0] = 1
        ft, pt = both(t, requires_grad=False)
    else:
        ft, pt = both(rng.dirichlet(np.ones(4), (5, 2)).transpose(0, 2, 1))
    w = rng.random(4) + 0.5 if weighted else None
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    if ignore_index is not None:
        kw["ignore_index"] = ignore_index
    fo = nn.CrossEntropyLoss(weight=None if w is None else fg.tensor(w), **kw)(fi, ft)
    po = torch.nn.CrossEntropyLoss(weight=None if w is None else torch.tensor(w), **kw)(pi, pt)
    leaves = ([fi, ft], [pi, pt]) if targets == "probs" else ([fi], [pi])
    assert_same(fo, po, *leaves)


def test_loss_gradchecks():
    rng = np.random.default_rng(10)
    a, b, c = (fg.tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(3))
    y = fg.tensor([1.0, -1.0, 1.0])
    t = fg.tensor(rng.random((3, 4)), requires_grad=True)
    for f, args in [(lambda a, b: F.cosine_embedding_loss(a, b, y, margin=-0.5), (a, b)),
                    (lambda a, b, c: F.triplet_margin_loss(a, b, c, margin=5.0, swap=True), (a, b, c)),
                    (lambda a, t: F.kl_div(a, t, reduction="batchmean"), (a, t))]:
        assert gradcheck(f, args) and gradgradcheck(f, args)


def test_parameter_containers_register_like_torch():
    fl = nn.ParameterList([nn.Parameter(fg.zeros(2)), fg.ones(3)])
    pl = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(2)), torch.ones(3)])
    assert list(fl.state_dict()) == list(pl.state_dict()) == ["0", "1"]
    assert isinstance(fl[1], nn.Parameter) and fl[1].requires_grad and len(fl) == 2
    fl.append(fg.zeros(1, 1))
    assert len(list(fl.parameters())) == 3 and fl[-1].shape == (1, 1)
    fd = nn.ParameterDict({"a": fg.zeros(2), "b": nn.Parameter(fg.ones(1))})
    pd = torch.nn.ParameterDict({"a": torch.zeros(2), "b": torch.nn.Parameter(torch.ones(1))})
    assert list(fd.state_dict()) == list(pd.state_dict())
    assert "a" in fd and list(fd.keys()) == ["a", "b"] and isinstance(fd["a"], nn.Parameter)
    del fd["a"]
    assert list(fd.state_dict()) == ["b"]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([fg.ones(2), fg.ones(2)])

        def forward(self, x):
            return x * self.ps[0] + self.ps[1]

    m = M()
    m(fg.ones(2)).sum().backward()
    assert all(np.all(np_of(p.grad) == 1.0) for p in m.parameters())


def test_new_layers_in_one_compiled_step():
    """One compiled graph of the new activations and losses matches eager (values and gradients)."""
    fg.manual_seed(0)
    prelu = nn.PReLU(4)
    x = fg.randn(3, 4, requires_grad=True)
    y = fg.randn(3, 4)
    lbl = fg.tensor([1.0, -1.0, 1.0])

    def f(x, y):
        h = F.mish(x) + F.selu(x) + F.hardswish(x) + prelu(x) + F.hardtanh(x, -0.5, 0.5)
        h = F.glu(fg.cat([h, x], 1), 1)
        loss = F.kl_div(F.log_softmax(h, 1), F.softmax(y, 1), reduction="batchmean")
        loss = loss + F.cosine_embedding_loss(h, y, lbl) + F.triplet_margin_loss(h, y, x)
        loss = loss + F.cross_entropy(h, F.softmax(y, 1), label_smoothing=0.1)
        return loss

    compiled = fg.compile(f, fullgraph=True)
    le = f(x, y)
    ge = fg.autograd.grad(le, [x, prelu.weight])
    lc = compiled(x, y)
    gc = fg.autograd.grad(lc, [x, prelu.weight])
    np.testing.assert_allclose(np_of(lc), np_of(le), rtol=1e-5)
    for a, b in zip(gc, ge):
        np.testing.assert_allclose(np_of(a), np_of(b), rtol=1e-4, atol=1e-6)
    assert compiled.cache_info()["graph_breaks"] == []


def test_mean_losses_with_every_target_ignored_are_nan_with_zero_gradients_as_torch():
    """A crop whose pixels are all ignore_index: PyTorch's mean loss is NaN but its gradient
    exactly 0, so a summed multi-term loss still trains (ours was 0/0 = NaN everywhere)."""
    torch = pytest.importorskip("torch")
    x0 = np.random.default_rng(0).standard_normal((3, 5))
    target = [2, 2, 2]
    for kw in ({}, {"label_smoothing": 0.1}, {"weight": [1.0, 2.0, 0.5, 1.0, 1.0]}):
        res = []
        for lib in (torch, fg):
            x = lib.tensor(x0, requires_grad=True)
            args = {k: lib.tensor(v, dtype=lib.float64) if k == "weight" else v for k, v in kw.items()}
            loss = lib.nn.functional.cross_entropy(x, lib.tensor(target), ignore_index=2, **args)
            (loss.nan_to_num() + x.sum()).backward()
            res.append((loss.item(), x.grad.numpy()))
        assert np.isnan(res[1][0]) and np.isnan(res[0][0])
        np.testing.assert_array_equal(res[1][1], res[0][1])


def test_classification_losses_keep_a_half_precision_inputs_dtype_as_torch():
    x0, t0 = np.random.default_rng(0).standard_normal((4, 5)), [1, 2, 3, 0]
    for dt in ("bfloat16", "float16"):
        for kw in ({}, {"label_smoothing": 0.1}, {"ignore_index": 1}):
            got = F.cross_entropy(fg.tensor(x0).to(getattr(fg, dt)), fg.tensor(t0), **kw)
            want = torch.nn.functional.cross_entropy(torch.tensor(x0).to(getattr(torch, dt)), torch.tensor(t0), **kw)
            assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1] == dt
            np.testing.assert_allclose(float(got), float(want), rtol=2e-2)
        assert F.nll_loss(fg.tensor(x0).to(getattr(fg, dt)), fg.tensor(t0)).dtype == getattr(fg, dt)


def test_gradients_at_nan_inputs_as_pytorch():
    """At a NaN input, clamp and hardsigmoid pass no gradient (a NaN compares inside no
    bound), elu, selu, celu and hardswish their positive branch's, as PyTorch's backward
    kernels; values stay NaN; eagerly and compiled."""
    torch = pytest.importorskip("torch")
    vals = [float("nan"), float("inf"), -float("inf"), -4.0, -1.0, 0.0, 0.5, 4.0]
    fns = [lambda m, x: x.clamp(-0.5, 0.5), lambda m, x: x.clamp(min=0.2), lambda m, x: x.clamp(max=0.2),
           lambda m, x: m.nn.functional.elu(x), lambda m, x: m.nn.functional.selu(x),
           lambda m, x: m.nn.functional.celu(x, 2.0), lambda m, x: m.nn.functional.hardswish(x),
           lambda m, x: m.nn.functional.hardsigmoid(x), lambda m, x: m.nn.functional.hardtanh(x)]

    def grads(m, f, run=None):
        x = m.tensor(vals, requires_grad=True)
        y = run(x) if run else f(m, x)
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()

    for f in fns:
        want = grads(torch, f)
        for got in (grads(fg, f), grads(fg, f, fg.compile(lambda x, f=f: f(fg, x)))):
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
