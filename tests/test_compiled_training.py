"""Compiled training: transforms composed with compile, compiled models trained by an eager
optimizer, whole-step compiled training (no graph break) and checkpoint under compile."""
import re

import numpy as np
import pytest

import fusegrad as torch
from fusegrad import nn, optim
from fusegrad.func import grad, jacfwd, jacrev, vmap
from fusegrad.utils.checkpoint import checkpoint
from helpers import mse_step, sgd_update

R = dict(rtol=1e-6, atol=1e-9)


def f(x):
    return (x.sin() * x.cos().exp()).sum() + (x ** 3).sum() * 0.1


def fv(x):
    return x.tanh() * x.sum() + x ** 2


def _x(n=5):
    return torch.tensor(np.random.default_rng(0).standard_normal(n), dtype=torch.float64)


def test_compile_of_grad_and_grad_of_compile():
    x = _x()
    ref = grad(f)(x).numpy()
    cg = torch.compile(grad(f), backend="eager")
    np.testing.assert_allclose(cg(x).numpy(), ref, **R)
    np.testing.assert_allclose(cg(x).numpy(), ref, **R)
    np.testing.assert_allclose(grad(torch.compile(f, backend="eager"))(x).numpy(), ref, **R)


def test_compile_of_jacrev_vmap_of_compile_and_jacfwd_jacrev():
    x = _x()
    jr = jacrev(fv)(x).numpy()
    np.testing.assert_allclose(torch.compile(jacrev(fv), backend="eager")(x).numpy(), jr, **R)
    xb = torch.tensor(np.random.default_rng(1).standard_normal((3, 5)), dtype=torch.float64)
    np.testing.assert_allclose(vmap(torch.compile(fv, backend="eager"))(xb).numpy(), vmap(fv)(xb).numpy(), **R)
    h = jacfwd(jacrev(f))(x).numpy()
    np.testing.assert_allclose(torch.compile(jacfwd(jacrev(f)), backend="eager")(x).numpy(), h, **R)
    try:
        import torch as T
        from torch.func import jacfwd as tjf, jacrev as tjr
    except ImportError:
        return
    tx = T.tensor(x.numpy())
    tf = lambda x: (x.sin() * x.cos().exp()).sum() + (x ** 3).sum() * 0.1  # noqa: E731
    np.testing.assert_allclose(h, tjf(tjr(tf))(tx).numpy(), **R)
    np.testing.assert_allclose(jr, tjr(lambda x: x.tanh() * x.sum() + x ** 2)(tx).numpy(), **R)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double()


def _data():
    g = np.random.default_rng(2)
    return (torch.tensor(g.standard_normal((16, 4))), torch.tensor(g.standard_normal((16, 1))))


OPTS = {"sgd_momentum": lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
        "adam": lambda p: optim.Adam(p, lr=0.01),
        "adamw": lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1)}


def _train(make_opt, wrap=None, mode="module", steps=20):
    X, Y = _data()
    m = _model()
    opt = make_opt(m.parameters())
    fwd = m
    if wrap == "module":
        fwd = torch.compile(m, backend="eager")
    elif wrap == "fn":
        fwd = torch.compile(lambda x: m(x), backend="eager")
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((fwd(X) - Y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), fwd


@pytest.mark.parametrize("name", ["sgd_momentum", "adam"])
@pytest.mark.parametrize("wrap", ["module", "fn"])
def test_compiled_model_trains_like_eager(name, wrap):
    ref, _ = _train(OPTS[name])
    got, cf = _train(OPTS[name], wrap)
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    assert ref[-1] < ref[0]
    info = cf.cache_info()
    assert info["graph_breaks"] == [] and info["compiles"] == 1



def _whole_step(make_opt, backend=None, steps=20):
    X, Y = _data()
    m = _model()
    opt = make_opt(m.parameters())
    step = mse_step(m, opt)
    fn = torch.compile(step, backend=backend) if backend else step
    return np.array([fn(X, Y).item() for _ in range(steps)]), fn, opt, m


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("name", list(OPTS))
def test_whole_step_compiles_as_one_graph(name, backend):
    """Forward, backward and the optimizer update as one graph; on the cpu backend the
    parameters and the optimizer state are updated in their own arrays."""
    ref, _, ropt, _ = _whole_step(OPTS[name])
    got, cf, copt, m = _whole_step(OPTS[name], backend)
    info = cf.cache_info()
    assert info["graph_breaks"] == [], info
    assert info["compiles"] == 1 and info["fallbacks"] == 0, info
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    # optimizer state holds concrete values equal to eager's (not traced values)
    for (pr, sr), (pc, sc) in zip(ropt.state.items(), copt.state.items()):
        for k in sr:
            np.testing.assert_allclose(np.asarray(sc[k].numpy()), np.asarray(sr[k].numpy()), rtol=1e-4, atol=1e-9)
    if backend == "cpu":  # every parameter and state tensor is computed into its own argument
        lowered = cf.lower(*_data())
        n_state = sum(1 for st in copt.state.values() for v in st.values() if isinstance(v, torch.Tensor))
        assert len(set(lowered._plan.forward._written)) == len(list(m.parameters())) + n_state
        fwd, src = lowered._plan.forward, lowered.kernel_source()
        # the caller has those: the entry returns only the other outputs, none copied from an argument
        ret = [r for r in src.split("return (")[1].split(")")[0].split(", ") if r]
        assert len(ret) == sum(a is None for a in fwd._from), ret
        assert "<- x" not in src.split("# program")[1].split("# generated")[0], src


def test_gradients_keep_the_parameters_layout_so_compiled_updates_run_in_place(monkeypatch):
    """PyTorch's gradient layout contract: a contiguous parameter's ``.grad`` is contiguous
    although the backward of ``x @ W.T`` makes a transposed view (``clone`` keeps a layout,
    as PyTorch's). SGD's momentum buffers, cloned from those gradients in an eager first
    step, are contiguous too, so the compiled step computes every parameter and buffer in
    its own array: nothing is copied back but the fresh gradients."""
    import torch as pt
    ref = pt.nn.Linear(4, 3)
    ref(pt.randn(5, 4)).sum().backward()
    lin = nn.Linear(4, 3)
    lin(torch.randn(5, 4)).sum().backward()
    assert lin.weight.grad.is_contiguous() and ref.weight.grad.is_contiguous()
    assert torch.clone(torch.randn(3, 4).t()).is_contiguous() == pt.clone(pt.randn(3, 4).t()).is_contiguous()

    import fusegrad.runtime.compiled as rc
    X, Y = _data()
    m = _model()
    opt = OPTS["sgd_momentum"](m.parameters())
    step = mse_step(m, opt)
    step(X, Y)  # eager: creates the momentum buffers
    cf = torch.compile(step, backend="cpu")
    copied = []
    copy_into = rc._copy_into
    monkeypatch.setattr(rc, "_copy_into", lambda dst, src: (copied.append(dst), copy_into(dst, src)))
    want = _whole_step(OPTS["sgd_momentum"], steps=4)[0]
    got = [cf(X, Y).item() for _ in range(3)]
    np.testing.assert_allclose(got, want[1:], rtol=1e-6)
    grads = {id(p.grad._data) for p in m.parameters()}
    assert copied and all(id(d) in grads for d in copied)


@pytest.mark.parametrize("backend", ["eager", "cpu"])
@pytest.mark.parametrize("name", list(OPTS))
def test_whole_step_follows_changes_to_the_param_groups(name, backend):
    """A learning-rate scheduler, and betas or momentum set by hand, act on the compiled
    step from the next call without recompiling (the hyperparameters are read at every
    call); turning nesterov on, which changes the update's form, recompiles once. The
    losses stay eager's."""
    def run(compiled):
        X, Y = _data()
        m = _model()
        opt = OPTS[name](m.parameters())
        sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.3)
        step = mse_step(m, opt)
        fn = torch.compile(step, backend=backend) if compiled else step
        losses = []
        for i in range(12):
            losses.append(fn(X, Y).item())
            sched.step()
            if i == 5:
                for g in opt.param_groups:
                    if "betas" in g:
                        g["betas"] = (0.5, 0.9)
                    else:
                        g["momentum"], g["nesterov"] = 0.5, True
        return np.array(losses), fn
    ref, _ = run(False)
    got, cf = run(True)
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    info = cf.cache_info()
    assert info["fallbacks"] == 0 and info["compiles"] == (2 if name == "sgd_momentum" else 1), info


