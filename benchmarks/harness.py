"""Timing and correctness checks shared by every workload.

Fair-measurement rules (../shared/BENCHMARKS.md): the first call (trace + compile) is timed
on its own; then every system is warmed up and timed in rounds, each system running alone
for a block of calls per round, in a shuffled order each round, so that drift on these shared
machines hits all of them alike (see ``_time_interleaved``); the figure is the median. Every result is checked against fusegrad eager, and fusegrad eager
against PyTorch eager."""
from __future__ import annotations

import gc
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from fusegrad.runtime.kernel_cache import modules_loaded

from .systems import FG_COMPILED, FG_EAGER, TORCH_EAGER, Prepared, Unavailable


@dataclass
class Entry:
    """One system's implementation of a task. ``build`` imports the system, converts the
    inputs and wraps the function for compiling (compilers trace on the first call, which
    is what "first call" times); ``comparable`` is False for floors whose
    result is not the workload's (the GEMMs of W2 alone)."""

    system: str
    build: Callable[[], Prepared]
    comparable: bool = True


@dataclass
class Task:
    """One timed quantity of a workload (W1 grad, W1 forward, ...), with its tolerances."""

    workload: str
    name: str
    entries: list[Entry]
    rtol: float
    atol: float


@dataclass
class Timing:
    """How hard to measure: warm-up calls, then rounds in which each system in turn runs
    alone for ``block_s`` and keeps the calls that start after ``settle_s`` (see
    ``_time_interleaved``); at least ``rounds`` rounds, more until every system has
    ``min_reps`` kept calls, at most ``max_rounds`` or, past ``rounds``, ``budget_s`` seconds."""

    warmup: int = 3
    min_reps: int = 20
    rounds: int = 5
    max_rounds: int = 40
    block_s: float = 0.25
    settle_s: float = 0.1
    budget_s: float = 90.0


@dataclass
class Row:
    """The measured figures of one system on one task (times in ms; None when skipped)."""

    workload: str
    task: str
    system: str
    median_ms: Optional[float] = None
    first_ms: Optional[float] = None
    kernels: Optional[int] = None  # distinct kernel modules fusegrad compiled in the first call
    reps: int = 0
    check: str = "n/a"
    max_abs_err: Optional[float] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    against: str = ""
    note: str = ""
    fallback: Optional[str] = None

    def as_dict(self) -> dict:
        return asdict(self)


def to_numpy(obj: Any) -> list[np.ndarray]:
    """The arrays in a (nested tuple/list of) fusegrad, torch, JAX or NumPy result, copied so
    later in-place updates (SGD steps) cannot change them."""
    if isinstance(obj, (tuple, list)):
        return [a for item in obj for a in to_numpy(item)]
    if hasattr(obj, "detach"):  # fusegrad and torch tensors
        obj = obj.detach().numpy()
    return [np.array(obj, copy=True)]


def compare(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float) -> tuple[bool, float]:
    """Whether ``got`` matches ``want`` within ``allclose(rtol, atol)``, and the max abs error."""
    if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
        return False, float("inf")
    err = max((float(np.max(np.abs(g.astype(np.float64) - w))) if g.size else 0.0 for g, w in zip(got, want)),
              default=0.0)
    ok = all(np.allclose(g, w, rtol=rtol, atol=atol) for g, w in zip(got, want))
    return ok, err


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _first_calls(task: Task, rows: dict[str, Row]) -> tuple[dict[str, Prepared], dict[str, list[np.ndarray]]]:
    """Build each system and call it once (that call timed: the first call), keeping its outputs."""
    live: dict[str, Prepared] = {}
    outputs: dict[str, list[np.ndarray]] = {}
    for entry in task.entries:
        row = rows[entry.system]
        try:
            prepared = entry.build()  # imports, input conversion: not part of the first call
            gc.collect()
            loaded = modules_loaded()
            start = time.perf_counter()
            result = prepared.call()
            row.first_ms = (time.perf_counter() - start) * 1e3
            if row.system.startswith(FG_COMPILED):
                row.kernels = modules_loaded() - loaded
        except Unavailable as exc:
            row.note = f"skipped: {exc}"
            continue
        except Exception as exc:  # a system failing here is a finding to report, not a crash
            row.note = f"failed: {_short(exc)}"
            continue
        live[entry.system] = prepared
        if entry.comparable:
            outputs[entry.system] = to_numpy(result)
        else:
            row.check = "n/a (not the workload's result)"
    return live, outputs


