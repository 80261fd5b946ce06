"""Leaks (issue 6, item 5): long loops leave memory flat, graphs and saved tensors are
freed, caches are bounded.

Memory is measured three ways after a warm-up: tracemalloc (to which NumPy reports its
array buffers) over two windows of TRACED steps, where what was allocated in a window and is
still alive after ``gc.collect()`` must stay under a small slack (17 bytes a step would
exceed it) in at least one of them: a leak repeats every step and shows in both, while a
one-off resize of an interpreter table (the interned-string dict grows by megabytes at
once) lands in one; the count of gc-tracked objects (tensors, autograd nodes) over all
steps; and RSS with a generous slack, because Numba's runtime allocates the arrays a cpu
kernel returns outside tracemalloc's view. RSS is read after ``malloc_trim`` so that
what glibc keeps of freed blocks (fusegrad raises its trim threshold, see
``codegen/cpu_malloc.py``) is not counted as growth. ``FUSEGRAD_LEAK_STEPS`` changes the
step count (default 4,000).

The cache bounds checked here are the documented ones (``fusegrad.compile`` docstring):
at most ``RECOMPILE_LIMIT`` (8) signatures per compiled function, and one in-memory kernel
module per distinct kernel source (shared by every compiled function and never evicted)."""
import ctypes
import gc
import os
import tracemalloc
import weakref

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn, optim
from helpers import mse_step

pytestmark = pytest.mark.usefixtures("frozen_heap")

STEPS = int(os.environ.get("FUSEGRAD_LEAK_STEPS", "4000"))
WARMUP = 200
TRACED = 1000
SLACK = 16 * 1024  # bytes still alive from TRACED steps: 17 bytes a step would exceed it
RSS_SLACK = 16 * 1024 * 1024


def _rss() -> int:
    try:
        ctypes.CDLL(None).malloc_trim(0)  # glibc only: hand freed heap pages back first
    except (OSError, AttributeError):
        pass
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _flat(step, steps=STEPS):
    """Run ``step(i)`` ``steps`` times: a warm-up, then untraced steps, then two windows of
    TRACED steps under tracemalloc (it slows Python allocation ~4x). Returns (the smaller of
    the two windows' bytes allocated in it and still alive, growth of the gc-tracked object
    count and of RSS over everything after the warm-up)."""
    for i in range(WARMUP):
        step(i)
    gc.collect()
    rss0, objs0 = _rss(), len(gc.get_objects())
    for i in range(WARMUP, steps - 2 * TRACED):
        step(i)
    alive = []
    for start in (steps - 2 * TRACED, steps - TRACED):
        tracemalloc.start()
        try:
            for i in range(start, start + TRACED):
                step(i)
            gc.collect()
            alive.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
    gc.collect()
    return min(alive), len(gc.get_objects()) - objs0, _rss() - rss0


def _check(alive, objs, rss):
    assert alive < SLACK, f"{alive} bytes allocated during the traced steps are still alive"
    assert objs < 200, f"{objs} more gc-tracked objects than after the warm-up"
    assert rss < RSS_SLACK, f"RSS grew by {rss / 2**20:.1f} MiB"


def test_eager_backward_is_flat():
    rng = np.random.default_rng(0)
    w = fg.tensor(rng.standard_normal((8, 8)), requires_grad=True)
    b = fg.tensor(rng.standard_normal(8), requires_grad=True)
    xs = [fg.tensor(rng.standard_normal((4, 8))) for _ in range(4)]
    last = []

    def step(i):
        x = xs[i % 4]
        h = fg.tanh(x @ w + b)
        loss = (h * h).sum() + h[1:, :3].mean()  # a view, a reduction, saved tensors
        loss.backward()
        w.grad = None
        b.grad = None
        if i == STEPS - 1:
            last.append(weakref.ref(loss.grad_fn))

    _check(*_flat(step))
    gc.collect()
    assert last[0]() is None, "the last step's graph is still alive"