def test_a_custom_optimizer_reading_its_learning_rate_follows_a_scheduler():
    """A custom optimizer's step reads ``group["lr"]`` as a number, which its trace bakes
    in: the compiled step is guarded on the groups' values, so a scheduler's change traces
    it again (it replayed the first rate: from the fourth step on the losses left eager's),
    while fusegrad's own optimizers read their rates at every call (one compile)."""
    class ScaledSGD(optim.Optimizer):
        def __init__(self, params, lr):
            super().__init__(params, dict(lr=lr, scale=1.0))

        @torch.no_grad()
        def step(self):
            for g in self.param_groups:
                for p in g["params"]:
                    p.sub_(p.grad * (g["lr"] * g["scale"]))

    def run(compiled):
        X, Y = _data()
        m = _model()
        opt = ScaledSGD(m.parameters(), lr=0.1)
        sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        step = mse_step(m, opt)
        fn = torch.compile(step) if compiled else step
        losses = []
        for _ in range(7):
            losses.append(fn(X, Y).item())
            sched.step()
        return np.array(losses), fn
    ref, _ = run(False)
    got, cf = run(True)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    assert cf.cache_info()["compiles"] == 4, cf.cache_info()  # (rates 0.1, 0.05, 0.025, 0.0125)


def test_an_optimizer_reached_through_the_users_own_module_is_warmed_up():
    """An optimizer the step reaches as an attribute of a module of the user's
    (``cfg.opt.step()``) is found as one named directly (its state made by an eager first
    call), though the modules of fusegrad, NumPy and the standard library are not scanned."""
    import types
    cfg = types.ModuleType("trainer_cfg")
    cfg.__file__ = "/home/user/project/trainer_cfg.py"

    def run(compiled):
        X, Y = _data()
        m = _model()
        cfg.opt = optim.Adam(m.parameters(), lr=0.01)

        def step(X, Y):
            cfg.opt.zero_grad()
            loss = ((m(X) - Y) ** 2).mean()
            loss.backward()
            cfg.opt.step()
            return loss
        fn = torch.compile(step) if compiled else step
        return np.array([fn(X, Y).item() for _ in range(4)]), fn
    ref, _ = run(False)
    got, cf = run(True)
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    assert cf.cache_info()["warmups"] == 1 and cf.cache_info()["compiles"] == 1, cf.cache_info()


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_updates_through_data_and_detach_reach_the_tensor(backend):
    """In-place updates through ``p.data`` (a manual SGD step, old PyTorch style) or
    ``x.detach()`` change the tensor they alias, as in eager: on a captured parameter and on
    an argument."""
    def make():
        w = torch.tensor([1.0, 2.0], requires_grad=True)

        def step(a, b):
            loss = (w * a).sum()
            loss.backward()
            w.data.sub_(0.1 * w.grad.data)
            w.grad = None
            b.detach().mul_(2)
            return loss, b * 1
        return step, w
    (ref_step, ref_w), (step, w) = make(), make()
    cstep = torch.compile(step, backend=backend)
    a = torch.tensor([1.0, 3.0])
    rb, cb = torch.tensor([1.0, -1.0]), torch.tensor([1.0, -1.0])
    for _ in range(4):
        (rl, ro), (cl, co) = ref_step(a, rb), cstep(a, cb)
        assert abs(rl.item() - cl.item()) < 1e-6
        np.testing.assert_array_equal(co.numpy(), ro.numpy())
        np.testing.assert_allclose(w.detach().numpy(), ref_w.detach().numpy(), rtol=1e-6)
        np.testing.assert_array_equal(cb.numpy(), rb.numpy())
    assert cstep.cache_info()["compiles"] == 1 and not cstep.cache_info()["fallbacks"]