def _check(task: Task, rows: dict[str, Row], outputs: dict[str, list[np.ndarray]]) -> None:
    """Each system against fusegrad eager; fusegrad eager against PyTorch eager."""
    for system, got in outputs.items():
        against = TORCH_EAGER if system == FG_EAGER else FG_EAGER
        row = rows[system]
        if against not in outputs:
            row.check = f"n/a ({against} did not run)"
            continue
        ok, err = compare(got, outputs[against], task.rtol, task.atol)
        row.check, row.max_abs_err, row.against = ("ok" if ok else "FAIL"), err, against
        row.rtol, row.atol = task.rtol, task.atol


def _block(call: Callable[[], Any], timing: Timing) -> list[float]:
    """One system's turn in a round: call it for ``timing.block_s``; the times of the calls
    that started after ``timing.settle_s`` (at least one)."""
    kept: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        if t0 - start >= timing.settle_s:
            kept.append(t1 - t0)
        if kept and t1 - start >= timing.block_s:
            return kept


def _time_interleaved(live: dict[str, Prepared], timing: Timing) -> dict[str, list[float]]:
    """Warm up, then time the systems in rounds, each system's calls in one block per round,
    the systems in a new random order each round.

    Rounds spread the drift of these shared machines over all systems alike. Blocks keep one
    system's threads from timing another: after a call, BLAS and OpenMP worker threads spin
    for up to ~0.1 s (OpenBLAS's default timeout is 2**28 cycles), so a call right after a
    different system's ran at half speed on W2 (2.45 ms alone, 5.2 ms call by call with NumPy's
    GEMMs). A block's calls count only after that settling time, as in a user's loop."""
    names = list(live)
    if not names:
        return {}
    for n in names:
        for _ in range(max(timing.warmup, 1)):
            live[n].call()
    samples: dict[str, list[float]] = {n: [] for n in names}
    order = random.Random(0)
    start = time.perf_counter()
    for r in range(timing.max_rounds):
        if r >= timing.rounds and (all(len(s) >= timing.min_reps for s in samples.values())
                                   or time.perf_counter() - start > timing.budget_s):
            break
        for name in order.sample(names, len(names)):
            samples[name] += _block(live[name].call, timing)
    return samples


def _record_compiler_state(row: Row, prepared: Prepared) -> None:
    row.fallback = prepared.fallback_reason()
    notes = prepared.compiler_notes()
    late = prepared.late_compile_ms()
    if late is not None and row.first_ms is not None:
        # the first call ran eagerly (an optimizer's state warm-up): "first call" is until compiled code has run
        notes = [f"first call = eager warm-up {row.first_ms:.0f} ms + the call that compiled {late:.0f} ms"] + notes
        row.first_ms += late
        if row.kernels is not None:
            row.kernels += prepared.late_compile_kernels()
    if notes:
        row.note = "; ".join(([row.note] if row.note else []) + [f"compiler: {n}" for n in notes])


def run_task(task: Task, timing: Timing) -> list[Row]:
    """All figures of one task: first call, correctness, then the interleaved medians."""
    rows = {e.system: Row(task.workload, task.name, e.system) for e in task.entries}
    live, outputs = _first_calls(task, rows)
    _check(task, rows, outputs)
    for system, samples in _time_interleaved(live, timing).items():
        rows[system].median_ms = statistics.median(samples) * 1e3
        rows[system].reps = len(samples)
    for system, prepared in live.items():
        # asked after timing: a recompile past the limit falls back late
        _record_compiler_state(rows[system], prepared)
    return list(rows.values())


def check_task(task: Task, systems: Optional[set[str]] = None) -> list[Row]:
    """One call per system (no timing) and the correctness checks: the smoke test's path."""
    if systems is not None:
        task = Task(task.workload, task.name, [e for e in task.entries if e.system in systems], task.rtol, task.atol)
    rows = {e.system: Row(task.workload, task.name, e.system) for e in task.entries}
    live, outputs = _first_calls(task, rows)
    _check(task, rows, outputs)
    for system, prepared in live.items():
        _record_compiler_state(rows[system], prepared)
    return list(rows.values())


@dataclass
class Results:
    """What a workload measured: timed rows, W5's memory figures, W6's first calls."""

    rows: list[Row] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)
    first_call: list[dict] = field(default_factory=list)


def run_tasks(tasks: list[Task], timing: Timing) -> Results:
    """Each task in turn (tasks are not interleaved: systems within a task are)."""
    return Results(rows=[row for task in tasks for row in run_task(task, timing)])
