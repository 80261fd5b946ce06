"""Ratios, the issues' targets, and the outputs: table, JSON, PNG chart, RESULTS.md."""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from dataclasses import dataclass
from typing import Callable, Optional

from . import systems as S
from .harness import Results, Row
from .w5_remat import compiled_name

HERE = os.path.dirname(os.path.abspath(__file__))


def fmt_ms(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3g}"


def fmt_ratio(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}x" if v >= 0.1 else f"{v:.3f}x"


class Lookup:
    """Medians and rows by (workload, task, system)."""

    def __init__(self, results: Results):
        self.results = results
        self.rows = {(r.workload, r.task, r.system): r for r in results.rows}

    def median(self, workload: str, task: str, system: str) -> Optional[float]:
        row = self.rows.get((workload, task, system))
        return row.median_ms if row else None

    def ratio(self, row: Row, anchor: str) -> Optional[float]:
        base = self.median(row.workload, row.task, anchor)
        return row.median_ms / base if row.median_ms and base else None

    def memory(self, system: str) -> dict:
        return next((m for m in self.results.memory if m["system"] == system), {})


def row_note(row: Row) -> str:
    parts = [row.note] if row.note else []
    if row.fallback:
        parts.append(f"fell back to eager: {row.fallback}")
    return "; ".join(parts)


def check_text(row: Row) -> str:
    if row.max_abs_err is None:
        return row.check
    return f"{row.check} (max abs err {row.max_abs_err:.2g} vs {row.against}; rtol {row.rtol:g}, atol {row.atol:g})"


