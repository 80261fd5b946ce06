"""The benchmark suite runs: each workload once at its tiny (--quick) size through the same
code paths as ``python -m benchmarks``, fusegrad eager and compiled checked against each
other and against the NumPy floor, and PyTorch eager where installed. No timing asserts.
torch.compile and JAX are left to the benchmark command: their compiles take seconds to
minutes, and CI installs neither."""
from __future__ import annotations

import importlib.util
import os
import time

import numpy as np
import pytest

from benchmarks import systems as S
from benchmarks.harness import check_task
from benchmarks.registry import WORKLOADS
from benchmarks.w1_elementwise import numpy_grad
from benchmarks.w5_remat import REMATS, compiled_name
from benchmarks.worker import run_worker

COMPILED = {S.FG_COMPILED, *(compiled_name(r) for r in REMATS)}
FUSEGRAD_SYSTEMS = {S.FG_EAGER, *COMPILED}
FLOORS = {"NumPy by hand", "NumPy GEMMs only (8)"}
OPTIONAL = {S.TORCH_EAGER} if importlib.util.find_spec("torch") else set()


@pytest.mark.parametrize("workload", ["W1", "W2", "W3", "W4", "W5", "W7", "W9", "W10", "W11"])
def test_workload_runs_and_matches_eager(workload):
    for task in WORKLOADS[workload].tasks("quick"):
        rows = check_task(task, FUSEGRAD_SYSTEMS | FLOORS | OPTIONAL)
        assert any(row.system in COMPILED for row in rows), f"{workload} {task.name} has no fusegrad compiled entry"
        for row in rows:
            label = f"{workload} {task.name} {row.system}"
            assert not row.note.startswith("failed"), f"{label}: {row.note}"
            if row.system in COMPILED:
                assert row.fallback is None, f"{label} fell back to eager: {row.fallback}"
            if row.system == S.FG_EAGER and S.TORCH_EAGER not in OPTIONAL:
                continue  # its check is against PyTorch eager
            assert row.check.startswith(("ok", "n/a (not the workload's")), \
                f"{label}: {row.check}, max abs err {row.max_abs_err} vs {row.against}"


def test_w1_numpy_gradient_matches_float64_finite_differences():
    x = np.linspace(-3, 3, 7)
    eps = 1e-6
    fd = np.array([(np.sum(numpy_grad(x + eps * e)[1]) - np.sum(numpy_grad(x - eps * e)[1])) / (2 * eps)
                   for e in np.eye(len(x))])
    np.testing.assert_allclose(numpy_grad(x)[0], fd, rtol=1e-6, atol=1e-8)


def test_w5_memory_worker_reports_peaks():
    result = run_worker(["memory", "W5", "grad", S.FG_EAGER, "quick"])
    assert "error" not in result, result["error"]
    assert result["tracemalloc_mib"] > 0


def test_w6_first_call_worker_with_empty_and_warm_cache(tmp_path):
    env = {**os.environ, "FUSEGRAD_CACHE_DIR": str(tmp_path)}
    kernels = tmp_path / "kernels"
    for cache in ("empty", "warm"):
        result = run_worker(["first-call", "W3", "grad", S.FG_COMPILED, "quick"], env=env)
        assert "error" not in result, result["error"]
        assert result["first_ms"] > 0
        assert not result.get("fallback"), result
        if cache == "empty":  # the first call wrote its kernels for the warm run to load
            assert kernels.is_dir() and any(kernels.iterdir()), tmp_path


def test_w6_numba_startup_worker(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # the first run fills Numba's cache, the second loads from it
        result = run_worker(["numba-startup", "-", "-", "-", "-"], env=env)
        assert "error" not in result, result["error"]
        assert result["first_ms"] > 0
    assert any(p.suffix == ".nbi" for p in tmp_path.rglob("*")), list(tmp_path.rglob("*"))


def test_timing_blocks_drop_the_settling_calls():
    """Each system's block keeps only calls that start after the settling time, and rounds go
    on until every system has its minimum number of kept calls."""
    from benchmarks.harness import Timing, _time_interleaved

    calls = {"a": 0, "b": 0}

    def system(name):
        def call():
            calls[name] += 1
            time.sleep(0.002)
        return S.Prepared(call)

    timing = Timing(warmup=1, min_reps=12, rounds=2, max_rounds=50, block_s=0.02, settle_s=0.01)
    samples = _time_interleaved({name: system(name) for name in calls}, timing)
    for name, n in calls.items():
        assert len(samples[name]) >= timing.min_reps
        # warm-up and the settling calls of every block are run but not kept
        assert n > len(samples[name]) + timing.warmup
        assert all(t >= 0.002 for t in samples[name])


def test_first_call_includes_a_compile_deferred_by_the_optimizer_warm_up():
    """W7/W8's steps run eagerly on their first call (the optimizer has no state yet) and
    compile on the second: the row's first call counts both."""
    import fusegrad
    from benchmarks.harness import Row, _record_compiler_state
    w = fusegrad.nn.Parameter(fusegrad.ones(3))
    opt = fusegrad.optim.SGD([w], lr=0.1, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
        return loss

    prepared = S.fusegrad_compiled(lambda f: f, step)
    prepared.call()
    assert prepared.late_compile_ms() is None  # nothing compiled yet
    prepared.call()
    late = prepared.late_compile_ms()
    assert late is not None and late > 0
    row = Row("W", "step", S.FG_COMPILED, first_ms=1.0)
    _record_compiler_state(row, prepared)
    assert row.first_ms == 1.0 + late and "the call that compiled" in row.note


def test_ntk_at_full_size_compiled_first_call_matches_eager():
    """W11 at its benchmark size: the compiled NTK's first call (which compiles) equals
    eager's, as its second does (a GEMM operand freed before BLAS read it showed only here)."""
    [task] = WORKLOADS["W11"].tasks("full")
    entries = {e.system: e for e in task.entries}
    want = entries[S.FG_EAGER].build().call().numpy()
    compiled = entries[S.FG_COMPILED].build()
    for _ in range(2):
        np.testing.assert_allclose(compiled.call().numpy(), want, rtol=task.rtol, atol=task.atol)
