"""The benchmark command: run the workloads, print the table, write the outputs.

Full runs of all workloads regenerate ``benchmarks/RESULTS.md``, ``benchmarks/results.json``
(committed) and ``benchmarks/ratios.png``; partial or ``--quick`` runs write only
``benchmarks/out/`` (git-ignored), so they never overwrite the committed figures."""
from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time


def _cold_caches() -> None:
    """Point fusegrad's and Inductor's on-disk caches at a fresh temporary directory, before
    either is imported, so that the timed first calls compile from scratch."""
    root = tempfile.mkdtemp(prefix="fusegrad-bench-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["FUSEGRAD_CACHE_DIR"] = os.path.join(root, "fusegrad")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")


def main(argv: list[str]) -> int:
    _cold_caches()
    from . import report, systems
    from .harness import Results, Timing
    from .registry import WORKLOADS

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("workloads", nargs="*", metavar="W", help=f"any of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few repetitions (a smoke run)")
    args = parser.parse_args(argv)
    chosen = [w.upper() for w in args.workloads] or list(WORKLOADS)
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")

    size = "quick" if args.quick else "full"
    timing = Timing(warmup=1, min_reps=5, rounds=2, max_rounds=5, block_s=0.02, settle_s=0.005, budget_s=2.0) if args.quick else Timing()
    results, notes = Results(), []
    for name in chosen:
        start = time.perf_counter()
        print(f"{name}: {WORKLOADS[name].TITLE} ...", file=sys.stderr, flush=True)
        part = WORKLOADS[name].run(size, timing)
        results.rows += part.rows
        results.memory += part.memory
        results.first_call += part.first_call
        print(f"{name}: done in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)

    for loader in (systems.torch, systems.jax):
        try:
            loader()
        except systems.Unavailable as exc:
            notes.append(f"skipped: {exc}")
    if args.quick:
        notes.append("--quick: tiny sizes and few repetitions; not comparable with the full figures.")

    look = report.Lookup(results)
    meta = report.machine()
    meta.update(size=size, workloads=chosen, seconds=round(time.perf_counter() - START, 1),
                load_avg=[round(LOAD_AT_START, 2), round(os.getloadavg()[0], 2)])
    targets = report.evaluate_targets(look)
    out = os.path.join(report.HERE, "out")
    os.makedirs(out, exist_ok=True)
    chart_note = report.chart(look, os.path.join(out, "ratios.png"))
    if chart_note:
        notes.append(chart_note)

    print(report.timing_table(look))
    if results.memory:
        print("\nW5 memory\n" + report.memory_table(look))
    if results.first_call:
        print("\nW6 first call in a fresh process\n" + report.first_call_table(look))
    print("\nTargets\n" + report.targets_table(targets))
    for note in notes:
        print(f"note: {note}")

    payload = report.to_json(results, meta, targets)
    with open(os.path.join(out, "results.json"), "w") as f:
        f.write(payload)
    if not args.quick and chosen == list(WORKLOADS):
        with open(os.path.join(report.HERE, "results.json"), "w") as f:
            f.write(payload)
        from .ddp import section_of
        path = os.path.join(report.HERE, "RESULTS.md")
        ddp_section = ""  # written by `python -m benchmarks ddp`: kept
        if os.path.exists(path):
            with open(path) as f:
                ddp_section = section_of(f.read())
        with open(path, "w") as f:
            f.write(report.results_md(look, meta, targets, notes) + ("\n" + ddp_section if ddp_section else ""))
        if not chart_note:
            shutil.copy(os.path.join(out, "ratios.png"), os.path.join(report.HERE, "ratios.png"))
        print("wrote benchmarks/RESULTS.md, benchmarks/results.json, benchmarks/ratios.png", file=sys.stderr)
    print(f"wrote {out}/results.json and ratios.png ({meta['seconds']:.0f} s)", file=sys.stderr)
    return 0


START = time.perf_counter()
LOAD_AT_START = os.getloadavg()[0]
