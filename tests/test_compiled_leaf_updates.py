"""Compiled code that updates leaves and their gradients as training loops do, against
PyTorch: gradient accumulation across windows whose .grad is set to None (the compiled
code reads the leaf's current .grad at each call), and a leaf updated in place without
gradient (under no_grad, through .data, an optimizer step) then used again (a graph
break where the function's outputs are differentiated: its gradient is the leaf's; a
backward inside the function reaches the leaf itself, in one graph)."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def test_accumulation_windows_with_grads_set_to_none():
    def run(T, compiled):
        w = T.tensor(np.linspace(-1, 1, 3), requires_grad=True)

        def micro(x):
            (w * x).sum().backward()
        f = fusegrad.compile(micro) if compiled else micro
        out = []
        for _ in range(3):
            w.grad = None
            for k in range(2):
                f(T.full((3,), float(k + 1), dtype=T.float64))
            out.append(w.grad.numpy().copy())
        return out
    np.testing.assert_array_equal(run(fusegrad, True), run(torch, False))


@pytest.mark.parametrize("how", ["data", "no_grad"])
def test_a_leaf_updated_without_gradient_then_used(how):
    def f(T, x, p):
        with T.no_grad():
            if how == "data":
                p.data.copy_(p.data * 0.5 + 1)
            else:
                p.copy_(p * 0.5 + 1)
        return (x * p).sum()
    x = np.arange(3.0)
    p, tp = fusegrad.ones(3, dtype=fusegrad.float64, requires_grad=True), torch.ones(3, dtype=torch.float64,
                                                                                   requires_grad=True)
    cf = fusegrad.compile(lambda x, p: f(fusegrad, x, p))
    for _ in range(3):
        got, want = cf(fusegrad.tensor(x), p), f(torch, torch.tensor(x), tp)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-15)
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-15)
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-15)
    assert any("updated in place without gradient" in b for b in cf.cache_info()["graph_breaks"])


def test_two_optimizer_steps_in_one_call():
    def run(T, compiled):
        w = T.tensor(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True)
        opt = T.optim.SGD([w], lr=0.1)
        x = T.tensor(np.arange(6.0).reshape(2, 3) / 6)

        def two_steps(x):
            losses = []
            for _ in range(2):
                opt.zero_grad()
                loss = (x @ w).pow(2).sum()
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            return losses[0], losses[1]
        f = fusegrad.compile(two_steps) if compiled else two_steps
        losses = [float(v) for _ in range(3) for v in f(x)]
        return losses, w.detach().numpy()
    (lc, wc), (lt, wt) = run(fusegrad, True), run(torch, False)
    np.testing.assert_allclose(lc, lt, rtol=1e-13)
    np.testing.assert_allclose(wc, wt, rtol=1e-13)


def test_no_grad_in_place_updates_of_a_non_leaf_keep_its_history_when_compiled():
    """``with no_grad(): ww.mul_(0.5)`` on ``ww = w * 2``: PyTorch keeps ww's history, so the
    gradient passes the update (and reads the updated values); compiled code dropped the
    path (w's gradient was only the ``w.sum()`` term's ones), as it did for F.embedding's
    max_norm renormalization of a computed weight."""
    torch = pytest.importorskip("torch")
    w0 = np.arange(1.0, 7.0).reshape(2, 3)
    idx = [[1, 0], [1, 1]]

    def f(lib, w):
        ww = w * 2.0
        vv = w * 3.0
        with lib.no_grad():
            ww.mul_(0.5)
            vv[0] = 0.0
            vv.div_(vv.norm().clamp(min=1.0))
        emb = lib.nn.functional.embedding(lib.tensor(idx), w * 1.0, max_norm=1.0)
        return (ww * ww).sum() + (vv * w).sum() + emb.pow(2).sum() + w.sum()
    grads = []
    for lib, fn in ((torch, lambda w: f(torch, w)), (fusegrad, lambda w: f(fusegrad, w)),
                    (fusegrad, fusegrad.compile(lambda w: f(fusegrad, w)))):
        w = lib.tensor(w0, requires_grad=True)
        fn(w).backward()
        grads.append(w.grad.numpy())
    for g in grads[1:]:
        np.testing.assert_allclose(g, grads[0], rtol=1e-12)


@pytest.mark.parametrize("update", ["normalize", "clamp", "two_steps"])
def test_parameters_updated_under_no_grad_then_used_keep_their_gradients_when_compiled(update):
    """SwAV's prototype normalization, WGAN's clamp_, two optimizer steps in one compiled
    call: each parameter, updated in place without gradient and then used, gets its gradient
    (compiled code left weight.grad None or stale: a view of the updated leaf, the forward's
    weight.t(), was taken for a detached one)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w1, w2, x0 = rng.standard_normal((5, 4)), rng.standard_normal((3, 5)), rng.standard_normal((6, 4))

    def run(lib, compiled):
        net = lib.nn.Sequential(lib.nn.Linear(4, 5), lib.nn.Tanh(), lib.nn.Linear(5, 3)).double()
        with lib.no_grad():
            net[0].weight.copy_(lib.tensor(w1))
            net[2].weight.copy_(lib.tensor(w2))
            net[0].bias.fill_(0.1)
            net[2].bias.fill_(-0.2)
        opt = lib.optim.SGD(net.parameters(), lr=0.1)

        def step(x):
            with lib.no_grad():
                if update == "normalize":
                    net[0].weight.copy_(lib.nn.functional.normalize(net[0].weight, dim=1))
                elif update == "clamp":
                    for p in net.parameters():
                        p.clamp_(-0.5, 0.5)
            for _ in range(2 if update == "two_steps" else 1):
                opt.zero_grad()
                loss = net(x).pow(2).mean()
                loss.backward()
                opt.step()
            return loss
        fn = fusegrad.compile(step) if compiled else step
        out = []
        for _ in range(3):
            loss = fn(lib.tensor(x0))
            out.append([loss.item()] + [p.grad.numpy().copy() for p in net.parameters()]
                       + [p.detach().numpy().copy() for p in net.parameters()])
        return out
    want = run(torch, False)
    for got in (run(fusegrad, False), run(fusegrad, True)):
        for g_call, w_call in zip(got, want):
            for g, w in zip(g_call, w_call):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_a_buffer_filled_with_values_that_require_grad_gets_their_history_when_compiled():
    """The seq2seq decoder loop ``outputs = zeros(T, B, H); for t: outputs[t] = step(...)`` with
    only the step compiled: the buffer takes the written values' autograd history, as eager
    (compiled code wrote the values back without it, and the loss's gradient through
    ``outputs`` was lost silently). Also an in-place update of a view of an argument that
    requires grad, which raised 'a view of a leaf Variable'."""
    torch = pytest.importorskip("torch")
    xs0 = np.random.default_rng(0).standard_normal((4, 3, 5))
    w0 = np.random.default_rng(1).standard_normal((5, 5)) * 0.3

    def run(lib, compiled, how):
        w = lib.tensor(w0, requires_grad=True)

        def step(outputs, t, x, h):
            h = (x @ w).tanh() + h
            if how == "setitem":
                outputs[t] = h
            elif how == "copy_":
                outputs[t].copy_(h)
            else:
                outputs.index_copy_(0, lib.tensor([t]), h.unsqueeze(0))
            return h
        f = fusegrad.compile(step) if compiled else step
        outputs, h, xs = lib.zeros(4, 3, 5, dtype=lib.float64), lib.zeros(3, 5, dtype=lib.float64), lib.tensor(xs0)
        for t in range(4):
            h = f(outputs, t, xs[t], h)
        ((outputs ** 2).sum() + h.sum()).backward()
        return outputs.detach().numpy(), w.grad.numpy()
    for how in ("setitem", "copy_", "index_copy_"):
        want = run(torch, False, how)
        for got in (run(fusegrad, False, how), run(fusegrad, True, how)):
            for g, e in zip(got, want):
                np.testing.assert_allclose(g, e, rtol=1e-12)


