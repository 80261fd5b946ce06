"""``torch.profiler``: where eager time goes, op by op and in ``record_function`` regions.

While a ``profile`` is recording, every primitive bound through the dispatcher (the one path
eager ops, autograd's backward ops and optimizer updates take) is timed as an event named
``fusegrad::<primitive>``; ``record_function(name)`` adds a region. A compiled function's
call is one region (``CompiledFunction: <name>``): its kernels do not pass the dispatcher.
Events nest by time, so "self" time excludes the events inside. ``key_averages()`` groups
them by name (and input shapes) and ``table()`` prints them as PyTorch does;
``export_chrome_trace`` writes them for chrome://tracing or Perfetto. The dispatcher is
wrapped only while recording: code outside a profile pays nothing. Under a compile or
transform trace the events time the tracing, not the computation."""
from __future__ import annotations

import enum
import json
import os
import time
from typing import Any, Callable, Iterable, Optional

from .ir import primitive as _primitive

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule",
           "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable:
    """The action for each ``step()`` number: skip ``skip_first``, then cycles of ``wait``
    idle, ``warmup`` and ``active`` recorded steps (the last one saves), ``repeat`` times (0: forever)."""
    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


class FunctionEvent:
    """One timed op or region: ``name``, start and end (us), input shapes, nesting."""

    def __init__(self, name: str, start_us: float, input_shapes: list, is_user_annotation: bool):
        self.name = self.key = name
        self.time_range_start = start_us
        self.time_range_end = start_us
        self.input_shapes = input_shapes
        self.is_user_annotation = is_user_annotation
        self.cpu_children: list = []
        self.cpu_parent: Optional[FunctionEvent] = None
        self.count = 1

    @property
    def cpu_time_total(self) -> float:
        return self.time_range_end - self.time_range_start

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    cpu_time = cpu_time_total

    def __repr__(self) -> str:
        return f"<FunctionEvent {self.name} cpu_time_total={_us(self.cpu_time_total)}>"


class FunctionEventAvg:
    """The events of one key summed: ``count``, ``cpu_time_total``, ``self_cpu_time_total``."""

    def __init__(self, key: str, input_shapes: list):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, e: FunctionEvent) -> "FunctionEventAvg":
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        return self

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    def __repr__(self) -> str:
        return f"<FunctionEventAvg key={self.key} self_cpu_time={_us(self.self_cpu_time_total)} " \
               f"cpu_time={_us(self.cpu_time_total)} count={self.count}>"


def _us(t: float) -> str:
    if t >= 1e6:
        return f"{t / 1e6:.3f}s"
    if t >= 1e3:
        return f"{t / 1e3:.3f}ms"
    return f"{t:.3f}us"


class EventList(list):
    """A list of events (or of their averages) that prints as PyTorch's table."""

    def __init__(self, items: Iterable = (), grouped_shapes: bool = False):
        super().__init__(items)
        self._shapes = grouped_shapes

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: Optional[str] = None, top_level_events_only: bool = False, **kwargs) -> str:
        rows = [e for e in self if not top_level_events_only or getattr(e, "cpu_parent", None) is None]
        if sort_by is not None and sort_by != "count":
            key = {"cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
                   "cpu_time": "cpu_time"}.get(sort_by)
            if key is not None:
                rows.sort(key=lambda e: -getattr(e, key))
        elif sort_by == "count":
            rows.sort(key=lambda e: -e.count)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total = sum(e.self_cpu_time_total for e in self) or 1.0
        width = min(max([len(e.key) for e in rows] + [4]), max_name_column_width) + 4
        cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        shapes = self._shapes
        line = "-" * width + "  " + "  ".join("-" * 12 for _ in cols) + ("  " + "-" * 24 if shapes else "") + "  "
        out = [line, "Name".rjust(width) + "  " + "  ".join(c.rjust(12) for c in cols)
               + ("  " + "Input Shapes".rjust(24) if shapes else "") + "  ", line]
        for e in rows:
            cells = [f"{100 * e.self_cpu_time_total / total:.2f}%", _us(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / total:.2f}%", _us(e.cpu_time_total),
                     _us(e.cpu_time_total / max(e.count, 1)), str(e.count)]
            name = e.key if len(e.key) <= width - 4 else e.key[:width - 7] + "..."
            out.append(name.rjust(width) + "  " + "  ".join(c.rjust(12) for c in cells)
                       + ("  " + str(e.input_shapes).rjust(24) if shapes else "") + "  ")
        out += [line, f"Self CPU time total: {_us(sum(e.self_cpu_time_total for e in self))}", ""]
        return ((header + "\n") if header else "") + "\n".join(out)

    def __str__(self) -> str:
        return self.table()


class _Recorder:
    """The events of one recording and the stack of those still open."""

    def __init__(self, record_shapes: bool):
        self.events: list = []
        self.open: list = []
        self.record_shapes = record_shapes
        self.t0 = time.perf_counter()

    def begin(self, name: str, args=(), user: bool = False) -> FunctionEvent:
        shapes = [list(a.shape) if hasattr(a, "shape") else [] for a in args] if self.record_shapes else []
        e = FunctionEvent(name, (time.perf_counter() - self.t0) * 1e6, shapes, user)
        if self.open:
            e.cpu_parent = self.open[-1]
            self.open[-1].cpu_children.append(e)
        self.open.append(e)
        self.events.append(e)
        return e

    def end(self, e: FunctionEvent) -> None:
        e.time_range_end = (time.perf_counter() - self.t0) * 1e6
        if self.open and self.open[-1] is e:
            self.open.pop()


