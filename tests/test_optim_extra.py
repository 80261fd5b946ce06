"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, LBFGS and the learning-rate schedulers
against PyTorch's: 50-step trajectories, state dicts, run-time edits of param_groups (also
in compiled steps) and learning-rate sequences."""
import io
import math

import numpy as np
import pytest

import fusegrad as fg


RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 5)).astype(np.float32)
Y = RNG.standard_normal((32, 2)).astype(np.float32)
W1 = (RNG.standard_normal((5, 8)) * 0.5).astype(np.float32)
W2 = (RNG.standard_normal((8, 2)) * 0.5).astype(np.float32)

CASES = [
    ("RMSprop", {}), ("RMSprop", dict(momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=1e-3, alpha=0.9, maximize=True)),
    ("Adagrad", {}), ("Adagrad", dict(lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adagrad", dict(fused=True)),
    ("Adadelta", {}), ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1)),
    ("Adamax", {}), ("Adamax", dict(weight_decay=0.1, betas=(0.8, 0.99))),
    ("NAdam", {}), ("NAdam", dict(weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", {}), ("RAdam", dict(lr=1e-2, weight_decay=0.1)), ("RAdam", dict(weight_decay=0.1,
                                                                              decoupled_weight_decay=True)),
]


def problem(lib, dtype=np.float32):
    w1 = lib.tensor(W1.astype(dtype), requires_grad=True)
    w2 = lib.tensor(W2.astype(dtype), requires_grad=True)
    x, y = lib.tensor(X.astype(dtype)), lib.tensor(Y.astype(dtype))

    def loss():
        return ((lib.tanh(x @ w1) @ w2 - y) ** 2).mean()
    return [w1, w2], loss


def training_step(opt, loss_fn):
    """One step of ``opt`` on ``loss_fn``, returning the loss (the function the compile tests compile)."""
    def step():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss
    return step


def trajectory(lib, name, kw, steps=50, edit=None):
    params, loss_fn = problem(lib)
    opt = getattr(lib.optim, name)(params, **kw)
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if edit is not None and i == steps // 2:
            edit(opt.param_groups[0])
    return [p.detach().numpy().copy() for p in params], losses, opt


@pytest.mark.torch
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_fifty_steps_match_torch(pt, name, kw):
    ours, our_losses, _ = trajectory(fg, name, kw)
    theirs, their_losses, _ = trajectory(pt, name, kw)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-4, atol=1e-6)
    assert not np.allclose(ours[0], W1, atol=1e-3)  # the parameters did move


def _edit(group):
    group["lr"] *= 0.3
    if "betas" in group:
        group["betas"] = (0.5, group["betas"][1])
    if "alpha" in group:
        group["alpha"] = 0.8


@pytest.mark.torch
@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_param_group_edits_and_state_dict_match_torch(pt, name):
    ours, our_losses, opt = trajectory(fg, name, {}, steps=30, edit=_edit)
    theirs, their_losses, topt = trajectory(pt, name, {}, steps=30, edit=_edit)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-4, atol=1e-6)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    # the state dicts name the same entries; torch's loads into fusegrad and fusegrad's
    # (through a saved checkpoint) into torch
    ours_sd, theirs_sd = opt.state_dict(), topt.state_dict()
    assert sorted(ours_sd["state"][0]) == sorted(theirs_sd["state"][0])
    assert set(theirs_sd["param_groups"][0]) <= set(ours_sd["param_groups"][0]) | {"initial_lr"}
    buf = io.BytesIO()
    fg.save(ours_sd, buf)
    buf.seek(0)
    reloaded = pt.load(buf)
    tparams, tloss = problem(pt)
    tparams[0].data.copy_(pt.tensor(ours[0]))
    tparams[1].data.copy_(pt.tensor(ours[1]))
    topt2 = getattr(pt.optim, name)(tparams)
    topt2.load_state_dict(reloaded)
    fparams, floss = problem(fg)
    fparams[0].data.copy_(fg.tensor(theirs[0]))
    fparams[1].data.copy_(fg.tensor(theirs[1]))
    fopt2 = getattr(fg.optim, name)(fparams)
    buf = io.BytesIO()
    pt.save(theirs_sd, buf)
    buf.seek(0)
    fopt2.load_state_dict(fg.load(buf))
    for _ in range(10):
        topt2.zero_grad()
        tloss().backward()
        topt2.step()
        fopt2.zero_grad()
        floss().backward()
        fopt2.step()
    for a, b in zip(fparams, tparams):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=2e-5)


def test_state_dict_resumes_the_same_trajectory():
    for name in ("RMSprop", "NAdam", "RAdam"):
        full, full_losses, _ = trajectory(fg, name, dict(weight_decay=0.1), steps=20)
        params, loss_fn = problem(fg)
        opt = getattr(fg.optim, name)(params, weight_decay=0.1)
        for _ in range(10):
            opt.zero_grad()
            loss_fn().backward()
            opt.step()
        buf = io.BytesIO()
        fg.save({"opt": opt.state_dict(), "params": [p.detach() for p in params]}, buf)
        buf.seek(0)
        ckpt = fg.load(buf)
        params2, loss_fn2 = problem(fg)
        for p, saved in zip(params2, ckpt["params"]):
            p.data.copy_(saved)
        opt2 = getattr(fg.optim, name)(params2, weight_decay=0.1)
        opt2.load_state_dict(ckpt["opt"])
        for _ in range(10):
            opt2.zero_grad()
            loss_fn2().backward()
            opt2.step()
        for a, b in zip(params2, full):
            np.testing.assert_allclose(a.detach().numpy(), b, rtol=1e-6, atol=1e-7)


def test_compiled_steps_follow_param_group_edits():
    """One compiled training step per optimizer: lr and betas/alpha edited between calls act
    at the next call, without recompiling; the losses stay eager's."""
    for name in ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"):
        def run(compiled):
            params, loss_fn = problem(fg)
            opt = getattr(fg.optim, name)(params)
            step = training_step(opt, loss_fn)
            fn = fg.compile(step, backend="eager") if compiled else step
            losses = [float(fn()) for _ in range(4)]
            before = fn.cache_info()["compiles"] if compiled else 0
            _edit(opt.param_groups[0])
            losses += [float(fn()) for _ in range(8)]
            return np.array(losses), fn, before
        ref, _, _ = run(False)
        got, cf, before = run(True)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7, err_msg=name)
        info = cf.cache_info()
        # (Adagrad's state exists before the first call, which then traces with no .grad yet: 2)
        assert info["fallbacks"] == 0 and info["compiles"] == before <= 2 and info["hits"] >= 8, (name, info)