def timing_table(look: Lookup) -> str:
    head = ("| W | task | system | median ms | first call ms | kernels | " + " | ".join(f"x {a}" for a in S.ANCHORS)
            + " | check | note |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in look.results.rows:
        ratios = " | ".join(fmt_ratio(look.ratio(r, a)) for a in S.ANCHORS)
        kernels = "-" if r.kernels is None else str(r.kernels)
        lines.append(f"| {r.workload} | {r.task} | {r.system} | {fmt_ms(r.median_ms)} | {fmt_ms(r.first_ms)} | "
                     f"{kernels} | {ratios} | {check_text(r)} | {row_note(r)} |")
    return "\n".join(lines)


def memory_table(look: Lookup) -> str:
    def mib(v: Optional[float]) -> str:
        return "-" if v is None else f"{v:+.1f}"

    lines = ["| system | median ms | tracemalloc peak MiB | peak RSS MiB, warm call | peak RSS MiB, first call | note |",
             "| --- | --- | --- | --- | --- | --- |"]
    for m in look.results.memory:
        notes = [m.get("error"), m.get("fallback") and f"fell back to eager: {m['fallback']}",
                 *(f"compiler: {n}" for n in m.get("compiler_notes") or [])]
        note = "; ".join(n for n in notes if n)
        lines.append(f"| {m['system']} | {fmt_ms(look.median('W5', 'grad', m['system']))} | "
                     f"{mib(m.get('tracemalloc_mib')).lstrip('+')} | {mib(m.get('rss_warm_mib'))} | "
                     f"{mib(m.get('rss_first_mib'))} | {note} |")
    return "\n".join(lines)


def first_call_table(look: Lookup) -> str:
    lines = ["| W | task | system | empty cache ms | warm cache ms | note |", "| --- | --- | --- | --- | --- | --- |"]
    for f in look.results.first_call:
        note = "; ".join(dict.fromkeys(n for n in (f.get("empty_note"), f.get("warm_note")) if n))
        lines.append(f"| {f['workload']} | {f['task']} | {f['system']} | {fmt_ms(f.get('empty_ms'))} | "
                     f"{fmt_ms(f.get('warm_ms'))} | {note} |")
    return "\n".join(lines)


@dataclass
class Target:
    """A target quoted by an issue; ``evaluate`` returns (status, detail), status one of
    "met", "not met", "not measured"."""

    issue: int
    text: str
    evaluate: Callable[[Lookup], tuple[str, str]]


def _ratio_target(workload: str, task: str, system: str, anchor: str, limit: float) -> Callable:
    def evaluate(look: Lookup) -> tuple[str, str]:
        row = look.rows.get((workload, task, system))
        if row is None:
            return "not measured", f"{workload} was not run"
        if row.median_ms is None:
            return "not measured", f"{system} did not run: {row.note}"
        ratio = look.ratio(row, anchor)
        if ratio is None:
            return "not measured", f"{anchor} did not run"
        detail = f"{fmt_ratio(ratio)} ({fmt_ms(row.median_ms)} ms vs {fmt_ms(look.median(workload, task, anchor))} ms)"
        if row.fallback:  # an eager figure cannot meet a compiled target
            return "not met", f"{detail}; fell back to eager: {row.fallback}"
        if row.check == "FAIL":
            return "not met", f"{detail}; result check FAILED"
        return ("met" if ratio <= limit else "not met"), detail
    return evaluate


def _w5_target(look: Lookup) -> tuple[str, str]:
    eager, auto = look.memory(S.FG_EAGER).get("tracemalloc_mib"), look.memory(compiled_name("auto"))
    t_auto, t_none = look.median("W5", "grad", compiled_name("auto")), look.median("W5", "grad", compiled_name("none"))
    if not look.results.memory:
        return "not measured", "W5 was not run"
    if not eager or auto.get("tracemalloc_mib") is None or not t_auto or not t_none:
        return "not measured", f"a W5 fusegrad figure is missing ({auto.get('error') or 'see the W5 rows'})"
    mem, time_ratio = auto["tracemalloc_mib"] / eager, t_auto / t_none
    detail = (f"memory {mem:.2f}x eager's ({auto['tracemalloc_mib']:.0f} vs {eager:.0f} MiB), "
              f"time {time_ratio:.2f}x remat=none's")
    if auto.get("fallback"):
        return "not met", f"{detail}; fell back to eager: {auto['fallback']}"
    return ("met" if mem <= 0.25 and time_ratio <= 1.3 else "not met"), detail


def _faster_target(workload: str, task: str, system: str, anchors: tuple, limit: float) -> Callable:
    """``system`` against the faster of ``anchors`` (issue 16: the faster of PyTorch eager and
    torch.compile)."""
    def evaluate(look: Lookup) -> tuple[str, str]:
        ran = [(look.median(workload, task, a), a) for a in anchors]
        ran = [(ms, a) for ms, a in ran if ms is not None]
        if not ran:
            return "not measured", f"none of {', '.join(anchors)} ran"
        return _ratio_target(workload, task, system, min(ran)[1], limit)(look)
    return evaluate


def _w6_target(look: Lookup) -> tuple[str, str]:
    warm = [(f["workload"], f.get("warm_ms"), f.get("warm_note")) for f in look.results.first_call
            if not f.get("floor")]
    if not warm:
        return "not measured", "W6 was not run"
    missing = [f"{w}: {note}" for w, ms, note in warm if ms is None]
    if missing:
        return "not measured", "no warm-cache first call for " + "; ".join(missing)
    detail = ", ".join(f"{w} {fmt_ms(ms)} ms" for w, ms, _ in warm)
    floor = [f.get("warm_ms") for f in look.results.first_call if f.get("floor") and f.get("warm_ms")]
    if floor:
        detail += f"; Numba's own start-up alone, in a fresh process: {fmt_ms(floor[0])} ms"
    fell = [note for _, _, note in warm if note]
    if fell:
        return "not met", f"{detail}; {fell[0]}"
    return ("met" if all(ms < 300 for _, ms, _ in warm) else "not met"), detail


TARGETS = [
    Target(3, "W1 compiled forward <= 0.3x torch.compile", _ratio_target("W1", "forward", S.FG_COMPILED, S.TORCH_COMPILE, 0.3)),
    Target(3, "W3 compiled forward <= 0.3x torch.compile", _ratio_target("W3", "forward", S.FG_COMPILED, S.TORCH_COMPILE, 0.3)),
    Target(3, "W6 warm-cache first call in a new process < 0.3 s (W1-W3)", _w6_target),
    Target(4, "W1 compiled grad <= 0.3x torch.compile", _ratio_target("W1", "grad", S.FG_COMPILED, S.TORCH_COMPILE, 0.3)),
    Target(4, "W2 compiled step <= 0.9x JAX jit", _ratio_target("W2", "step", S.FG_COMPILED, S.JAX_JIT, 0.9)),
    Target(4, "W3 compiled grad <= 0.2x torch.compile", _ratio_target("W3", "grad", S.FG_COMPILED, S.TORCH_COMPILE, 0.2)),
    Target(4, "W4 compiled jacrev <= 1.0x JAX jit", _ratio_target("W4", "jacrev", S.FG_COMPILED, S.JAX_JIT, 1.0)),
    Target(4, "W4 compiled hessian <= 1.0x JAX jit", _ratio_target("W4", "hessian", S.FG_COMPILED, S.JAX_JIT, 1.0)),
    Target(4, 'W5 remat="auto": peak activation memory (tracemalloc) <= 0.25x eager\'s at <= 1.3x the time of '
              'remat="none"', _w5_target),
    Target(16, "W7 compiled step <= 0.8x the faster of PyTorch eager and torch.compile",
           _faster_target("W7", "step", S.FG_COMPILED, (S.TORCH_EAGER, S.TORCH_COMPILE), 0.8)),
    Target(16, "W8 compiled step <= 0.7x the faster of PyTorch eager and torch.compile",
           _faster_target("W8", "step", S.FG_COMPILED, (S.TORCH_EAGER, S.TORCH_COMPILE), 0.7)),
    Target(19, "W9 20 batch sizes: compiled total <= 0.5x torch.compile (steady state; compiles in the first call)",
           _ratio_target("W9", "steps", S.FG_COMPILED, S.TORCH_COMPILE, 0.5)),
    Target(19, "W11 NTK: fusegrad.func <= 1.0x torch.func", _ratio_target("W11", "ntk", S.FG_EAGER, S.TORCH_EAGER, 1.0)),
    Target(19, "W11 NTK compiled <= 0.5x torch.func", _ratio_target("W11", "ntk", S.FG_COMPILED, S.TORCH_EAGER, 0.5)),
    Target(19, "W4 compiled jacrev <= 0.5x JAX jit", _ratio_target("W4", "jacrev", S.FG_COMPILED, S.JAX_JIT, 0.5)),
    Target(19, "W4 compiled hessian <= 0.5x JAX jit", _ratio_target("W4", "hessian", S.FG_COMPILED, S.JAX_JIT, 0.5)),
    Target(19, "W10 compiled step (a graph break in its middle) <= 1.0x torch.compile",
           _ratio_target("W10", "step", S.FG_COMPILED, S.TORCH_COMPILE, 1.0)),
    Target(19, "W10 compiled step <= 0.5x fusegrad eager", _ratio_target("W10", "step", S.FG_COMPILED, S.FG_EAGER, 0.5)),
    Target(2, "W3 eager grad <= 1.5x PyTorch eager", _ratio_target("W3", "grad", S.FG_EAGER, S.TORCH_EAGER, 1.5)),
]


def evaluate_targets(look: Lookup) -> list[dict]:
    return [{"issue": t.issue, "target": t.text, **dict(zip(("status", "detail"), t.evaluate(look)))}
            for t in TARGETS]


def targets_table(targets: list[dict]) -> str:
    lines = ["| issue | target | status | measured |", "| --- | --- | --- | --- |"]
    lines += [f"| {t['issue']} | {t['target']} | **{t['status']}** | {t['detail']} |" for t in targets]
    return "\n".join(lines)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=HERE, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine() -> dict:
    """CPU model, cores, AVX-512, library versions, commit and date of this run."""
    cpu, avx512 = platform.processor() or "unknown", False
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        cpu = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), cpu)
        avx512 = " avx512f" in info
    except OSError:
        pass
    versions = {}
    for name in ("numpy", "numba", "fusegrad", "torch", "jax", "matplotlib"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            versions[name] = "not installed"
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = bool(_git("status", "--porcelain"))
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "commit": commit + (" (with uncommitted changes)" if dirty else ""),
            "cpu": cpu, "cores": os.cpu_count(), "avx512": avx512, "python": platform.python_version(),
            "versions": versions}


