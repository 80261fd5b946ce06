"""Compiled code around graph breaks (runtime.segments): the operations between breaks run
as compiled segments, the breaking operation eagerly, and values, gradients and training
steps match PyTorch's; a value-dependent branch picks the segment that follows."""
from __future__ import annotations

import io
import contextlib
import math

import numpy as np
import pytest

import fusegrad
from fusegrad.runtime import segments

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
HERE = __file__.rsplit("/", 1)[-1]


def make(m):
    def f(x, w):
        h = m.tanh(x @ w)
        s = h.sum()
        if s.item() > 0:  # .item() and a branch on its value
            y = (h * 2).sin()
        else:
            y = h.cos()
        print("y sums to", y.sum())  # print(tensor)
        n = len(y.tolist())  # .tolist()
        if (y.max() > 0.5):  # a value-dependent `if` on a tensor
            y = y * n
        return (y * y).sum() + s
    return f


def _data(sign, seed):
    rng = np.random.default_rng(seed)
    return sign * np.abs(rng.standard_normal((4, 3))), np.abs(rng.standard_normal((3, 2)))


def test_segments_around_item_tolist_print_and_if_match_torch():
    f = make(fusegrad)
    cf = fusegrad.compile(f)
    ref = make(torch)
    segments = []
    for sign, seed in ((1, 0), (-1, 1), (1, 2), (-1, 3)):
        xa, wa = _data(sign, seed)
        x = fusegrad.tensor(xa, requires_grad=True)
        w = fusegrad.tensor(wa, requires_grad=True)
        tx = torch.tensor(xa, requires_grad=True)
        tw = torch.tensor(wa, requires_grad=True)
        out_got, out_want = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_got):
            got = cf(x, w)
        with contextlib.redirect_stdout(out_want):
            want = ref(tx, tw)
        assert out_got.getvalue().split("(")[1].split(",")[0] == out_want.getvalue().split("(")[1].split(",")[0]
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
        got.backward()
        want.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-12)
        assert type(got.grad_fn).__name__ == "CompiledFunctionBackward"
        segments.append(cf.cache_info()["segments"])
    info = cf.cache_info()
    assert info["fallbacks"] == 0 and info["compiles"] == 0
    # both branches were compiled by the first two calls; the next two reuse them
    assert segments[2] == segments[3] == segments[1] > segments[0] >= 3, segments
    kinds = " ".join(info["graph_breaks"])
    assert "item()" in kinds and "printing" in kinds and f"{HERE}:" in kinds
    with pytest.raises(RuntimeError, match="fullgraph=True"):
        fusegrad.compile(f, fullgraph=True)(x, w)


def test_one_backward_node_per_segment():
    """The output's node is the last segment's; its edge leads to the segment before."""
    def f(x):
        y = (x * 2).exp()
        if float(y.sum()) > 0:  # (a number read as such: a break; item() compared is guarded)
            return (y + 1).log().sum()
        return y.sum()
    cf = fusegrad.compile(f, backend="eager")
    x = fusegrad.tensor([0.1, 0.2, 0.3], requires_grad=True)
    out = cf(x)
    node = out.grad_fn
    assert type(node).__name__ == "CompiledFunctionBackward"
    prev = [n for n, _ in node.next_functions if n is not None]
    assert [type(n).__name__ for n in prev] == ["CompiledFunctionBackward"]
    out.backward()
    tx = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    (tx * 2).exp().add(1).log().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def _step_of(m, opt, lib, threshold):
    def step(x, y):
        opt.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        if loss.item() > threshold:
            loss = loss * 2
        loss.backward()
        opt.step()
        return loss
    return step


def test_training_step_with_item_in_the_middle_trains_like_torch():
    """W10's shape: forward, ``if loss.item() > threshold``, backward, SGD with momentum:
    no segments, the loss read and compared inside the compiled code (tracer.speculate), a
    compiled variant per branch, each traced on the first call that takes it."""
    rng = np.random.default_rng(0)
    xa, ya = rng.standard_normal((16, 5)), rng.standard_normal((16, 1))
    w1, b1, w2, b2 = (rng.standard_normal(s) * 0.5 for s in ((8, 5), (8,), (1, 8), (1,)))

    def model(lib):
        m = lib.nn.Sequential(lib.nn.Linear(5, 8), lib.nn.Tanh(), lib.nn.Linear(8, 1)).double()
        with lib.no_grad():
            for p, v in zip(m.parameters(), (w1, b1, w2, b2)):
                p.copy_(lib.tensor(v))
        return m
    res = {}
    for lib in (fusegrad, torch):
        m = model(lib)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        step = _step_of(m, opt, lib, 0.5)
        if lib is fusegrad:
            step = cf = fusegrad.compile(step, backend="eager")
        x, y = lib.tensor(xa), lib.tensor(ya)
        res[lib.__name__] = ([step(x, y).item() for _ in range(12)], [p.detach().numpy().copy() for p in m.parameters()])
    got, want = res["fusegrad"], res["torch"]
    assert want[0][0] > 0.5 > want[0][-1]  # both branches taken
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    info = cf.cache_info()
    assert info["fallbacks"] == 0 and info["segments"] == 0 and info["compiles"] == 2, info
    assert info["graph_breaks"] == [] and info["warmups"] == 1, info


