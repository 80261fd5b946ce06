"""Compiled training code following what programs change around it, against PyTorch:
an optimizer's load_state_dict (resuming) and add_param_group (unfreezing) between compiled
steps, an optimizer reached through a dict, a model switched to eval() and back inside the
function, random generators passed in or held as attributes, and a reentrant checkpoint of
inputs without gradient."""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _models(T):
    g = np.random.default_rng(0)
    a, b = T.nn.Linear(3, 4).double(), T.nn.Linear(4, 1).double()
    with T.no_grad():
        for p in list(a.parameters()) + list(b.parameters()):
            p.copy_(T.tensor(g.standard_normal(tuple(p.shape))))
    return a, b


def _losses(T, compiled, edit):
    a, b = _models(T)
    b.requires_grad_(False)
    opt = T.optim.Adam(a.parameters(), lr=0.05)
    parts = {"opt": opt}
    x, y = T.tensor(np.linspace(-1, 1, 12).reshape(4, 3)), T.tensor(np.ones((4, 1)))

    def step(x, y):
        parts["opt"].zero_grad()
        loss = ((b(a(x).relu()) - y) ** 2).mean()
        loss.backward()
        parts["opt"].step()
        return loss.detach()
    f = fusegrad.compile(step) if compiled else step
    out = []
    for i in range(6):
        if i == 3:
            edit(T, opt, a, b)
        out.append(float(f(x, y)))
    return out


def _resume(T, opt, a, b):
    opt.load_state_dict(T.optim.Adam(a.parameters(), lr=0.01).state_dict())


def _unfreeze(T, opt, a, b):
    b.requires_grad_(True)
    opt.add_param_group({"params": b.parameters(), "lr": 0.1})


@pytest.mark.parametrize("edit", [_resume, _unfreeze])
def test_optimizer_changes_between_compiled_steps(edit):
    np.testing.assert_allclose(_losses(fusegrad, True, edit), _losses(torch, False, edit), rtol=1e-12)


def test_eval_and_back_inside_compiles_once():
    m = fusegrad.nn.Sequential(fusegrad.nn.Linear(4, 8), fusegrad.nn.Dropout(0.5), fusegrad.nn.Linear(8, 2))

    def evaluate(x):
        m.eval()
        with fusegrad.no_grad():
            out = m(x).sum()
        m.train()
        return out
    ce = fusegrad.compile(evaluate)
    x = fusegrad.ones(3, 4)
    want = evaluate(x).item()
    for _ in range(4):
        assert ce(x).item() == pytest.approx(want, rel=1e-6)
    assert m.training and ce.cache_info()["compiles"] == 1


def test_random_generators_given_or_held_draw_as_eagerly():
    class Noisy(fusegrad.nn.Module):
        def __init__(self):
            super().__init__()
            self.rng = random.Random(3)

        def forward(self, x):
            return x * self.rng.random()

    def f(x, gen):
        return x * gen.standard_normal()
    x = fusegrad.ones(2)
    for make, call in ((lambda: np.random.default_rng(5), lambda fn, g: fn(x, g)),
                       (Noisy, lambda fn, m: fn(x))):
        eager_obj, comp_obj = make(), make()
        cf = fusegrad.compile(f if make is not Noisy else comp_obj)
        eager_fn = f if make is not Noisy else eager_obj
        for _ in range(4):
            np.testing.assert_array_equal(call(cf, comp_obj).numpy(), call(eager_fn, eager_obj).numpy())


def test_reentrant_checkpoint_of_inputs_without_grad():
    def run(T, compiled):
        lin, head = T.nn.Linear(3, 3).double(), T.nn.Linear(3, 1).double()

        def f(x):
            h = T.utils.checkpoint.checkpoint(lin, x, use_reentrant=True)
            loss = head(h).sum()
            loss.backward()
            return loss.detach()
        g = fusegrad.compile(f) if compiled else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(2):
                g(T.ones(2, 3, dtype=T.float64))
        return lin.weight.grad, head.weight.grad
    (gw, gh), (tw, th) = run(fusegrad, True), run(torch, False)
    assert gw is None and tw is None
    assert gh is not None and th is not None


def test_a_tensor_learning_rate_a_scheduler_changes():
    """A scheduler fills a tensor learning rate in place, as PyTorch's; one replaced by
    another tensor is a new guard value (both were ignored by the compiled step)."""
    def run(T, compiled, replace):
        w = T.zeros(1, requires_grad=True)
        opt = T.optim.SGD([w], lr=T.tensor(0.1))
        sched = T.optim.lr_scheduler.ExponentialLR(opt, 0.5)

        def step():
            opt.zero_grad()
            w.sum().backward()
            opt.step()
        f = fusegrad.compile(step) if compiled else step
        out = []
        for i in range(5):
            f()
            if replace and i == 2:
                opt.param_groups[0]["lr"] = T.tensor(0.3)
            else:
                sched.step()
            out.append(float(w))
        return out
    for replace in (False, True):
        np.testing.assert_allclose(run(fusegrad, True, replace), run(torch, False, replace), rtol=1e-6)


