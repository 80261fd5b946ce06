"""nn, optim and utils.checkpoint, checked against PyTorch where it is installed."""
import copy
import math

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.utils.checkpoint import checkpoint

RTOL, ATOL = 1e-5, 1e-6


def np_of(t) -> np.ndarray:
    """A fusegrad or torch tensor as an ndarray."""
    if hasattr(t, "detach"):
        t = t.detach()
    return np.asarray(t.numpy())


def close(a, b, rtol=RTOL, atol=ATOL) -> None:
    np.testing.assert_allclose(np_of(a), np_of(b), rtol=rtol, atol=atol)


def pair(pt, array, requires_grad=False):
    """The same values as a fusegrad and a torch tensor."""
    a = np.asarray(array)
    return (fg.tensor(a, requires_grad=requires_grad), pt.tensor(a, requires_grad=requires_grad))


def sync(fg_module, pt_module) -> None:
    """Copy torch's parameters and buffers into the fusegrad module."""
    fg_module.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in pt_module.state_dict().items()})


def mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(6, 16), lib.nn.LayerNorm(16), lib.nn.GELU(), lib.nn.Linear(16, 16),
                             lib.nn.Tanh(), lib.nn.Linear(16, 4))


# ---------------------------------------------------------------- training against torch
OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.5, amsgrad=True, eps=1e-6)),
    ("Adam", dict(lr=0.01, maximize=True)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,kwargs", OPTIMIZERS)
def test_training_steps_match_torch(pt, name, kwargs):
    pt.manual_seed(0)
    ref = mlp(pt)
    model = mlp(fg)
    sync(model, ref)
    opt_ref = getattr(pt.optim, name)(ref.parameters(), **kwargs)
    opt = getattr(fg.optim, name)(model.parameters(), **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.standard_normal((8, 6)).astype(np.float32)
        y = rng.integers(0, 4, 8)
        losses = []
        for lib, m, o in ((pt, ref, opt_ref), (fg, model, opt)):
            o.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            o.step()
            losses.append(loss)
        close(losses[1], losses[0])
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), ref.named_parameters()):
        assert n1 == n2
        close(p1, p2, rtol=1e-5, atol=1e-6)


@pytest.mark.torch
def test_param_groups_and_closure_match_torch(pt):
    pt.manual_seed(1)
    ref = mlp(pt)
    model = mlp(fg)
    sync(model, ref)
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)

    def groups(m):
        return [{"params": m[0].parameters(), "lr": 0.05, "momentum": 0.5},
                {"params": list(m[1].parameters()) + list(m[3].parameters())},
                {"params": m[5].parameters(), "weight_decay": 0.2}]

    opt_ref = pt.optim.SGD(groups(ref), lr=0.1, momentum=0.9)
    opt = fg.optim.SGD(groups(model), lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.05, 0.1, 0.1]
    for _ in range(3):
        for lib, m, o in ((pt, ref, opt_ref), (fg, model, opt)):
            def closure():
                o.zero_grad()
                loss = (m(lib.tensor(x)) ** 2).mean()
                loss.backward()
                return loss
            loss = o.step(closure)
            assert loss is not None
    for p1, p2 in zip(model.parameters(), ref.parameters()):
        close(p1, p2)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_optimizer_state_dict_round_trip(pt, name):
    kwargs = dict(lr=0.01, momentum=0.9) if name == "SGD" else dict(lr=0.01, amsgrad=True)
    rng = np.random.default_rng(2)
    xs = [fg.tensor(rng.standard_normal((4, 6)).astype(np.float32)) for _ in range(6)]

    def run(model, opt, batch):
        opt.zero_grad()
        (model(batch) ** 2).sum().backward()
        opt.step()

    model = mlp(fg)
    twin = copy.deepcopy(model)
    opt = getattr(fg.optim, name)(model.parameters(), **kwargs)
    for x in xs[:3]:
        run(model, opt, x)
    saved = copy.deepcopy(opt.state_dict())
    twin.load_state_dict(model.state_dict())
    opt2 = getattr(fg.optim, name)(twin.parameters(), **kwargs)
    opt2.load_state_dict(saved)
    for x in xs[3:]:
        run(model, opt, x)
        run(twin, opt2, x)
    for p1, p2 in zip(model.parameters(), twin.parameters()):
        close(p1, p2, rtol=0, atol=0)
    # the layout is PyTorch's: integer ids per parameter, hyperparameters per group
    ref = mlp(pt)
    opt_ref = getattr(pt.optim, name)(ref.parameters(), **kwargs)
    (ref(pt.ones(2, 6)) ** 2).sum().backward()
    opt_ref.step()
    sd, sd_ref = opt.state_dict(), opt_ref.state_dict()
    assert sorted(sd["state"]) == sorted(sd_ref["state"])
    assert sorted(sd["state"][0]) == sorted(sd_ref["state"][0])
    assert sd["param_groups"][0]["params"] == sd_ref["param_groups"][0]["params"]
    assert set(sd_ref["param_groups"][0]) <= set(sd["param_groups"][0])