def to_json(results: Results, meta: dict, targets: list[dict]) -> str:
    return json.dumps({"meta": meta, "rows": [r.as_dict() for r in results.rows], "memory": results.memory,
                       "first_call": results.first_call, "targets": targets}, indent=1)


def chart(look: Lookup, path: str) -> Optional[str]:
    """A bar chart of every row's ratio to each anchor (log scale); a note instead when
    matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: chart skipped"
    rows = [r for r in look.results.rows if r.median_ms]
    fig, axes = plt.subplots(1, len(S.ANCHORS), figsize=(6 * len(S.ANCHORS), 0.28 * len(rows) + 1.5), sharey=True)
    labels = [f"{r.workload} {r.task} | {r.system}" for r in rows]
    for ax, anchor in zip(axes, S.ANCHORS):
        ratios = [look.ratio(r, anchor) or 0.0 for r in rows]
        colors = ["tab:orange" if r.system.startswith("fusegrad") else "tab:gray" for r in rows]
        ax.barh(range(len(rows)), ratios, color=colors)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_title(f"time / {anchor} (lower is better)")
    axes[0].set_yticks(range(len(rows)), labels, fontsize=7)
    axes[0].invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def results_md(look: Lookup, meta: dict, targets: list[dict], notes: list[str]) -> str:
    v = meta["versions"]
    return f"""# Benchmark results