def test_a_backward_after_a_break_compiles_with_the_update_that_follows():
    """W10's shape with the loss unchanged by the branch: the forward's backward is recorded
    into the segment after the break (its matmuls there, no gradient left as an output), so
    it compiles with the SGD update; parameters match PyTorch's over steps on both branches."""
    rng = np.random.default_rng(1)
    xa, ya = rng.standard_normal((12, 6)), rng.standard_normal((12, 2))
    init = [rng.standard_normal(s) * 0.4 for s in ((6, 5), (5,), (5, 2), (2,))]

    def make_step(lib):
        params = [lib.tensor(v, requires_grad=True) for v in init]
        opt = lib.optim.SGD(params, lr=0.1)

        def step(x, y):
            w1, b1, w2, b2 = params
            loss = (((x @ w1 + b1).tanh() @ w2 + b2 - y) ** 2).mean()
            opt.param_groups[0]["lr"] = 0.2 if loss.item() > 0.6 else 0.1
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        return step, params

    res = {}
    for lib in (fusegrad, torch):
        step, params = make_step(lib)
        if lib is fusegrad:
            step = cf = fusegrad.compile(step, backend="eager")
        x, y = lib.tensor(xa), lib.tensor(ya)
        res[lib.__name__] = [step(x, y).item() for _ in range(8)], [p.detach().numpy().copy() for p in params]
    (got, gp), (want, wp) = res["fusegrad"], res["torch"]
    assert want[0] > 0.6 > want[-1]  # both learning rates taken
    np.testing.assert_allclose(got, want, rtol=1e-10)
    for a, b in zip(gp, wp):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert cf.cache_info()["fallbacks"] == 0
    after = [plan.stages["traced"] for plan in cf._segments.values() if "backward" not in plan.stages]
    assert after
    for g in after:
        assert sum(e.prim.name == "matmul" for e in g.eqns) >= 3  # the backward's
        assert all(o.shape in [v.shape for v in init] for o in g.outputs)  # parameters only, no grads


def test_code_raising_graph_break_itself_runs_the_call_eagerly():
    """Library code that raises GraphBreak (DDP, collectives inside compiled code) before a
    break ran on: the call, and the signature's later calls, run eagerly."""
    from fusegrad.tracer import GraphBreak
    calls = []

    def f(x):
        y = x * 2
        if y.sum().item() > 100:  # a break first: the signature runs in segments
            return y
        calls.append(1)
        if fusegrad.tracer.trace.capturing():
            raise GraphBreak("not capturable here")
        return y + 1
    cf = fusegrad.compile(f, backend="eager")
    x = fusegrad.ones(3)
    with pytest.raises(GraphBreak):  # the break had already run on: nothing can start over
        cf(x)

    def g(x):
        if fusegrad.tracer.trace.capturing():
            raise GraphBreak("not capturable here")
        return x * 2
    cg = fusegrad.compile(g, backend="eager")
    for _ in range(2):
        np.testing.assert_array_equal(cg(x).numpy(), [2.0, 2.0, 2.0])
    assert cg.cache_info()["fallbacks"] == 2


@pytest.mark.parametrize("read", ["float", "item"])
def test_in_place_updates_after_a_break_write_the_tensors_own_arrays(read):
    """With the cpu backend a segment computes an in-place update of one of its inputs
    straight into that tensor's array (donated): views taken before the break see it, a
    tensor updated twice ends with the second value, and an update whose tensor is also
    read through another argument that shares its memory (the kernel must then not
    overwrite what it still reads) matches eager. ``read="item"``: the same with the value
    compared inside the compiled code (no segments), the updates then in its body."""
    def f(p, q, g, alias):
        head = p[:2]  # a view, taken before the update
        s = g.sum()
        if (float(s) if read == "float" else s.item()) > 0:  # float(): the break, then the second segment
            scale = 0.5
        else:
            scale = 0.25
        p -= scale * g
        q.mul_(2).add_(p)
        alias += 1.0  # alias is a view of q: the update is seen through q
        return head.sum() + q.sum() + p.sum()

    rng = np.random.default_rng(4)
    pa, qa, ga = rng.standard_normal(64), rng.standard_normal(64), rng.standard_normal(64)
    cf = fusegrad.compile(f, backend="cpu")
    for sign in (1.0, -1.0, 1.0):
        res = {}
        for run in ("eager", "compiled"):
            p, q, g = fusegrad.tensor(pa.copy()), fusegrad.tensor(qa.copy()), fusegrad.tensor(sign * ga)
            arrays = p.numpy(), q.numpy()
            alias = q[10:20] if read == "float" else fusegrad.zeros(10)  # (a written argument sharing
            out = (f if run == "eager" else cf)(p, q, g, alias)  # memory with another: whole graphs run eagerly)
            assert p.numpy() is arrays[0] or np.shares_memory(p.numpy(), arrays[0])
            res[run] = (out.item(), p.numpy().copy(), q.numpy().copy())
        np.testing.assert_allclose(res["compiled"][0], res["eager"][0], rtol=1e-12)
        np.testing.assert_allclose(res["compiled"][1], res["eager"][1], rtol=1e-12)
        np.testing.assert_allclose(res["compiled"][2], res["eager"][2], rtol=1e-12)
    info = cf.cache_info()
    assert info["fallbacks"] == 0, info
    assert info["segments"] >= 3 if read == "float" else (info["segments"] == 0 and info["compiles"] == 2), info