def test_optimizer_errors_and_zero_grad():
    p = nn.Parameter(fg.ones(3))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        fg.optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        fg.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        fg.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty parameter list"):
        fg.optim.Adam([])
    with pytest.raises(TypeError):
        fg.optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        fg.optim.SGD([p * 2], lr=0.1)
    opt = fg.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # parameters without gradients are skipped
    assert p.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.torch
def test_step_lr_matches_torch(pt):
    lrs = []
    for lib in (pt, fg):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        seen = []
        for _ in range(6):
            opt.step()
            sched.step()
            seen.append(sched.get_last_lr()[0])
        lrs.append(seen)
    assert lrs[0] == lrs[1]


# ---------------------------------------------------------------- losses against torch
def _loss_case(pt, fn_name, x, target, grad_input=True, **kwargs):
    xf, xt = pair(pt, x, requires_grad=grad_input)
    tf, tt = pair(pt, target)
    kf = {k: fg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    kt = {k: pt.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    out_f = getattr(F, fn_name)(xf, tf, **kf)
    out_t = getattr(pt.nn.functional, fn_name)(xt, tt, **kt)
    close(out_f, out_t)
    if grad_input:
        g = np.random.default_rng(3).standard_normal(tuple(out_t.shape)).astype(np.float32)
        out_f.backward(fg.tensor(g))
        out_t.backward(pt.tensor(g))
        close(xf.grad, xt.grad)
    return out_f, out_t


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("fn", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_losses(pt, fn, reduction):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((4, 5)) * 2).astype(np.float32)
    t = rng.standard_normal((4, 5)).astype(np.float32)
    _loss_case(pt, fn, x, t, reduction=reduction)
    if fn == "smooth_l1_loss":
        _loss_case(pt, fn, x, t, reduction=reduction, beta=0.5)
    if fn == "huber_loss":
        _loss_case(pt, fn, x, t, reduction=reduction, delta=0.7)
    if fn in ("mse_loss", "l1_loss"):
        _loss_case(pt, fn, x, t, reduction=reduction, weight=rng.random((4, 5)).astype(np.float32))


CE_CASES = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(weight=np.array([0.2, 1.0, 2.0, 0.5, 1.5], np.float32)),
    dict(weight=np.array([0.2, 1.0, 2.0, 0.5, 1.5], np.float32), reduction="none"),
    dict(ignore_index=2),
    dict(ignore_index=2, weight=np.array([0.2, 1.0, 2.0, 0.5, 1.5], np.float32)),
    dict(label_smoothing=0.2),
    dict(label_smoothing=0.1, ignore_index=1, weight=np.array([0.2, 1.0, 2.0, 0.5, 1.5], np.float32)),
    dict(label_smoothing=0.3, reduction="sum", ignore_index=0),
    dict(label_smoothing=0.3, reduction="none", weight=np.array([0.2, 1.0, 2.0, 0.5, 1.5], np.float32)),
]


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", CE_CASES)
def test_cross_entropy_class_indices(pt, kwargs):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    t = np.array([0, 2, 4, 1, 2, 3])
    _loss_case(pt, "cross_entropy", x, t, **kwargs)
    # spatial (N, C, d) input and a single unbatched sample
    _loss_case(pt, "cross_entropy", rng.standard_normal((2, 5, 3)).astype(np.float32),
               np.array([[0, 1, 2], [2, 4, 1]]), **kwargs)
    _loss_case(pt, "cross_entropy", x[0], np.array(3), **kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [dict(), dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.25),
                                    dict(weight=np.array([0.5, 1.0, 2.0, 1.0], np.float32))])
def test_cross_entropy_probabilities(pt, kwargs):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    p = rng.random((3, 4)).astype(np.float32)
    _loss_case(pt, "cross_entropy", x, p / p.sum(1, keepdims=True), **kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [dict(), dict(reduction="none"), dict(reduction="sum"), dict(ignore_index=1),
                                    dict(weight=np.array([1.0, 0.5, 3.0], np.float32), ignore_index=0)])
def test_nll_loss(pt, kwargs):
    x = np.log(np.random.default_rng(7).dirichlet(np.ones(3), 5)).astype(np.float32)
    _loss_case(pt, "nll_loss", x, np.array([0, 1, 2, 1, 0]), **kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(pt, reduction):
    rng = np.random.default_rng(8)
    p = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32)
    t = rng.random((4, 3)).astype(np.float32)
    w = rng.random((4, 3)).astype(np.float32)
    _loss_case(pt, "binary_cross_entropy", p, t, reduction=reduction)
    _loss_case(pt, "binary_cross_entropy", p, t, reduction=reduction, weight=w)
    # saturated probabilities (a float32 sigmoid gives exactly 0 and 1): PyTorch's gradient
    # (x - y) / max(x (1 - x), 1e-12) is 0 where x == y there, not the terms' derivative
    sat = np.array([[0.0, 1.0, 0.0], [1.0, 0.5, 1.0], [0.0, 1.0, 0.3], [1.0, 0.0, 0.7]], np.float32)
    _loss_case(pt, "binary_cross_entropy", sat, (sat > 0.5).astype(np.float32), reduction=reduction)