def test_returned_arguments_and_captured_tensors_are_themselves():
    """A returned argument (updated in place or not) or captured tensor is that tensor, as
    in eager and torch.compile: an in-place update of the result reaches it (it was a copy)."""
    lin = fusegrad.nn.Linear(2, 2)
    buf = fusegrad.zeros(2)

    def upd(b, x):
        b.mul_(0.5).add_(x)
        return b, x, lin.weight, buf
    cf = fusegrad.compile(upd)
    b, x = fusegrad.ones(2), fusegrad.full((2,), 2.0)
    for _ in range(3):
        rb, rx, rw, rbuf = cf(b, x)
        assert rb is b and rx is x and rw is lin.weight and rbuf is buf
    rb.add_(1)
    np.testing.assert_allclose(b.numpy(), [0.5 * (0.5 * (0.5 + 2) + 2) + 2 + 1] * 2)


def test_module_attributes_set_between_calls():
    """A plain attribute a module's forward reads (a temperature, a flag), set between
    compiled calls, retraces, as torch.compile's guards do (it was frozen at trace time);
    attributes forward itself sets do not."""
    def make(T):
        class Net(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = T.nn.Linear(2, 2).double()
                self.temperature, self.use_residual = 1.0, False

            def forward(self, x):
                y = self.lin(x) / self.temperature
                self.last = y.detach()  # set by forward itself each call
                return y + x if self.use_residual else y
        return Net()
    tn, fn = make(torch), make(fusegrad)
    fn.load_state_dict({k: fusegrad.tensor(v.detach().numpy()) for k, v in tn.state_dict().items()})
    cf = fusegrad.compile(fn)
    x = np.array([[1.0, 2.0]])
    for temp, res in [(1.0, False), (1.0, False), (0.5, False), (0.25, True), (0.25, True)]:
        tn.temperature = fn.temperature = temp
        tn.use_residual = fn.use_residual = res
        np.testing.assert_allclose(cf(fusegrad.tensor(x)).detach().numpy(), tn(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-13)
    assert cf.cache_info()["compiles"] == 3


def test_a_dict_and_list_argument_filled_by_the_function():
    """A metrics dict and a list of losses given to the compiled step are filled at every
    call, as eagerly (they stayed empty: the trace filled its own copies)."""
    def make(T):
        lin = T.nn.Linear(3, 1).double()
        with T.no_grad():
            lin.weight.fill_(0.5)
            lin.bias.fill_(0.1)

        def step(x, metrics, history):
            loss = lin(x).pow(2).mean()
            metrics["loss"] = float(loss)
            metrics["n"] = metrics.get("n", 0) + 1
            history.append(loss.detach() * 1)
            return loss
        return step
    results = []
    for T, compiled in ((fusegrad, True), (torch, False)):
        step = fusegrad.compile(make(T)) if compiled else make(T)
        metrics, history = {}, []
        for _ in range(3):
            step(T.ones(2, 3, dtype=T.float64), metrics, history)
        results.append((metrics, [float(h) for h in history]))
    assert results[0] == results[1]


def test_a_list_of_numbers_read_by_index():
    """A closure or global list of numbers the function reads (cnt[0]) is guarded by value
    (it was frozen at trace time)."""
    scales = [2.0]
    w = fusegrad.ones(3)

    def f(x):
        return (w * x * scales[0]).sum()
    cf = fusegrad.compile(f)
    got = []
    for i in range(6):
        if i == 3:
            scales[0] = 3.0
        got.append(cf(fusegrad.ones(3)).item())
    assert got == [6.0] * 3 + [9.0] * 3 and cf.cache_info()["compiles"] == 2


class _Trainer:
    """A user object whose step counts itself."""

    def __init__(self):
        self.global_step = 0


def _side_effect_program(lib, compiled: bool):
    """A training step with Python side effects: a loss log (list of tensors), a counter in
    a dict, a user module's step counter read back as a warm-up factor, a user object's
    attribute; returns what each held after five steps, and the losses."""
    lib.manual_seed(0)

    class Warm(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 1).double()
            self.steps = 0

        def forward(self, x):
            self.steps += 1
            return self.lin(x).sum() * min(1.0, self.steps / 4)

    m, history, counts, trainer = Warm(), [], {"n": 0}, _Trainer()
    with lib.no_grad():
        m.lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3]], dtype=lib.float64))
        m.lin.bias.fill_(0.05)
    opt = lib.optim.SGD(m.parameters(), lr=0.01)

    def step(x):
        counts["n"] += 1
        trainer.global_step += 2
        opt.zero_grad()
        loss = m(x) ** 2
        loss.backward()
        opt.step()
        history.append(loss.detach())
        return loss
    run = lib.compile(step) if compiled else step
    losses = [run(lib.ones(2, 3, dtype=lib.float64) * (1 + i / 4)).item() for i in range(5)]
    return ([h.item() for h in history], counts["n"], trainer.global_step, m.steps, losses,
            run.cache_info()["graph_breaks"] if compiled else None)