def test_in_place_update_of_a_non_leaf_argument_runs_in_segments():
    """A compiled function that updates an argument in place which requires grad and is
    not a leaf (its stand-in in the trace would look like a leaf): a graph break, then
    the update runs in a segment with the argument's own autograd history, as in eager.
    A value the function computed from the argument before the update is differentiated
    at the old value (the segment's backward keeps a copy of what it saved)."""
    def scale_(y, w):
        y.mul_(w)
        return y.sum()

    def read_then_scale_(y, w):
        r = (y * w).sum()
        y.mul_(2)
        return r

    xa, wa = np.arange(1.0, 4.0), np.array([0.5, -1.0, 2.0])
    for fn in (scale_, read_then_scale_):
        for backend in ("eager", "cpu"):
            x = fusegrad.tensor(xa, requires_grad=True)
            w = fusegrad.tensor(wa, requires_grad=True)
            y = x * 1
            cf = fusegrad.compile(fn, backend=backend)
            out = cf(y, w)
            out.backward()
            np.testing.assert_allclose(out.item(), 4.5)
            np.testing.assert_allclose(x.grad.numpy(), wa)
            np.testing.assert_allclose(w.grad.numpy(), xa)
            np.testing.assert_allclose(y.detach().numpy(), xa * (wa if fn is scale_ else 2))
            assert any("in-place update of an argument" in b for b in cf.cache_info()["graph_breaks"])


def test_hooks_retain_grad_and_requires_grad_inside_compiled_code_act_as_in_eager():
    """register_hook, retain_grad and requires_grad_ on a value compiled code is tracing
    are graph breaks: they act on the concrete tensor, as in eager. A hook or retain_grad
    on a tensor the compiled code already used cannot see that use's gradient: the call
    then runs eagerly from its start, or, past an earlier break, raises GraphBreak."""
    from fusegrad.tracer import GraphBreak

    def make(lib, hook_after_use, break_first):
        def f(x):
            out = (x * 0.0).sum()
            if break_first and out.item() > 1.0:
                out = out * 2
            y = x * 2.0
            if hook_after_use:
                out = out + y.exp().sum()
            y.register_hook(lambda g: g * 3.0)
            y.retain_grad()
            z = y.detach().requires_grad_()
            return out + (y * x).sum() + (z * z).sum(), y, z
        return f

    xa = np.linspace(-1.0, 1.0, 5)
    for hook_after_use, break_first in ((False, False), (False, True), (True, False), (True, True)):
        tx = torch.tensor(xa, requires_grad=True)
        tout, ty, tz = make(torch, hook_after_use, break_first)(tx)
        tout.backward()
        cf = fusegrad.compile(make(fusegrad, hook_after_use, break_first), backend="eager")
        x = fusegrad.tensor(xa, requires_grad=True)
        if hook_after_use and break_first:
            with pytest.raises(GraphBreak, match="register_hook"):
                cf(x)
            continue
        out, y, z = cf(x)
        out.backward()
        np.testing.assert_allclose(out.item(), tout.item(), rtol=1e-12)
        for got, want in ((x, tx), (y, ty), (z, tz)):
            np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-12)
        assert any("register_hook" in b for b in cf.cache_info()["graph_breaks"])


def test_compiled_results_never_share_an_arguments_memory():
    """A result the eager backend's optimized graph passes through from an argument (x * 1.0
    simplified to x), or a view of one, is copied, as the cpu backend's kernels compute
    into memory of their own: an in-place update of the result (here through a view
    after a break) leaves the argument alone, as in eager."""
    def f(x):
        y = (x * 1.0).t().t()
        y.mul_(1.5)  # through a view: a graph break
        return y.t().t() * x

    xa = np.arange(6.0).reshape(2, 3)
    want = f(fusegrad.tensor(xa)).numpy()
    for backend in ("eager", "cpu"):
        x = fusegrad.tensor(xa)
        np.testing.assert_allclose(fusegrad.compile(f, backend=backend)(x).numpy(), want)
        np.testing.assert_array_equal(x.numpy(), xa)
        y = fusegrad.compile(lambda t: t * 1.0, backend=backend)(x)
        y.mul_(2.0)
        np.testing.assert_array_equal(x.numpy(), xa)