def test_a_parameter_updated_from_a_clone_of_its_data_inside_compiled_code_stays_concrete():
    """SwAV's ``w = p.data.clone(); p.copy_(normalize(w))`` under no_grad: the parameter was
    captured first through its ``.data`` alias, so it was never snapshotted and kept a traced
    value after the call ('used after the trace ended' at its next use)."""
    torch = pytest.importorskip("torch")
    w0, x0 = np.random.default_rng(0).standard_normal((3, 4)), np.random.default_rng(1).standard_normal((5, 4))

    def run(lib, compiled):
        lin = lib.nn.Linear(4, 3).double()
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(w0))
            lin.bias.zero_()

        def f(x):
            with lib.no_grad():
                w = lin.weight.data.clone()
                lin.weight.copy_(lib.nn.functional.normalize(w, dim=1))
            loss = lin(x).pow(2).mean()
            loss.backward()
            return loss.detach()
        fn = fusegrad.compile(f) if compiled else f
        out = []
        for _ in range(2):
            lin.zero_grad()
            with lib.no_grad():
                lin.weight.mul_(2)
            out += [fn(lib.tensor(x0)).item(), lin.weight.detach().numpy().copy(), lin.weight.grad.numpy().copy()]
        return out
    want = run(torch, False)
    for got in (run(fusegrad, False), run(fusegrad, True)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10)


def test_a_compiled_optimizer_step_reads_each_calls_gradients():
    """PyTorch's compiled-optimizer recipe: forward and backward eager, only ``opt.step()``
    (or clip_grad_norm_) compiled. zero_grad(set_to_none) makes each backward a new .grad
    tensor: the compiled step reads (and clipping writes) the one there at each call (it
    kept the gradient of the call it traced, silently)."""
    def run(lib, compiled, momentum):
        w = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64))
        opt = lib.optim.SGD([w], lr=0.1, momentum=momentum)

        def step():
            norm = lib.nn.utils.clip_grad_norm_([w], 4.0)
            opt.step()
            return norm
        step = fusegrad.compile(step) if compiled else step
        out = []
        for i in range(5):
            opt.zero_grad()
            (w * (i + 1)).sum().backward()
            out.append(float(step()))
        return out + w.tolist()

    for momentum in (0.0, 0.9):
        want = run(torch, False, momentum)
        np.testing.assert_allclose(run(fusegrad, True, momentum), want, rtol=1e-12)


def test_the_grad_of_a_tensor_argument_inside_compiled_code():
    """A tensor argument's .grad read inside compiled code is the caller's (it was None), and
    a backward inside accumulates onto it, as eagerly; a call whose argument has no .grad
    is another signature."""
    def fgsm(t):
        return t + 0.1 * t.grad.sign()

    def accumulate(t):
        (t * 2).sum().backward()
        return t.grad * 1

    for f in (fgsm, accumulate, lambda t: t.grad is None):
        cf = fusegrad.compile(f)
        for k in range(3):
            got, want = [], []
            for fn, lib, out in ((cf, fusegrad, got), (f, torch, want)):
                x = lib.tensor([1.0, -2.0], requires_grad=True)
                if k != 1:
                    x.grad = lib.tensor([0.5, -1.0])
                if f is fgsm and k == 1:
                    continue
                r = fn(x)
                out.append((r.tolist() if hasattr(r, "tolist") else r, None if x.grad is None else x.grad.tolist()))
            assert got == want, (f, k)
