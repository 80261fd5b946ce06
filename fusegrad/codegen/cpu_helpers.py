"""Loop kernels compiled in helper processes while this process compiles the others.

Numba compiles one function at a time per process, holding the GIL: a graph with dozens of
new kernel modules (a CNN's or a GPT's training step) spends seconds in a row of compiles
that do not depend on each other. When a graph needs at least ``MIN_KERNELS`` modules that
the disk cache does not hold, helper processes (``python -m fusegrad.codegen.cpu_worker``,
one fewer than the CPUs, at most ``MAX_HELPERS``; ``FUSEGRAD_COMPILE_HELPERS`` sets the
number, 0 for none) take kernels from the front of the list while this process compiles
the graph's entry and then takes kernels from the back. A helper leaves the machine code in
Numba's disk cache, from which this process then loads it. A kernel a helper could not
compile is compiled here. Helpers start on first need, are reused by later graphs, and end
with this process (their input closes)."""
from __future__ import annotations

import atexit
import collections
import json
import os
import subprocess
import sys
import threading
from typing import Callable, Optional

from ..runtime.kernel_cache import cache_base, cache_dir, module_path

MIN_KERNELS = 12  # new kernel modules in one graph before helpers pay for their start-up
MAX_HELPERS = 4


class _Helper:
    """One helper process and the pipe to it."""

    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen([sys.executable, "-m", "fusegrad.codegen.cpu_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.compiled = 0
        self._lock = threading.Lock()  # one request at a time (graphs may compile in several threads)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def compile(self, source: str) -> bool:
        """Have the helper compile one kernel; False if it could not (or has died)."""
        try:
            with self._lock:
                self.proc.stdin.write(json.dumps({"cache": cache_base(), "path": module_path(source)}) + "\n")
                self.proc.stdin.flush()
                ok = json.loads(self.proc.stdout.readline() or "{}").get("ok") is True
        except (OSError, ValueError):  # a broken pipe (the helper is gone), or not its answer
            return False
        self.compiled += ok
        return ok

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.proc.stdout.close()


_HELPERS: list = []  # the running helpers, reused by every graph of this process
_LOCK = threading.Lock()


def _wanted() -> int:
    setting = os.environ.get("FUSEGRAD_COMPILE_HELPERS")
    if setting is not None:
        return max(0, int(setting))
    return min(MAX_HELPERS, (os.cpu_count() or 1) - 1)


def _helpers() -> list:
    """The helpers to use now, started as needed (none where the kernel cache is a
    process's own temporary directory, which a helper would not share)."""
    if cache_dir() != os.path.join(cache_base(), "kernels"):
        return []
    with _LOCK:
        _HELPERS[:] = [h for h in _HELPERS if h.alive()]
        while len(_HELPERS) < _wanted():
            _HELPERS.append(_Helper())
        return list(_HELPERS[:_wanted()])


@atexit.register
def _close_all() -> None:
    for h in _HELPERS:
        h.close()


def compiled_by_helpers() -> int:
    """How many kernel modules this process's helpers have compiled (diagnostics)."""
    return sum(h.compiled for h in _HELPERS)


def compile_kernels(kernels: list, here: Callable[[tuple], None], first: Optional[Callable[[], None]] = None) -> None:
    """Compile ``kernels`` (module sources) here with ``here`` or in
    helpers (see the module docstring), after running ``first`` here (the entry); returns
    once all are compiled, each in this process or in Numba's disk cache for it to load."""
    helpers = _helpers() if len(kernels) >= MIN_KERNELS else []
    todo = collections.deque(kernels)
    left: list = []  # what the helpers could not compile
    lock = threading.Lock()

    def serve(h: _Helper) -> None:
        while True:
            with lock:
                if not todo:
                    return
                k = todo.popleft()
            if not h.compile(k):
                with lock:
                    left.append(k)

    threads = [threading.Thread(target=serve, args=(h,), daemon=True) for h in helpers]
    for t in threads:
        t.start()
    try:
        if first is not None:
            first()
        while True:
            with lock:
                if not todo:
                    break
                k = todo.pop()
            here(k)
    finally:
        with lock:
            rest = list(todo)
            todo.clear()
        for t in threads:
            t.join()
    for k in rest + left:
        here(k)