@pytest.mark.parametrize("variant", ["legacy constructor", "python zero", "in-place unsqueeze"])
def test_tutorial_step_with_data_updates_keeps_parameters_leaves(variant):
    """The char-RNN generation tutorial's train(), compiled: a loss summed into
    ``torch.Tensor([0])`` (a tensor the legacy constructor makes inside the segmented
    trace: it was not computed at the break, item() raised), the update
    ``p.data.add_(p.grad.data, alpha=-lr)`` (a parameter updated through its detached
    alias: it became a non-leaf with the segment's backward node, and the next step's
    backward ran into a freed graph), ``loss.item() / n`` (a number used as such: segments).
    Losses, parameters and their leaf status against torch eager over 4 steps."""
    xa = np.random.RandomState(0).randn(3, 1, 4).astype(np.float32)

    def make_train(lib, lin):
        crit = lib.nn.NLLLoss()

        def train(x, target):
            if variant == "in-place unsqueeze":
                target.unsqueeze_(-1)
            lin.zero_grad()
            loss = lib.Tensor([0]) if variant == "legacy constructor" else 0
            for i in range(x.size(0)):
                out = lib.log_softmax(lin(x[i]), dim=1)
                loss += crit(out, target[i] if variant == "in-place unsqueeze" else target[i:i + 1])
            loss.backward()
            for p in lin.parameters():
                p.data.add_(p.grad.data, alpha=-0.1)
            return out, loss.item() / x.size(0)
        return train

    tlin = torch.nn.Linear(4, 3)
    lin = fusegrad.nn.Linear(4, 3)
    lin.load_state_dict({k: fusegrad.tensor(v.detach().numpy()) for k, v in tlin.state_dict().items()})
    want_step, step = make_train(torch, tlin), fusegrad.compile(make_train(fusegrad, lin))
    for _ in range(4):
        want = want_step(torch.tensor(xa), torch.tensor([0, 2, 1]))
        got = step(fusegrad.tensor(xa), fusegrad.tensor([0, 2, 1]))
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
        np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(), rtol=1e-5, atol=1e-6)
        for p, tp in zip(lin.parameters(), tlin.parameters()):
            assert p.is_leaf and p.grad_fn is None and p.requires_grad
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_ops_without_cpu_kernels_run_eagerly_between_compiled_segments():
    """cholesky has no cpu kernel: a graph break, run eagerly with the code around it
    (topk included) compiled, gradients flowing across (the whole call ran eagerly before).
    Values and gradients against torch."""
    def f(lib, x, a):
        v, i = (x * 2).topk(3)
        c = lib.linalg.cholesky(a @ a.mT + lib.eye(3, dtype=a.dtype))
        return (v.sin().sum() + c.sum()) * 2, i

    cf = fusegrad.compile(lambda x, a: f(fusegrad, x, a))
    rng = np.random.default_rng(5)
    for _ in range(2):
        xa, aa = rng.standard_normal((2, 6)), rng.standard_normal((3, 3))
        x, a = fusegrad.tensor(xa, requires_grad=True), fusegrad.tensor(aa, requires_grad=True)
        tx, ta = torch.tensor(xa, requires_grad=True), torch.tensor(aa, requires_grad=True)
        (got, gi), (want, wi) = cf(x, a), f(torch, tx, ta)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
        np.testing.assert_array_equal(gi.numpy(), wi.numpy())
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)
    info = cf.cache_info()
    assert info["fallbacks"] == 0 and info["segments"] >= 2, info
    assert [r.split(":")[0] for r in info["graph_breaks"]] == ["cholesky has no kernel lowering"], info


def test_a_number_read_each_call_into_arithmetic_stops_compiling_new_segments():
    """``.item()`` feeding arithmetic puts a new float constant into the next segment at each
    call: after two such variants that segment runs op by op instead of compiling per call."""
    def f(m, x):
        s = x.sum().item()
        return (x * (1.0 / (math.fabs(s) + 1.0))).tanh().sum()

    cf = fusegrad.compile(lambda x: f(fusegrad, x))
    rng = np.random.default_rng(0)
    for _ in range(6):
        a = rng.standard_normal(7).astype(np.float32)
        x, xt = fusegrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, yt = cf(x), f(torch, xt)
        y.backward()
        yt.backward()
        np.testing.assert_allclose(y.item(), yt.item(), rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-7)
    info = cf.cache_info()
    assert info["segments"] <= 3, info  # the first segment and two variants of the second
    assert any("float constants" in n for n in info["notes"]), info["notes"]


def test_small_segments_run_eagerly_and_large_ones_compiled(monkeypatch):
    """The default policy (SEGMENT_MIN_WORK; the other tests set it to 0): a function whose
    segments make few elements per operation runs eagerly after a first call op by op, one
    with large operands in compiled segments; both give eager's values and gradients."""
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", 1 << 16)

    def f(x):
        y = x.sin() * 2
        s = float(y.sum().item())  # used as a number: a break
        return (y * s).sum()

    for shape, compiled in (((4, 3), False), ((512, 256), True)):
        cf = fusegrad.compile(f)
        xa = np.abs(np.random.default_rng(0).standard_normal(shape)) / 100
        for _ in range(3):
            x = fusegrad.tensor(xa, requires_grad=True)
            tx = torch.tensor(xa, requires_grad=True)
            got, want = cf(x), f(tx)
            got.backward()
            want.backward()
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-9)
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
        info = cf.cache_info()
        assert (info["segments"] > 0) is compiled, info
        assert (info["fallbacks"] > 0) is not compiled, info
        assert any("too few to pay" in n for n in info["notes"]) is not compiled, info