def test_whole_step_with_gradient_clipping_and_two_param_groups():
    """clip_grad_norm_ between backward and step scales the .grad tensors in place: traced,
    not a graph break (they were views of backward temporaries), and the losses are eager's."""
    def run(compiled):
        X, Y = _data()
        m = _model()
        params = list(m.parameters())
        opt = optim.SGD([{"params": params[:2], "lr": 0.1}, {"params": params[2:], "lr": 0.02}], momentum=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            nn.utils.clip_grad_norm_(m.parameters(), 0.05)
            opt.step()
            return loss
        fn = torch.compile(step) if compiled else step
        return np.array([fn(X, Y).item() for _ in range(8)]), fn
    ref, _ = run(False)
    got, cf = run(True)
    np.testing.assert_allclose(got, ref, rtol=1e-4)
    info = cf.cache_info()
    assert info["graph_breaks"] == [] and info["compiles"] == 1 and info["fallbacks"] == 0, info


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_module_attributes_assigned_in_forward(backend):
    """A forward that assigns a new value to a buffer (a running mean) updates it on every
    compiled call as in eager (the trace used to leave a traced tensor in the module, and
    the next call failed). A traced tensor stored under a new attribute (``self.last``), or
    a value that requires grad assigned over an attribute by a forward pre-hook, as pruning
    and weight norm do (``module.weight = weight_orig * weight_mask``), is assigned the
    computed value after each compiled call, with no graph break (they broke the graph);
    gradients reach the original parameter through it."""
    class Running(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(2))
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.mean = self.mean * 0.9 + x.mean(0) * 0.1
            return self.lin(x) - self.mean

    class Keeps(Running):
        def forward(self, x):
            self.last = self.lin(x)
            return self.last * 2

    class Pruned(Running):
        def __init__(self):
            super().__init__()
            orig = self.lin.weight
            del self.lin._parameters["weight"]
            self.lin.weight_orig = nn.Parameter(orig.detach().clone())
            self.lin.register_buffer("weight_mask", torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
            self.lin.register_forward_pre_hook(lambda m, a: setattr(m, "weight", m.weight_orig * m.weight_mask))
    x = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    for cls in (Running, Keeps, Pruned):
        torch.manual_seed(0)
        ref = cls()
        torch.manual_seed(0)
        mod = cls()
        cm = torch.compile(mod, backend=backend)
        for _ in range(3):
            got, want = cm(x), ref(x)
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(mod.mean.numpy(), ref.mean.numpy(), rtol=1e-6)
            for name in ("last", "lin.weight"):
                if cls is not Running and (name == "last") == (cls is Keeps):
                    a, b = eval(f"mod.{name}"), eval(f"ref.{name}")
                    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
            got.sum().backward()
            want.sum().backward()
        if cls is Pruned:
            np.testing.assert_allclose(mod.lin.weight_orig.grad.numpy(), ref.lin.weight_orig.grad.numpy(), rtol=1e-5)
        assert cm.cache_info()["graph_breaks"] == [], cm.cache_info()


def test_backward_seed_inside_compiled_code_is_folded_away():
    """``loss.backward()`` under compile seeds with a fill in the trace, not a captured
    array of ones, so no multiplication by it survives optimization."""
    _, cf, _, _ = _whole_step(OPTS["sgd_momentum"], "eager", steps=2)
    low = cf.lower(*_data())
    assert "const" in low.ir("traced") and "full(" in low.ir("traced")
    assert "full(" not in low.ir("optimized"), low.ir("optimized")


def test_checkpoint_inside_compiled_code():
    x = _x(6).reshape(2, 3)

    def block(a):
        return (a.sin() * a).tanh()

    def fn(a):
        return checkpoint(block, a * 2, use_reentrant=False).sum()

    xe = x.detach().requires_grad_(True)
    fn(xe).backward()
    xc = x.detach().requires_grad_(True)
    cf = torch.compile(fn, backend="eager")
    cf(xc).backward()
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), **R)
    assert cf.cache_info()["graph_breaks"] == [] and cf.cache_info()["compiles"] == 1


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_detach_and_no_grad_block_compiled_gradients(backend):
    """detach() and no_grad regions trace to stop_gradient: the compiled backward must not go
    through them, and the detached values (one is the input itself) must still come out."""
    x = _x(6)

    def fn(a):
        with torch.no_grad():
            s = (a * a).sum()
        return (a * a.detach()).sum() * s, a.detach(), s

    xe, xc = x.detach().requires_grad_(True), x.detach().requires_grad_(True)
    want = fn(xe)
    want[0].backward()
    cf = torch.compile(fn, backend=backend)
    got = cf(xc)
    got[0].backward()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), **R)
    assert [g.requires_grad for g in got] == [True, False, False]
    s = (x * x).sum().item()
    np.testing.assert_allclose(xe.grad.numpy(), x.numpy() * s, **R)  # d/da sum(a * const) * const
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), **R)
    info = cf.cache_info()
    assert info["compiles"] == 1 and not info["graph_breaks"] and not info["fallbacks"] and not info["notes"]


def _residual_lines(forward_ir: str, n_outputs: int) -> list:
    """The listing lines defining the forward graph's residuals (outputs after the first n)."""
    names = forward_ir.strip().splitlines()[-2].strip()[len("return ("):-1].split(", ")[n_outputs:]
    defs = {ln.split(":")[0].strip(): ln for ln in forward_ir.splitlines() if " = " in ln}
    return [defs.get(n, n + " (input)") for n in names]


def test_residuals_that_are_arguments_are_read_not_copied():
    """The forward returns no copy of an argument its backward reads: the backward reads the
    leaf's own array and, as PyTorch does, refuses to run once it was updated in place. A
    non-leaf argument updated in place after the forward (legal in PyTorch, whose ops saved
    other values) still gets PyTorch's gradients: its array is copied for the backward."""
    rng = np.random.default_rng(4)
    xa, wa = rng.standard_normal((6, 4)), rng.standard_normal((4, 3))
    cf = torch.compile(lambda x, w: ((x @ w).tanh() * x.sum()).sum(), backend="eager")
    x, w = torch.tensor(xa), torch.tensor(wa, requires_grad=True)
    fwd = cf.lower(x, w).ir("forward")
    assert not any("(input)" in ln for ln in _residual_lines(fwd, 1))
    cf(x, w).backward()
    import torch as pt
    tx, tw = pt.tensor(xa), pt.tensor(wa, requires_grad=True)
    ((tx @ tw).tanh() * tx.sum()).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), **R)
    for lib, f, xx, ww in ((torch, cf, x, w), (pt, lambda x, w: ((x @ w).tanh() * x.sum()).sum(), tx, tw)):
        out = f(xx, ww)
        with lib.no_grad():
            xx.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()

    def g(y):
        return y.exp().sum()
    cg = torch.compile(g, backend="eager")
    grads = []
    for lib, f in ((torch, cg), (pt, g)):
        a = lib.tensor(xa, requires_grad=True)
        y = a * 2.0
        out = f(y)
        y.mul_(3.0)
        out.backward()
        grads.append(a.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], **R)