def test_python_side_effects_run_at_every_call():
    """Python state the compiled function changes (a list it logs to, a dict counter, a
    user module's or object's attribute) changes at every call as in torch (it changed at
    trace time only, and cached calls replayed the traced counter's value); the trace's
    own changes are undone, so the first call counts once."""
    got, want = _side_effect_program(fusegrad, True), _side_effect_program(torch, False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    assert got[1:4] == want[1:4] == (5, 10, 5)
    np.testing.assert_allclose(got[4], want[4], rtol=1e-12)
    assert any("Warm.steps set at" in r for r in got[5])


def test_a_tensor_returned_twice_is_one_tensor():
    cf = fusegrad.compile(lambda x: (lambda y: (y, y, y * 2))(x.sin()))
    x, tx = fusegrad.ones(3, dtype=fusegrad.float64, requires_grad=True), torch.ones(3, dtype=torch.float64,
                                                                                   requires_grad=True)
    for _ in range(3):
        a, b, c = cf(x)
        assert a is b and a is not c
    (a.sum() + b.sum()).backward()
    ty = tx.sin()
    (ty.sum() + ty.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15)


def _stateful_python_program(lib, compiled: bool):
    """Steps whose Python state lives in objects: a scheduler stepped inside the step, an
    optimizer of the user's counting steps in a Python int (bias correction from it), and a
    data loader's iterator consumed inside the step."""
    class CountingAdam(lib.optim.Optimizer):
        def __init__(self, params, lr=0.05):
            super().__init__(params, {"lr": lr})

        @lib.no_grad()
        def step(self):
            for group in self.param_groups:
                for p in group["params"]:
                    st = self.state[p]
                    if not st:
                        st["step"], st["m"] = 0, lib.zeros_like(p)
                    st["step"] += 1
                    st["m"].mul_(0.9).add_(p.grad, alpha=0.1)
                    p.sub_(group["lr"] * st["m"] / (1 - 0.9 ** st["step"]))

    w = lib.nn.Parameter(lib.tensor([0.5, -0.25, 1.0], dtype=lib.float64))
    v = lib.nn.Parameter(lib.tensor([0.1, 0.2, 0.3], dtype=lib.float64))
    opt, custom = lib.optim.SGD([w], lr=0.2), CountingAdam([v])
    sch = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    data = lib.arange(24, dtype=lib.float64).reshape(8, 3) / 10
    batches = iter(lib.utils.data.DataLoader(lib.utils.data.TensorDataset(data), batch_size=2))

    def step():
        (x,) = next(batches)
        opt.zero_grad()
        custom.zero_grad()
        loss = (((x * w).sum(1) - 1.0) ** 2).mean() + ((x * v).sum() - 0.5) ** 2
        loss.backward()
        opt.step()
        custom.step()
        sch.step()
        return loss
    run = lib.compile(step) if compiled else step
    losses = [run().item() for _ in range(4)]
    return losses, w.tolist(), v.tolist(), sch.last_epoch, custom.state[v]["step"]


def test_objects_python_state_changes_at_every_call():
    """lr_scheduler.step() inside the compiled step, a user optimizer's Python step count,
    and next() on a data loader's iterator: as torch (the scheduler advanced at trace time
    only, the step count stayed at 2, and every call replayed the first batch)."""
    got, want = _stateful_python_program(fusegrad, True), _stateful_python_program(torch, False)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _mode_and_method_program(lib, compiled: bool):
    """An evaluate() under @no_grad that switches the model to eval mode, a method compiled
    with the decorator, a fusegrad module's counter attribute set in the function, a NumPy
    draw before a graph break, and LazyLinear initialized inside the first compiled call."""
    comp = (lambda f: lib.compile(f)) if compiled else (lambda f: f)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 1)).double()
    with lib.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(lib.linspace(-0.5, 0.5, p.numel(), dtype=lib.float64).reshape(p.shape) * (k + 1))

    @comp
    @lib.no_grad()
    def evaluate(x):
        model.eval()
        return model(x).sum()

    class Scaled(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 1).double()
            with lib.no_grad():
                self.lin.weight.fill_(0.5)
                self.lin.bias.fill_(0.1)

        @comp
        def forward(self, x):
            self.lin.calls = getattr(self.lin, "calls", 0) + 1  # (on fusegrad's Linear, set from here)
            return self.lin(x).sum() * min(1.0, self.lin.calls / 3)

    rng = np.random.default_rng(7)

    @comp
    def mix(x):
        lam = float(rng.beta(0.4, 0.4))
        lib.manual_seed(3)  # (a graph break)
        return (x * lam).sum()

    lazy = comp(lib.nn.Sequential(lib.nn.LazyLinear(2), lib.nn.ReLU()))
    x = lib.tensor(np.linspace(-1, 2, 6).reshape(2, 3))
    scaled, out = Scaled(), []
    for _ in range(4):
        model.train()
        out += [evaluate(x).item(), model.training, scaled(x).item(), mix(x).item()]
    out.append(tuple(lazy(x.float()).shape))  # (LazyLinear makes float32 parameters)
    with lib.no_grad():
        out.append(model(x).sum().item())  # (in eval mode, as evaluate() left it)
    return out


def test_mode_switches_methods_counters_and_host_draws_as_eagerly():
    """model.eval() in a compiled @no_grad function leaves the model in eval mode (it stayed
    in train mode on replays); @compile on a method binds self (it crashed); a counter set on
    a fusegrad module counts every call; a NumPy draw before a graph break is drawn once per
    call (the aborted trace drew one more); LazyLinear initializes in the first compiled call
    (the break escaped). Compared with fusegrad eager."""
    got, want = _mode_and_method_program(fusegrad, True), _mode_and_method_program(fusegrad, False)
    assert got[-2] == want[-2]
    np.testing.assert_allclose([v for v in got if not isinstance(v, tuple)],
                               [v for v in want if not isinstance(v, tuple)], rtol=1e-12)


