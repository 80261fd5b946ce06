"""``spawn`` and ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` new processes and
raise a child's exception in the parent, as ``torch.multiprocessing.spawn``."""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import traceback
import warnings
from typing import Any, Callable, List, Optional, Tuple


class ProcessException(Exception):
    """A child process of ``spawn`` failed."""

    def __init__(self, msg: str, error_index: int, pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child process raised an exception; ``msg`` holds its traceback."""


class ProcessExitedException(ProcessException):
    """A child process exited with a nonzero code or was killed by a signal."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: Optional[str] = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn: Callable, i: int, args: Tuple, error_file: str) -> None:
    """A child's entry point: ``fn(i, *args)``; an exception's traceback goes to ``error_file``
    (a file, not a pipe: a long traceback cannot block the child's exit)."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent was interrupted too: it reports that
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes`` started; ``join`` waits for them."""

    def __init__(self, processes: List[multiprocessing.Process], error_files: List[str]) -> None:
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> List[int]:
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds for a process to end; True once all ended well.
        When one fails, end the others and raise ``ProcessRaisedException`` (with the
        child's traceback) or ``ProcessExitedException``."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            self.processes[index].join()
            if self.processes[index].exitcode != 0:
                error_index = index
                break
        if error_index is None:
            if not self.sentinels:
                self._remove_error_files()
            return not self.sentinels
        for p in self.processes:
            if p.is_alive():
                p.terminate()
            p.join()
        self.sentinels.clear()
        failed = self.processes[error_index]
        try:
            with open(self.error_files[error_index]) as f:
                trace = f.read()
        finally:
            self._remove_error_files()
        if not trace:
            code = failed.exitcode
            if code < 0:
                name = signal.Signals(-code).name
                raise ProcessExitedException(f"process {error_index} terminated with signal {name}", error_index,
                                             failed.pid, code, name)
            raise ProcessExitedException(f"process {error_index} terminated with exit code {code}", error_index,
                                         failed.pid, code)
        raise ProcessRaisedException(f"\n\n-- Process {error_index} terminated with the following error:\n{trace}",
                                     error_index, failed.pid)

    def _remove_error_files(self) -> None:
        for path in self.error_files:
            if os.path.exists(path):
                os.remove(path)


class SpawnContext(ProcessContext):
    """The ``ProcessContext`` of ``spawn``."""


def start_processes(fn: Callable, args: Tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> Optional[ProcessContext]:
    """Start ``nprocs`` processes running ``fn(i, *args)`` (``i`` the process index) with
    ``start_method``; with ``join`` wait for them all, else return their context."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="fusegrad_spawn_error_")
        os.close(fd)
        error_files.append(path)
        p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable, args: Tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> Optional[ProcessContext]:
    """``start_processes`` with the 'spawn' start method."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      f"To use a different start_method use:\n\t\t torch.multiprocessing.start_processes(...)",
                      FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