@pytest.mark.parametrize("remat", ["none", "auto", "max"])
def test_checkpoint_under_compile_is_a_remat_hint(remat):
    """Values computed inside checkpoint() are never saved, matmuls included: the backward
    recomputes them from the region's input, and gradients match eager."""
    rng = np.random.default_rng(3)
    w1 = torch.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    w2 = torch.tensor(rng.standard_normal((5, 3)), requires_grad=True)

    def block(a):
        return (torch.tanh(a @ w1) ** 2) @ w2

    def fn(x, ck):
        a = x.sin()
        y = checkpoint(block, a, use_reentrant=False) if ck else block(a)
        return (y * y).sum()

    x0 = rng.standard_normal((6, 4))
    for t in (x := torch.tensor(x0, requires_grad=True), w1, w2):
        t.grad = None
    fn(x, False).backward()
    ref = [t.grad.numpy().copy() for t in (x, w1, w2)]
    lowered = {}
    for ck in (False, True):
        cf = torch.compile(fn, backend="eager", remat=remat)
        for t in (x, w1, w2):
            t.grad = None
        cf(x, ck).backward()
        for t, r in zip((x, w1, w2), ref):
            np.testing.assert_allclose(t.grad.numpy(), r, **R)
        lowered[ck] = cf.lower(x, ck)
    fwd = lowered[True].ir("forward")
    assert fwd.count("# checkpointed") == 3  # matmul, tanh, pow inside the region
    assert not any("checkpointed" in ln for ln in _residual_lines(fwd, 1))
    bwd_mm = {ck: lowered[ck].ir("backward").count("= matmul(") for ck in (False, True)}
    assert bwd_mm[True] == bwd_mm[False] + 1  # the region's first matmul is recomputed


def test_checkpoint_under_compile_with_a_keyword_tensor():
    """A tensor passed to checkpoint() by keyword is a region input like a positional one:
    gradients match eager, and the values computed inside are marked for recompute also when
    only the keyword argument is traced (the positional one a captured parameter)."""
    rng = np.random.default_rng(5)
    p = torch.tensor(rng.standard_normal((4, 4)), requires_grad=True)

    def block(a, w):
        return torch.tanh(a @ w) ** 2

    def fn(x, w):
        y = checkpoint(block, x.sin(), w=w.cos(), use_reentrant=False)
        z = checkpoint(block, p, w=w, use_reentrant=False)
        return (y * y).sum() + (z * z).sum()

    x = torch.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    w = torch.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    fn(x, w).backward()
    ref = [t.grad.numpy().copy() for t in (x, w, p)]
    cf = torch.compile(fn, backend="eager")
    for t in (x, w, p):
        t.grad = None
    cf(x, w).backward()
    for t, r in zip((x, w, p), ref):
        np.testing.assert_allclose(t.grad.numpy(), r, **R)
    assert cf.cache_info()["graph_breaks"] == [] and cf.cache_info()["compiles"] == 1
    assert cf.lower(x, w).ir("forward").count("# checkpointed") == 4  # matmul, tanh per region


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_sgd_step_on_parameters_passed_as_arguments_writes_back(backend):
    """In-place updates of tensor arguments inside a compiled step reach the caller's tensors.
    The cpu backend computes each update straight into the parameter's array (the GEMM
    epilogue accumulates into it, the bias loop writes over it): no copy, same arrays."""
    import fusegrad

    def step(params, x):
        loss = ((x @ params[0] + params[1]) ** 2).mean()
        loss.backward()
        sgd_update(params)
        return loss

    g = np.random.default_rng(3)
    w0, b0, x0 = g.standard_normal((4, 3)), g.standard_normal(3), g.standard_normal((5, 4))
    pc = [fusegrad.tensor(w0, requires_grad=True), fusegrad.tensor(b0, requires_grad=True)]
    pe = [fusegrad.tensor(w0, requires_grad=True), fusegrad.tensor(b0, requires_grad=True)]
    x = fusegrad.tensor(x0)
    arrays = [p._data for p in pc]
    cstep = fusegrad.compile(step, backend=backend)
    for _ in range(5):
        lc, le = cstep(pc, x), step(pe, x)
        assert np.allclose(lc.item(), le.item(), rtol=1e-12)
    for a, b in zip(pc, pe):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
        assert a.grad is None
    assert cstep.cache_info()["compiles"] == 1
    assert all(p._data is a for p, a in zip(pc, arrays))
    if backend == "cpu":
        src = cstep.lower(pc, x).kernel_source()
        # W's update is a GEMM epilogue computed straight into W's array (no copy into or out)
        program = src.split("# program")[1].split("# generated")[0]
        assert "copy" not in program and re.search(r"dgemm\(.*, beta=1\.0, x0, ldc=\d+\)", program), src


def test_in_place_update_with_the_same_tensor_twice():
    """An argument updated in place that is also passed as another argument: the call runs
    eagerly (the trace took them for distinct tensors), with a note; distinct ones compile."""
    rng = np.random.default_rng(8)
    x = torch.tensor(rng.standard_normal((4, 5)))

    def upd(p, q, x):
        with torch.no_grad():
            p -= 0.1 * (x.t() @ (x @ q))
        return q.sum()

    a0 = rng.standard_normal((5, 5))
    pe, pc = torch.tensor(a0.copy()), torch.tensor(a0.copy())
    cf = torch.compile(upd, backend="cpu")
    qe, qc = torch.tensor(a0.copy()), torch.tensor(a0.copy())
    for _ in range(3):
        np.testing.assert_allclose(cf(pc, qc, x).item(), upd(pe, qe, x).item(), rtol=1e-12)
        np.testing.assert_allclose(cf(pc, pc, x).item(), upd(pe, pe, x).item(), rtol=1e-12)
        np.testing.assert_allclose(cf(qc[:], qc, x).item(), upd(qe[:], qe, x).item(), rtol=1e-12)
    np.testing.assert_allclose(pc.numpy(), pe.numpy(), rtol=1e-12)
    np.testing.assert_allclose(qc.numpy(), qe.numpy(), rtol=1e-12)
    info = cf.cache_info()
    assert info["fallbacks"] == 6 and any("shares memory" in n for n in info["notes"])


