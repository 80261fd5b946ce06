"""How many threads the BLAS under a compiled kernel's matmuls, and under eager ones, uses,
chosen per executable (per operand shapes, eagerly) by measurement.

Generated kernels call NumPy's OpenBLAS (see codegen.cpu_blas). Its worker
threads synchronize by spinning and ``sched_yield``: on an idle machine two threads halve a
GEMM, but on a shared, oversubscribed one each GEMM waits for the scheduler to hand the
worker a time slice (measured on the 2-core benchmark machine under load: a 128x784x512
SGEMM took 36 ms with two threads and 1.4 ms with one). Neither fixed choice is right
everywhere, so ``TunedBlas`` times its executable with the count as it is (the default,
or what the user set) and with one thread, runs the faster, re-probes the other now and
then (sooner when a call turns slow) and switches when the other wins; ``EagerBlas`` does
the same for each eager matmul big enough for OpenBLAS to thread (W7's eager step under
load: 260 ms with two threads, 33 ms with one). The count is set with OpenBLAS's
``openblas_set_num_threads_local`` (which returns the previous count) and restored right
after each call, so the caller's own NumPy calls keep their setting (a NumPy BLAS call made
by another thread during a compiled call may run with the kernel's count: a speed effect,
never a numerical one). Without that entry point it does nothing."""
from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Optional

from ..ir import prims as P
from ..ir.prims.linalg import install_gemm_call

_WARMUP = 3  # timed calls per candidate before the first choice
_PROBE_MIN, _PROBE_MAX = 32, 4096  # calls between probes of the other count (doubling)
_SLOW = 3.0  # a call this many times the recent median probes the other count next


class TunedBlas:
    """Wraps an executable; ``__call__`` runs it with the BLAS thread count that has been
    fastest for it lately (see the module docstring), chosen apart for each set of argument
    shapes (a shape-symbolic executable's sizes take different times, and which count wins
    depends on the size). Other attributes pass through."""

    def __init__(self, exe, setter):
        self._exe = exe
        self._set = setter
        self._choices: dict = {}  # argument shapes -> _Choice

    def __getattr__(self, name):
        return getattr(self.__dict__["_exe"], name)

    def __call__(self, *arrays):
        return self._timed(self._exe, arrays)

    def call_guarded(self, *arrays):
        """The executable's ``call_guarded`` (see codegen.cpu.CpuExecutable), timed alike."""
        return self._timed(self._exe.call_guarded, arrays)

    def _timed(self, run, arrays: tuple):
        key = tuple([a.shape for a in arrays])
        choice = self._choices.get(key)
        if choice is None:
            choice = self._choices[key] = _Choice()
        return _with_threads(choice, self._set, run, arrays)


