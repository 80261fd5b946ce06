"""compile(backend=callable): a backend people write is handed each graph as a GraphModule
(torch.fx's names) with example inputs, and what it returns runs in the graph's place;
torch._dynamo.testing.CompileCounter counts them. Values and gradients against PyTorch."""
import numpy as np
import pytest
import torch

import fusegrad as fg
from fusegrad._dynamo.testing import CompileCounter


def test_a_backend_is_handed_the_graph_and_its_example_inputs(capsys):
    seen = []

    def custom_backend(gm: fg.fx.GraphModule, example_inputs):
        assert isinstance(gm, fg.fx.GraphModule) and isinstance(gm, fg.nn.Module)
        seen.append(([tuple(t.shape) for t in example_inputs], [(n.op, getattr(n.target, "name", n.target))
                                                                  for n in gm.graph.nodes]))
        gm.graph.print_tabular()
        return gm.forward

    def foo(x, y):
        return torch_like(x, y)

    def torch_like(x, y, T=fg):
        return T.sin(x) + T.cos(y)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    opt = fg.compile(foo, backend=custom_backend)
    for _ in range(2):
        got = opt(fg.tensor(x), fg.tensor(x * 2))
    np.testing.assert_allclose(got.numpy(), torch_like(torch.tensor(x), torch.tensor(x * 2), torch).numpy(),
                               rtol=1e-6)
    assert seen == [([(3, 4), (3, 4)], [("placeholder", "arg0"), ("placeholder", "arg1"), ("call_function", "sin"),
                                        ("call_function", "cos"), ("call_function", "add"), ("output", "output")])]
    table = capsys.readouterr().out
    assert "opcode" in table and "call_function" in table and "sin" in table
    assert "sin(%0)" in gm_code(foo, x)


def gm_code(fn, x) -> str:
    codes = []
    fg.compile(fn, backend=lambda gm, ex: codes.append(gm.code) or gm)(fg.tensor(x), fg.tensor(x))
    return codes[0]


def test_compile_counter_counts_one_graph_per_signature_and_gradients_match_pytorch():
    w = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], np.float32)
    b = np.array([0.1, -0.2], np.float32)
    x = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]], np.float32)
    grads = {}
    for T in (fg, torch):
        lin = T.nn.Linear(3, 2)
        with T.no_grad():
            lin.weight.copy_(T.tensor(w))
            lin.bias.copy_(T.tensor(b))
        cnt = CompileCounter() if T is fg else None
        step = fg.compile(lambda x: lin(x).relu().pow(2).sum(), backend=cnt) if T is fg else \
            (lambda x: lin(x).relu().pow(2).sum())
        for _ in range(2):
            lin.zero_grad()
            step(T.tensor(x)).backward()
        grads[T] = (lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy())
        if T is fg:
            assert cnt.frame_count == 1 and cnt.op_count >= 3  # (the backward runs op by op, unseen)
    for a, e in zip(grads[fg], grads[torch]):
        np.testing.assert_allclose(a, e, rtol=1e-6)


def test_what_the_backend_returns_runs_and_failures_are_backend_compiler_failed():
    runs = []

    def wrapping(gm, example_inputs):
        def run(*args):
            runs.append(len(args))
            return gm(*args)
        return run
    f = fg.compile(lambda a, b: (a @ b).tanh(), backend=wrapping)
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    for _ in range(2):
        got = f(fg.tensor(a), fg.tensor(a.T.copy()))
    np.testing.assert_allclose(got.numpy(), np.tanh(a @ a.T), rtol=1e-6)
    assert runs == [2, 2]
    with pytest.raises(fg._dynamo.exc.BackendCompilerFailed, match="not a callable"):
        fg.compile(lambda a: a + 1, backend=lambda gm, ex: 3)(fg.ones(2))

    def broken(gm, ex):
        raise ValueError("no")
    with pytest.raises(RuntimeError, match="backend='broken' raised:\nValueError: no"):
        fg.compile(lambda a: a + 1, backend=broken)(fg.ones(2))


def test_value_dependent_branches_and_copies_keep_the_backend():
    cnt = CompileCounter()

    def f(x):
        y = x.sin() * 2
        if y.sum() > 0:
            return y.cos() + 1
        return y - 1
    g = fg.compile(f, backend=cnt)
    for s in (1.0, -1.0, 1.0):
        np.testing.assert_allclose(g(fg.full((3,), s)).numpy(), f(torch.full((3,), s)).numpy(), rtol=1e-6)
    assert cnt.frame_count >= 2
    import copy
    cnt2 = CompileCounter()
    m = copy.deepcopy(fg.compile(fg.nn.Linear(3, 2), backend=cnt2))
    m(fg.ones(1, 3))
    assert cnt2.frame_count == 1