def test_in_place_update_rerun_for_huge_sin_arguments_reads_the_old_values():
    """A graph whose fast sin may be rerun exactly writes no argument in place, so the rerun
    (here forced by a huge argument) starts from the parameter's old values."""
    def upd(p):
        with torch.no_grad():
            p -= 0.5 * (p * 3.0).sin()
        return p.sum()

    a0 = np.array([0.3, -1.2, 2.0e9, 4.0])
    pe, pc = torch.tensor(a0.copy()), torch.tensor(a0.copy())
    cf = torch.compile(upd, backend="cpu")
    for _ in range(2):
        np.testing.assert_allclose(cf(pc).item(), upd(pe).item(), rtol=1e-12)
        np.testing.assert_allclose(pc.numpy(), pe.numpy(), rtol=1e-12)


def test_reentrant_checkpoint_rejects_keywords_when_traced_too():
    x = torch.tensor(np.ones(3), requires_grad=True)

    def fn(x):
        return checkpoint(lambda a, w: a * w, x, w=x, use_reentrant=True).sum()

    for run in (fn, torch.compile(fn)):
        with pytest.raises(ValueError, match="Unexpected keyword arguments: w"):
            run(x)


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_step_taking_the_model_and_optimizer_as_arguments(opt_name):
    """``compile(step)(net, opt, x, y)``: an optimizer passed as an argument has its state
    created by an eager first call, as one the step names (a momentum buffer made inside the
    trace escaped it, and the second call failed). Losses and parameters against eager."""
    def run(compiled):
        torch.manual_seed(0)
        net = nn.Linear(4, 2)
        opt = (optim.SGD(net.parameters(), lr=0.1, momentum=0.9) if opt_name == "SGD"
               else optim.Adam(net.parameters(), lr=0.1))

        def step(net, opt, x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = torch.compile(step) if compiled else step
        x, y = torch.ones(3, 4), torch.tensor([0, 1, 0])
        return [fn(net, opt, x, y).item() for _ in range(4)], net, fn
    (want, ref, _), (got, net, fn) = run(False), run(True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(net.weight.detach().numpy(), ref.weight.detach().numpy(), rtol=1e-5, atol=1e-7)
    info = fn.cache_info()
    assert info["warmups"] == 1 and info["compiles"] == 1 and info["graph_breaks"] == [], info


def test_backward_inside_compiled_code_reaches_leaves_behind_a_non_leaf_argument():
    """A compiled step whose argument carries autograd history from outside (a GAN's fake
    batch, a producer's output): its backward() / autograd.grad() continues into that
    history (the call runs the backward eagerly, a named graph break), as eager does."""
    import fusegrad as F
    w = F.tensor([1.0, 2.0, 3.0], requires_grad=True)

    @F.compile
    def step(y):
        loss = (y * y).sum()
        loss.backward()
        return loss

    for _ in range(2):
        w.grad = None
        step(w * 2.0)
        np.testing.assert_allclose(w.grad.numpy(), 8 * np.array([1.0, 2.0, 3.0]))
    assert any("not a leaf" in b for b in step.cache_info()["graph_breaks"])
    g = F.compile(lambda y: F.autograd.grad((y * y).sum(), w))
    np.testing.assert_allclose(g(w * 2.0)[0].numpy(), 8 * np.array([1.0, 2.0, 3.0]))


def test_compiled_code_follows_module_hooks_added_and_removed():
    """Compiled code that called a module is guarded on its hooks: one registered (or
    removed) after the first call changes the result as in eager."""
    import fusegrad as F
    F.manual_seed(0)
    m = F.nn.Sequential(F.nn.Linear(3, 3), F.nn.Tanh())
    cm, cf = F.compile(m), F.compile(lambda t: m(t) * 2)
    assert cm._orig_mod is m  # (torch.compile's OptimizedModule attribute, read by nanoGPT)
    x = F.ones(2, 3)
    plain = m(x).detach().numpy()
    np.testing.assert_allclose(cm(x).detach().numpy(), plain, rtol=1e-6)
    cf(x)
    h = m[1].register_forward_hook(lambda mod, i, o: o * 0)
    assert not cm(x).detach().numpy().any() and not cf(x).detach().numpy().any()
    h.remove()
    np.testing.assert_allclose(cm(x).detach().numpy(), plain, rtol=1e-6)
    np.testing.assert_allclose(cf(x).detach().numpy(), 2 * plain, rtol=1e-6)


@pytest.mark.parametrize("act", ["Hardswish", "SiLU", "Mish"])
def test_in_place_activation_of_x_times_g_x_has_torchs_gradient(act):
    """A traced in-place activation that reads its input twice (x * g(x)): its nodes keep the
    input's old value, not the activation that the update writes into the tensor."""
    reference = pytest.importorskip("torch")

    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(3, 4), getattr(lib.nn, act)(inplace=True))

    reference.manual_seed(0)
    ref = make(reference).double()
    ours = make(torch).double()
    ours.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})

    def step(lib, m, x):
        loss = m(x).pow(2).sum()
        loss.backward()
        return loss

    x = np.random.default_rng(0).standard_normal((6, 3)) * 2
    want = step(reference, ref, reference.tensor(x))
    got = torch.compile(lambda x: step(torch, ours, x), backend="eager")(torch.tensor(x))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    for (name, p), (_, q) in zip(ref.named_parameters(), ours.named_parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-10, err_msg=name)