class EagerBlas:
    """``call(gemm, a, b)`` for eager matmuls (ir.prims.linalg.install_gemm_call): each
    product big enough for OpenBLAS to thread runs with the count that has been fastest for
    its operands' shapes and dtype lately, as ``TunedBlas`` chooses (the last ``LIMIT``
    shapes remembered)."""

    LIMIT = 256

    def __init__(self, setter):
        self._set = setter
        self._choices: "OrderedDict[tuple, _Choice]" = OrderedDict()

    def __call__(self, gemm, a, b):
        sa, sb = a.shape, b.shape
        rows = a.size // sa[-1] if sa[-1] else 0
        if len(sb) > 2:
            rows *= max(1, b.size // (sb[-1] * sb[-2])) if sb[-1] * sb[-2] else 0
        if not _threads_possible(rows, sb[-1], sa[-1]):
            return gemm(a, b)
        key = (sa, sb, a.dtype)
        choice = self._choices.get(key)
        if choice is None:
            choice = self._choices[key] = _Choice()
            if len(self._choices) > self.LIMIT:
                self._choices.popitem(last=False)
        return _with_threads(choice, self._set, gemm, (a, b))


def _with_threads(choice: "_Choice", setter, run, args: tuple):
    """``run(*args)`` with the thread count ``choice`` picks, timed for it."""
    n, probe = choice.choose()
    prev = setter(n) if n else None
    t0 = time.perf_counter()
    try:
        return run(*args)
    finally:
        dt = time.perf_counter() - t0
        if prev is not None:
            setter(prev)
        choice.record(n, probe, dt)


class _Choice:
    """The thread count chosen for one set of argument shapes, from the calls' times: 0 (the
    count as it is) or 1."""

    def __init__(self):
        self._cands = (0, 1)
        self._samples: dict = {n: [] for n in self._cands}
        self._recent: deque = deque(maxlen=8)
        self._best: Optional[int] = None
        self._calls = 0
        self._interval = _PROBE_MIN
        self._next_probe = 0

    def choose(self) -> tuple:
        """(thread count, is this call a probe of the non-best count)."""
        if self._best is None:
            return self._cands[self._calls % 2], False
        if self._calls >= self._next_probe:
            return self._other(), True
        return self._best, False

    def _other(self) -> int:
        return self._cands[1] if self._best == self._cands[0] else self._cands[0]

    def record(self, n: int, probe: bool, dt: float) -> None:
        self._calls += 1
        if self._best is None:
            if self._calls > 1:  # the first call pays for page faults and caches
                self._samples[n].append(dt)
            if all(len(s) >= _WARMUP for s in self._samples.values()):
                self._best = min(self._cands, key=lambda c: _median(self._samples[c]))
                self._samples = {}
                self._next_probe = self._calls + self._interval
            return
        if probe:
            ref = _median(self._recent) if self._recent else float("inf")
            if dt < ref:
                self._best, self._interval = n, _PROBE_MIN
                self._recent.clear()
                self._recent.append(dt)
            else:
                self._interval = min(2 * self._interval, _PROBE_MAX)
            self._next_probe = self._calls + self._interval
            return
        if len(self._recent) >= 4 and dt > _SLOW * _median(self._recent):
            self._next_probe = self._calls  # conditions changed: try the other count next
        self._recent.append(dt)


def _median(xs) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


# OpenBLAS runs a GEMV whose matrix has fewer than 2304 * GEMM_MULTITHREAD_THRESHOLD (4 by
# default) elements, and a GEMM with m*n*k at most 65536 * 4, on one thread whatever the
# count (interface/gemv.c, gemm.c; a GEMM with one row or column goes to GEMV): such a matmul
# has nothing to tune, and timing it would cost more than the product (2.5 us around a 16x16
# matmul's 1 us; W4's 64x64 products)
_GEMV_ONE_THREAD = 2304 * 4
_GEMM_ONE_THREAD = 65536 * 4


def _may_thread(e) -> bool:
    """Whether the matmul ``e`` is big enough for OpenBLAS to run it on more than one
    thread (its batch counted as rows: a batch may be one GEMM)."""
    a, b = e.inputs[0].shape, e.inputs[1].shape
    n = b[-1] if len(b) > 1 else 1
    return _threads_possible(e.out.size // n if n else 0, n, a[-1])


def _threads_possible(rows: int, n: int, k: int) -> bool:
    """Whether OpenBLAS may thread a product of ``rows`` x ``k`` by ``k`` x ``n``."""
    if rows == 1 or n == 1:
        return max(rows, n) * k >= _GEMV_ONE_THREAD
    return rows * n * k > _GEMM_ONE_THREAD


def tuned(exe):
    """``exe`` wrapped in a :class:`TunedBlas` when its graph calls BLAS and the thread
    count can be set to something other than its default; else ``exe`` itself."""
    graph = getattr(exe, "_graph", None)
    if graph is None or not any(e.prim is P.matmul and _may_thread(e) for e in graph.eqns):
        return exe
    setter = _setter()
    return TunedBlas(exe, setter) if setter is not None else exe


def _setter():
    """OpenBLAS's thread-count setter (it returns the count it replaces), where NumPy's BLAS
    has one and runs more than one thread by default; else None (nothing to choose)."""
    from ..codegen.cpu_blas import BLAS
    setter = BLAS and BLAS.set_threads
    if setter is None:
        return None
    default = setter(1)
    setter(default)
    return setter if default > 1 else None


def _install_eager() -> None:
    setter = _setter()
    if setter is not None:
        install_gemm_call(EagerBlas(setter))


_install_eager()
