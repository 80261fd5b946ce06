"""``Timer`` and ``Measurement`` as ``torch.utils.benchmark`` has them: the statement runs
in a compiled ``timeit`` loop with ``perf_counter``, after a warm-up (so a compiled
function's first-call compile is not measured), with fusegrad's kernel threads set to
``num_threads`` for the measurement."""
from __future__ import annotations

import statistics
import textwrap
import timeit
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional


@dataclass(frozen=True)
class TaskSpec:
    """What was timed, and the labels it is reported under."""
    stmt: str
    setup: str
    global_setup: str = ""
    label: Optional[str] = None
    sub_label: Optional[str] = None
    description: Optional[str] = None
    env: Optional[str] = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        if self.label is not None:
            return self.label + (f": {self.sub_label}" if self.sub_label else "")
        return f"{self.stmt}" if "\n" not in self.stmt else "stmt:\n" + textwrap.indent(self.stmt, "  ")


@dataclass
class Measurement:
    """The timings of one ``Timer`` run: ``raw_times`` (seconds per block of
    ``number_per_run`` executions), ``times`` (seconds per execution), ``mean``,
    ``median`` and ``iqr``."""
    number_per_run: int
    raw_times: List[float]
    task_spec: TaskSpec
    metadata: Optional[Dict[Any, Any]] = None
    times: List[float] = field(init=False)

    def __post_init__(self) -> None:
        self.times = [t / self.number_per_run for t in self.raw_times]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def iqr(self) -> float:
        if len(self.times) < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4, method="inclusive")
        return q[2] - q[0]

    def __getattr__(self, name: str) -> Any:  # label, stmt, num_threads, ... from the task spec
        spec = self.__dict__.get("task_spec")
        if spec is not None and hasattr(spec, name):
            return getattr(spec, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        value, unit = _human(self.median if len(self.times) > 1 else self.mean)
        lines = [f"<{__name__}.Measurement object at {hex(id(self))}>", self.task_spec.title]
        if self.task_spec.description:
            lines.append(self.task_spec.description)
        n = len(self.times)
        if n > 1:
            lines.append(f"  Median: {value:.2f} {unit}")
            iqr, iqr_unit = _human(self.iqr)
            lines.append(f"  IQR:    {iqr:.2f} {iqr_unit} ({len(self.times)} measurements)")
            lines.append(f"  {n} measurements, {self.number_per_run} runs per measurement, "
                         f"{self.task_spec.num_threads} thread{'s' if self.task_spec.num_threads > 1 else ''}")
        else:
            lines.append(f"  {value:.2f} {unit}")
            lines.append(f"  1 measurement, {self.number_per_run} runs , {self.task_spec.num_threads} thread"
                         f"{'s' if self.task_spec.num_threads > 1 else ''}")
        return "\n".join(lines)


def _human(seconds: float):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return seconds / scale, unit
    return seconds / 1e-9, "ns"


class _Threads:
    """fusegrad's kernel threads set to ``n`` inside the block, restored after."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __enter__(self) -> None:
        import fusegrad
        self.saved = fusegrad.get_num_threads()
        if self.saved != self.n:
            fusegrad.set_num_threads(self.n)

    def __exit__(self, *exc: Any) -> None:
        import fusegrad
        if fusegrad.get_num_threads() != self.saved:
            fusegrad.set_num_threads(self.saved)


class Timer:
    """Times ``stmt`` (Python source) after running ``setup`` once, with ``globals`` as its
    namespace (``fusegrad`` is there as ``torch`` unless given): ``timeit(number)`` and
    ``blocked_autorange(min_run_time)`` return a ``Measurement``."""

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timeit.default_timer, globals: Optional[Dict[str, Any]] = None,
                 label: Optional[str] = None, sub_label: Optional[str] = None, description: Optional[str] = None,
                 env: Optional[str] = None, num_threads: int = 1, language: str = "python") -> None:
        if language not in ("python", "py"):
            raise ValueError(f"fusegrad's Timer times Python statements only, not language={language!r}")
        import fusegrad
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", fusegrad)
        self._task_spec = TaskSpec(stmt=textwrap.dedent(stmt).strip() or "pass",
                                   setup=textwrap.dedent(setup).strip() or "pass", global_setup=global_setup,
                                   label=label, sub_label=sub_label, description=description, env=env,
                                   num_threads=num_threads)
        self._timer = timeit.Timer(stmt=self._task_spec.stmt, setup=self._task_spec.setup, timer=timer,
                                   globals=self._globals)

    def _timeit(self, number: int) -> float:
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> Measurement:
        """Run ``stmt`` ``number`` times (after ``max(number // 100, 2)`` warm-up runs)."""
        with _Threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return Measurement(number, [self._timeit(number)], self._task_spec)

    def blocked_autorange(self, callback: Optional[Callable[[int, float], None]] = None,
                          min_run_time: float = 0.2) -> Measurement:
        """Find a block size whose run takes at least ``min_run_time / 1000``, then time
        blocks until ``min_run_time`` seconds have been measured (PyTorch's procedure)."""
        with _Threads(self._task_spec.num_threads):
            number = 1
            while True:  # the block size; its runs double as warm-up
                t = self._timeit(number)
                if t >= min_run_time / 1000 or number >= 10 ** 9:
                    break
                number *= 10
            times: List[float] = []
            total = 0.0
            while total < min_run_time or len(times) < 2:
                t = self._timeit(number)
                if callback is not None:
                    callback(number, t)
                times.append(t)
                total += t
            return Measurement(number, times, self._task_spec)