@pytest.mark.parametrize("kind", ["module_global", "post_accumulate", "optimizer_global", "optimizer_own"])
def test_hooks_fusegrad_runs_keep_their_python_side_effects(kind):
    """Hooks that fusegrad's own code calls (global module hooks, post-accumulate-grad hooks,
    optimizer step hooks) are watched as the function's own code: a hook counting calls
    in a dict counts every compiled call, as eagerly (a replayed graph would skip it)."""
    from fusegrad.nn.modules.module import register_module_forward_hook
    from fusegrad.optim.optimizer import register_optimizer_step_pre_hook
    lin = nn.Linear(3, 2)
    opt = optim.SGD(lin.parameters(), lr=0.1)
    count = {"n": 0}

    def hook(*args):
        count["n"] += 1

    handle = {"module_global": lambda: register_module_forward_hook(hook),
              "post_accumulate": lambda: lin.weight.register_post_accumulate_grad_hook(hook),
              "optimizer_global": lambda: register_optimizer_step_pre_hook(hook),
              "optimizer_own": lambda: opt.register_step_pre_hook(hook)}[kind]()

    def step(x):
        opt.zero_grad()
        lin(x).sum().backward()
        opt.step()

    f = torch.compile(step, backend="eager")
    try:
        for _ in range(4):
            f(torch.ones(1, 3))
    finally:
        handle.remove()
    assert count["n"] == 4
    assert any("changes a dict" in b for b in f.cache_info()["graph_breaks"])


def test_create_graph_through_a_compiled_module_that_updates_what_it_reads():
    """spectral_norm's forward reads its u vector and updates it in place: the differentiable
    (create_graph) backward of a compiled call reruns the graph on u as that call read it."""
    reference = pytest.importorskip("torch")

    def make(lib):
        return lib.nn.Sequential(lib.nn.utils.spectral_norm(lib.nn.Linear(4, 3)), lib.nn.Tanh(), lib.nn.Linear(3, 1))

    reference.manual_seed(0)
    ref = make(reference).double()
    ours = make(torch).double()
    ours.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    compiled = torch.compile(ours, backend="eager")
    x = np.random.default_rng(0).standard_normal((5, 4))

    def penalty(lib, model):
        xi = lib.tensor(x).requires_grad_(True)
        out = model(xi)
        g, = lib.autograd.grad(out.sum(), xi, create_graph=True)
        return g.pow(2).sum()

    for _ in range(3):
        want, got = penalty(reference, ref), penalty(torch, compiled)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
        np.testing.assert_allclose(ours[0].weight_u.numpy(), ref[0].weight_u.numpy(), rtol=1e-10)


def test_constant_indices_captured_by_compiled_code_are_checked_without_a_break():
    """An embedding indexed by (and a one_hot of) a tensor the function captures, a T5
    bucket table built once: the range checks read it on the host, not through the trace."""
    emb = nn.Embedding(6, 3)
    buckets = torch.tensor([[0, 1, 5], [2, 2, 3]])

    def f(x):
        return (emb(buckets) * x).sum() + torch.nn.functional.one_hot(buckets, 6).sum()

    cf = torch.compile(f, backend="eager")
    x = torch.ones(3)
    np.testing.assert_allclose(cf(x).item(), f(x).item(), rtol=1e-6)
    assert cf.cache_info()["graph_breaks"] == []
    big = torch.tensor([6])
    with pytest.raises(IndexError, match="index out of range"):
        torch.compile(lambda x: emb(big).sum() * x, backend="eager")(x)


def test_outputs_without_a_gradient_add_nothing_even_where_their_derivative_is_infinite():
    """Eager autograd never visits the backward of an output that gets no gradient. A
    compiled step returning an overflowing perplexity exp(loss), or a cross entropy whose
    every target is ignored, beside the loss it backpropagates: the compiled backward's
    zeros for those outputs times their infinite derivatives must not make NaN gradients."""
    def step(lib, w, x, t):
        logits = x @ w
        loss = lib.nn.functional.cross_entropy(logits, t) * 2000.0
        ignored = lib.nn.functional.cross_entropy(logits, lib.full_like(t, -100))
        return loss, loss.exp(), ignored, x.sqrt().sum() * w.sum()

    reference = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    wa, xa, ta = rng.standard_normal((3, 4)), np.abs(rng.standard_normal((5, 3))), rng.integers(0, 4, 5)
    xa[0, 0] = 0.0  # (sqrt's derivative is infinite there)
    tw = reference.tensor(wa, requires_grad=True)
    step(reference, tw, reference.tensor(xa), reference.tensor(ta))[0].backward()
    w = torch.tensor(wa, requires_grad=True)
    f = torch.compile(lambda w, x, t: step(torch, w, x, t))
    for _ in range(2):
        w.grad = None
        loss, ppl, ignored, _ = f(w, torch.tensor(xa), torch.tensor(ta))
        loss.backward()
        assert np.isinf(ppl.item()) and np.isnan(ignored.item())
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)


