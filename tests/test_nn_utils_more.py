"""nn.utils.prune, nn.utils.parametrize(ations), hook-based weight_norm/spectral_norm,
optim.swa_utils and CyclicLR, checked against PyTorch."""
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.nn.utils import parametrizations, parametrize, prune
from fusegrad.optim import lr_scheduler, swa_utils

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch.nn.utils.prune as tprune  # noqa: E402
from torch.nn.utils import parametrize as tparametrize  # noqa: E402
from torch.optim import swa_utils as tswa_utils  # noqa: E402


def np_of(t) -> np.ndarray:
    """A fusegrad or torch tensor as an ndarray."""
    return np.asarray(t.detach().numpy())


def close(a, b, rtol=1e-5, atol=1e-6) -> None:
    np.testing.assert_allclose(np_of(a), np_of(b), rtol=rtol, atol=atol)


def twins(make):
    """``make(lib)`` built with torch and with fusegrad, fusegrad holding torch's values."""
    torch.manual_seed(0)
    pt = make(torch)
    f = make(fg)
    f.load_state_dict({k: fg.tensor(np_of(v)) for k, v in pt.state_dict().items()})
    return f, pt


def names(module):
    return ([n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()])


def same_state(f, pt) -> None:
    """Same parameter/buffer names and values, same (pruned) attribute values."""
    assert names(f) == names(pt)
    for (_, a), (_, b) in zip(f.state_dict().items(), pt.state_dict().items()):
        close(a, b)


# ------------------------------------------------------------------ pruning
def test_prune_iterative_matches_torch():
    f, pt = twins(lambda lib: lib.nn.Conv2d(3, 6, 3))
    for lib_prune, m in ((prune, f), (tprune, pt)):
        lib_prune.l1_unstructured(m, "weight", amount=0.3)
        lib_prune.ln_structured(m, "weight", amount=2, n=2, dim=0)
        lib_prune.ln_structured(m, "weight", amount=0.34, n=1, dim=1)
        lib_prune.l1_unstructured(m, "bias", amount=2)
    same_state(f, pt)
    assert names(f) == (["weight_orig", "bias_orig"], ["weight_mask", "bias_mask"])
    close(f.weight, pt.weight)
    hook = next(h for h in f._forward_pre_hooks.values() if h._tensor_name == "weight")
    assert [type(h).__name__ for h in hook] == ["L1Unstructured", "LnStructured", "LnStructured"]
    x = np.random.RandomState(0).randn(2, 3, 6, 6).astype(np.float32)
    close(f(fg.tensor(x)), pt(torch.tensor(x)), atol=1e-5)
    assert prune.is_pruned(f)
    prune.remove(f, "weight")
    tprune.remove(pt, "weight")
    same_state(f, pt)
    assert isinstance(f.weight, nn.Parameter)


def test_prune_importance_scores_and_structured_inf_norm():
    f, pt = twins(lambda lib: lib.nn.Linear(5, 4))
    scores = np.random.RandomState(1).rand(4, 5).astype(np.float32)
    prune.l1_unstructured(f, "weight", amount=7, importance_scores=fg.tensor(scores))
    tprune.l1_unstructured(pt, "weight", amount=7, importance_scores=torch.tensor(scores))
    prune.ln_structured(f, "weight", amount=1, n=float("inf"), dim=-1)
    tprune.ln_structured(pt, "weight", amount=1, n=float("inf"), dim=-1)
    same_state(f, pt)