_MASK = fusegrad.ones(3)


def _masked(x):
    return (x * _MASK).sum()


def test_a_global_tensor_rebound_between_calls_is_read_not_retraced():
    """A global or closure tensor the function only reads, rebound to a new tensor of the
    same shape and dtype before each call (a mask made anew), is read at every call (it
    traced again at each call, then ran eagerly past 8); a new shape traces again; one the
    function updates in place or that requires grad stays guarded on its identity."""
    global _MASK
    f = fusegrad.compile(_masked)
    got = []
    for i in range(10):
        _MASK = fusegrad.full((3,), float(i))
        got.append(f(fusegrad.ones(3)).item())
    assert got == [3.0 * i for i in range(10)] and f.cache_info()["compiles"] == 1, f.cache_info()
    _MASK = fusegrad.ones(4)
    assert f(fusegrad.ones(4)).item() == 4.0 and f.cache_info()["compiles"] == 2

    counter = fusegrad.zeros(())
    w = fusegrad.ones(3, requires_grad=True)

    def g(x):
        counter.add_(1)
        return (x * w).sum()
    cg = fusegrad.compile(g)
    for _ in range(3):
        cg(fusegrad.ones(3)).backward()
    assert counter.item() == 3 and w.grad.tolist() == [3.0, 3.0, 3.0]
    w = fusegrad.full((3,), 2.0, requires_grad=True)  # (a new parameter: traced again, its own gradient)
    cg(fusegrad.ones(3)).backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0] and counter.item() == 4