class _Recording:
    """The active recorders. While there is one, the ways into the dispatcher (primitives'
    calls, and ``ops``' direct calls of ``bind``) and compiled functions' calls are wrapped
    to time themselves; otherwise they are the plain ones."""
    recorders: list = []
    plain: Optional[tuple] = None  # (dispatcher, ops.bind, CompiledFunction.__call__) while wrapped

    @classmethod
    def start(cls, rec: _Recorder) -> None:
        if not cls.recorders:
            from .runtime import ops
            from .runtime.compiled import CompiledFunction
            cls.plain = _primitive._DISPATCH[0], ops.bind, CompiledFunction.__call__
            _primitive.install_dispatcher(cls._timed(cls.plain[0]))
            ops.bind = cls._timed(cls.plain[1])
            call = cls.plain[2]

            def timed_call(self, *args, **kwargs):
                with record_function("CompiledFunction: " + self.__name__):
                    return call(self, *args, **kwargs)
            CompiledFunction.__call__ = timed_call
        cls.recorders.append(rec)

    @classmethod
    def _timed(cls, dispatch: Callable) -> Callable:
        def timed(prim, args, params):
            events = [(r, r.begin("fusegrad::" + prim.name, args)) for r in cls.recorders]
            try:
                return dispatch(prim, args, params)
            finally:
                for r, e in events:
                    r.end(e)
        return timed

    @classmethod
    def stop(cls, rec: _Recorder) -> None:
        if rec in cls.recorders:
            cls.recorders.remove(rec)
        if not cls.recorders and cls.plain is not None:
            from .runtime import ops
            from .runtime.compiled import CompiledFunction
            _primitive.install_dispatcher(cls.plain[0])
            ops.bind = cls.plain[1]
            CompiledFunction.__call__ = cls.plain[2]
            cls.plain = None


class record_function:
    """A named region in the profile (context manager or decorator); free when not profiling."""

    def __init__(self, name: str, args: Optional[str] = None):
        self.name = name
        self._events: list = []

    def __enter__(self) -> "record_function":
        self._events = [(r, r.begin(self.name, user=True)) for r in _Recording.recorders]
        return self

    def __exit__(self, *exc) -> None:
        for r, e in self._events:
            r.end(e)
        self._events = []

    def __call__(self, fn: Callable) -> Callable:
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper


class profile:
    """Record eager ops and regions while the block runs (see the module docstring).

    With a ``schedule``, ``step()`` moves through its actions: events are kept in RECORD
    steps and ``on_trace_ready(self)`` is called at the end of each active span."""

    def __init__(self, activities: Optional[Iterable] = None, schedule: Optional[Callable] = None,
                 on_trace_ready: Optional[Callable] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda: Optional[bool] = None, enabled: bool = True, **kwargs):
        self.activities = set(activities or [ProfilerActivity.CPU])
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.enabled = enabled
        self.step_num = 0
        self._rec: Optional[_Recorder] = None
        self._kept: list = []

    def _action(self) -> ProfilerAction:
        return ProfilerAction.RECORD if self.schedule is None else self.schedule(self.step_num)

    def _begin(self) -> None:
        if self._rec is None:
            self._rec = _Recorder(self.record_shapes)
            _Recording.start(self._rec)

    def _finish(self) -> None:
        if self._rec is not None:
            _Recording.stop(self._rec)
            self._kept = self._rec.events
            self._rec = None

    def start(self) -> None:
        if self.enabled and self._action() in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._begin()

    def stop(self) -> None:
        recording_now = self._rec is not None
        self._finish()
        if recording_now and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def step(self) -> None:
        """End one training step: follow the schedule's action for the next one."""
        if not self.enabled:
            return
        before = self._action()
        self.step_num += 1
        after = self._action()
        if before is ProfilerAction.RECORD_AND_SAVE:
            self._finish()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        if after in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._begin()

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def events(self) -> EventList:
        return EventList(self._rec.events if self._rec is not None else self._kept)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        groups: dict = {}
        for e in self.events():
            key = (e.key, str(e.input_shapes)) if group_by_input_shape else e.key
            if key not in groups:
                groups[key] = FunctionEventAvg(e.key, e.input_shapes)
            groups[key].add(e)
        return EventList(groups.values(), grouped_shapes=group_by_input_shape and self.record_shapes)

    def export_chrome_trace(self, path: str) -> None:
        """The events as Chrome trace JSON ("X" complete events, microseconds)."""
        trace = [{"name": e.name, "ph": "X", "ts": e.time_range_start, "dur": e.cpu_time_total,
                  "pid": os.getpid(), "tid": 0, "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                  "args": {"Input Dims": e.input_shapes} if e.input_shapes else {}} for e in self.events()]
        with open(path, "w") as f:
            json.dump({"traceEvents": trace}, f)


def tensorboard_trace_handler(dir_name: str, worker_name: Optional[str] = None, use_gzip: bool = False) -> Callable:
    """An ``on_trace_ready`` that writes each trace as ``<dir>/<worker>.<n>.pt.trace.json``."""
    counter = [0]

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{name}.{counter[0]}.pt.trace.json"))
        counter[0] += 1
    return handler