def test_prune_random_counts_and_custom_method():
    m = nn.Linear(6, 5)
    prune.random_unstructured(m, "weight", amount=0.3)
    assert int((m.weight_mask == 0).sum()) == 9
    prune.random_structured(m, "weight", amount=2, dim=0)
    assert int((m.weight_mask.sum(dim=1) == 0).sum()) >= 2

    class EveryOther(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    EveryOther.apply(m, "bias")
    assert np_of(m.bias_mask).tolist() == [0, 1, 0, 1, 0]
    prune.identity(m, "bias")
    assert np_of(m.bias_mask).tolist() == [0, 1, 0, 1, 0]


def test_prune_global_unstructured_and_custom_mask():
    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.Linear(6, 3))

    f, pt = twins(make)
    prune.l1_unstructured(f[0], "weight", amount=5)
    tprune.l1_unstructured(pt[0], "weight", amount=5)
    for lib_prune, m in ((prune, f), (tprune, pt)):
        lib_prune.global_unstructured([(m[0], "weight"), (m[1], "weight")], pruning_method=lib_prune.L1Unstructured,
                                      amount=0.4)
    same_state(f, pt)
    mask = np.array([1, 0, 1], np.float32)
    prune.custom_from_mask(f[1], "bias", fg.tensor(mask))
    assert np_of(f[1].bias).tolist() == (np_of(f[1].bias_orig) * mask).tolist()


def test_prune_errors_match_torch():
    for amount, exc in ((-1, ValueError), (1.5, ValueError), ("x", TypeError)):
        with pytest.raises(exc) as a:
            prune.L1Unstructured(amount)
        with pytest.raises(exc) as b:
            tprune.L1Unstructured(amount)
        assert str(a.value) == str(b.value)
    with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
        prune.l1_unstructured(nn.Linear(2, 2), "bias", amount=3)
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(nn.Linear(2, 2), "weight")
    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="Structured pruning can only be applied"):
        prune.ln_structured(m, "bias", amount=1, n=2, dim=0)
    assert names(m) == (["weight", "bias"], [])  # a failed pruning leaves the module as it was


# ------------------------------------------------------------------ parametrize
def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    return Symmetric()


