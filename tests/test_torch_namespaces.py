"""The thin namespaces programs written for PyTorch reach for: ``testing`` (assert_close's
tolerances and messages, compared with PyTorch's own), ``random`` (fork_rng) and ``jit``
(code written for TorchScript runs as Python)."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")


def _cases(T):
    nan, inf = float("nan"), float("inf")
    return [
        (T.tensor([1., 2., 3.]), T.tensor([1., 2.5, 3.]), {}),
        (T.tensor([1., 2.]), T.tensor([1., 2., 3.]), {}),
        (T.tensor([1., 2.]), T.tensor([1., 2.], dtype=T.float64), {}),
        (T.tensor([1., 2.]), T.tensor([1., 2.], dtype=T.float64), {"check_dtype": False}),
        (1.0, 1.5, {}),
        (T.tensor([[1, 2], [3, 4]]), T.tensor([[1, 2], [3, 5]]), {}),
        ([T.tensor(1.), T.tensor(2.)], [T.tensor(1.), T.tensor(3.)], {}),
        ({"a": T.tensor(1.)}, {"a": T.tensor(2.)}, {}),
        ({"a": T.tensor(1.)}, {"b": T.tensor(1.)}, {}),
        (T.tensor([nan]), T.tensor([nan]), {}),
        (T.tensor([nan, 1.]), T.tensor([nan, 1.]), {"equal_nan": True}),
        ([1, 2], [1, 2, 3], {}),
        (T.tensor([1., 2.], requires_grad=True), T.tensor([1., 2.]), {}),
        (T.tensor([inf, 1.]), T.tensor([inf, 1.]), {}),
        (T.tensor([inf, 1.]), T.tensor([-inf, 1.]), {}),
        (T.tensor([1., 2.], dtype=T.float16), T.tensor([1., 2.001], dtype=T.float16), {}),
        (T.tensor([1., 2.], dtype=T.float16), T.tensor([1., 2.01], dtype=T.float16), {}),
        (np.array([1., 2.]), np.array([1., 2.1]), {}),
        ((T.tensor(1), 2), (T.tensor(1), 3), {}),
        (T.tensor([True, False]), T.tensor([True, True]), {}),
        (T.tensor(1.), T.tensor(1.1), {"rtol": 0.2, "atol": 0.0}),
        (T.tensor([1.]), T.tensor([1.1]), {"msg": "custom"}),
        (T.tensor([1.]), T.tensor([1.1]), {"msg": lambda m: "seen: " + m.splitlines()[0]}),
        (T.tensor([1.]), T.tensor([1.1]), {"rtol": 0.2}),
        (T.tensor(1.), 1.0, {}),
    ]


def _outcome(T, name: str, a, e, kw) -> str:
    try:
        T.testing.assert_close(a, e, **kw)
        return "ok"
    except (AssertionError, ValueError) as exc:
        return f"{type(exc).__name__}: {str(exc).replace(name + '.', 'T.')}"
    except TypeError as exc:
        return "TypeError"


@pytest.mark.parametrize("i", range(25))
def test_assert_close_passes_and_fails_as_pytorch_with_its_message(i):
    fg_case, t_case = _cases(fg)[i], _cases(torch)[i]
    assert _outcome(fg, "fusegrad", *fg_case) == _outcome(torch, "torch", *t_case)


def test_make_tensor_respects_range_dtype_and_layout():
    t = fg.testing.make_tensor((200,), dtype=fg.float32, device="cpu", low=-1, high=1)
    assert t.dtype is fg.float32 and t.shape == (200,) and bool((t >= -1).all()) and bool((t < 1).all())
    assert float(t.std()) > 0.3  # spread over the range, not a constant
    t = fg.testing.make_tensor(4, 5, dtype=fg.int64, device="cpu", noncontiguous=True, exclude_zero=True)
    assert t.shape == (4, 5) and not t.is_contiguous() and bool((t != 0).all())
    assert bool((t >= -9).all()) and bool((t < 10).all())
    assert fg.testing.make_tensor(3, dtype=fg.bool, device="cpu").dtype is fg.bool
    assert fg.testing.make_tensor((2,), dtype=fg.float64, device="cpu", requires_grad=True).requires_grad


def test_fork_rng_restores_the_default_generator():
    fg.manual_seed(3)
    with fg.random.fork_rng():
        fg.rand(5)
        fg.manual_seed(99)
        fg.randn(2)
    after = fg.rand(3)
    fg.manual_seed(3)
    np.testing.assert_array_equal(after.numpy(), fg.rand(3).numpy())
    with fg.random.fork_rng(enabled=False):
        fg.rand(1)
    assert fg.random.initial_seed() == 3 and fg.random.get_rng_state is fg.get_rng_state


def test_torchscript_code_runs_as_python():
    @fg.jit.script
    def gelu_ish(x):
        return x * fg.sigmoid(1.702 * x)

    class Net(fg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = fg.nn.Linear(3, 2)

        @fg.jit.ignore
        def helper(self, x):
            return x

        def forward(self, x):
            if fg.jit.is_scripting() or fg.jit.is_tracing():
                raise AssertionError("fusegrad never scripts")
            return self.helper(self.lin(x)).relu()

    net = Net()
    x = fg.randn(4, 3)
    assert fg.jit.script(net) is net and fg.jit.trace(net, (x,)) is net
    np.testing.assert_allclose(gelu_ish(x).numpy(), (x * fg.sigmoid(1.702 * x)).numpy())
    fut = fg.jit.fork(net, x)
    np.testing.assert_array_equal(fg.jit.wait(fut).detach().numpy(), net(x).detach().numpy())
    assert fg.jit.annotate(list, []) == [] and not isinstance(net, fg.jit.ScriptModule)
    with pytest.raises(RuntimeError, match="importable"):  # (a class local to this test cannot be pickled)
        fg.jit.save(net, io.BytesIO())
    seq = fg.jit.trace(fg.nn.Sequential(fg.nn.Linear(3, 2), fg.nn.Tanh()), (x,))
    buf = io.BytesIO()
    fg.jit.save(seq, buf)
    buf.seek(0)
    back = fg.jit.load(buf)
    np.testing.assert_array_equal(back(x).detach().numpy(), seq(x).detach().numpy())


def test_compiler_disable_reset_and_is_compiling():
    """``torch.compiler.disable`` (and ``torch._dynamo``'s): the function runs eagerly once per
    call, a named graph break in compiled code; ``reset`` makes the next call compile again;
    ``is_compiling`` is True only inside compile's trace."""
    import fusegrad._dynamo as dynamo
    calls, seen = [], []

    @fg.compiler.disable
    def log_it(x):
        calls.append(float(x.sum()))
        return x

    def f(x):
        y = x.sin() * 2
        log_it(y)
        seen.append(fg.compiler.is_compiling())
        return (y + 1).cos()
    c = fg.compile(f)
    x = fg.tensor([0.5, -1.0, 2.0])
    for _ in range(3):
        np.testing.assert_allclose(c(x).numpy(), np.cos(np.sin(x.numpy()) * 2 + 1), rtol=1e-6)
    assert len(calls) == 3 and calls[0] == calls[-1]
    assert any("log_it is compiler.disable'd" in b for b in c.cache_info()["graph_breaks"])
    assert True in seen and not fg.compiler.is_compiling()
    g = fg.compile(lambda t: t * 3)
    g(x)
    g(x)
    assert g.cache_info()["misses"] == 1 and g.cache_info()["hits"] == 1
    dynamo.reset()
    g(x)
    assert g.cache_info()["misses"] == 1 and g.cache_info()["hits"] == 0 and g.cache_info()["entries"] == 1


def test_foreach_ops_match_torch():
    """torch._foreach_*: list ops for hand-written optimizers and EMAs, out of place (tuples)
    and in place, with scalars, lists of scalars and tensor lists."""
    def run(lib):
        ps = [lib.tensor([1.0, 2.0]), lib.tensor([3.0, -4.0, 5.0])]
        gs = [lib.tensor([0.5, 0.25]), lib.tensor([1.0, 2.0, -3.0])]
        lib._foreach_mul_(ps, 0.9)
        lib._foreach_add_(ps, gs, alpha=-0.1)
        lib._foreach_div_(ps, [2.0, 4.0])
        ema = [lib.zeros(2), lib.zeros(3)]
        lib._foreach_lerp_(ema, ps, 0.25)
        lib._foreach_addcmul_(ema, gs, gs, value=0.5)
        outs = list(lib._foreach_sqrt(lib._foreach_abs(ps))) + list(lib._foreach_norm(gs))
        outs += list(lib._foreach_sub(ps, 1.0)) + list(lib._foreach_maximum(ps, gs))
        outs += list(lib._foreach_clamp_min(ps, 0.1)) + list(lib._foreach_clamp_max(ps, [0.2, 0.3]))
        outs += list(lib._foreach_addcdiv(ema, gs, ps, value=2.0)) + list(lib._foreach_addcmul(ema, gs, ps))
        outs += list(lib._foreach_max(ps)) + list(lib._foreach_clone(gs))
        for name in ("rsqrt", "log1p", "expm1", "erf", "round", "frac", "atan", "lgamma"):
            outs += list(getattr(lib, f"_foreach_{name}")(lib._foreach_abs(ps)))
        grown = lib._foreach_clone(ps)
        lib._foreach_clamp_min_(grown, 0.5)
        lib._foreach_log2_(grown)
        outs += grown
        lib._foreach_zero_(gs)
        return [t.numpy().copy() for t in ps + ema + outs + gs], type(lib._foreach_exp(ps)).__name__
    ours, theirs = run(fg), run(torch)
    assert ours[1] == theirs[1]
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_torch_ops_and_selective_checkpointing_as_torchs():
    """``torch.ops.aten.<op>.<overload>``: named, hashable and callable as PyTorch's;
    selective checkpointing (context_fn=create_selective_checkpoint_contexts(policy)) gives
    plain checkpointing's values and gradients; a packet in the op list is refused."""
    torch = pytest.importorskip("torch")
    import functools

    def program(T):
        from importlib import import_module
        ck = import_module(T.__name__ + ".utils.checkpoint")
        ops = T.ops.aten
        out = [str(ops.mm.default), ops.mm.default.name(), ops.add.Tensor.name(), ops.mm.default == ops.mm.default,
               len({ops.mm.default, ops.mm.default, ops.addmm.default}),
               ops.mm.default(T.ones(2, 2), T.ones(2, 2)).tolist(), ops.add.Tensor(T.ones(2), T.ones(2)).tolist()]
        rng = np.random.default_rng(43)
        lin1, lin2 = T.nn.Linear(4, 8), T.nn.Linear(8, 4)
        with T.no_grad():
            for p in list(lin1.parameters()) + list(lin2.parameters()):
                p.copy_(T.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        save = [ops.mm.default, ops.addmm.default]

        def policy(ctx, op, *args, **kwargs):
            return ck.CheckpointPolicy.MUST_SAVE if op in save else ck.CheckpointPolicy.PREFER_RECOMPUTE
        for pol in (policy, save):
            x = T.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
            y = ck.checkpoint(lambda v: v + lin2(T.nn.functional.gelu(lin1(v))), x, use_reentrant=False,
                              context_fn=functools.partial(ck.create_selective_checkpoint_contexts, pol))
            y.pow(2).sum().backward()
            out += [np.round(y.detach().numpy(), 5).tolist(), np.round(x.grad.numpy(), 5).tolist()]
        try:
            ck.create_selective_checkpoint_contexts([ops.mm])
        except ValueError as e:
            out.append(str(e)[:60])
        return out
    assert program(fg) == program(torch)


def test_aten_ops_reach_functional_and_methods_and_jit_freeze():
    x = fg.ones(2, 3)
    assert tuple(fg.ops.aten.view.default(x, [3, 2]).shape) == (3, 2)
    assert tuple(fg.ops.aten.expand.default(fg.ones(1, 3), [4, 3]).shape) == (4, 3)
    np.testing.assert_allclose(fg.ops.aten.gelu.default(x).numpy(), fg.nn.functional.gelu(x).numpy())
    assert fg.ops.aten.mm.default.overloadpacket.__name__ == fg.ops.aten.mm.__name__ == "mm"
    net = fg.nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="eval mode"):
        fg.jit.freeze(net)
    assert fg.jit.freeze(net.eval()) is net


def test_automatic_dynamic_shapes_off_keeps_sizes_static():
    f = fg.compile(lambda t: t.sin() * 2)
    with fg._dynamo.config.patch(automatic_dynamic_shapes=False):
        for n in (2, 3, 4):
            f(fg.ones(n, 4))
    assert f.cache_info()["symbolic_sizes"] == 0 and f.cache_info()["compiles"] == 3