def test_compiled_nadam_on_the_cpu_backend_follows_the_scheduler():
    def run(compiled):
        params, loss_fn = problem(fg)
        opt = fg.optim.NAdam(params, lr=1e-2)
        sched = fg.optim.lr_scheduler.ExponentialLR(opt, 0.8)
        step = training_step(opt, loss_fn)
        fn = fg.compile(step) if compiled else step
        out = []
        for _ in range(6):
            out.append(float(fn()))
            sched.step()
        return np.array(out), fn
    ref, _ = run(False)
    got, cf = run(True)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    assert cf.cache_info()["compiles"] == 1


# ----------------------------------------------------------------------------- LBFGS
def lbfgs_run(lib, kw, steps, dtype, convex):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((40, 6)).astype(dtype)
    b = (rng.random(40) > 0.5).astype(dtype)
    if convex:  # L2-regularized logistic regression
        w = lib.tensor(np.zeros(6, dtype), requires_grad=True)
        params = [w]
        a, t = lib.tensor(A), lib.tensor(b)

        def f():
            z = a @ w
            return (lib.nn.functional.softplus(z) - t * z).mean() + 0.01 * (w * w).sum()
    else:
        params, f = problem(lib, dtype)
    opt = lib.optim.LBFGS(params, **kw)
    evals = [0]

    def closure():
        evals[0] += 1
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss
    losses = [float(opt.step(closure).detach()) for _ in range(steps)]
    return [p.detach().numpy() for p in params], losses, evals[0]


@pytest.mark.torch
@pytest.mark.parametrize("kw", [dict(), dict(history_size=3, max_iter=5, lr=0.5),
                                dict(line_search_fn="strong_wolfe"),
                                dict(line_search_fn="strong_wolfe", history_size=2, max_iter=3)])
def test_lbfgs_matches_torch(pt, kw):
    # float32 on a convex problem: 50 steps to the same weights, losses and closure calls
    ours, our_losses, our_evals = lbfgs_run(fg, kw, 50, np.float32, True)
    theirs, their_losses, their_evals = lbfgs_run(pt, kw, 50, np.float32, True)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-5)
    assert abs(our_evals - their_evals) <= 2
    # float64 on the non-convex MLP: the same iterates, step for step
    ours, our_losses, our_evals = lbfgs_run(fg, kw, 3, np.float64, False)
    theirs, their_losses, their_evals = lbfgs_run(pt, kw, 3, np.float64, False)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)  # (float64 rounding, grown over 60 iterations)
    assert our_evals == their_evals and our_losses[-1] < our_losses[0]


