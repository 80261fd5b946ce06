"""How idle worker threads wait: passively, so that two thread pools can share the cores.

Compiled kernels run their parallel loops on Numba's OpenMP threads and their matmuls on
NumPy's OpenBLAS threads, and eager code calls OpenBLAS too. By default both pools spin after
their work (libgomp for its spin count, OpenBLAS for 2**28 cycles, a tenth of a second), so a
parallel loop that follows a GEMM waits for the cores that OpenBLAS's idle workers hold, and
the next GEMM for Numba's: on a machine with few cores an eager backward alternating with a
compiled optimizer step ran twice as long as the two apart (README, "Benchmarks"). Both libraries read their setting when they load, so it is set before
fusegrad imports NumPy, and only where the user has not chosen it: ``OMP_WAIT_POLICY=PASSIVE``
and ``OPENBLAS_THREAD_TIMEOUT=16`` (2**16 cycles: back-to-back GEMMs keep their workers). A
NumPy or OpenMP runtime loaded before fusegrad keeps its own setting."""
from __future__ import annotations

import os

SETTINGS = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "16"}


def wait_passively() -> None:
    """Set SETTINGS in the environment where unset (see the module docstring)."""
    for name, value in SETTINGS.items():
        os.environ.setdefault(name, value)