def test_anomaly_detection_inside_compiled_code_runs_it_eagerly():
    """detect_anomaly() checks every backward node as it runs: compiled code that turns it
    on runs eagerly, so a NaN gradient raises before the optimizer step, as in PyTorch
    (whose first step here makes NaN weights only when the gradients accumulate)."""
    reference = pytest.importorskip("torch")

    def run(lib, wrap):
        lib.manual_seed(0)
        lin = lib.nn.Linear(2, 1)
        opt = lib.optim.SGD(lin.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            with lib.autograd.detect_anomaly():
                loss = (lin(x) - lin(x)).sqrt().sum()  # sqrt(0): infinite derivatives
                loss.backward()
            opt.step()

        f = wrap(step)
        raised = []
        for _ in range(3):
            try:
                f(lib.ones(3, 2))
                raised.append(False)
            except RuntimeError as e:
                raised.append("nan" in str(e).lower())
        return raised, f

    want, _ = run(reference, lambda f: f)
    got, f = run(torch, lambda f: torch.compile(f, backend="eager"))
    assert got == want == [False, True, True]
    assert any("anomaly" in b for b in f.cache_info()["graph_breaks"])


def test_deepcopy_of_a_compiled_module_is_an_independent_compiled_copy():
    """copy.deepcopy of compile(model) (an EMA or best-model snapshot, AveragedModel) copies
    the model and compiles the copy on its own; updates to one leave the other."""
    import copy
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
    cm = torch.compile(model, backend="eager")
    x = torch.ones(4, 2)
    want = cm(x).detach().numpy()
    twin = copy.deepcopy(cm)
    np.testing.assert_array_equal(twin(x).detach().numpy(), want)
    with torch.no_grad():
        model[0].bias.add_(1.0)
    np.testing.assert_array_equal(twin(x).detach().numpy(), want)
    assert not np.allclose(cm(x).detach().numpy(), want)
    avg = optim.swa_utils.AveragedModel(cm)
    np.testing.assert_allclose(avg(x).detach().numpy(), cm(x).detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_gan_iteration_uses_the_discriminator_again_after_its_step_in_one_graph(backend):
    """The DCGAN loop: D's step, then G's loss through the updated D. The backward inside
    the function reaches D's parameters themselves, so it traces as one graph (only
    differentiating the function's outputs would need the break)."""
    reference = pytest.importorskip("torch")

    def make(lib):
        lib.manual_seed(0)
        D, G = lib.nn.Linear(4, 1), lib.nn.Linear(2, 4)
        return D, G, lib.optim.Adam(D.parameters(), 1e-2), lib.optim.SGD(G.parameters(), 0.1, momentum=0.9)

    def iteration(lib, D, G, oD, oG, real, z):
        oD.zero_grad()
        fake = G(z)
        loss_d = lib.nn.functional.softplus(-D(real)).mean() + lib.nn.functional.softplus(D(fake.detach())).mean()
        loss_d.backward()
        oD.step()
        oG.zero_grad()
        loss_g = lib.nn.functional.softplus(-D(fake)).mean()
        loss_g.backward()
        oG.step()
        return loss_d, loss_g  # (backpropagated already: another backward raises, as eagerly)

    ref = make(reference)
    ours = make(torch)
    for (a, b) in zip(ref[:2], ours[:2]):
        b.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in a.state_dict().items()})
    step = torch.compile(lambda real, z: iteration(torch, *ours, real, z), backend=backend)
    rng = np.random.default_rng(0)
    for _ in range(4):
        real, z = rng.standard_normal((6, 4)), rng.standard_normal((6, 2))
        want = iteration(reference, *ref, reference.tensor(real, dtype=reference.float32),
                         reference.tensor(z, dtype=reference.float32))
        got = step(torch.tensor(real, dtype=torch.float32), torch.tensor(z, dtype=torch.float32))
        np.testing.assert_allclose([g.item() for g in got], [w.item() for w in want], rtol=1e-5)
    with pytest.raises(RuntimeError, match="second time"):
        got[1].backward()
    for a, b in zip(ref[:2], ours[:2]):
        for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
            np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
    assert step.cache_info()["graph_breaks"] == [] and step.cache_info()["compiles"] == 1


def test_optimizer_state_and_groups_changed_between_compiled_steps():
    """A reset optimizer state (opt.state.clear(), an LR restart), a rebound state entry or
    a group's parameter list rebound between compiled steps: the next step traces again,
    as eager reads them."""
    reference = pytest.importorskip("torch")

    reference.manual_seed(0)
    init = reference.nn.Sequential(reference.nn.Linear(3, 4), reference.nn.Tanh(), reference.nn.Linear(4, 1))
    init = {k: v.detach().double().numpy() for k, v in init.state_dict().items()}

    def run(lib, wrap):
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 1)).double()
        m.load_state_dict({k: lib.tensor(v) for k, v in init.items()})
        opt = lib.optim.Adam(m.parameters(), lr=0.05)
        x = lib.tensor(np.linspace(-1, 1, 15).reshape(5, 3))

        def step():
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()

        f = wrap(step)
        losses = []
        for i in range(9):
            if i == 3:
                opt.state.clear()
            if i == 5:
                opt.state[m[0].weight]["step"] = lib.tensor(1.0, dtype=lib.float64)
            if i == 7:
                opt.param_groups[0]["params"] = list(m[0].parameters())
            losses.append(float(f()))
        return losses, [p.detach().numpy().copy() for p in m.parameters()]

    ref = None
    for lib, wrap in ((reference, lambda f: f), (torch, lambda f: torch.compile(f))):
        losses, params = run(lib, wrap)
        if ref is None:
            ref = losses, params
            continue
        np.testing.assert_allclose(losses, ref[0], rtol=1e-9)
        for got, want in zip(params, ref[1]):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_data_assignment_inside_compiled_code_is_written_back():
    """MoCo's momentum update ``pk.data = pk.data * m + pq.data * (1 - m)`` inside compiled
    code: written back to the parameter at every call, as eagerly (it left a traced value)."""
    reference = pytest.importorskip("torch")
    reference.manual_seed(0)
    q_ref, k_ref = reference.nn.Linear(3, 2), reference.nn.Linear(3, 2)
    q, k = nn.Linear(3, 2), nn.Linear(3, 2)
    for a, b in ((q_ref, q), (k_ref, k)):
        b.load_state_dict({n: torch.tensor(v.detach().numpy()) for n, v in a.state_dict().items()})
    for p in list(k_ref.parameters()) + list(k.parameters()):
        p.requires_grad = False

    def f(lib, q, k, x):
        with lib.no_grad():
            for pq, pk in zip(q.parameters(), k.parameters()):
                pk.data = pk.data * 0.9 + pq.data * 0.1
        return q(x).sum() + k(x).sum()

    cf = torch.compile(lambda x: f(torch, q, k, x), backend="eager")
    for i in range(3):
        x = np.full((2, 3), float(i + 1), np.float32)
        want = f(reference, q_ref, k_ref, reference.tensor(x))
        np.testing.assert_allclose(cf(torch.tensor(x)).item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(k.weight.detach().numpy(), k_ref.weight.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "NAdam"])
def test_bfloat16_parameters_train_in_compiled_adam_steps(name):
    """bfloat16 parameters: the compiled step reads the hyperparameters as float32, as
    PyTorch's scalars (in bfloat16, 0.999 is 1 and Adam's 1 - beta2 is 0: no update)."""
    reference = pytest.importorskip("torch")
    got = []
    for lib, wrap in ((reference, lambda f: f), (torch, lambda f: torch.compile(f, backend="eager"))):
        w = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5]).to(lib.bfloat16))
        opt = getattr(lib.optim, name)([w], lr=0.05)

        def step():
            opt.zero_grad()
            (w.float() ** 2).sum().backward()
            opt.step()
        f = wrap(step)
        for _ in range(4):
            f()
        got.append(w.float().detach().numpy())
    assert not np.allclose(got[1], [1.0, -2.0, 0.5], atol=0.1)
    np.testing.assert_allclose(got[1], got[0], atol=8e-3)  # (bfloat16: 1/128 at 1)