@pytest.mark.torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(pt, reduction):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((4, 3)) * 5).astype(np.float32)
    t = (rng.random((4, 3)) > 0.5).astype(np.float32)
    w = rng.random((4, 3)).astype(np.float32)
    pw = np.array([0.5, 2.0, 3.0], np.float32)
    _loss_case(pt, "binary_cross_entropy_with_logits", x, t, reduction=reduction)
    _loss_case(pt, "binary_cross_entropy_with_logits", x, t, reduction=reduction, weight=w, pos_weight=pw)
    # a zero-initialized head's logits are exactly 0: the gradient there is sigmoid(0) - t
    x[:2] = 0.0
    _loss_case(pt, "binary_cross_entropy_with_logits", x, np.full((4, 3), 0.3, np.float32), reduction=reduction)
    xf, xt = pair(pt, np.array([0.0, -0.0, 2.0, -3.0], np.float32), requires_grad=True)
    F.logsigmoid(xf).sum().backward()
    pt.nn.functional.logsigmoid(xt).sum().backward()
    close(xf.grad, xt.grad)


@pytest.mark.torch
def test_loss_modules_match_functional(pt):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = np.array([1.0, 2.0, 0.5], np.float32)
    t_cls = np.array([0, 2, 1, 2])
    t_bin = (rng.random((4, 3)) > 0.5).astype(np.float32)
    cases = [("CrossEntropyLoss", dict(weight=w, label_smoothing=0.1, ignore_index=1), t_cls),
             ("NLLLoss", dict(weight=w), t_cls), ("MSELoss", dict(reduction="sum"), t_bin),
             ("L1Loss", dict(), t_bin), ("BCEWithLogitsLoss", dict(pos_weight=w), t_bin),
             ("SmoothL1Loss", dict(beta=0.5), t_bin), ("HuberLoss", dict(delta=0.5), t_bin)]
    for name, kw, target in cases:
        kf = {k: fg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        kt = {k: pt.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        close(getattr(nn, name)(**kf)(fg.tensor(x), fg.tensor(target)),
              getattr(pt.nn, name)(**kt)(pt.tensor(x), pt.tensor(target)))
    s = 1 / (1 + np.exp(-x))
    close(nn.BCELoss()(fg.tensor(s), fg.tensor(t_bin)), pt.nn.BCELoss()(pt.tensor(s), pt.tensor(t_bin)))
    assert list(nn.CrossEntropyLoss(weight=fg.tensor(w)).state_dict()) == ["weight"]
    assert list(nn.BCEWithLogitsLoss(pos_weight=fg.tensor(w)).state_dict()) == ["pos_weight"]


def test_loss_errors():
    x = fg.randn(3, 5)
    with pytest.raises(ValueError, match="batch_size"):
        F.nll_loss(x, fg.tensor([0, 1]))
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.cross_entropy(x, fg.tensor([0, 1, 7]))
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(x, fg.tensor([0, 1, -1]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.mse_loss(x, x, reduction="bad")
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, fg.rand(3, 4))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(x * 10, fg.rand(3, 5))
    with pytest.raises(RuntimeError, match="class probabilities"):
        F.cross_entropy(x, fg.zeros(3, 5, dtype=fg.int64))
    with pytest.raises(RuntimeError, match="label_smoothing"):
        F.cross_entropy(x, fg.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(x, fg.zeros(5))


@pytest.mark.torch
def test_all_ignored_mean_is_nan(pt):
    out = F.cross_entropy(fg.randn(2, 3), fg.tensor([1, 1]), ignore_index=1)
    ref = pt.nn.functional.cross_entropy(pt.randn(2, 3), pt.tensor([1, 1]), ignore_index=1)
    assert math.isnan(out.item()) and math.isnan(ref.item())


# ---------------------------------------------------------------- functional against torch
ACTIVATIONS = [
    ("relu", {}), ("gelu", {}), ("gelu", dict(approximate="tanh")), ("tanh", {}), ("sigmoid", {}),
    ("softmax", dict(dim=1)), ("log_softmax", dict(dim=0)), ("leaky_relu", dict(negative_slope=0.2)),
    ("elu", dict(alpha=0.7)), ("silu", {}), ("softplus", dict(beta=2.0, threshold=5.0)), ("logsigmoid", {}),
    ("normalize", {}), ("normalize", dict(p=1.0, dim=0)),
]


@pytest.mark.torch
@pytest.mark.parametrize("name,kwargs", ACTIVATIONS)
def test_activations(pt, name, kwargs):
    x = (np.random.default_rng(11).standard_normal((4, 6)) * 3).astype(np.float32)
    xf, xt = pair(pt, x, requires_grad=True)
    of, ot = getattr(F, name)(xf, **kwargs), getattr(pt.nn.functional, name)(xt, **kwargs)
    close(of, ot)
    g = np.random.default_rng(12).standard_normal(x.shape).astype(np.float32)
    of.backward(fg.tensor(g))
    ot.backward(pt.tensor(g))
    close(xf.grad, xt.grad, atol=1e-5)


@pytest.mark.torch
def test_inplace_activations(pt):
    x = np.random.default_rng(13).standard_normal((3, 4)).astype(np.float32)
    for name, kw in [("relu", {}), ("leaky_relu", dict(negative_slope=0.3)), ("elu", {}), ("silu", {})]:
        xf, xt = pair(pt, x)
        rf = getattr(F, name)(xf, inplace=True, **kw)
        getattr(pt.nn.functional, name)(xt, inplace=True, **kw)
        assert rf is xf
        close(xf, xt)


def test_grad_fn_names():
    """The names PyTorch shows for these ops (checked against torch 2.13 by hand)."""
    x = fg.randn(3, 5, requires_grad=True)
    w = fg.randn(2, 5, requires_grad=True)
    b = fg.randn(2, requires_grad=True)
    t = fg.tensor([0, 1, 1])
    names = {
        "AddmmBackward0": F.linear(x, w, b), "MmBackward0": F.linear(x, w),
        "ViewBackward0": F.linear(fg.randn(4, 3, 5), w, b), "ReluBackward0": F.relu(x),
        "NllLossBackward0": F.cross_entropy(x[:, :2], t), "MseLossBackward0": F.mse_loss(x, x.detach()),
        "GeluBackward0": F.gelu(x), "NativeLayerNormBackward0": F.layer_norm(x, (5,)),
        "EmbeddingBackward0": F.embedding(t, w), "LogSoftmaxBackward0": F.log_softmax(x, 1),
        "BinaryCrossEntropyWithLogitsBackward0": F.binary_cross_entropy_with_logits(x, x.detach()),
        "BinaryCrossEntropyBackward0": F.binary_cross_entropy(fg.sigmoid(x), fg.rand(3, 5)),
        "SmoothL1LossBackward0": F.smooth_l1_loss(x, x.detach()), "SoftmaxBackward0": F.softmax(x, 1),
    }
    for name, out in names.items():
        assert type(out.grad_fn).__name__ == name
    nll = F.nll_loss(F.log_softmax(x, 1), fg.tensor([0, 1, 2]))
    assert type(nll.grad_fn).__name__ == "NllLossBackward0"


@pytest.mark.torch
def test_linear_shapes(pt):
    w = np.random.default_rng(14).standard_normal((3, 4)).astype(np.float32)
    b = np.random.default_rng(15).standard_normal(3).astype(np.float32)
    for shape in [(4,), (2, 4), (2, 5, 4)]:
        x = np.random.default_rng(16).standard_normal(shape).astype(np.float32)
        for bias in (None, b):
            wf, wt = pair(pt, w, requires_grad=True)
            of = F.linear(fg.tensor(x), wf, None if bias is None else fg.tensor(bias))
            ot = pt.nn.functional.linear(pt.tensor(x), wt, None if bias is None else pt.tensor(bias))
            close(of, ot)
            of.sum().backward()
            ot.sum().backward()
            close(wf.grad, wt.grad)


def test_linear_wrong_input_size():
    lin = nn.Linear(5, 2)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 5x2\)"):
        lin(fg.randn(3, 4))
    with pytest.raises(RuntimeError, match=r"\(6x4 and 5x2\)"):
        lin(fg.randn(2, 3, 4))


@pytest.mark.torch
def test_layer_norm_and_embedding_grads(pt):
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ln_f, ln_t = nn.LayerNorm((3, 4)), pt.nn.LayerNorm((3, 4))
    with pt.no_grad():
        ln_t.weight.copy_(pt.tensor(rng.standard_normal((3, 4)).astype(np.float32)))
        ln_t.bias.copy_(pt.tensor(rng.standard_normal((3, 4)).astype(np.float32)))
    sync(ln_f, ln_t)
    xf, xt = pair(pt, x, requires_grad=True)
    of, ot = ln_f(xf), ln_t(xt)
    close(of, ot, atol=1e-5)
    g = rng.standard_normal(x.shape).astype(np.float32)
    of.backward(fg.tensor(g))
    ot.backward(pt.tensor(g))
    close(xf.grad, xt.grad, atol=1e-5)
    close(ln_f.weight.grad, ln_t.weight.grad, atol=1e-5)
    close(ln_f.bias.grad, ln_t.bias.grad)

    idx = np.array([[1, 2, 0, 2], [3, 2, 2, 1]])
    for kw in [dict(), dict(padding_idx=2), dict(scale_grad_by_freq=True), dict(padding_idx=-1, max_norm=1.0)]:
        emb_t = pt.nn.Embedding(4, 3, **kw)
        emb_f = nn.Embedding(4, 3, **kw)
        sync(emb_f, emb_t)
        of, ot = emb_f(fg.tensor(idx)), emb_t(pt.tensor(idx))
        close(of, ot)
        close(emb_f.weight, emb_t.weight)  # max_norm renormalizes in place
        g = rng.standard_normal(tuple(ot.shape)).astype(np.float32)
        of.backward(fg.tensor(g))
        ot.backward(pt.tensor(g))
        close(emb_f.weight.grad, emb_t.weight.grad)
    assert nn.Embedding(5, 2, padding_idx=3).weight[3].tolist() == [0.0, 0.0]
    with pytest.raises(IndexError, match="index out of range"):
        nn.Embedding(3, 2)(fg.tensor([3]))
    with pytest.raises(RuntimeError, match="Long, Int"):
        nn.Embedding(3, 2)(fg.tensor([1.0]))
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(fg.randn(3, 5), (4,))


@pytest.mark.torch
def test_one_hot_and_pad(pt):
    idx = np.array([[0, 3], [2, 1]])
    close(F.one_hot(fg.tensor(idx)), pt.nn.functional.one_hot(pt.tensor(idx)))
    assert F.one_hot(fg.tensor(idx), 6).dtype == fg.int64
    assert F.one_hot(fg.tensor(idx), 6).shape == (2, 2, 6)
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(fg.tensor([3]), 2)
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    for mode, p in [("constant", (1, 2)), ("constant", (1, -1, 2, 0)), ("reflect", (2, 1, 1, 2)),
                    ("replicate", (3, 0, 1, 1)), ("circular", (1, 3, 2, 1))]:
        xf, xt = pair(pt, x, requires_grad=True)
        kw = dict(value=2.5) if mode == "constant" else {}
        of, ot = F.pad(xf, p, mode=mode, **kw), pt.nn.functional.pad(xt, p, mode=mode, **kw)
        close(of, ot)
        g = np.random.default_rng(18).standard_normal(tuple(ot.shape)).astype(np.float32)
        of.backward(fg.tensor(g))
        ot.backward(pt.tensor(g))
        close(xf.grad, xt.grad)


def test_dropout_train_and_eval():
    fg.manual_seed(3)
    drop = nn.Dropout(0.25)
    x = fg.ones(200, 100, requires_grad=True)
    y = drop(x)
    kept = (y.detach() != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.02
    assert set(np.unique(np_of(y)).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    y.sum().backward()
    np.testing.assert_allclose(np_of(x.grad), np_of(y), rtol=1e-6)
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 1.0).sum().item() == 0.0
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)


# ---------------------------------------------------------------- Module API
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.norm = nn.LayerNorm(3)
        self.register_buffer("running", fg.zeros(3))
        self.register_buffer("scratch", fg.ones(1), persistent=False)

    def forward(self, x):
        return self.norm(self.fc(x)) + self.running


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(fg.ones(1))
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(3, 2, bias=False)
        self.tied = self.head  # shared module: listed once
        self.act = nn.ReLU()

    def forward(self, x):
        for b in self.blocks:
            x = self.act(b(x))
        return self.head(x * self.scale)


def test_named_parameters_buffers_and_modules():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.norm.weight",
                     "blocks.0.norm.bias", "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.norm.weight",
                     "blocks.1.norm.bias", "head.weight"]
    assert len(list(net.parameters())) == 10
    assert len(list(net.parameters(recurse=False))) == 1
    assert [n for n, _ in net.named_buffers()] == ["blocks.0.running", "blocks.0.scratch", "blocks.1.running",
                                                   "blocks.1.scratch"]
    assert [n for n, _ in net.named_modules()] == ["", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.norm",
                                                   "blocks.1", "blocks.1.fc", "blocks.1.norm", "head", "act"]
    assert [n for n, _ in net.named_children()] == ["blocks", "head", "act"]
    assert list(net.state_dict()) == ["scale", "blocks.0.running", "blocks.0.fc.weight", "blocks.0.fc.bias",
                                      "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.1.running",
                                      "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.norm.weight",
                                      "blocks.1.norm.bias", "head.weight", "tied.weight"]
    assert isinstance(net.scale, nn.Parameter) and net.scale.requires_grad and net.scale.is_leaf
    assert repr(net.scale).startswith("Parameter containing:\ntensor(")


@pytest.mark.torch
def test_named_parameters_and_repr_match_torch(pt):
    ref = pt.nn.Sequential(pt.nn.Linear(2, 3), pt.nn.ReLU(), pt.nn.ModuleList([pt.nn.Linear(3, 3)] * 3),
                           pt.nn.Dropout(0.1), pt.nn.LayerNorm(4), pt.nn.Embedding(3, 4, padding_idx=1),
                           pt.nn.GELU(approximate="tanh"), pt.nn.Softmax(1), pt.nn.Flatten(),
                           pt.nn.CrossEntropyLoss(), pt.nn.ModuleDict({"a": pt.nn.Tanh(), "b": pt.nn.Identity()}),
                           pt.nn.Linear(3, 1, bias=False))
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.ModuleList([nn.Linear(3, 3)] * 3), nn.Dropout(0.1),
                        nn.LayerNorm(4), nn.Embedding(3, 4, padding_idx=1), nn.GELU(approximate="tanh"),
                        nn.Softmax(1), nn.Flatten(), nn.CrossEntropyLoss(),
                        nn.ModuleDict({"a": nn.Tanh(), "b": nn.Identity()}), nn.Linear(3, 1, bias=False))
    assert repr(net) == repr(ref)
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert list(net.state_dict()) == list(ref.state_dict())


def test_state_dict_round_trip_and_errors():
    a, b = Net(), Net()
    with fg.no_grad():
        a.blocks[0].running.fill_(3.0)
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = fg.randn(4, 3)
    close(a(x), b(x), rtol=0, atol=0)
    assert b.blocks[0].running.tolist() == [3.0, 3.0, 3.0]
    sd = a.state_dict()
    assert not sd["scale"].requires_grad and sd["scale"].grad_fn is None
    sd["head.weight"] = fg.zeros(5, 5)
    sd["extra.weight"] = fg.zeros(1)
    del sd["scale"]
    with pytest.raises(RuntimeError) as err:
        b.load_state_dict(sd)
    msg = str(err.value)
    assert 'Missing key(s) in state_dict: "scale"' in msg and '"extra.weight"' in msg
    assert "size mismatch for head.weight" in msg
    del sd["head.weight"]
    res = b.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["scale", "head.weight"] and res.unexpected_keys == ["extra.weight"]
    with pytest.raises(TypeError):
        b.load_state_dict([1, 2])


def test_module_registration_rules():
    m = nn.Linear(3, 2)
    with pytest.raises(TypeError, match="cannot assign"):
        m.weight = fg.ones(2, 3)
    m.bias = None
    assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]
    m.extra = nn.Parameter(fg.zeros(2))
    assert "extra" in dict(m.named_parameters())
    del m.extra
    assert "extra" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(fg.tensor([1, 2]))

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(fg.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()
    with pytest.raises(KeyError):
        m.register_buffer("a.b", fg.ones(1))
    with pytest.raises(NotImplementedError):
        nn.Module()(1)


def test_train_eval_zero_grad_apply_to_and_hooks():
    net = Net()
    assert net.training and all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    net(fg.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(not np.any(np_of(p.grad)) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())

    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 3

    weight = net.head.weight
    net.double()
    assert net.head.weight is weight and weight.dtype == fg.float64
    assert net.blocks[0].running.dtype == fg.float64
    assert net(fg.randn(2, 3, dtype=fg.float64)).dtype == fg.float64
    net.to(fg.float32)
    assert weight.dtype == fg.float32
    with pytest.raises(TypeError):
        net.to(fg.int64)

    calls = []
    h1 = net.head.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = net.head.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    out = net(fg.randn(2, 3))
    assert calls == [(2, 2)] and out.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    h1.remove()
    h2.remove()
    net(fg.randn(2, 3))
    assert len(calls) == 1
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_containers():
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    seq.append(nn.Tanh())
    assert len(seq) == 3 and isinstance(seq[-1], nn.Tanh) and isinstance(seq[1:], nn.Sequential)
    del seq[0]
    assert [type(m).__name__ for m in seq] == ["ReLU", "Tanh"] and list(seq._modules) == ["0", "1"]
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml += [nn.ReLU()]
    ml.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in ml] == ["Tanh", "Linear", "ReLU"]
    with pytest.raises(IndexError):
        ml[3]
    md = nn.ModuleDict({"a": nn.ReLU()})
    md["b"] = nn.Linear(1, 1)
    assert list(md) == ["a", "b"] and "b" in md and len(list(md.parameters())) == 2
    assert nn.Flatten()(fg.zeros(2, 3, 4)).shape == (2, 12)
    assert nn.Identity(1, x=2)(seq) is seq


def test_locate_and_swap_for_functional_call():
    net = Net()
    mod, name = net._locate("blocks.1.fc.weight")
    assert mod is net.blocks[1].fc and name == "weight"
    old = mod._swap("weight", fg.zeros(3, 3))
    assert type(mod.weight) is fg.Tensor
    assert mod._swap("weight", old) is not old and mod.weight is old
    with pytest.raises(AttributeError):
        net._locate("blocks.7.fc")
    x = fg.randn(2, 3)
    params = {k: fg.zeros_like(v) for k, v in net.named_parameters()}
    out = fg.func.functional_call(net, params, (x,))
    assert out.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert net.blocks[1].fc.weight is old


# ---------------------------------------------------------------- init
def test_init_distributions():
    fg.manual_seed(0)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives 1/sqrt(fan_in) too
    w = np_of(lin.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(np_of(lin.bias)).max() <= bound
    t = fg.empty(500, 400)
    nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    assert abs(np_of(t).std() - math.sqrt(2 / 500)) < 0.02 * math.sqrt(2 / 500)
    nn.init.xavier_uniform_(t, gain=2.0)
    a = 2.0 * math.sqrt(6 / 900)
    assert np.abs(np_of(t)).max() <= a and np.abs(np_of(t)).max() > 0.99 * a
    nn.init.xavier_normal_(t)
    assert abs(np_of(t).std() - math.sqrt(2 / 900)) < 0.02 * math.sqrt(2 / 900)
    p = nn.Parameter(fg.empty(3, 4))
    nn.init.constant_(p, 0.5)
    assert p.is_leaf and p.requires_grad and np.all(np_of(p) == 0.5)
    nn.init.zeros_(p)
    nn.init.ones_(p)
    assert np.all(np_of(p) == 1.0)
    nn.init.normal_(p, 3.0, 0.0)
    assert np.all(np_of(p) == 3.0)
    assert nn.init._calculate_fan_in_and_fan_out(fg.empty(5, 3, 2, 2)) == (12, 20)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    with pytest.raises(ValueError):
        nn.init.calculate_gain("bogus")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(fg.empty(3))


# ---------------------------------------------------------------- nn.utils
@pytest.mark.torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.1, 100.0])
def test_clip_grad_norm_matches_torch(pt, norm_type, max_norm):
    pt.manual_seed(2)
    ref = mlp(pt)
    model = mlp(fg)
    sync(model, ref)
    x = np.random.default_rng(19).standard_normal((4, 6)).astype(np.float32)
    (ref(pt.tensor(x)) ** 2).sum().backward()
    (model(fg.tensor(x)) ** 2).sum().backward()
    total_t = pt.nn.utils.clip_grad_norm_(ref.parameters(), max_norm, norm_type)
    total_f = nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)
    close(total_f, total_t)
    for p1, p2 in zip(model.parameters(), ref.parameters()):
        close(p1.grad, p2.grad)