def test_lbfgs_errors_and_state():
    w = fg.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        fg.optim.LBFGS([{"params": [w]}, {"params": [fg.zeros(2, requires_grad=True)]}])
    opt = fg.optim.LBFGS([w], line_search_fn="bogus")

    def closure():
        opt.zero_grad()
        loss = ((w - 1) ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        opt.step(closure)
    opt = fg.optim.LBFGS([w])
    opt.step(closure)
    np.testing.assert_allclose(w.detach().numpy(), [1, 1, 1], atol=1e-5)
    st = opt.state_dict()["state"][0]
    assert st["n_iter"] >= 1 and isinstance(st["d"], fg.Tensor)


# ------------------------------------------------------------------------ schedulers
SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.01)),
    ("CosineAnnealingWarmRestarts", dict(T_0=4, T_mult=2, eta_min=0.001)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=30)),
    ("OneCycleLR", dict(max_lr=[0.5, 0.2], total_steps=30, three_phase=True, anneal_strategy="linear")),
    ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (1 + e))),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.95)),
    ("LinearLR", dict(start_factor=0.2, total_iters=6)),
    ("ConstantLR", dict(factor=0.5, total_iters=4)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)),
]


def sched_run(lib, name, kw, optimizer="SGD", steps=25, edit_at=None):
    w = lib.zeros(2, requires_grad=True)
    v = lib.zeros(2, requires_grad=True)
    opt_kw = dict(momentum=0.9) if optimizer == "SGD" else {}
    opt = getattr(lib.optim, optimizer)([{"params": [w]}, {"params": [v], "lr": 0.05}], lr=0.1, **opt_kw)
    s = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
    seq = [s.get_last_lr()]
    moms = []
    for i in range(steps):
        opt.step()
        s.step()
        if edit_at == i:
            opt.param_groups[0]["lr"] = 0.07  # a hand edit: the recursive forms carry on from it
        seq.append(s.get_last_lr())
        g = opt.param_groups[0]
        moms.append(g["betas"][0] if "betas" in g else g.get("momentum"))
    return np.array(seq, dtype=np.float64), moms, s


@pytest.mark.torch
@pytest.mark.parametrize("name,kw", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)])
def test_scheduler_sequences_match_torch(pt, name, kw):
    steps = 29 if name == "OneCycleLR" else 25
    for optimizer in ("SGD", "Adam"):
        ours, our_m, _ = sched_run(fg, name, kw, optimizer, steps)
        theirs, their_m, _ = sched_run(pt, name, kw, optimizer, steps)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(np.array(our_m, float), np.array(their_m, float), rtol=1e-12)
    if name not in ("OneCycleLR", "LambdaLR", "CosineAnnealingWarmRestarts"):
        ours, _, _ = sched_run(fg, name, kw, edit_at=6)
        theirs, _, _ = sched_run(pt, name, kw, edit_at=6)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


@pytest.mark.torch
def test_sequential_chained_plateau_and_closed_forms_match_torch(pt):
    def composite(lib, kind):
        w = lib.zeros(2, requires_grad=True)
        opt = lib.optim.SGD([w], lr=1.0)
        S = lib.optim.lr_scheduler
        if kind == "sequential":
            s = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=4), S.ExponentialLR(opt, 0.8),
                                     S.CosineAnnealingLR(opt, T_max=5)], milestones=[4, 9])
        elif kind == "chained":
            s = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=3), S.ExponentialLR(opt, 0.9)])
        else:
            s = S.ReduceLROnPlateau(opt, patience=2, factor=0.5, cooldown=1, min_lr=0.05, threshold=0.01)
        out = []
        metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8]
        for i in range(16):
            opt.step()
            s.step(metrics[i]) if kind == "plateau" else s.step()
            out.append(s.get_last_lr()[0])
        return out, s
    for kind in ("sequential", "chained", "plateau"):
        ours, s = composite(fg, kind)
        theirs, _ = composite(pt, kind)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, err_msg=kind)
    # step(epoch) uses the closed forms (with PyTorch's deprecation warning)
    for name, kw in SCHEDULERS[:4] + [("LinearLR", dict(start_factor=0.2, total_iters=6))]:
        seqs = []
        for lib in (fg, pt):
            opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1)
            s = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
            with pytest.warns(UserWarning, match="epoch parameter"):
                seq = []
                for e in (3, 7, 2, 10):
                    s.step(e)
                    seq.append(s.get_last_lr()[0])
            seqs.append(seq)
        np.testing.assert_allclose(seqs[0], seqs[1], rtol=1e-12, err_msg=name)