def test_compiled_step_calling_a_compiled_model_or_a_wrapped_one():
    """compile(step) whose step calls compile(model) (a codebase compiling both), or a
    wrapper object passing attributes on to a module: traced as eager runs them."""
    class Wrapper:
        def __init__(self, m):
            self.__dict__["m"] = m

        def __call__(self, *a):
            return self.m(*a)

        def __getattr__(self, n):
            return getattr(self.__dict__["m"], n)

    x = torch.tensor(np.linspace(-1, 1, 12).reshape(3, 4))
    results = []
    for wrap in (lambda m: m, lambda m: torch.compile(m, backend="eager"), Wrapper):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)).double()
        called = wrap(model)
        opt = optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = called(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        f = torch.compile(step, backend="eager")
        results.append(([f(x).item() for _ in range(3)], [p.detach().numpy() for p in model.parameters()]))
    for losses, params in results[1:]:
        np.testing.assert_allclose(losses, results[0][0], rtol=1e-12)
        for got, want in zip(params, results[0][1]):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_compiled_module_is_an_optimized_module_as_torchs():
    """compile(module) is an nn.Module wrapping the original as torch.compile's
    OptimizedModule: isinstance, state_dict keys with the ``_orig_mod.`` prefix (loading
    torch's compiled checkpoint), printed form, train/eval, deepcopy and attribute access."""
    import copy
    import fusegrad as F
    reference = pytest.importorskip("torch")
    ref = reference.compile(reference.nn.Sequential(reference.nn.Linear(3, 4), reference.nn.Tanh()))
    cm = F.compile(F.nn.Sequential(F.nn.Linear(3, 4), F.nn.Tanh()))
    assert isinstance(cm, F.nn.Module) and type(cm).__name__ == type(ref).__name__
    assert list(cm.state_dict()) == list(ref.state_dict()) and repr(cm) == repr(ref)
    cm.load_state_dict({k: F.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    x = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    np.testing.assert_allclose(cm(F.tensor(x)).detach().numpy(), ref(reference.tensor(x)).detach().numpy(), rtol=1e-6)
    assert getattr(cm, "0") is cm._orig_mod[0] and getattr(ref, "0") is ref._orig_mod[0]  # forwarded
    assert list(cm.parameters()) == [cm._orig_mod[0].weight, cm._orig_mod[0].bias]
    cm.eval()
    assert not cm._orig_mod.training and cm.cache_info()["compiles"] == 1
    twin = copy.deepcopy(cm)
    assert twin._orig_mod is not cm._orig_mod and twin._compiled.fn is twin._orig_mod
    np.testing.assert_allclose(twin(F.tensor(x)).detach().numpy(), cm(F.tensor(x)).detach().numpy())
    seen = {}
    for lib, m in ((F, cm), (reference, ref)):  # a hook on the wrapper itself runs, as PyTorch's
        handle = m.register_forward_hook(lambda mod, i, o, lib=lib: seen.setdefault(lib, type(mod).__name__))
        m(lib.tensor(x))
        handle.remove()
    assert seen[F] == seen[reference] == "OptimizedModule"


def test_compiled_function_returning_a_strided_view():
    """A compiled function returning unfold/as_strided of its input (or of a value it
    computed) returns those frames, as eager (it returned the input itself), with eager's
    gradients."""
    import fusegrad as F
    sig = np.random.default_rng(9).standard_normal((2, 40))
    fns = [lambda a: a.unfold(-1, 10, 5), lambda a: a.as_strided((2, 3, 10), (40, 7, 1)),
           lambda a: (a * 2).unfold(1, 8, 8)]
    for fn in fns:
        res = []
        for run in (fn, F.compile(fn)):
            x = F.tensor(sig, requires_grad=True)
            out = run(x)
            (out * F.arange(out.numel(), dtype=F.float64).reshape(out.shape)).sum().backward()
            res.append((out.detach().numpy(), x.grad.numpy()))
        for ours, eager in zip(*res):
            assert ours.shape == eager.shape
            np.testing.assert_allclose(ours, eager, rtol=1e-12)


def test_requires_grad_changes_inside_a_compiled_step_take_effect_as_eagerly():
    """A compiled generator step that freezes the discriminator and unfreezes it at its end
    (ProGAN/WGAN style; requires_grad_, the setter, Module.requires_grad_): after each call
    the flags are eager's, and the next discriminator step gets its gradients. The flags were
    restored to the trace's view of them (frozen), so D silently stopped training (found by yr)."""
    def run(compiled):
        r = np.random.default_rng(0)
        D, G = torch.nn.Linear(3, 1), torch.nn.Linear(2, 3)
        with torch.no_grad():
            for p in (*D.parameters(), *G.parameters()):
                p.copy_(torch.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32)))
        opt_d, opt_g = torch.optim.SGD(D.parameters(), lr=0.1), torch.optim.SGD(G.parameters(), lr=0.1)
        z, real = torch.tensor(r.standard_normal((4, 2)).astype(np.float32)), torch.ones(4, 3)

        def set_d(flag, how):
            if how == "module":
                D.requires_grad_(flag)
            for p in D.parameters():
                if how == "method":
                    p.requires_grad_(flag)
                elif how == "setter":
                    p.requires_grad = flag

        def g_step(z, how):
            set_d(False, how)
            opt_g.zero_grad()
            loss = -D(G(z)).mean()
            loss.backward()
            opt_g.step()
            set_d(True, how)
            return loss
        step = torch.compile(g_step) if compiled else g_step
        out = []
        for how in ("method", "setter", "module", "method"):
            opt_d.zero_grad()
            (D(G(z).detach()).mean() - D(real).mean()).backward()
            opt_d.step()
            loss = step(z, how)
            out.append((float(loss), [p.requires_grad for p in D.parameters()], D.weight.grad is not None,
                        D.weight.detach().numpy().copy()))
        return out
    eager, compiled = run(False), run(True)
    for e, c in zip(eager, compiled):
        assert e[1:3] == c[1:3] == ([True, True], True)
        np.testing.assert_allclose(c[0], e[0], rtol=1e-5)
        np.testing.assert_allclose(c[3], e[3], rtol=1e-5, atol=1e-6)