def test_clip_grad_value_and_vector_conversion():
    p = nn.Parameter(fg.tensor([1.0, -2.0, 3.0]))
    q = nn.Parameter(fg.tensor([[0.5, 4.0]]))
    (p * fg.tensor([1.0, -2.0, 3.0])).sum().backward()
    (q * 10).sum().backward()
    nn.utils.clip_grad_value_([p, q], 2.5)
    assert p.grad.tolist() == [1.0, -2.0, 2.5] and q.grad.tolist() == [[2.5, 2.5]]
    assert nn.utils.clip_grad_norm_([nn.Parameter(fg.ones(1))], 1.0).item() == 0.0
    p.grad = fg.tensor([float("nan"), 0.0, 0.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    vec = nn.utils.parameters_to_vector([p, q])
    assert vec.tolist() == [1.0, -2.0, 3.0, 0.5, 4.0]
    nn.utils.vector_to_parameters(fg.arange(5.0), [p, q])
    assert p.tolist() == [0.0, 1.0, 2.0] and q.tolist() == [[3.0, 4.0]]


# ---------------------------------------------------------------- checkpoint
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_recomputes_and_matches(use_reentrant):
    fg.manual_seed(5)
    block = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.3), nn.Linear(8, 4))
    calls = []

    def fn(x, scale):
        calls.append(1)
        return block(x) * scale

    x = fg.randn(3, 4, requires_grad=True)
    state = fg.get_rng_state()
    y = checkpoint(fn, x, 2.0, use_reentrant=use_reentrant)
    assert len(calls) == 1
    assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward"
    fg.randn(10)  # consuming random numbers between forward and backward must not change the mask
    g = fg.randn(3, 4)
    y.backward(g)
    assert len(calls) == 2
    grads = [x.grad] + [p.grad for p in block.parameters()]
    assert all(t is not None for t in grads)

    x.grad = None
    block.zero_grad()
    fg.set_rng_state(state)
    y2 = fn(x, 2.0)
    close(y, y2, rtol=0, atol=0)
    y2.backward(g)
    for a, b in zip(grads, [x.grad] + [p.grad for p in block.parameters()]):
        close(a, b)


