"""compile's dynamic shapes: after a second size a function is compiled once with the
backend's shape-symbolic kernels and every further size reuses them (traced again, no
kernel compiled); sizes 0 and 1 specialize; dynamic=True/False and mark_dynamic/mark_static;
results against PyTorch at sizes 0, 1, 2 and large, forward and a training step."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad
from helpers import mse_step

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _linear_pair(rng):
    w, b = rng.standard_normal((3, 5)), rng.standard_normal(3)
    fm, tm = fusegrad.nn.Linear(5, 3).double(), torch.nn.Linear(5, 3).double()
    for m, lib in ((fm, fusegrad), (tm, torch)):
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.copy_(lib.tensor(b))
    return fm, tm


def test_batch_sizes_share_one_symbolic_compile_and_match_torch():
    rng = np.random.default_rng(0)
    fm, tm = _linear_pair(rng)
    cf = fusegrad.compile(lambda x: fusegrad.tanh(fm(x)) * 2.0)
    sizes = [8, 9, 10, 17, 2, 64, 0, 1, 300, 9]
    for n in sizes:
        x = rng.standard_normal((n, 5))
        np.testing.assert_allclose(cf(fusegrad.tensor(x)).detach().numpy(),
                                   (torch.tanh(tm(torch.tensor(x))) * 2.0).detach().numpy(), rtol=1e-10, atol=1e-12)
    info = cf.cache_info()
    # 8 static; 9 recompiles symbolic; 0 and 1 specialize (a compile each); 10, 17, 2, 64 and
    # 300 reuse the symbolic kernels; 9 again hits its cached plan
    assert info["compiles"] == 4 and info["symbolic_sizes"] == 5 and info["fallbacks"] == 0, info


def test_training_step_over_batch_sizes_trains_like_torch():
    """A whole step (forward, backward, SGD) at changing batch sizes: the backward and the
    update run in the symbolic family too."""
    rng = np.random.default_rng(1)
    fm, tm = _linear_pair(rng)
    res = {}
    for lib, m in ((fusegrad, fm), (torch, tm)):
        step = mse_step(m, lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
        run = fusegrad.compile(step) if lib is fusegrad else step
        data = np.random.default_rng(2)
        res[lib.__name__] = [run(lib.tensor(data.standard_normal((n, 5))), lib.tensor(data.standard_normal((n, 3))))
                             .item() for n in (6, 7, 11, 6, 23, 2, 40)]
        if lib is fusegrad:
            info = run.cache_info()
    np.testing.assert_allclose(res["fusegrad"], res["torch"], rtol=1e-9)
    np.testing.assert_allclose(fm.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-9)
    assert info["compiles"] <= 2 and info["symbolic_sizes"] >= 4, info


def test_dynamic_true_false_and_marks():
    f = lambda x: (x * 3.0).sum(1)  # noqa: E731
    xs = [fusegrad.ones(n, 4) for n in (5, 6, 7)]
    static = fusegrad.compile(f, dynamic=False)
    eager = fusegrad.compile(f, dynamic=True)
    for x in xs:
        np.testing.assert_allclose(static(x).numpy(), np.full(x.shape[0], 12.0))
        np.testing.assert_allclose(eager(x).numpy(), np.full(x.shape[0], 12.0))
    assert static.cache_info()["compiles"] == 3 and static.cache_info()["symbolic_sizes"] == 0
    assert eager.cache_info()["compiles"] == 1 and eager.cache_info()["symbolic_sizes"] == 2
    marked = fusegrad.compile(f)
    a = fusegrad.ones(5, 4)
    fusegrad.compiler.mark_dynamic(a, 0)
    marked(a)
    marked(fusegrad.ones(6, 4))
    assert marked.cache_info()["compiles"] == 1 and marked.cache_info()["symbolic_sizes"] == 1
    pinned = fusegrad.compile(f)
    for n in (5, 6, 7):
        b = fusegrad.ones(n, 4)
        fusegrad.compiler.mark_static(b, 0)
        pinned(b)
    assert pinned.cache_info()["compiles"] == 3 and pinned.cache_info()["symbolic_sizes"] == 0
    with pytest.raises(IndexError):
        fusegrad.compiler.mark_dynamic(a, 2)
    with pytest.raises(TypeError):
        fusegrad.compile(f, dynamic="yes")


def test_a_gemm_epilogue_step_stays_right_at_new_sizes():
    """W2's update ``p -= lr * (x.T @ g)`` fuses into one GEMM with an accumulator, which
    the symbolic kernels cannot run yet: such a signature compiles statically per size and
    still matches PyTorch."""
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((4, 3))
    res = {}
    for lib in (fusegrad, torch):
        w = lib.tensor(w0.copy(), requires_grad=True)

        def step(x):
            loss = (x @ w).tanh().sum()
            loss.backward()
            with lib.no_grad():
                w.sub_(0.1 * w.grad)
                w.grad = None
            return loss
        run = fusegrad.compile(step) if lib is fusegrad else step
        data = np.random.default_rng(4)
        res[lib.__name__] = [run(lib.tensor(data.standard_normal((n, 4)))).item() for n in (5, 6, 7, 6)]
        res[lib.__name__ + "w"] = w.detach().numpy().copy()
    np.testing.assert_allclose(res["fusegrad"], res["torch"], rtol=1e-9)
    np.testing.assert_allclose(res["fusegradw"], res["torchw"], rtol=1e-9)


def test_causal_attention_at_new_lengths_compiles_no_kernel():
    """GPT-style attention reads its causal mask through a slice of a fixed buffer and
    splits/merges heads with views: once the symbolic family exists, a new sequence length
    compiles no kernel (the views' source sizes and slice starts are kernel arguments)."""
    from fusegrad.codegen import cpu_render
    rng = np.random.default_rng(3)
    w = rng.standard_normal((24, 8)) * 0.3
    mods = {}
    for lib in (fusegrad, torch):
        lin = lib.nn.Linear(8, 24, bias=False).double()
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(w))
        mask = lib.tril(lib.ones(16, 16)).view(1, 1, 16, 16)

        def attend(x, lib=lib, lin=lin, mask=mask):
            b, t, c = x.size()
            q, k, v = lin(x).split(8, dim=2)
            q, k, v = (z.view(b, t, 2, 4).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * 0.5
            att = att.masked_fill(mask[:, :, :t, :t] == 0, float("-inf")).softmax(dim=-1)
            return (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        mods[lib] = attend
    cf = fusegrad.compile(mods[fusegrad])
    # (lengths above the head size: min-cut's choice to save or recompute the [b, h, t, t]
    # mask weighs its bytes against [b, h, t] floats, a size-dependent choice)
    for n, t in enumerate((10, 11, 9, 12, 13, 15)):
        if n == 2:  # the symbolic family is compiled by now
            kernels = len(cpu_render._COMPILED)
        x = rng.standard_normal((3, t, 8))
        np.testing.assert_allclose(cf(fusegrad.tensor(x)).detach().numpy(), mods[torch](torch.tensor(x)).detach().numpy(),
                                   rtol=1e-10, atol=1e-12)
    assert len(cpu_render._COMPILED) == kernels, "a new length compiled kernels"
    assert cf.cache_info()["symbolic_sizes"] == 4


def test_mark_dynamic_takes_pytorchs_range_hints_and_mark_static_every_dim():
    fg = fusegrad
    f = fg.compile(lambda x: (x * 2).sum(0))
    a = fg.ones(5, 3)
    fg._dynamo.mark_dynamic(a, 0, min=2, max=64)
    np.testing.assert_allclose(f(a).numpy(), [10.0] * 3)
    for n in (6, 7):
        np.testing.assert_allclose(f(fg.ones(n, 3)).numpy(), [2.0 * n] * 3)
    assert f.cache_info()["compiles"] == 1
    g = fg.compile(lambda x: x + 1, dynamic=True)
    b = fg.ones(4, 2)
    fg._dynamo.mark_static(b)
    assert g(b).shape == (4, 2)


def test_a_size_new_at_every_call_runs_eagerly_after_the_limit(monkeypatch):
    """A decode step whose KV cache grows by cat at every call: each new length traced and
    planned anew, many times eager's cost per call; past NEW_SIZES_LIMIT new sizes in a row
    further new sizes run eagerly (with eager's values, noted), while a size seen before
    still runs its plan and starts the count again."""
    from fusegrad.runtime import compiled
    monkeypatch.setattr(compiled, "NEW_SIZES_LIMIT", 4)
    w = fusegrad.tensor(np.linspace(-0.5, 0.5, 64, dtype=np.float32).reshape(8, 8))

    def step(x, past):
        past = fusegrad.cat([past, (x @ w)[:, None]], dim=1)
        att = fusegrad.softmax(past @ x[:, :, None], dim=1)
        return (att * past).sum(1), past

    cf = fusegrad.compile(step, dynamic=True)
    x, past = fusegrad.ones(2, 8), fusegrad.zeros(2, 1, 8)
    xe, pe = x, past
    for _ in range(10):
        x, past = cf(x, past)
        xe, pe = step(xe, pe)
        np.testing.assert_allclose(x.numpy(), xe.numpy(), rtol=1e-6)
    info = cf.cache_info()
    assert info["fallbacks"] == 10 - 4 and any("4 new sizes in a row" in n for n in info["notes"]), info
    cf(fusegrad.ones(2, 8), fusegrad.zeros(2, 1, 8))  # (a size seen before: its plan, no fallback)
    assert cf.cache_info()["fallbacks"] == info["fallbacks"]
