"""``python -m benchmarks ddp``: data-parallel scaling of W2's MLP step (784-512-512-10, ReLU,
softmax cross-entropy, SGD, float32, batch 128 per rank) on 1 and 2 MPI ranks, one thread each.

Each configuration is its own ``mpiexec`` job running this module with ``--worker``; the
worker times steps after warm-up and reports per rank: the median step time, the time the
backward waited for all-reduces after its last gradient (and when that wait began), the
time the same buckets take to all-reduce blocking, with nothing to overlap (the whole cost),
and the minor page faults per step (fresh memory from the kernel: a process whose allocator
returns big arrays to the kernel and faults them back in each step runs ~40% slower, which
says nothing about scaling). hidden share = 1 - exposed communication / whole, where the
exposed communication is the time from the later rank's last gradient to the end of the wait
(perf_counter is one clock for every process on a host), so that waiting for a slower rank
(skew, reported apart) does not count as communication. Throughput ratio =
(2 x batch / step_2) / (batch / step_1), from a 1-rank job and a 2-rank job run back to back
(a third mode, the host ceiling, runs 2 ranks that train alone: no all-reduce at all);
``--repeat N`` runs N such pairs per mode (other load on the machine distorts single pairs)
and reports each pair's ratio with the load average at its end, and their median.
The result goes into a section of RESULTS.md that full benchmark runs keep."""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BATCH, WIDTHS, BUCKET_MB, STEPS, WARMUP = 128, (784, 512, 512, 10), 1.0, 60, 10
START, END = "<!-- ddp benchmark -->", "<!-- /ddp benchmark -->"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}
# glibc's malloc serves big arrays by mmap and may give them back each step, to fault them in
# again (~1800 faults, ~4 ms of an 8 ms step) depending on the process's allocation history:
# the same step then costs 40% more in one job than in another. Both configurations keep
# their heap instead, so that the ratio compares compute and communication.
STEADY_HEAP = {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def _model(fg, seed: int = 0):
    nn = fg.nn
    fg.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(WIDTHS[:-1], WIDTHS[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(WIDTHS) - 2 else [])
    return nn.Sequential(*layers)


def worker(mode: str, steps: int, warmup: int) -> None:
    """One rank: time STEPS SGD steps of W2's MLP (under DDP when the world has 2+ ranks, except
    in mode "alone": each rank trains its own model, nothing communicated)."""
    import numpy as np

    import fusegrad as fg
    import fusegrad.distributed as dist
    from fusegrad.nn.parallel import DistributedDataParallel as DDP
    from mpi4py import MPI

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = _model(fg)
    net = fg.compile(model) if mode == "compiled" else model
    ddp = DDP(net, bucket_cap_mb=BUCKET_MB) if world > 1 and mode != "alone" else None
    run = ddp if ddp is not None else net
    opt = fg.optim.SGD(model.parameters(), lr=0.01)
    g = np.random.default_rng(rank)
    x = fg.tensor(g.standard_normal((BATCH, WIDTHS[0])).astype(np.float32))
    y = fg.tensor(g.integers(0, WIDTHS[-1], BATCH))
    loss_fn = fg.nn.CrossEntropyLoss()
    times, waits, spans, faults = [], [], [], []
    for i in range(warmup + steps):
        dist.barrier()
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        opt.zero_grad()
        loss_fn(run(x), y).backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
            waits.append(ddp.last_backward_wait_s if ddp is not None else 0.0)
            spans.append(ddp.reducer.wait_span if ddp is not None else (0.0, 0.0))
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    whole = []
    if ddp is not None:  # the same buckets all-reduced blocking: the communication's full cost
        flats = [b.flat for b in ddp.reducer.buckets]
        for _ in range(steps):
            dist.barrier()
            t0 = time.perf_counter()
            for f in flats:
                MPI.Request.Waitall([ddp.process_group.comm.Iallreduce(MPI.IN_PLACE, f)])
            whole.append(time.perf_counter() - t0)
    rec = {"rank": rank, "world": world, "mode": mode, "step_s": float(np.median(times)),
           "wait_s": float(np.median(waits)), "allreduce_s": float(np.median(whole)) if whole else 0.0,
           "faults": float(np.median(faults)), "spans": spans,
           "buckets": ddp.bucket_sizes if ddp is not None else []}
    recs = MPI.COMM_WORLD.gather(rec, root=0)
    if rank == 0:  # one writer: lines printed by several ranks at once can interleave
        comm = [max(e for _, e in s) - max(b for b, _ in s) for s in zip(*(r["spans"] for r in recs))]
        skew = [max(b for b, _ in s) - min(b for b, _ in s) for s in zip(*(r["spans"] for r in recs))]
        for r in recs:
            del r["spans"]
            r["comm_s"], r["skew_s"] = float(np.median(comm)), float(np.median(skew))
            print("DDPBENCH " + json.dumps(r), flush=True)
    dist.destroy_process_group()


def _launch(n: int, mode: str, steps: int, warmup: int) -> list:
    here = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(here) if here.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit("mpiexec not found: pip install 'fusegrad[dist]'")
    env = dict(os.environ, **ONE_THREAD, **STEADY_HEAP)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    p = subprocess.run([mpiexec, "-launcher", "fork", "-n", str(n), sys.executable, "-m", "benchmarks.ddp",
                        "--worker", mode, str(steps), str(warmup)], capture_output=True, text=True, timeout=600, env=env, cwd=HERE.parent)
    recs = [json.loads(m) for m in re.findall(r"^DDPBENCH (.*)$", p.stdout, re.M)]
    if p.returncode != 0 or len(recs) != n:
        raise SystemExit(f"mpiexec -n {n} failed:\n{(p.stdout + p.stderr)[-4000:]}")
    return recs


def _pair(mode: str, steps: int, warmup: int) -> dict:
    """A 1-rank job, then a 2-rank job: one throughput ratio, and the load when it ended."""
    one = _launch(1, mode, steps, warmup)[0]
    two = _launch(2, mode, steps, warmup)
    step2 = max(r["step_s"] for r in two)
    wait = max(r["wait_s"] for r in two)
    whole = max(r["allreduce_s"] for r in two)
    comm = two[0]["comm_s"]
    return {"mode": mode, "step1_ms": one["step_s"] * 1e3, "step2_ms": step2 * 1e3,
            "wait_ms": wait * 1e3, "allreduce_ms": whole * 1e3, "comm_ms": comm * 1e3,
            "skew_ms": two[0]["skew_s"] * 1e3, "hidden": max(0.0, 1 - comm / whole) if whole else 0.0,
            "ratio": 2 * one["step_s"] / step2, "buckets": two[0]["buckets"],
            "faults": [one["faults"], max(r["faults"] for r in two)], "load": round(os.getloadavg()[0], 2)}


def main(argv: list) -> int:
    """``--quick``: a few steps, printed only (RESULTS.md untouched); ``--repeat N``: N
    back-to-back pairs of jobs per mode (default 3; the row is the pair of median ratio)."""
    quick = "--quick" in argv
    repeat = int(argv[argv.index("--repeat") + 1]) if "--repeat" in argv else (1 if quick else 3)
    steps, warmup = (4, 2) if quick else (STEPS, WARMUP)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    rows = []
    for mode in ("eager", "compiled", "alone"):
        pairs = sorted((_pair(mode, steps, warmup) for _ in range(repeat)), key=lambda r: r["ratio"])
        row = dict(pairs[len(pairs) // 2])
        row["pairs"] = [(round(r["ratio"], 2), r["load"]) for r in pairs]
        rows.append(row)
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cores": os.cpu_count(),
            "load": [round(load0, 2), round(os.getloadavg()[0], 2)], "seconds": round(time.perf_counter() - t0)}
    section = _section(rows, meta, steps, warmup)
    print(section)
    if quick:
        return 0
    path = HERE / "RESULTS.md"
    text = path.read_text() if path.exists() else ""
    path.write_text(strip_section(text).rstrip("\n") + "\n\n" + section)
    print("wrote the DDP section of benchmarks/RESULTS.md", file=sys.stderr)
    return 0


def strip_section(text: str) -> str:
    i, j = text.find(START), text.find(END)
    return text if i < 0 or j < 0 else text[:i] + text[j + len(END):]


def section_of(text: str) -> str:
    """The DDP section of an existing RESULTS.md ('' when none): full runs carry it over."""
    i, j = text.find(START), text.find(END)
    return "" if i < 0 or j < 0 else text[i:j + len(END)] + "\n"


def _section(rows: list, meta: dict, steps: int, warmup: int) -> str:
    lines = [START, "## DDP: W2's MLP step on 1 vs 2 MPI ranks (`python -m benchmarks ddp`)", "",
             f"Batch {BATCH} per rank, float32, SGD, one thread per rank (OMP/OpenBLAS/Numba), glibc malloc "
             "keeping its heap (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ 1 GiB: no page faults per step), "
             f"bucket_cap_mb={BUCKET_MB}; median of {steps} steps after {warmup} warm-up steps; 1 rank runs the "
             "plain model (no DDP), 2 ranks run DistributedDataParallel (ranks on one host, shared memory); "
             f"{len(rows[0]['pairs'])} back-to-back pairs of a 1-rank and a 2-rank job per mode, the row showing "
             "the pair of median ratio. "
             "Wait: the backward's wait for all-reduces after its last gradient (the slower rank's, which "
             "includes waiting for the other); skew: how much later the later rank's last gradient came; "
             "exposed communication: from the later rank's last gradient to the end of the wait (one clock "
             "for both processes on one host); whole all-reduce: the same buckets all-reduced with nothing "
             "to overlap; hidden = 1 - exposed communication / whole (medians over steps). "
             "Compiled: the model compiled whole, its backward run in stages, one per bucket. "
             "Host ceiling: 2 ranks each train the eager model alone (no DDP, no all-reduce, only the "
             "per-step barrier): the ratio the host's cores allow this compute without any communication.", "",
             f"- date: {meta['date']}; {meta['cores']} cores; 1-minute load average at start / end: "
             f"{meta['load'][0]} / {meta['load'][1]}; run time {meta['seconds']} s"
             + (f" (load above the {meta['cores']} cores: other processes took CPU time from the ranks, so "
                "these times and ratios do not measure scaling)" if max(meta["load"]) > meta["cores"] else ""),
             "",
             "| mode | step 1 rank ms | step 2 ranks ms | wait ms | skew ms | exposed comm. ms | "
             "whole all-reduce ms | hidden | samples/s ratio (target >= 1.8x) | every pair's ratio @ load | "
             "page faults/step 1 / 2 ranks | buckets (elements) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        pairs = ", ".join(f"{x:.2f}x @ {load}" for x, load in r["pairs"])
        label = "host ceiling (eager, no DDP)" if r["mode"] == "alone" else r["mode"]
        lines.append(f"| {label} | {r['step1_ms']:.2f} | {r['step2_ms']:.2f} | {r['wait_ms']:.3f} | "
                     f"{r['skew_ms']:.3f} | {r['comm_ms']:.3f} | {r['allreduce_ms']:.3f} | {100 * r['hidden']:.0f}% | {r['ratio']:.2f}x "
                     f"({'met' if r['ratio'] >= 1.8 else 'not met'}) | {pairs} | "
                     f"{r['faults'][0]:.0f} / {r['faults'][1]:.0f} | {r['buckets']} |")
    return "\n".join(lines) + "\n" + END + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main(sys.argv[1:]))