def _training(backend):
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    opt = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    return model, fg.compile(mse_step(model, opt), backend=backend)


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_compiled_training_is_flat(backend):
    model, cstep = _training(backend)
    rng = np.random.default_rng(1)
    data = [(fg.tensor(rng.standard_normal((16, 4))), fg.tensor(rng.standard_normal((16, 1))))
            for _ in range(4)]
    losses = []

    def step(i):
        loss = cstep(*data[i % 4])
        if i % 1000 == 0:
            losses.append(loss.item())

    _check(*_flat(step))
    info = cstep.cache_info()
    assert info["compiles"] == 1 and info["entries"] == 1 and info["fallbacks"] == 0, info
    assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
    for p in model.parameters():
        assert p.grad is not None and p.grad._grad_fn is None


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_compiled_outputs_free_residuals(backend):
    """A compiled differentiable call saves residuals on its backward node; dropping the
    output (without backward) or running backward releases them."""
    f = fg.compile(lambda x: (fg.tanh(x) * x).sum(), backend=backend)
    x = fg.tensor(np.linspace(-1, 1, 64), requires_grad=True)

    def step(i):
        out = f(x)
        if i % 2:
            out.backward()
            x.grad = None

    _check(*_flat(step, 2 * TRACED + WARMUP))


def test_signature_cache_is_bounded():
    RECOMPILE_LIMIT = fg._dynamo.config.recompile_limit
    f = fg.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)  # each size its own signature
    for n in range(1, 3 * RECOMPILE_LIMIT):
        assert f(fg.ones(n)).item() == 2 * n
    info = f.cache_info()
    assert info["entries"] == RECOMPILE_LIMIT and info["compiles"] == RECOMPILE_LIMIT
    assert info["fallbacks"] == 3 * RECOMPILE_LIMIT - 1 - RECOMPILE_LIMIT
    assert len(info["notes"]) == 1  # the limit note is recorded once, not per call


def test_kernel_modules_are_shared_not_per_function():
    """The in-memory kernel table grows with distinct kernel sources, not with compiled
    functions or calls; compiled functions themselves are freed."""
    from fusegrad.runtime import kernel_cache
    x = fg.tensor(np.linspace(0, 1, 10))
    fg.compile(lambda x: (fg.exp(x) - x).sum(), backend="cpu")(x)  # warm
    n0 = len(kernel_cache._MODULES)
    refs = []
    for _ in range(20):
        f = fg.compile(lambda x: (fg.exp(x) - x).sum(), backend="cpu")
        assert abs(f(x).item() - (np.exp(x.numpy()) - x.numpy()).sum()) < 1e-9
        refs.append(weakref.ref(f))
        del f
    gc.collect()
    assert len(kernel_cache._MODULES) == n0
    assert all(r() is None for r in refs), "compiled functions are kept alive"


def test_loading_kernel_modules_leaves_the_shared_helpers_unwrapped():
    """Each kernel module's own dispatchers get the corrupt-cache guard; the helpers every
    module imports (cpu_link.operand) did too, once more per module, until loading through
    the nested wrappers raised RecursionError in long runs (and recompiled those kernels)."""
    import functools
    from fusegrad.codegen import cpu_link
    x = fg.tensor(np.linspace(0, 1, 10))
    for k in range(6):  # (distinct kernels: a module each)
        fg.compile(lambda x, k=k: (fg.exp(x) * (k + 2)).sum(), backend="cpu")(x)
    load = cpu_link.operand._cache.load_overload
    assert not (isinstance(load, functools.partial) and load.func.__name__ == "_load_or_flush")


def test_the_harness_sees_a_leak():
    """A step that keeps a list holding a 1-element array alive each time is caught."""
    kept = []
    alive, objs, _ = _flat(lambda i: kept.append([np.zeros(1)]), 2 * TRACED + WARMUP)
    assert alive >= SLACK and objs >= 200