def test_scheduler_state_dict_resumes():
    full, _, _ = sched_run(fg, "CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2), steps=20)
    w = fg.zeros(2, requires_grad=True)
    opt = fg.optim.SGD([{"params": [w]}, {"params": [fg.zeros(2, requires_grad=True)], "lr": 0.05}], lr=0.1,
                       momentum=0.9)
    s = fg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    for _ in range(8):
        s.step()
    buf = io.BytesIO()
    fg.save({"sched": s.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ck = fg.load(buf)
    opt2 = fg.optim.SGD([{"params": [fg.zeros(2, requires_grad=True)]},
                         {"params": [fg.zeros(2, requires_grad=True)], "lr": 0.05}], lr=0.1, momentum=0.9)
    opt2.load_state_dict(ck["opt"])
    s2 = fg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt2, T_0=3, T_mult=2)
    s2.load_state_dict(ck["sched"])
    rest = []
    for _ in range(12):
        s2.step()
        rest.append(s2.get_last_lr())
    np.testing.assert_allclose(np.array(rest), full[9:], rtol=1e-12)
    assert math.isclose(full[0][0], 0.1)


def test_optimizer_hooks_match_torch():
    """Step pre/post hooks (per optimizer and global; a pre-hook may replace the arguments),
    state-dict and load-state-dict hooks, prepend, and removal, in torch's order."""
    import torch

    def run(lib):
        seen = []
        import importlib
        glob = importlib.import_module(lib.__name__ + ".optim.optimizer")
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0], dtype=lib.float64))
        opt = lib.optim.SGD([p], lr=0.1)
        hs = [opt.register_step_pre_hook(lambda o, a, k: seen.append(("pre", len(a), sorted(k)))),
              opt.register_step_post_hook(lambda o, a, k: seen.append(("post", type(o).__name__))),
              glob.register_optimizer_step_pre_hook(lambda o, a, k: seen.append("global pre")),
              glob.register_optimizer_step_post_hook(lambda o, a, k: seen.append("global post"))]
        opt.register_state_dict_pre_hook(lambda o: seen.append("sd pre"))
        opt.register_state_dict_pre_hook(lambda o: seen.append("sd pre first"), prepend=True)
        opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
        opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append(("load pre", sorted(sd))))
        opt.register_load_state_dict_post_hook(lambda o: seen.append("load post"))
        try:
            p.grad = lib.tensor([1.0, 1.0], dtype=lib.float64)
            opt.step()
            sd = opt.state_dict()
            seen.append(sorted(sd))
            opt.load_state_dict(sd)
            for h in hs:
                h.remove()
            opt.step()
        finally:
            for h in hs:
                h.remove()
        return seen, p.detach().tolist()

    assert run(fg) == run(torch)


def test_schedulers_keep_a_tensor_lr_base_apart_from_the_lr_they_update():
    """A tensor lr (what avoids recompiles) is updated in place by the schedulers; its
    initial_lr is a copy, as PyTorch's, so schedules built on base_lrs do not compound."""
    torch = pytest.importorskip("torch")
    got = []
    for lib in (torch, fg):
        w = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([w], lr=lib.tensor(0.1))
        sched = lib.optim.lr_scheduler.SequentialLR(
            opt, [lib.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e),
                  lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)], milestones=[2])
        lrs = []
        for _ in range(6):
            w.sum().backward()
            opt.step()
            sched.step()
            lrs.append(float(opt.param_groups[0]["lr"]))
        got.append((lrs, float(opt.param_groups[0]["initial_lr"])))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-6)
    assert got[1][1] == pytest.approx(got[0][1])


@pytest.mark.torch
def test_scheduler_stepped_before_the_optimizer_warns_as_torch(pt):
    """``scheduler.step()`` before any ``optimizer.step()`` warns (PyTorch's order check);
    after one it does not, and only the first scheduler step is checked; an optimizer step
    replaced after the scheduler was made warns that it was overridden."""
    import warnings

    def program(lib):
        seen = []
        for optimizer_first in (False, True, "overridden"):
            opt = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=1.0)
            s = lib.optim.lr_scheduler.StepLR(opt, 1, 0.5)
            if optimizer_first == "overridden":  # (a logging wrapper set after the scheduler: torch's warning)
                opt.step = (lambda step: lambda *a, **k: step(*a, **k))(opt.step)
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                for _ in range(2):
                    if optimizer_first:
                        opt.step()
                    s.step()
            seen.append([str(r.message)[:60] for r in rec])
        return seen
    ours, theirs = program(fg), program(pt)
    assert ours == theirs and len(theirs[0]) == 1 and theirs[1] == [] and "overridden" in theirs[2][0], \
        (ours, theirs)