def test_checkpoint_non_reentrant_closure_parameters_are_graph_inputs():
    lin = nn.Linear(3, 3)
    x = fg.randn(2, 3)  # no input requires grad: the output still depends on lin's parameters
    y = checkpoint(lambda t: fg.tanh(lin(t)), x, use_reentrant=False)
    assert y.requires_grad
    gw, gb = fg.autograd.grad(y.sum(), [lin.weight, lin.bias])
    assert lin.weight.grad is None  # autograd.grad does not accumulate, as without checkpointing
    ref_w, ref_b = fg.autograd.grad(fg.tanh(lin(x)).sum(), [lin.weight, lin.bias])
    close(gw, ref_w)
    close(gb, ref_b)
    hooked = []
    lin.weight.register_hook(lambda g: hooked.append(g))
    checkpoint(lin, x, use_reentrant=False).sum().backward()
    assert len(hooked) == 1 and lin.weight.grad is not None


def test_checkpoint_multiple_outputs_and_kwargs():
    w = nn.Parameter(fg.tensor([1.0, 2.0]))

    def fn(a, b, *, power):
        return a * w, (a + b) ** power

    a = fg.tensor([1.0, 3.0], requires_grad=True)
    b = fg.tensor([2.0, 1.0], requires_grad=True)
    u, v = checkpoint(fn, a, b, power=2, use_reentrant=False)
    (u.sum() + v.sum()).backward()
    assert a.grad.tolist() == [1.0 + 6.0, 2.0 + 8.0]
    assert b.grad.tolist() == [6.0, 8.0]
    assert w.grad.tolist() == [1.0, 3.0]
    with pytest.raises(ValueError, match="Unexpected keyword"):
        checkpoint(fn, a, b, power=2, use_reentrant=True)
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lambda t: t * 2, a)