Generated by `python -m benchmarks` (do not edit by hand; rerun to regenerate).
Workloads and rules: `../shared/BENCHMARKS.md`. Medians of calls after warm-up, timed in
rounds: each round every system, in a shuffled order, runs alone for a 0.25 s block whose
first 0.1 s is not counted (so no other system's still-spinning threads are timed). The
first call (trace + compile, on empty compiler caches) is timed separately in the same
process; "kernels" counts the distinct kernel modules (graph entries and loop kernels)
fusegrad compiled in it. Ratios are this row's median over the anchor's median on the same
task (lower is better). Every result is checked against fusegrad eager, fusegrad eager against PyTorch eager.

- date: {meta['date']}
- commit: {meta['commit']}
- machine: {meta['cpu']}, {meta['cores']} cores, AVX-512 {'yes' if meta['avx512'] else 'no'}; Python {meta['python']}
- versions: numpy {v['numpy']}, numba {v['numba']}, fusegrad {v['fusegrad']}, torch {v['torch']}, jax {v['jax']}
- threads: torch.set_num_threads(2), Numba and XLA defaults; OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset;
  OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}
- 1-minute load average at start / end: {meta['load_avg'][0]} / {meta['load_avg'][1]} (above 0 means other
  processes competed for the cores; interleaving keeps the ratios fair, absolute times suffer)
- run time: {meta['seconds']:.0f} s

## Targets

{targets_table(targets)}

## Times

{timing_table(look)}

## W5 memory (fresh subprocess per system)

tracemalloc sees NumPy and Numba buffers, so it is given for fusegrad only. RSS is how far
the resident set peaked above its level before the call (high-water mark reset via
/proc/self/clear_refs), for a warm call and for the first call (which includes compiling).

{memory_table(look)}

## W6 first call in a fresh process (fusegrad compiled)

{first_call_table(look)}

## Notes

{chr(10).join(f'- {n}' for n in notes + METHOD_NOTES)}
"""


#: Choices BENCHMARKS.md leaves open or states differently, made explicit in every report.
METHOD_NOTES = [
    "W2's NumPy floor times all eight GEMMs of a step (three forward, three weight gradients, two "
    "input gradients); BENCHMARKS.md says six, but a floor that skipped required work would not be one.",
    "W2 compiles the whole step (forward, loss.backward(), SGD update in place) where the system can; "
    "targets are one-hot float32 so every system runs the same arithmetic.",
    "W3 and W5 start the chain from a fixed random h, which is not differentiated.",
    "W6 measures fusegrad only; the other systems' first calls (same process, empty caches) are in the "
    "W1-W3 rows.",
    "A 'fusegrad compiled' row that fell back to eager (cache_info() records a fallback) still runs and is "
    "flagged; targets are never counted as met on such a row or on a failed result check.",
]