def _skew(lib):
    class Skew(lib.nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu(1)

    return Skew()


def _double(lib):
    class Double(lib.nn.Module):
        def forward(self, X):
            return X * 2

        def right_inverse(self, A):
            return A / 2

    return Double()


def test_parametrize_register_values_grads_and_remove():
    f, pt = twins(lambda lib: lib.nn.Linear(3, 3))
    parametrize.register_parametrization(f, "weight", _symmetric(fg))
    tparametrize.register_parametrization(pt, "weight", _symmetric(torch))
    assert type(f).__name__ == "ParametrizedLinear" and parametrize.type_before_parametrizations(f) is nn.Linear
    assert parametrize.is_parametrized(f) and parametrize.is_parametrized(f, "weight")
    assert not parametrize.is_parametrized(f, "bias")
    assert list(f.state_dict()) == list(pt.state_dict()) == ["bias", "parametrizations.weight.original"]
    close(f.weight, pt.weight)
    x = np.random.RandomState(0).randn(2, 3).astype(np.float32)
    f(fg.tensor(x)).sum().backward()
    pt(torch.tensor(x)).sum().backward()
    close(f.parametrizations.weight.original.grad, pt.parametrizations.weight.original.grad)
    assert repr(f) == repr(pt)
    parametrize.remove_parametrizations(f, "weight")
    tparametrize.remove_parametrizations(pt, "weight")
    assert type(f) is nn.Linear and names(f) == names(pt) == (["bias", "weight"], [])
    close(f.weight, pt.weight)


def test_parametrize_right_inverse_chain_and_leave_unparametrized():
    f, pt = twins(lambda lib: lib.nn.Linear(3, 3))
    value = np.array([[0., 0.3, -0.2], [-0.3, 0., 0.7], [0.2, -0.7, 0.]], np.float32)
    for lib, lib_p, m in ((fg, parametrize, f), (torch, tparametrize, pt)):
        original = m.weight
        lib_p.register_parametrization(m, "weight", _skew(lib))
        assert m.parametrizations.weight.original is original  # the same Parameter, set in place
        lib_p.register_parametrization(m, "weight", _double(lib))
        m.weight = lib.tensor(value)
    close(f.parametrizations.weight.original, pt.parametrizations.weight.original)
    close(f.weight, pt.weight)
    parametrize.remove_parametrizations(f, "weight", leave_parametrized=False)
    tparametrize.remove_parametrizations(pt, "weight", leave_parametrized=False)
    close(f.weight, pt.weight)
    assert names(f) == names(pt)


def test_parametrize_cached_and_errors():
    calls = []

    class Counting(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", Counting())
    calls.clear()
    m.weight, m.weight
    assert len(calls) == 2
    with parametrize.cached():
        a, b = m.weight, m.weight
    assert len(calls) == 3 and a is b

    class Shrink(nn.Module):
        def forward(self, X):
            return X[0]

    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(nn.Linear(2, 2), "weight", Shrink())
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        parametrize.register_parametrization(nn.Linear(2, 2), "nothing", Counting())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = fg.ones(2, 2)


def test_parametrizations_weight_norm_matches_torch():
    f, pt = twins(lambda lib: lib.nn.Conv1d(3, 4, 2))
    parametrizations.weight_norm(f)
    torch.nn.utils.parametrizations.weight_norm(pt)
    assert list(f.state_dict()) == list(pt.state_dict())
    same_state(f, pt)
    x = np.random.RandomState(0).randn(2, 3, 5).astype(np.float32)
    (f(fg.tensor(x)) ** 2).sum().backward()
    (pt(torch.tensor(x)) ** 2).sum().backward()
    for name in ("original0", "original1"):
        close(getattr(f.parametrizations.weight, name).grad, getattr(pt.parametrizations.weight, name).grad,
              atol=1e-5)


def _copy_uv(f, pt, names_):
    for fn, tn in names_:
        fg_buf, pt_buf = f.get_buffer(fn), pt.get_buffer(tn)
        fg_buf.copy_(fg.tensor(np_of(pt_buf)))


def test_parametrizations_spectral_norm_matches_torch():
    f, pt = twins(lambda lib: lib.nn.Linear(5, 4))
    parametrizations.spectral_norm(f, n_power_iterations=2)
    torch.nn.utils.parametrizations.spectral_norm(pt, n_power_iterations=2)
    assert list(f.state_dict()) == list(pt.state_dict())
    _copy_uv(f, pt, [("parametrizations.weight.0._u",) * 2, ("parametrizations.weight.0._v",) * 2])
    x = np.random.RandomState(0).randn(3, 5).astype(np.float32)
    for _ in range(2):  # training mode: each forward advances u and v
        (f(fg.tensor(x)) ** 2).sum().backward()
        (pt(torch.tensor(x)) ** 2).sum().backward()
        same_state(f, pt)
    close(f.parametrizations.weight.original.grad, pt.parametrizations.weight.original.grad, atol=1e-5)
    f.eval(), pt.eval()
    close(f.weight, pt.weight)


def test_hook_weight_norm_and_spectral_norm_match_torch():
    f, pt = twins(lambda lib: lib.nn.Linear(4, 3))
    with pytest.warns(FutureWarning, match="is deprecated in favor of"):
        nn.utils.weight_norm(f, dim=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.nn.utils.weight_norm(pt, dim=None)
    same_state(f, pt)
    g, tg = twins(lambda lib: lib.nn.ConvTranspose1d(2, 3, 2))
    nn.utils.spectral_norm(g)
    torch.nn.utils.spectral_norm(tg)
    assert names(g) == names(tg) == (["bias", "weight_orig"], ["weight_u", "weight_v"])
    _copy_uv(g, tg, [("weight_u",) * 2, ("weight_v",) * 2])
    x = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    xs = np.random.RandomState(1).randn(2, 2, 3).astype(np.float32)
    f(fg.tensor(x)).sum().backward()
    pt(torch.tensor(x)).sum().backward()
    g(fg.tensor(xs)).sum().backward()
    tg(torch.tensor(xs)).sum().backward()
    same_state(g, tg)
    for a, b in ((f.weight_g, pt.weight_g), (f.weight_v, pt.weight_v), (g.weight_orig, tg.weight_orig)):
        close(a.grad, b.grad, atol=1e-5)
    nn.utils.remove_weight_norm(f)
    torch.nn.utils.remove_weight_norm(pt)
    nn.utils.remove_spectral_norm(g)
    torch.nn.utils.remove_spectral_norm(tg)
    same_state(f, pt)
    same_state(g, tg)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        nn.utils.remove_weight_norm(f)


# ------------------------------------------------------------------ schedulers, SWA
def _lr_sequence(lib, make_opt, make_sched, steps=30):
    p = lib.nn.Parameter(lib.zeros(2))
    opt = make_opt(lib, p)
    sched = make_sched(lib.optim, opt)
    seq = []
    for _ in range(steps):
        opt.step()
        sched.step()
        g = opt.param_groups[0]
        seq.append((g["lr"], g.get("momentum"), g.get("betas")))
    return seq, sched


def _sgd(lib, p):
    return lib.optim.SGD([p], lr=0.1, momentum=0.9)


@pytest.mark.parametrize("kwargs", [
    dict(mode="triangular"), dict(mode="triangular2", step_size_down=3),
    dict(mode="exp_range", gamma=0.95), dict(scale_fn=lambda x: 1 / (x + 1), scale_mode="iterations"),
    dict(mode="triangular2", cycle_momentum=False)])
def test_cyclic_lr_matches_torch(kwargs):
    def make(optim, opt):
        return optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, **kwargs)

    a, fs = _lr_sequence(fg, _sgd, make)
    b, ts = _lr_sequence(torch, _sgd, make)
    assert a == b
    assert sorted(fs.state_dict()) == sorted(ts.state_dict())


def test_cyclic_lr_adam_betas_and_errors():
    def adam(lib, p):
        return lib.optim.Adam([p], lr=0.1)

    def make(optim, opt):
        return optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3, base_momentum=0.85, max_momentum=0.95)

    assert _lr_sequence(fg, adam, make)[0] == _lr_sequence(torch, adam, make)[0]
    opt = fg.optim.Adagrad([nn.Parameter(fg.zeros(1))])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        lr_scheduler.CyclicLR(opt, 0.01, 0.1)
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="other", cycle_momentum=False)