@pytest.mark.torch
def test_checkpoint_double_backward_matches_torch(pt):
    results = []
    for lib in (pt, fg):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.nn.Parameter(lib.tensor([0.5, -1.0]))
        y = lib.utils.checkpoint.checkpoint(lambda t: lib.sin(t * w) ** 2, x, use_reentrant=False).sum()
        g, = lib.autograd.grad(y, x, create_graph=True)
        gg, = lib.autograd.grad(g.sum(), x)
        results.append((g, gg))
    close(results[1][0], results[0][0])
    close(results[1][1], results[0][1])


@pytest.mark.torch
def test_checkpoint_recomputes_under_the_forwards_autocast_and_refuses_partial_reentrant(pt):
    """Both variants recompute under the autocast state the forward ran in (a bfloat16 block
    recomputed in float32 gave other gradients than without checkpointing), as torch's; the
    reentrant one refuses autograd.grad and backward(inputs=) as torch's (it accumulated into
    every parameter's .grad besides)."""
    rng = np.random.default_rng(5)
    w_np, x_np = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)

    def program(lib):
        out = []
        for reentrant in (None, False, True):
            w = lib.nn.Parameter(lib.tensor(w_np))
            x = lib.tensor(x_np, requires_grad=True)
            with lib.autocast("cpu", dtype=lib.bfloat16):
                block = lambda t: lib.tanh(t @ w) @ w  # noqa: E731
                y = block(x) if reentrant is None else lib.utils.checkpoint.checkpoint(block, x,
                                                                                       use_reentrant=reentrant)
            y.float().square().sum().backward()
            out.append([w.grad.numpy(), x.grad.numpy()])
            z = lib.utils.checkpoint.checkpoint(lambda t: (t @ w).sum(), x, use_reentrant=True)
            for call in (lambda: lib.autograd.grad(z, x, retain_graph=True), lambda: z.backward(inputs=[x])):
                with pytest.raises(RuntimeError, match="use_reentrant=True, torch.utils.checkpoint is incompatible"):
                    call()
        return out
    mine, ref = program(fg), program(pt)
    for grads, ref_grads in zip(mine, ref):
        for got, plain, want in zip(grads, mine[0], ref_grads):
            np.testing.assert_array_equal(got, plain)  # checkpointing changes nothing
            np.testing.assert_allclose(got, want, rtol=0.05, atol=0.2)  # (bfloat16 backward rounding)