def test_composite_ops_and_nll_loss_after_a_break():
    """mean, softmax, log_softmax, mse_loss and cross_entropy (one autograd node each in
    eager) on a value computed before a break, in later segments: they crashed on the
    second call (their node held a value the segment never computed); nll_loss's target
    check is no break of its own."""
    def make(m):
        def f(x, w, y):
            h = (x @ w).tanh()
            s = float(h.sum().item())  # a number used as such: segments
            out = h.mean() * s + h.softmax(1).sum() + h.log_softmax(1).mean()
            out = out + m.nn.functional.mse_loss(h, x[:, :2]) + m.nn.functional.cross_entropy(h, y)
            return out
        return f
    cf = fusegrad.compile(make(fusegrad))
    rng = np.random.default_rng(0)
    xa, wa, ya = rng.standard_normal((5, 3)), rng.standard_normal((3, 2)), rng.integers(0, 2, 5)
    for _ in range(3):
        w, tw = fusegrad.tensor(wa, requires_grad=True), torch.tensor(wa, requires_grad=True)
        got = cf(fusegrad.tensor(xa), w, fusegrad.tensor(ya))
        want = make(torch)(torch.tensor(xa), tw, torch.tensor(ya))
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10)
    info = cf.cache_info()
    assert info["segments"] > 0 and len(info["graph_breaks"]) == 1, info