def test_fused_multiply_adds_round_as_torchs_float32_kernels(pt):
    """PyTorch's CPU kernels round ``add``/``sub`` with ``alpha``, ``addcmul`` and ``lerp`` once
    (a fused multiply-add): bit for bit in float32, eagerly and compiled (LLVM fuses there), and
    SGD (momentum, dampening, Nesterov, weight decay) and Adamax trajectories built on them."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(4099).astype(np.float32), rng.standard_normal(4099).astype(np.float32)
    w = rng.uniform(-1.0, 1.5, 4099).astype(np.float32)

    def ops(lib, x, y, wt):
        return [lib.add(x, y, alpha=-0.01), lib.sub(x, y, alpha=0.3), lib.add(x, 2.5, alpha=0.1),
                x.clone().add_(y[:1], alpha=3), lib.addcmul(x, y, x, value=0.3), x.clone().addcmul_(y, y),
                lib.lerp(x, y, 0.1), lib.lerp(x, y, 0.7), lib.lerp(x, y, wt), x.clone().lerp_(y, 0.25)]
    want = [t.numpy() for t in ops(pt, pt.tensor(a), pt.tensor(b), pt.tensor(w))]
    args = (fg.tensor(a), fg.tensor(b), fg.tensor(w))
    for got in (ops(fg, *args), fg.compile(lambda *t: ops(fg, *t))(*args)):
        for g, e in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), e)

    def trajectory(lib, name, **kw):
        p = lib.tensor(W1.copy(), requires_grad=True)
        opt = getattr(lib.optim, name)([p], lr=0.05, **kw)
        for _ in range(20):
            p.grad = lib.tensor(np.sin(3 * p.detach().numpy()).astype(np.float32))
            opt.step()
        return p.detach().numpy()
    for name, kw in [("SGD", dict(momentum=0.9, weight_decay=0.1)), ("SGD", dict(momentum=0.5, dampening=0.3)),
                     ("SGD", dict(momentum=0.9, nesterov=True)), ("Adamax", {})]:
        np.testing.assert_array_equal(trajectory(fg, name, **kw), trajectory(pt, name, **kw))


def test_old_checkpoints_late_parameters_and_subclass_setstate_as_pytorch():
    """As PyTorch's: Adagrad creates the state of a parameter added by add_param_group (or
    after a state reset) at its first step, from the defaults; load_state_dict fills the
    options an older checkpoint's groups lack with their defaults and makes a step count
    saved as a number a tensor, and ends in __setstate__, which subclasses extend (and
    which deepcopy uses)."""
    import copy
    from collections import defaultdict

    torch = pytest.importorskip("torch")
    results = []
    for m in (torch, fg):
        out = []
        a, b = m.nn.Parameter(m.tensor([1.0, 2.0])), m.nn.Parameter(m.tensor([3.0]))
        opt = m.optim.Adagrad([a], lr=0.1, initial_accumulator_value=0.5)
        opt.add_param_group({"params": [b], "initial_accumulator_value": 2.0})
        a.grad, b.grad = m.tensor([0.5, -0.5]), m.tensor([1.0])
        opt.step()
        opt.state = defaultdict(dict)
        opt.step()
        out += a.tolist() + b.tolist()
        p = m.nn.Parameter(m.tensor([1.0, -2.0]))
        opt = m.optim.Adam([p], lr=0.1)
        p.grad = m.tensor([0.5, 0.5])
        opt.step()
        sd = opt.state_dict()
        del sd["param_groups"][0]["decoupled_weight_decay"], sd["param_groups"][0]["maximize"]
        sd["state"][0]["step"] = 1
        again = m.optim.Adam([p], lr=0.1, maximize=True)
        again.load_state_dict(sd)
        again.step()
        out += p.tolist() + [again.param_groups[0]["maximize"], type(again.state[p]["step"]).__name__]

        class Momentum(m.optim.SGD):
            def __setstate__(self, state):
                super().__setstate__(state)
                for group in self.param_groups:
                    group.setdefault("dampening_note", "set")

        q = m.nn.Parameter(m.tensor([1.0]))
        mo = Momentum([q], lr=0.1, momentum=0.9)
        mo.load_state_dict(mo.state_dict())
        out += [mo.param_groups[0]["dampening_note"], copy.deepcopy(mo).param_groups[0]["dampening_note"]]
        results.append(out)
    assert results[0] == results[1]
