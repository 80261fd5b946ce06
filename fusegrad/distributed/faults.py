"""Fault handling: an uncaught exception on one rank aborts the whole MPI job (instead of
leaving the other ranks blocked in a collective forever), naming the rank and the error."""
from __future__ import annotations

import sys
import traceback


class _Hook:
    """The excepthook in force (and the one it replaced), while a process group exists."""
    previous = None
    comm = None


def install(comm) -> None:
    if _Hook.comm is None:
        _Hook.previous = sys.excepthook
        sys.excepthook = _abort_on_exception
    _Hook.comm = comm


def uninstall() -> None:
    if _Hook.comm is not None:
        sys.excepthook = _Hook.previous
        _Hook.comm = _Hook.previous = None


def _abort_on_exception(etype, value, tb) -> None:
    comm = _Hook.comm
    rank, size = comm.Get_rank(), comm.Get_size()
    text = "".join(traceback.format_exception(etype, value, tb))
    sys.stderr.write(f"[rank {rank}] {text}"
                     f"fusegrad.distributed: rank {rank} of {size} raised {etype.__name__}: {value}; "
                     f"aborting all ranks (MPI_Abort)\n")
    sys.stderr.flush()
    comm.Abort(1)