def test_a_custom_function_breaking_inside_backward_keeps_the_pending_nodes():
    """The double-backward tutorial's Cube, whose backward is another custom Function, in a
    gradient-penalty step: a custom Function runs eagerly (a break), here in the middle of
    loss.backward(), while the engine still has to apply nodes recorded in the segment."""
    def make(lib):
        class CubeBackward(lib.autograd.Function):
            @staticmethod
            def forward(ctx, grad_out, x):
                ctx.save_for_backward(x, grad_out)
                return grad_out * 3 * x ** 2

            @staticmethod
            def backward(ctx, g):
                x, gp = ctx.saved_tensors
                return g * 3 * x ** 2, g * 6 * x * gp

        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return CubeBackward.apply(g, x)

        def step(X, w):
            Xr = X.clone().requires_grad_(True)
            out = Cube.apply(Xr @ w).sum(1)
            g, = lib.autograd.grad(out.sum(), Xr, create_graph=True)
            loss = out.pow(2).mean() + (g.norm(dim=1) - 1).pow(2).mean()
            loss.backward()
            return loss
        return step

    wa = np.linspace(-1, 1, 12).reshape(4, 3)
    Xa = np.random.default_rng(0).standard_normal((16, 4))
    tw = torch.tensor(wa, requires_grad=True)
    tloss = make(torch)(torch.tensor(Xa), tw)
    cf = fusegrad.compile(make(fusegrad), backend="eager")
    w = fusegrad.tensor(wa, requires_grad=True)
    for _ in range(2):
        w.grad = None
        loss = cf(fusegrad.tensor(Xa), w)
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_grad_cam_hooks_on_a_layer_with_a_full_backward_hook():
    """Grad-CAM: a forward hook keeps out.detach() and registers a hook on out; the layer's
    full backward hook makes its input a break first. The detach is no use of out that
    the hook would miss, so the hook is registered, as eagerly."""
    def run(lib):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2), lib.nn.Tanh())
        return model

    ref = run(torch).double()
    ours = run(fusegrad).double()
    ours.load_state_dict({k: fusegrad.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    stores = []
    for model in (ref, ours):
        store = {}

        def fwd_hook(m, i, out, store=store):
            store["act"] = out.detach()
            out.register_hook(lambda g: store.__setitem__("grad", g.detach()))
        model[2].register_forward_hook(fwd_hook)
        model[2].register_full_backward_hook(lambda m, gi, go, store=store: store.__setitem__("bgrad", go[0]))
        stores.append(store)
    x = np.random.default_rng(0).standard_normal((5, 3))
    ref(torch.tensor(x, requires_grad=True)).sum().backward()
    cm = fusegrad.compile(ours, backend="eager")
    for _ in range(2):
        cm(fusegrad.tensor(x, requires_grad=True)).sum().backward()
        for k in ("act", "grad", "bgrad"):
            np.testing.assert_allclose(stores[1][k].numpy(), stores[0][k].numpy(), rtol=1e-12, err_msg=k)


def test_vq_vae_ema_codebook_recreated_in_forward():
    """The VQ-VAE notebook's EMA codebook: buffers rebound by attribute (one of them
    requiring grad) and parameters re-created with nn.Parameter(...) of traced values in a
    compiled forward: as eagerly, call after call (it crashed on values of an abandoned trace)."""
    def make():
        class VQ(fusegrad.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = fusegrad.nn.Embedding(6, 3)
                self.register_buffer("cs", fusegrad.ones(6))
                self.ema_w = fusegrad.nn.Parameter(fusegrad.tensor(np.linspace(-1, 1, 18).reshape(6, 3)))

            def forward(self, x):
                enc = fusegrad.softmax(x @ self.emb.weight.t(), 1)
                self.cs = self.cs * 0.9 + 0.1 * enc.sum(0)
                self.ema_w = fusegrad.nn.Parameter(self.ema_w * 0.9 + 0.1 * (enc.t() @ x))
                self.emb.weight = fusegrad.nn.Parameter(self.ema_w / self.cs.unsqueeze(1))
                return (enc @ self.emb.weight - x).pow(2).mean()
        m = VQ().double()
        with fusegrad.no_grad():
            m.emb.weight.copy_(fusegrad.tensor(np.linspace(0, 1, 18).reshape(6, 3)))
        return m

    eager, compiled = make(), make()
    cm = fusegrad.compile(compiled, backend="eager")
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = fusegrad.tensor(rng.standard_normal((5, 3)))
        np.testing.assert_allclose(cm(x).item(), eager(x).item(), rtol=1e-12)
    np.testing.assert_allclose(compiled.cs.detach().numpy(), eager.cs.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(compiled.emb.weight.detach().numpy(), eager.emb.weight.detach().numpy(), rtol=1e-12)


def test_an_in_place_op_that_breaks_the_graph_returns_its_value(monkeypatch):
    """An in-place op that needs concrete values (index_put_ through a boolean mask) on a
    temporary, beside traced in-place scatters: the tensor it rebinds takes the later
    segment's value, with eager's values and gradients. (The default SEGMENT_MIN_WORK: the first call traces in segments, later
    ones of so little work run eagerly; compiling each segment would cost ~16 s here.)"""
    import fusegrad as F
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", 1 << 16)
    i = F.tensor([0, 2, 2])

    def f(x):
        y = (x * 2).index_put_((x > 1,), x[:1] * 3).scatter_reduce_(0, i, x[:3], "amax", include_self=False)
        z = F.zeros(6, dtype=x.dtype).scatter_reduce_(0, i, x[:3] * x[:3], "sum")
        return y * 3 + z, (x + 1).scatter_(0, i, x[:3] + 1, reduce="multiply")

    cf = F.compile(f)
    for k in range(2):
        res = []
        for fn in (f, cf):
            x = F.tensor(np.arange(6.0) - k, requires_grad=True)
            a, b = fn(x)
            (a.sum() + (b * b).sum()).backward()
            res.append((a.detach().numpy(), b.detach().numpy(), x.grad.numpy()))
        for ours, eager in zip(*res):
            np.testing.assert_allclose(ours, eager, rtol=1e-12)
    assert cf.cache_info()["graph_breaks"]


def test_a_backward_from_one_output_keeps_what_anothers_backward_needs():
    """A GAN's D step in compiled segments: it returns ``fake`` and backpropagates a loss on
    ``fake.detach()`` itself; G's later backward through ``fake`` still finds its saved
    values (eager frees only the nodes a backward traverses), and no version check of D's
    weights, which D's step updated in place, with eager's gradients."""
    import fusegrad as F
    rng = np.random.default_rng(5)
    w1, w2, w3, z0 = (rng.standard_normal((6, 6)) * 0.3, rng.standard_normal((6, 6)) * 0.3,
                      rng.standard_normal((1, 6)), rng.standard_normal((4, 6)))
    grads = []
    for compiled in (False, True):
        g_lin = F.nn.Linear(6, 6).double()
        d_net = F.nn.Sequential(F.nn.Linear(6, 6), F.nn.Tanh(), F.nn.Linear(6, 1)).double()
        with F.no_grad():
            for lin, w in ((g_lin, w1), (d_net[0], w2), (d_net[2], w3)):
                lin.weight.copy_(F.tensor(w))
                lin.bias.fill_(0.1)

        def d_step(z):
            fake = F.tanh(g_lin(z))
            loss = d_net(fake.detach()).pow(2).mean()  # (in fake's segment: saves D's weights)
            inter = fake.detach().requires_grad_(True)  # (the gradient penalty's: a graph break)
            loss = loss + d_net(inter).sum() * 0.0
            d_net.zero_grad()
            loss.backward()
            with F.no_grad():  # D's optimizer step: G's backward never reads D's old weights
                for p in d_net.parameters():
                    p.sub_(0.1 * p.grad)
            return loss.detach(), fake
        step = F.compile(d_step) if compiled else d_step
        for _ in range(3):
            g_lin.zero_grad()
            loss, fake = step(F.tensor(z0))
            d_net(fake).sum().backward()
        grads.append((loss.item(), g_lin.weight.grad.numpy().copy(), d_net[0].weight.grad.numpy().copy()))
        if compiled:
            assert step.cache_info()["segments"] > 0
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-12)
    for ours, eager in zip(grads[1][1:], grads[0][1:]):
        np.testing.assert_allclose(ours, eager, rtol=1e-10)


@pytest.mark.parametrize("min_work", [0, 1 << 16])
def test_a_break_cuts_only_the_autograd_nodes_its_own_segment_recorded(min_work, monkeypatch):
    """An embedding with max_norm renormalizes its weight in place under no_grad at each call:
    the second call's segment traces the weight, which the first call's index node also
    reads; that node (an earlier segment's) keeps what it saved, so the backward matches
    eager's (it raised 'NoneType' object is not subscriptable)."""
    import fusegrad as F
    from fusegrad.runtime import segments
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", min_work)
    w0 = (np.random.default_rng(0).standard_normal((8, 4)) * 1.5).astype(np.float32)
    idx = F.tensor([[1, 2, 0, 7], [5, 2, 2, 0]])

    def step(w, i):
        e = F.nn.Embedding(8, 4, padding_idx=3, max_norm=2.0)
        with F.no_grad():
            e.weight.copy_(w)
        out = e(i)
        out2 = e(i[:, :2])
        (out.sum() + (out2 * 2).sum()).backward()
        return out.detach(), e.weight.grad
    want = step(F.tensor(w0), idx)
    cf = F.compile(step)
    got = cf(F.tensor(w0), idx)
    assert cf.cache_info()["graph_breaks"]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def test_a_module_made_and_cast_inside_compiled_code_takes_the_new_dtype():
    """``nn.Linear(...).double()`` inside a compiled function (its Parameter breaks the graph,
    then ``.double()`` sets each parameter's ``.data`` to a float64 value): the parameter
    takes the new array; it was written into the old float32 one."""
    import fusegrad as F
    w0 = np.random.default_rng(0).standard_normal((3, 4))

    def make(w):
        lin = F.nn.Linear(4, 3).double()
        with F.no_grad():
            lin.weight.copy_(w)
        return lin.weight * 1.0
    got, want = F.compile(make)(F.tensor(w0)), make(F.tensor(w0))
    assert got.dtype == want.dtype == F.float64
    np.testing.assert_array_equal(got.detach().numpy(), w0)


def test_a_dead_rebound_leaf_s_id_taken_by_another_tensor_is_no_break():
    """A parameter made and updated under no_grad inside compiled code, then dropped: a later
    tensor that takes its id is not that leaf (it broke the graph there, and a building
    Transformer's softmax shift, untracked at that break, escaped the trace about one time
    in ten)."""
    import fusegrad as F

    def f(x):
        for _ in range(20):
            p = F.nn.Parameter(F.ones(3))
            with F.no_grad():
                p.mul_(2)
            del p
            x = (x * 2).sin()
        return x
    cf = F.compile(f)
    got = cf(F.ones(3, requires_grad=True))
    np.testing.assert_allclose(got.detach().numpy(), f(F.ones(3)).numpy(), rtol=1e-6)
    assert not [b for b in cf.cache_info()["graph_breaks"] if "used again" in b]


@pytest.mark.parametrize("min_work", [0, 1 << 16])
def test_an_argument_multiplied_in_place_by_a_value_that_requires_grad(min_work, monkeypatch):
    """``b.mul_(x * 2)`` on a plain argument (the call breaks there: b takes eager's history):
    the node of the multiplication saves b's value from before it, so the backward is legal
    and right (it raised 'modified by an inplace operation' when the segment ran op by op)."""
    torch = pytest.importorskip("torch")
    import fusegrad as F
    from fusegrad.runtime import segments
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", min_work)

    def f(b, x):
        b.mul_(x * 2)
        return x.sum() * 0
    res = []
    for lib, fn in ((torch, f), (F, F.compile(f))):
        w = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        buf = lib.ones(2, 3, dtype=lib.float64)
        r = fn(buf, w)
        ((buf * lib.arange(1.0, 7.0, dtype=lib.float64).view(2, 3)).sum() + r).backward()
        res.append((buf.detach().numpy(), w.grad.numpy()))
    for g, e in zip(res[1], res[0]):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_a_break_inside_no_grad_keeps_the_history_recorded_before_it(monkeypatch):
    """A graph break inside a ``with no_grad()`` block (a data-dependent check on a target, as
    SAC/TD3 updates have) ends a segment run op by op: what was recorded before the block
    keeps its history (the loss had none: backward raised), what ran inside has none;
    the critic frozen and unfrozen with requires_grad around it, as those updates do."""
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", 1 << 16)

    def run(lib, compiled):
        q = lib.nn.Linear(3, 1).double()
        with lib.no_grad():
            q.weight.copy_(lib.tensor([[0.1, -0.2, 0.3]], dtype=lib.float64))
            q.bias.zero_()
        opt = lib.optim.SGD(q.parameters(), lr=0.1)

        def update(o, r):
            opt.zero_grad()
            qo = q(o).squeeze(-1)
            with lib.no_grad():
                tgt = r * 2 + q(o).squeeze(-1)
                if bool((tgt > 100).any()):
                    tgt = tgt / 2
            loss = ((qo - tgt) ** 2).mean()
            loss.backward()
            opt.step()
            for p in q.parameters():
                p.requires_grad = False
            for p in q.parameters():
                p.requires_grad = True
            return loss.detach(), tgt.requires_grad
        update = fusegrad.compile(update) if compiled else update
        o = lib.linspace(-1, 1, 12, dtype=lib.float64).view(4, 3)
        r = lib.tensor([1.0, 0.0, -1.0, 2.0], dtype=lib.float64)
        out = [update(o, r) for _ in range(4)]
        return [loss.item() for loss, _ in out] + q.weight.flatten().tolist(), [rg for _, rg in out]
    got, want = run(fusegrad, True), run(torch, False)
    assert got[1] == want[1] == [False] * 4
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


def test_a_break_inside_a_backward_reads_outputs_saved_by_nodes_of_concrete_inputs():
    """A compiled step whose backward breaks (solve_triangular inside cholesky's VJP) after
    running the node of ``s.exp()``: that node's inputs are concrete (a parameter) but it
    saved its traced output, which the segment cut at the break must hand back (KeyError)."""
    def run(lib, compiled):
        z = lib.nn.Parameter(lib.linspace(0.5, 4.5, 3, dtype=lib.float64).unsqueeze(1))
        s = lib.nn.Parameter(lib.tensor(-2.0, dtype=lib.float64))
        y = lib.linspace(0, 1, 8, dtype=lib.float64).unsqueeze(-1)
        x = lib.linspace(0, 5, 8, dtype=lib.float64).unsqueeze(1)

        def step():
            a = lib.exp(-(z - x.T) ** 2)
            lb = lib.linalg.cholesky(a @ a.T + lib.eye(3, dtype=lib.float64))
            loss = (lib.linalg.solve_triangular(lb, a @ y, upper=False) / s.exp()).pow(2).sum()
            loss.backward()
            return loss
        step = fusegrad.compile(step) if compiled else step
        losses = []
        for _ in range(2):
            z.grad = s.grad = None
            losses.append(step().item())
        return losses + [s.grad.item()] + z.grad.flatten().tolist()
    np.testing.assert_allclose(run(fusegrad, True), run(torch, False), rtol=1e-10)


def test_a_compiled_in_place_helper_on_a_linear_output():
    """A compiled helper scaling a Linear's output in place (features before a loss): the
    segment's tensor comes from a composite node, whose context has no segment bookkeeping
    (an AttributeError); values and gradients as torch's, on two calls."""
    def program(lib, compile_):
        enc = lib.nn.Linear(3, 4)
        with lib.no_grad():
            enc.weight.copy_(lib.arange(12.0).reshape(4, 3) / 10 - 0.5)
            enc.bias.fill_(0.1)
        x = lib.tensor([[1.0, -2.0, 0.5], [0.3, 0.7, -1.0]])

        def scale_(z):
            z.mul_(2.0)
        f = compile_(scale_)
        out = []
        for _ in range(2):
            enc.zero_grad()
            z = enc(x)
            f(z)
            (z * z).sum().backward()
            out += [z.detach().numpy().copy(), enc.weight.grad.numpy().copy()]
        return out
    for a, b in zip(program(fusegrad, fusegrad.compile), program(torch, lambda f: f)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_compiled_helpers_differentiating_a_loss_passed_in():
    """GradNorm/PCGrad helpers: a compiled function given a loss computed outside calls
    autograd.grad on it, or backward() on several and reads .grad (the loss was traced as
    a leaf: 'not used in the graph', or no .grad); run eagerly at that point, as torch."""
    def program(lib, compile_):
        w = lib.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        x = lib.tensor([[1.0, 2.0], [3.0, -1.0]])

        def grad_norm(loss, param):
            g, = lib.autograd.grad(loss, param, retain_graph=True)
            return g.norm()

        def backward_and_norm(losses, param):
            for loss in losses:
                loss.backward(retain_graph=True)
            return param.grad.norm()
        gn, bn = compile_(grad_norm), compile_(backward_and_norm)
        out = []
        for _ in range(2):
            w.grad = None
            loss = (x @ w).tanh().sum()
            out.append(gn(loss, w).item())
            out.append(bn([loss, (x @ w).pow(2).mean()], w).item())
            out.append(w.grad.numpy().copy())
        return out
    for a, b in zip(program(fusegrad, fusegrad.compile), program(torch, lambda f: f)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("min_work", [0, 1 << 16])
def test_unfold_and_as_strided_after_a_break_keep_their_history(min_work, monkeypatch):
    """unfold and as_strided of a concrete tensor after a break are traced in the segment:
    their result is the segment's output, not an eager alias that kept the segment's cut
    autograd nodes (the backward of the first call raised 'NoneType' object is not
    subscriptable)."""
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", min_work)
    x0 = np.random.default_rng(3).standard_normal((4, 3))

    def f(m, x):
        print("break", end="")
        return x.unfold(0, 3, 1) * 2, x.as_strided((2, 2), (1, 1)).exp()

    cf = fusegrad.compile(lambda x: f(fusegrad, x))
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()):
            x = fusegrad.tensor(x0, requires_grad=True)
            got = cf(x)
        gx, = fusegrad.autograd.grad(sum((o * (k + 1)).sum() for k, o in enumerate(got)), [x])
        t = torch.tensor(x0, requires_grad=True)
        with contextlib.redirect_stdout(io.StringIO()):
            want = f(torch, t)
        gt, = torch.autograd.grad(sum((o * (k + 1)).sum() for k, o in enumerate(want)), [t])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(gx.numpy(), gt.numpy(), rtol=1e-12)
    assert cf.cache_info()["graph_breaks"]


def test_print_into_a_buffer_is_no_graph_break():
    """While tracing, print() to stdout or stderr is a graph break (a replayed graph would not
    print); print(..., file=buffer), code writing into a buffer of its own (Numba's compiler
    does when a kernel first compiles inside a traced call), is not."""
    import sys
    from fusegrad.tracer.side_effects import printing_breaks

    class Trace:
        breaks: list = []

        def graph_break(self, why):
            self.breaks.append(why)

    tr, buf = Trace(), io.StringIO()
    with printing_breaks(tr):
        print("kept", file=buf)
        assert not tr.breaks
        print("shown")
        print("shown", file=sys.stderr)
    assert len(tr.breaks) == 2 and buf.getvalue() == "kept\n"