@pytest.mark.parametrize("strategy,epochs", [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_matches_torch(strategy, epochs):
    def make(optim, opt):
        return optim.swa_utils.SWALR(opt, swa_lr=0.02, anneal_epochs=epochs, anneal_strategy=strategy)

    a, fs = _lr_sequence(fg, _sgd, make)
    b, ts = _lr_sequence(torch, _sgd, make)
    assert a == b and sorted(fs.state_dict()) == sorted(ts.state_dict())
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        fs.get_lr()


def test_custom_scheduler_reads_get_lr_called_within_step():
    def run(lib):
        class Warmup(lib.optim.lr_scheduler.LRScheduler):
            def get_lr(self):
                assert self._get_lr_called_within_step
                return [b * min(1.0, (self.last_epoch + 1) / 3) for b in self.base_lrs]

        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.3)
        s = Warmup(opt)
        seq = []
        for _ in range(4):
            opt.step()
            s.step()
            seq.append(s.get_last_lr()[0])
        assert not s._get_lr_called_within_step
        return seq, sorted(s.state_dict())

    assert run(fg) == run(torch)


def _bn_net(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 1))


@pytest.mark.parametrize("which", ["swa", "ema_multi", "ema_avg", "swa_buffers"])
def test_averaged_model_and_update_bn_match_torch(which):
    f, pt = twins(_bn_net)
    rs = np.random.RandomState(0)
    batches = [rs.randn(5, 3).astype(np.float32) for _ in range(3)]
    avg = {}
    for lib, swa, m in ((fg, swa_utils, f), (torch, tswa_utils, pt)):
        kw = {"swa": {}, "ema_multi": dict(multi_avg_fn=swa.get_ema_multi_avg_fn(0.9)),
              "ema_avg": dict(avg_fn=swa.get_ema_avg_fn(0.8)), "swa_buffers": dict(use_buffers=True)}[which]
        averaged = swa.AveragedModel(m, **kw)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)
        for x in batches:
            opt.zero_grad()
            (m(lib.tensor(x)) ** 2).mean().backward()
            opt.step()
            averaged.update_parameters(m)
        swa.update_bn([(lib.tensor(x), None) for x in batches], averaged)
        averaged.eval()
        avg[lib] = (averaged, averaged(lib.tensor(batches[0])))
    (fa, fo), (ta, to) = avg[fg], avg[torch]
    assert list(fa.state_dict()) == list(ta.state_dict())
    assert int(fa.n_averaged) == 3 and fa.n_averaged.dtype == fg.int64
    same_state(fa, ta)
    close(fo, to, atol=1e-5)


