"""Fault handling: an uncaught exception on one rank aborts the whole MPI job (instead of
leaving the other ranks blocked in a collective forever), naming the rank and the error. The
hook stays for the rest of the process once a process group was made: programs destroy the
group in a ``finally`` that runs before the exception reaches the top. (A rank that ends with
``sys.exit(1)`` is not caught: SystemExit never reaches the hook.)"""
from __future__ import annotations

import sys
import traceback


class _Hook:
    """The communicator the excepthook aborts (MPI's world), once one was given."""
    comm = None


def install(comm) -> None:
    if _Hook.comm is None:
        sys.excepthook = _abort_on_exception
    _Hook.comm = comm


def _abort_on_exception(etype, value, tb) -> None:
    comm = _Hook.comm
    rank, size = comm.Get_rank(), comm.Get_size()
    text = "".join(traceback.format_exception(etype, value, tb))
    sys.stderr.write(f"[rank {rank}] {text}"
                     f"fusegrad.distributed: rank {rank} of {size} raised {etype.__name__}: {value}; "
                     f"aborting all ranks (MPI_Abort)\n")
    sys.stderr.flush()
    comm.Abort(1)