@pytest.mark.torch
def test_first_and_second_derivatives_at_exactly_zero_match_torch(pt):
    """Newton's method from w = 0 reads the Hessian of BCE with logits at logits of exactly
    0: logsigmoid, softplus, BCE with logits, smooth L1 and Huber have PyTorch's first and
    second derivatives there (the |x| forms gave 0 for the second)."""
    x_np = np.array([0.0, -0.0, 3.0, -3.0, 50.0, -50.0, 800.0, -800.0])
    cases = [lambda L, x: L.nn.functional.logsigmoid(x).sum(),
             lambda L, x: L.nn.functional.softplus(x).sum(),
             lambda L, x: L.nn.functional.binary_cross_entropy_with_logits(
                 x, L.tensor(np.linspace(0, 1, 8)), reduction="sum"),
             lambda L, x: L.nn.functional.smooth_l1_loss(x * 0.01, L.zeros(8, dtype=L.float64), reduction="sum"),
             lambda L, x: L.nn.functional.huber_loss(x * 0.01, L.zeros(8, dtype=L.float64), reduction="sum")]
    for case in cases:
        got = []
        for L in (fg, pt):
            x = L.tensor(x_np, requires_grad=True)
            g, = L.autograd.grad(case(L, x), x, create_graph=True)
            h, = L.autograd.grad(g.sum(), x)
            got.append((g.detach().numpy(), h.numpy()))
        np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-12, atol=1e-15)
