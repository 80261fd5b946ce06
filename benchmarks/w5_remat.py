"""W5: 32 layers ``h = tanh(h*w[i] + b[i])`` on h of 2^20, grad w.r.t. w, b (each 32 scalars).

Stresses the peak memory of saved activations and rematerialization. The function is
W3's chain with vectors of scalars for W, b. fusegrad and torch run it the way training
code does: the forward (compiled, for the compiled systems) with w, b requiring grad, then
``autograd.grad`` through the saved activations, which is where ``remat`` decides what to
keep. fusegrad compiled runs with ``remat="none"`` and ``remat="auto"``.

Memory is measured in a fresh subprocess per system (see :func:`measure_memory`)."""
from __future__ import annotations

import functools
import gc
import resource
import sys
import tracemalloc
from typing import Any, Callable, Optional

import numpy as np

import fusegrad

from . import systems as S
from .common import rng
from .harness import Entry, Results, Task, Timing, run_tasks
from .w3_chain import fn

TITLE = "32-layer tanh chain on h of 2^20, grad w.r.t. 32 scalar w, b; peak memory"
SIZES = {"full": (32, 2 ** 20), "quick": (4, 2 ** 10)}
REMATS = ("none", "auto")
MIB = 2 ** 20


def compiled_name(remat: str) -> str:
    return f"{S.FG_COMPILED} remat={remat}"


def inputs(size: str) -> list[np.ndarray]:
    layers, n = SIZES[size]
    g = rng(6)
    w = (1.0 + 0.1 * g.standard_normal(layers)).astype(np.float32)
    b = (0.1 * g.standard_normal(layers)).astype(np.float32)
    h = g.standard_normal(n).astype(np.float32)
    return [w, b, h]


def _autograd(T: Any, wrap: Callable[[Callable], Callable], size: str) -> S.Prepared:
    """fusegrad or torch: leaves w, b that require grad, ``wrap``'d forward, autograd.grad."""
    w_np, b_np, h_np = inputs(size)
    w, b = T.tensor(w_np, requires_grad=True), T.tensor(b_np, requires_grad=True)
    h = T.tensor(h_np)
    forward = wrap(functools.partial(fn, T))
    prepared = S.Prepared(lambda: T.autograd.grad(forward(w, b, h), (w, b)))
    if isinstance(forward, S.FusegradCompiled):
        prepared.fallback_reason, prepared.compiler_notes = forward.fallback_reason, forward.compiler_notes
    return prepared


def _jax(size: str) -> S.Prepared:
    jax = S.jax()
    args = [jax.numpy.asarray(a) for a in inputs(size)]
    grad = S.jax_jit(jax.grad(functools.partial(fn, jax.numpy), argnums=(0, 1)))
    return S.Prepared(lambda: grad(*args))


def entries(size: str) -> list[Entry]:
    def fusegrad_compiled(remat: str) -> Entry:
        return Entry(compiled_name(remat),
                     lambda: _autograd(fusegrad, lambda f: S.FusegradCompiled(f, remat=remat), size))

    return [Entry(S.FG_EAGER, lambda: _autograd(fusegrad, lambda f: f, size)),
            *(fusegrad_compiled(r) for r in REMATS),
            Entry(S.TORCH_EAGER, lambda: _autograd(S.torch(), lambda f: f, size)),
            Entry(S.TORCH_COMPILE, lambda: _autograd(S.torch(), S.torch_compile, size)),
            Entry(S.JAX_JIT, lambda: _jax(size))]


def tasks(size: str) -> list[Task]:
    # the gradients are sums over 2^20 lanes: summation order differs between systems
    return [Task("W5", "grad", entries(size), rtol=1e-3, atol=1e-3)]


def _status_kib(field: str) -> Optional[int]:
    """A ``VmRSS``/``VmHWM`` figure of this process in KiB (Linux), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's RSS high-water mark (Linux ``clear_refs`` 5), so the next
    ``VmHWM`` covers only what follows."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_growth_mib(call: Callable[[], Any]) -> float:
    """How far the resident set peaked above its level before ``call``, in MiB.

    Linux: the high-water mark is reset, then ``VmHWM`` after minus ``VmRSS`` before. Elsewhere
    the ``ru_maxrss`` delta, which only counts growth past the process's earlier peak. (Not
    ru_maxrss on Linux either: a child spawned by a large process inherits the parent's peak
    as its ru_maxrss across exec, so every delta would read 0 in these fresh workers.)"""
    gc.collect()
    rss = _status_kib("VmRSS")
    if rss is not None and _reset_peak_rss():
        call()
        return (_status_kib("VmHWM") - rss) / 1024
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    call()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def measure_memory(entry: Entry) -> dict:
    """Peak memory of one system's W5 gradient, in this (fresh) process.

    - ``rss_first_mib``: peak RSS growth of the first call (includes compiling);
    - ``rss_warm_mib``: peak RSS growth of a later call: its activations and temporaries;
    - ``tracemalloc_mib``: tracemalloc peak of a later call, for the NumPy/Numba-backed
      systems (fusegrad), whose buffers tracemalloc sees; torch and JAX allocate outside it."""
    prepared = entry.build()
    out: dict = {"rss_first_mib": peak_rss_growth_mib(prepared.call),
                 "rss_warm_mib": peak_rss_growth_mib(prepared.call), "tracemalloc_mib": None}
    if entry.system.startswith("fusegrad"):
        gc.collect()
        tracemalloc.start()
        prepared.call()
        out["tracemalloc_mib"] = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
    out["fallback"] = prepared.fallback_reason()
    out["compiler_notes"] = prepared.compiler_notes()
    return out


def memory(size: str) -> list[dict]:
    """:func:`measure_memory` of every system, each in a fresh subprocess."""
    from .worker import run_worker
    rows = []
    for entry in entries(size):
        result = run_worker(["memory", "W5", "grad", entry.system, size])
        rows.append({"workload": "W5", "system": entry.system, **result})
        print(f"  W5 memory {entry.system}: {result}", file=sys.stderr)
    return rows


def run(size: str, timing: Timing) -> Results:
    results = run_tasks(tasks(size), timing)
    results.memory = memory(size)
    return results