def test_optimizers_two_levels_down_get_their_state_first():
    """Optimizers held in a dict of a config dict, or in (model, optimizer) pairs, and stepped
    inside the compiled step get their state from an eager first call, as one level down
    does (the compiled step then trained differently, or crashed)."""
    def run(compiled):
        nets = {k: fusegrad.nn.Linear(3, 1).double() for k in "ab"}
        for m in nets.values():
            fusegrad.nn.init.constant_(m.weight, 0.5)
            fusegrad.nn.init.zeros_(m.bias)
        pairs = [(m, fusegrad.optim.Adam(m.parameters(), lr=0.1)) for m in nets.values()]
        cfg = {"opts": {"a": pairs[0][1], "b": pairs[1][1]}}

        def step(x):
            losses = []
            for (net, _), k in zip(pairs, "ab"):
                opt = cfg["opts"][k]
                opt.zero_grad()
                loss = net(x).pow(2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            return fusegrad.stack(losses)
        f = fusegrad.compile(step) if compiled else step
        return [f(fusegrad.ones(2, 3, dtype=fusegrad.float64) * (i + 1)).tolist() for i in range(4)]

    np.testing.assert_allclose(run(True), run(False), rtol=1e-12)


def test_the_default_dtype_is_part_of_the_signature():
    """A graph that makes tensors of the default dtype (zeros(3)) is not reused after
    set_default_dtype changes it (it returned the old dtype)."""
    f = fusegrad.compile(lambda x: fusegrad.zeros(3) + x.sum())
    x = fusegrad.ones(2, dtype=fusegrad.float16)
    try:
        for dt in (fusegrad.float64, fusegrad.float32, fusegrad.float64):
            fusegrad.set_default_dtype(dt)
            assert f(x).dtype == dt and f(x).dtype == dt
    finally:
        fusegrad.set_default_dtype(fusegrad.float32)
    assert f.cache_info()["compiles"] == 2


STEP = 0
LOG: list = []


def _next_step():
    global STEP
    STEP += 1
    return STEP


def _callee_state_program(lib, compiled: bool):
    """State changed by what the compiled function calls: a helper's global step counter
    (a warm-up factor), a submodule's forward logging to a list, a forward hook storing an
    activation in a dict, a metric object's running tensor count rebound."""
    global STEP
    STEP = 0
    LOG.clear()

    class Logged(lib.nn.Module):
        def forward(self, x):
            LOG.append(tuple(x.shape))
            return x.tanh()

    class Metric:
        def __init__(self):
            self.correct = lib.tensor(0)

        def update(self, out, y):
            self.correct = self.correct + ((out > 0) == (y > 0)).sum()

    model = lib.nn.Sequential(lib.nn.Linear(3, 4), Logged(), lib.nn.Linear(4, 1)).double()
    with lib.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(lib.linspace(-0.5, 0.5, p.numel(), dtype=lib.float64).reshape(p.shape) * (k + 1))
    feats: dict = {}
    model[1].register_forward_hook(lambda m, i, o: feats.__setitem__("act", o))
    opt, metric = lib.optim.SGD(model.parameters(), lr=0.1), Metric()

    def step(x, y):
        warm = min(1.0, _next_step() / 4)
        out = model(x)
        metric.update(out, y)
        loss = ((out - y) ** 2).mean() * warm
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()
    f = lib.compile(step) if compiled else step
    x, y = lib.tensor(np.linspace(-1, 2, 6).reshape(2, 3)), lib.tensor([[0.5], [-0.25]], dtype=lib.float64)
    losses = [float(f(x, y)) for _ in range(6)]
    return losses, STEP, len(LOG), float(feats["act"].sum()), int(metric.correct)


def test_state_changed_by_callees_changes_at_every_call():
    """A helper's global counter, a submodule's log, a hook's stored activation and a
    metric's rebound tensor change at every call as in torch (the replayed graph kept the
    traced counter and the hook's traced tensor escaped)."""
    got, want = _callee_state_program(fusegrad, True), _callee_state_program(torch, False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    assert got[1:3] == want[1:3] == (6, 6) and got[4] == want[4]
    np.testing.assert_allclose(got[3], want[3], rtol=1e-12)


EMA = None


def _rebinding_program(lib, compiled: bool):
    """A running average kept in a global tensor rebound by the step, a set and a deque the
    model fills, a class constant read as self.SCALE changed on the class, and an
    activation swapped for another between calls."""
    import collections
    global EMA
    EMA, seen, window = None, set(), collections.deque(maxlen=3)

    class Net(lib.nn.Module):
        SCALE = 1.0

        def __init__(self):
            super().__init__()
            self.inp, self.act, self.out = lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 1)

        def forward(self, x):
            seen.add(len(seen))
            window.append(len(seen))
            return self.out(self.act(self.inp(x))) * self.SCALE

    model = Net().double()
    with lib.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(lib.linspace(-0.5, 0.5, p.numel(), dtype=lib.float64).reshape(p.shape) * (k + 1))

    def step(x):
        global EMA
        loss = (model(x) ** 2).mean()
        EMA = loss.detach() if EMA is None else 0.9 * EMA + 0.1 * loss.detach()
        return loss
    f = lib.compile(model) if compiled else model
    g = lib.compile(step) if compiled else step
    x = lib.tensor(np.linspace(-1, 2, 6).reshape(2, 3))
    out = []
    for i in range(6):
        if i == 2:
            Net.SCALE = 3.0
        if i == 4:
            model.act = lib.nn.Tanh()
        out += [float(f(x).sum()), float(g(x))]
    return out, float(EMA), len(seen), list(window)


def test_rebound_names_sets_deques_class_constants_and_swapped_layers():
    """As torch: the global running average is the eager one (a traced tensor escaped, a
    RuntimeError), the set and deque fill at every call, and the compiled model follows its
    class constant and its swapped activation (both kept their traced values)."""
    got, want = _rebinding_program(fusegrad, True), _rebinding_program(torch, False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    assert got[2:] == want[2:]


def test_an_unused_random_draw_still_advances_the_generator():
    """A draw whose value reaches no output (noise computed and dropped) takes its numbers
    from the generator at every compiled call as eagerly, so later masks and draws after the
    call are eager's (dead-code elimination dropped its key, and the stream shifted)."""
    def run(compiled: bool):
        fusegrad.manual_seed(0)
        x = fusegrad.ones(64, 16)

        def f(x):
            fusegrad.rand(3)  # unused
            return fusegrad.nn.functional.dropout(x, 0.5).sum()
        g = fusegrad.compile(f) if compiled else f
        return [float(g(x)) for _ in range(5)] + [float(fusegrad.rand(()))]
    assert run(True) == run(False)


def test_unfreezing_parameters_warms_up_again_and_compiles():
    """Fine-tuning: a backbone frozen, then unfrozen between compiled Adam steps. Its new
    optimizer state is made by one eager warm-up call, and the step compiles again (it ran
    eagerly at every call after the unfreeze); losses as torch's."""
    def run(lib, compiled):
        a, b = _models(lib)
        a.requires_grad_(False)
        opt = lib.optim.Adam(list(a.parameters()) + list(b.parameters()), lr=0.05)
        x, y = lib.tensor(np.linspace(-1, 1, 12).reshape(4, 3)), lib.tensor(np.ones((4, 1)))

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = ((b(a(x).relu()) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        f = lib.compile(step) if compiled else step
        out = []
        for i in range(8):
            if i == 3:
                a.requires_grad_(True)
            out.append(float(f(x, y)))
        return out, (f.cache_info() if compiled else None)
    (got, info), (want, _) = run(fusegrad, True), run(torch, False)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert info["fallbacks"] == 0 and info["warmups"] == 2 and info["compiles"] == 2, info


def test_truncated_bptt_step_with_the_hidden_state_passed_back_compiles():
    """An LSTM language model's step takes the previous step's hidden state (which requires
    grad, not a leaf) and detaches it: its backward never reaches that argument, so the step
    compiles (it ran eagerly at every call); losses as torch's."""
    def run(lib, compiled):
        lib.manual_seed(0)
        emb, rnn, out = lib.nn.Embedding(40, 16), lib.nn.LSTM(16, 24, batch_first=True), lib.nn.Linear(24, 40)
        mods = (emb, rnn, out)
        g = np.random.default_rng(1)
        with lib.no_grad():
            for m in mods:
                for p in m.parameters():
                    p.copy_(lib.tensor(g.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
        opt = lib.optim.Adam([p for m in mods for p in m.parameters()], lr=5e-3)

        def step(x, y, h):
            h = tuple(t.detach() for t in h)
            opt.zero_grad(set_to_none=True)
            o, h = rnn(emb(x), h)
            loss = lib.nn.functional.cross_entropy(out(o).reshape(-1, 40), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss, h
        f = lib.compile(step) if compiled else step
        data = lib.tensor(np.random.RandomState(0).randint(0, 40, (4, 31)))
        h = (lib.zeros(1, 4, 24), lib.zeros(1, 4, 24))
        losses = []
        for i in range(5):
            loss, h = f(data[:, i * 6:i * 6 + 6], data[:, i * 6 + 1:i * 6 + 7], h)
            losses.append(loss.item())
        return losses, (f.cache_info() if compiled else None)
    (got, info), (want, _) = run(fusegrad, True), run(torch, False)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert info["compiles"] >= 1 and info["fallbacks"] == 0 and not info["graph_breaks"], info


W_SMALL = np.array([1.0, 1.0, 1.0])


def test_a_small_global_array_changed_in_place_is_seen():
    """torch.tensor(W) of a global NumPy array copies it when traced: a small array is
    guarded by its contents, so W[0] = 5 between calls traces again (it kept the copy)."""
    f = fusegrad.compile(lambda x: (x * fusegrad.tensor(W_SMALL)).sum())
    x = fusegrad.ones(3, dtype=fusegrad.float64)
    try:
        assert [f(x).item() for _ in range(2)] == [3.0, 3.0]
        W_SMALL[0] = 5.0
        assert f(x).item() == 7.0
    finally:
        W_SMALL[0] = 1.0


W_LARGE = np.arange(1000.0)


def test_numpy_arrays_copied_into_tensors_are_read_at_every_call():
    """torch.tensor(W) of a NumPy array the program changes in place between calls (a large
    global, an object's attribute, a slice of one) gives eager's values, with no retrace."""
    class State:
        table = np.ones((3, 100))

    st = State()
    f = fusegrad.compile(lambda x: x * fusegrad.tensor(W_LARGE)[:4].sum()
                         + fusegrad.tensor(st.table[:, :2], dtype=fusegrad.float32).sum())
    x = fusegrad.ones(4)
    try:
        got = [f(x)[0].item()]
        W_LARGE[1] = 100.0
        got.append(f(x)[0].item())
        st.table[2, 1] = 7.0
        got.append(f(x)[0].item())
        assert got == [12.0, 111.0, 117.0]
        assert f.cache_info()["compiles"] == 1
        out = fusegrad.compile(lambda x: fusegrad.tensor(W_LARGE) + x.sum())(x)
        out[0] = -1.0  # a copy, as eager's: the array keeps its values
        assert W_LARGE[0] == 0.0
    finally:
        W_LARGE[1] = 1.0


log = []  # a script's metrics list: its name is also fusegrad.log's
step = 0  # a script's step counter: its name is also optimizer.step's


def test_attribute_names_are_not_guarded_as_globals():
    """A compiled step calling ``fusegrad.log`` and ``opt.step()`` in a script whose own
    ``log`` list and ``step`` counter change between calls compiles once (every call
    recompiled, then the function ran eagerly for good)."""
    global step
    fusegrad.manual_seed(0)
    model = fusegrad.nn.Linear(4, 1)
    opt = fusegrad.optim.SGD(model.parameters(), lr=0.1)
    x, y = fusegrad.randn(8, 4), fusegrad.rand(8, 1)

    def train(x, y):
        opt.zero_grad()
        p = fusegrad.sigmoid(model(x)).clamp(1e-6, 1 - 1e-6)
        loss = -(y * fusegrad.log(p) + (1 - y) * fusegrad.log(1 - p)).mean()
        loss.backward()
        opt.step()
        return loss

    f = fusegrad.compile(train)
    try:
        for _ in range(6):
            log.append(f(x, y).item())
            step += 1
        info = f.cache_info()
        assert info["compiles"] == 1 and info["recompiles"] == 0 and info["fallbacks"] == 0, info
        assert log[-1] < log[0]
    finally:
        log.clear()
        step = 0


def test_grad_mode_and_default_dtype_set_for_the_code_after_the_call():
    """A function that sets grad mode or the default dtype and leaves it set (an evaluate()
    starting with set_grad_enabled(False)) does so at every compiled call, as eagerly: such
    a function runs its Python at each call (a replayed graph would skip the setter)."""
    m = fusegrad.nn.Linear(2, 2)

    def evaluate(x):
        fusegrad.set_grad_enabled(False)
        return m(x) * 2

    def widen(x):
        fusegrad.set_default_dtype(fusegrad.float64)
        return x * 2

    f, g = fusegrad.compile(evaluate, backend="eager"), fusegrad.compile(widen, backend="eager")
    try:
        for _ in range(3):
            fusegrad.set_grad_enabled(True)
            fusegrad.set_default_dtype(fusegrad.float32)
            assert not f(fusegrad.ones(1, 2)).requires_grad and not fusegrad.is_grad_enabled()
            g(fusegrad.ones(2))
            assert fusegrad.get_default_dtype() == fusegrad.float64
    finally:
        fusegrad.set_grad_enabled(True)
        fusegrad.set_default_dtype(fusegrad.float32)
    assert any("grad mode" in b for b in f.cache_info()["graph_breaks"])
    assert any("default dtype" in b for b in g.cache_info()["graph_breaks"])


def test_dicts_holding_functions_and_modules_are_guarded_by_their_items():
    """A config or registry dict that also holds a function, a module or an optimizer
    (closure, self attribute or global): a changed number, or an item swapped for another
    object between calls, retraces, as eager reads it."""
    cfg = {"scale": 2.0, "act": fusegrad.tanh}
    mods = {"head": fusegrad.nn.Identity()}

    class Trainer:
        def __init__(self):
            self.cfg = {"scale": 2.0, "act": fusegrad.tanh}

        def step(self, x):
            return (self.cfg["act"](x) * self.cfg["scale"]).sum()

    def f(x):
        return mods["head"](cfg["act"](x) * cfg["scale"]).sum()

    trainer = Trainer()
    cf, cm = fusegrad.compile(f, backend="eager"), fusegrad.compile(trainer.step, backend="eager")
    x = fusegrad.tensor(np.linspace(-1, 1, 4))
    changes = [lambda d: None, lambda d: d.__setitem__("scale", 3.0), lambda d: d.__setitem__("act", fusegrad.sigmoid)]
    for change in changes:
        change(cfg)
        change(trainer.cfg)
        assert cf(x).item() == pytest.approx(f(x).item()) and cm(x).item() == pytest.approx(trainer.step(x).item())
    mods["head"] = fusegrad.nn.ReLU()
    assert cf(x).item() == pytest.approx(f(x).item())


def test_a_fresh_lambda_argument_equal_to_the_last_reuses_its_graph():
    """A lambda made afresh at each call (same code, equal plain closure values and defaults)
    finds the graph traced for the first; another code, default or closure value is another
    signature; a global that a function argument names is guarded as the compiled
    function's own (the same function passed again saw the old value)."""
    f = fusegrad.compile(lambda x, act: act(x) + 1)
    x = fusegrad.arange(4.0)
    for k in (3.0, 3.0, 3.0, 4.0):
        assert f(x, lambda t: t * 2).tolist() == [1.0, 3.0, 5.0, 7.0]
        assert f(x, lambda t, s=k: t * s).tolist() == [1.0 + k * i for i in range(4)]
        assert f(x, (lambda c: lambda t: t - c)(k)).tolist() == [1.0 - k + i for i in range(4)]
    assert f.cache_info()["compiles"] == 5 and f.cache_info()["fallbacks"] == 0
    global _SHIFT
    g = fusegrad.compile(lambda x, act: act(x) + 1)
    shift = lambda t: t + _SHIFT  # noqa: E731
    for _SHIFT in (1.0, 2.0, 2.0):
        assert g(x, lambda t: t + _SHIFT).tolist() == [1.0 + _SHIFT + i for i in range(4)]
        assert g(x, shift).tolist() == [1.0 + _SHIFT + i for i in range(4)]
    assert g.cache_info()["compiles"] == 4 and g.cache_info()["fallbacks"] == 0


class _Scaled(fusegrad.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = fusegrad.nn.Linear(3, 3)

    def forward(self, x):
        return self.body(x) * _GAIN


def test_a_module_argument_is_guarded_as_a_compiled_module():
    """A module passed as an argument: a global its forward reads and a submodule swapped
    between calls are seen (the old graph was replayed, silently)."""
    global _GAIN
    f = fusegrad.compile(lambda m, x: m(x))
    m, x = _Scaled(), fusegrad.ones(2, 3)
    for _GAIN in (1.0, 3.0):
        np.testing.assert_allclose(f(m, x).detach().numpy(), (m.body(x) * _GAIN).detach().numpy(), rtol=1e-6)
    m.body = fusegrad.nn.Identity()
    assert f(m, x).tolist() == [[3.0] * 3] * 2


def test_hooks_of_layers_the_function_does_not_call_do_not_retrace_it():
    """A counting hook on a submodule the compiled forward never calls (the encoder, run
    eagerly between calls) leaves the compiled decoder's graph alone; a global that a hook
    of a called layer reads is still guarded."""
    global _HOOK_SCALE
    nn = fusegrad.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = nn.Linear(3, 3), nn.Linear(3, 3)

        def forward(self, x):
            return self.dec(x)

    m, calls = M(), {"n": 0}
    m.enc.register_forward_hook(lambda mod, i, o: calls.__setitem__("n", calls["n"] + 1))
    m.dec.register_forward_hook(lambda mod, i, o: o * _HOOK_SCALE)
    f, x = fusegrad.compile(m), fusegrad.ones(2, 3)
    for _HOOK_SCALE in (2.0, 2.0, 2.0, 3.0):
        np.testing.assert_allclose(f(x).detach().numpy(), (m.dec.forward(x) * _HOOK_SCALE).detach().numpy())
        m.enc(x)
    assert calls["n"] == 4 and f.cache_info()["compiles"] == 2 and f.cache_info()["fallbacks"] == 0


def _module_edits_program(lib, compiled):
    """A compiled Module called repeatedly (its fast path) while the program edits it between
    calls: a parameter rebound, eval() and back, a buffer rebound, a layer swapped, a hook
    added on a submodule, requires_grad_ turned off."""
    g = np.random.default_rng(3)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).double()
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(g.standard_normal(tuple(p.shape))))
    f = fusegrad.compile(model) if compiled else model
    x = lib.tensor(g.standard_normal((5, 3)))
    edits = [
        lambda: setattr(model[0], "weight", lib.nn.Parameter(lib.tensor(g.standard_normal((4, 3))))),
        lambda: model.eval(),
        lambda: setattr(model[1], "running_mean", lib.tensor(g.standard_normal(4))),
        lambda: model.train(),
        lambda: model.__setitem__(2, lib.nn.Tanh()),
        lambda: model[3].register_forward_hook(lambda m, i, o: o * 2),
        lambda: model.requires_grad_(False),
    ]
    out = []
    for edit in [None] + edits:
        if edit is not None:
            edit()
        for _ in range(2):
            y = f(x)
            out.append(y.detach().numpy().copy())
            out.append(y.requires_grad)
            if y.requires_grad:
                y.sum().backward()
                out.append(model[0].weight.grad.numpy().copy())
                model.zero_grad()
    return out


def test_a_compiled_module_follows_edits_between_calls():
    got, want = _module_edits_program(fusegrad, True), _module_edits_program(torch, False)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _anchor_cache_program(lib, compiled):
    """A detector whose submodule caches a grid per feature size in a dict (torchvision's
    AnchorGenerator, DETR's position embeddings), called compiled, then eagerly."""
    class Anchors(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self._cache = {}

        def forward(self, f):
            key = tuple(f.shape[-2:])
            if key not in self._cache:
                self._cache[key] = lib.arange(float(key[0] * key[1])) * 8 + 4
            return self._cache[key]

    class Det(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.anchors = Anchors()
            self.w = lib.nn.Parameter(lib.tensor(2.0))

        def forward(self, f):
            return self.anchors(f) * self.w
    m = Det()
    cm = fusegrad.compile(m) if compiled else m
    out = []
    for shape in ((2, 3), (2, 3), (3, 2), (2, 3)):
        out.append(cm(lib.ones(*shape)).tolist())
        out.append(m(lib.ones(*shape)).tolist())
    return out, sorted(m.anchors._cache)


def test_a_submodules_cache_filled_inside_a_compiled_call_holds_real_tensors():
    """The dict a submodule fills during a compiled call gets real tensors (it kept traced
    ones: the next use raised 'used after the trace ended'); values as torch's."""
    assert _anchor_cache_program(fusegrad, True) == _anchor_cache_program(torch, False)



def test_a_compiled_module_follows_its_forward_set_and_deleted_on_the_instance():
    """``m.forward = f`` then ``del m.forward`` (a hook added and removed by a library): the
    compiled module runs the class's forward again (it kept the deleted one)."""
    def program(lib, compile_):
        class M(lib.nn.Module):
            def forward(self, x):
                return x + 1
        m = M()
        c = compile_(m)
        x = lib.ones(2)
        out = [c(x).tolist()]
        m.forward = lambda x: x * 10
        out.append(c(x).tolist())
        del m.forward
        out += [c(x).tolist(), c(x).tolist()]
        return out
    assert program(fusegrad, fusegrad.compile) == program(torch, lambda m: m)


def test_a_compiled_module_follows_its_class_forward_patched_after_compiling():
    """``M.forward = g`` on the class after a compiled call (a library patching a model
    class): the compiled module runs the new forward, as torch.compile's guards make it."""
    def program(lib):
        class M(lib.nn.Module):
            def forward(self, x):
                return x + 1
        c = lib.compile(M())
        x = lib.ones(2)
        out = [c(x).tolist()]
        M.forward = lambda self, x: x * 10
        out += [c(x).tolist(), c(x).tolist()]
        return out
    assert program(fusegrad) == program(torch) == [[2.0, 2.0], [10.0, 10.0], [10.0, 10.0]]


def test_a_compiled_module_differentiates_a_parameter_beside_its_detach_and_data():
    """``w * w.detach()``, ``w * w.detach().max()``, ``w * w.data.sum()`` and a QAT scale
    from ``w.detach().abs().max()`` in a compiled module's forward: the detached alias shares
    the parameter's array but is a constant (gradients as torch's, not doubled or lost)."""
    def program(lib, compile_):
        out = []
        for fn in (lambda w: w * w.detach(), lambda w: w * w.detach().max(), lambda w: w * w.data.sum(),
                   lambda w: w.detach().sum() * w,
                   lambda w: lib.fake_quantize_per_tensor_affine(w, float(w.detach().abs().max()) / 127, 0,
                                                                 -128, 127)):
            class M(lib.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = lib.nn.Parameter(lib.tensor([0.5, -1.0, 2.0]))

                def forward(self, x):
                    return x * fn(self.w)
            m = M()
            c = compile_(m)
            for _ in range(2):
                y = c(lib.tensor([1.0, 2.0, 3.0]))
                y.sum().backward()
                out.append((y.tolist(), m.w.grad.tolist()))
        return out
    assert program(fusegrad, fusegrad.compile) == program(torch, lambda m: m)
