"""Measurements that need a fresh process: W5's peak memory and W6's first calls.

``python -m benchmarks.worker {memory,first-call} WORKLOAD TASK SYSTEM SIZE`` builds one
system's entry of one task and prints its figures as one JSON line (``numba-startup - - - -``
times Numba's own start-up instead); :func:`run_worker`
spawns it and reads that line back."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Optional

from .harness import Entry

#: Marks the worker's result line on stdout (compilers may print too).
PREFIX = "BENCHMARK-RESULT "


def find_entry(workload: str, task: str, system: str, size: str) -> Entry:
    from .registry import WORKLOADS
    for t in WORKLOADS[workload].tasks(size):
        if t.name == task:
            for entry in t.entries:
                if entry.system == system:
                    return entry
    raise KeyError(f"no {system!r} entry for {workload} {task}")


def first_call(entry: Entry) -> dict:
    """Time of the entry's first call in this fresh process (imports and building excluded)."""
    prepared = entry.build()
    start = time.perf_counter()
    prepared.call()
    return {"first_ms": (time.perf_counter() - start) * 1e3, "fallback": prepared.fallback_reason(),
            "compiler_notes": prepared.compiler_notes()}


def numba_startup() -> dict:
    """Time to import Numba and call one function cached on disk (see numba_startup)."""
    start = time.perf_counter()
    from .numba_startup import one
    one(1.0)
    return {"first_ms": (time.perf_counter() - start) * 1e3}


def run_worker(args: list[str], env: Optional[dict] = None, timeout_s: float = 240) -> dict:
    """Run the worker with ``args`` in a fresh interpreter; its figures, or ``{"error": ...}``.
    The timeout keeps one runaway compile from eating the command's 15-minute budget."""
    cmd = [sys.executable, "-m", "benchmarks.worker", *args]
    cwd = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    tail = " ".join(proc.stderr.strip().splitlines()[-3:])
    return {"error": f"exit {proc.returncode}: {tail[-400:]}"}


def main(argv: list[str]) -> None:
    mode, workload, task, system, size = argv
    try:
        if mode == "numba-startup":
            result = numba_startup()
        elif mode == "memory":
            entry = find_entry(workload, task, system, size)
            from .w5_remat import measure_memory
            result = measure_memory(entry)
        else:
            result = first_call(find_entry(workload, task, system, size))
    except Exception as exc:  # reported as the row's note by the parent
        result = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
    print(PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
