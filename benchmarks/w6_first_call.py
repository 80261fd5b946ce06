"""W6: the first call of W1-W3 (compiled) in a fresh process, with an empty and with a warm
on-disk cache (``FUSEGRAD_CACHE_DIR``).

Measures compile latency as a user meets it: a new interpreter, the workload built and
called once. The empty-cache run fills a new temporary cache directory; the warm run is a
second fresh process on that same directory. Imports and input conversion are not counted
(they happen before the clock starts). In-process first calls of every system are in the W1-W3 rows.
A last row times Numba's own start-up in a fresh process, the floor under every such first call."""
from __future__ import annotations

import os
import sys
import tempfile

from . import systems as S
from .harness import Results, Timing
from .worker import run_worker

TITLE = "first call of W1-W3 compiled in a fresh process, empty and warm FUSEGRAD_CACHE_DIR"
#: (workload, task) whose compiled first call is measured.
CASES = (("W1", "grad"), ("W2", "step"), ("W3", "grad"))


def first_calls(size: str) -> list[dict]:
    rows = []
    for workload, task in CASES:
        with tempfile.TemporaryDirectory(prefix="fusegrad-cache-") as cache:
            env = {**os.environ, "FUSEGRAD_CACHE_DIR": cache}
            row: dict = {"workload": workload, "task": task, "system": S.FG_COMPILED}
            for state in ("empty", "warm"):
                result = run_worker(["first-call", workload, task, S.FG_COMPILED, size], env=env)
                row[f"{state}_ms"] = result.get("first_ms")
                notes = [result.get("error"), result.get("fallback") and f"fell back to eager: {result['fallback']}",
                         *(f"compiler: {n}" for n in result.get("compiler_notes") or [])]
                row[f"{state}_note"] = "; ".join(n for n in notes if n)
            print(f"  W6 {workload} {task}: {row}", file=sys.stderr)
            rows.append(row)
    return rows


def numba_startup() -> dict:
    """The floor row: a fresh process importing Numba and calling one function from Numba's
    cache (a first process fills that cache, in a temporary directory)."""
    row: dict = {"workload": "-", "task": "Numba start-up", "system": "one cached @njit function", "floor": True}
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for state in ("empty", "warm"):
            result = run_worker(["numba-startup", "-", "-", "-", "-"], env=env)
            row[f"{state}_ms"], row[f"{state}_note"] = result.get("first_ms"), result.get("error") or ""
    print(f"  W6 Numba start-up: {row}", file=sys.stderr)
    return row


def run(size: str, timing: Timing) -> Results:
    return Results(first_call=first_calls(size) + [numba_startup()])