# ------------------------------------------------------------------ compile
_WRAPPERS = {
    "prune": lambda m: prune.l1_unstructured(m, "weight", amount=5),
    "weight_norm": parametrizations.weight_norm,
    "spectral_norm": parametrizations.spectral_norm,
}


@pytest.mark.parametrize("kind", sorted(_WRAPPERS))
def test_compiled_training_step_matches_eager(kind):
    def build():
        fg.manual_seed(0)
        m = _WRAPPERS[kind](nn.Linear(4, 3))
        return m, fg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    x = fg.tensor(np.random.RandomState(0).randn(6, 4).astype(np.float32))

    def step(m, opt):
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    me, oe = build()
    mc, oc = build()
    compiled = fg.compile(lambda: step(mc, oc), backend="cpu")
    for _ in range(3):
        close(step(me, oe), compiled(), atol=1e-6)
    for (name, a), (_, b) in zip(me.state_dict().items(), mc.state_dict().items()):
        close(a, b, atol=1e-6)  # parameters, masks and spectral_norm's u/v
    close(mc(x), me(x), atol=1e-6)
    info = compiled.cache_info()
    assert info["compiles"] == 1 and info["graph_breaks"] == [] and info["fallbacks"] == 0, info


@pytest.mark.parametrize("shape,omap", [((4, 4), None), ((5, 3), None), ((3, 5), "cayley")])
def test_parametrizations_orthogonal_matches_torch(shape, omap):
    f, pt = twins(lambda lib: lib.nn.Linear(shape[1], shape[0]))
    parametrizations.orthogonal(f, orthogonal_map=omap)
    torch.nn.utils.parametrizations.orthogonal(pt, orthogonal_map=omap)
    assert sorted(f.state_dict()) == sorted(pt.state_dict())
    f.parametrizations.weight[0].base = fg.tensor(np_of(pt.parametrizations.weight[0].base))  # random completion
    close(f.weight, pt.weight)
    x = np.random.RandomState(0).randn(2, shape[1]).astype(np.float32)
    (f(fg.tensor(x)) ** 2).sum().backward()
    (pt(torch.tensor(x)) ** 2).sum().backward()
    close(f.parametrizations.weight.original.grad, pt.parametrizations.weight.original.grad, atol=2e-5)


def test_transfer_parametrizations_skip_init_stateless_and_batch_norm_replacement():
    """nn.utils.parametrize.transfer_parametrizations_and_params, nn.utils.skip_init,
    nn.utils.stateless.functional_call and func.replace_all_batch_norm_modules_, as torch's."""
    import importlib

    def run(lib):
        lnn = lib.nn
        stateless = importlib.import_module(lib.__name__ + ".nn.utils.stateless")
        par = importlib.import_module(lib.__name__ + ".nn.utils.parametrize")

        class Sym(lnn.Module):
            def forward(self, w):
                return w.triu() + w.triu(1).transpose(0, 1)

        a, b = lnn.Linear(3, 3, bias=False).double(), lnn.Linear(3, 3, bias=False).double()
        with lib.no_grad():
            a.weight.copy_(lib.arange(9, dtype=lib.float64).reshape(3, 3))
        par.register_parametrization(a, "weight", Sym())
        par.transfer_parametrizations_and_params(a, b)
        x = lib.tensor([[1.0, -1.0, 2.0]], dtype=lib.float64)
        m = lnn.Sequential(lnn.Linear(3, 2), lnn.BatchNorm1d(2))
        lib.func.replace_all_batch_norm_modules_(m)
        skipped = lnn.utils.skip_init(lnn.Linear, 4, 2)
        return [b.weight.tolist(), b(x).tolist(), par.is_parametrized(b, "weight"),
                stateless.functional_call(a, {"parametrizations.weight.original": lib.eye(3, dtype=lib.float64)},
                                          (x,)).tolist(),
                m[1].running_mean is None, m[1].track_running_stats, tuple(skipped.weight.shape)]

    assert run(fg) == run(torch)
