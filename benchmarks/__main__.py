"""``python -m benchmarks [W1 ...] [--quick]``; ``python -m benchmarks ddp`` (see ``benchmarks/ddp.py``).

NumPy's OpenBLAS is slowed on these machines by ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE``;
BLAS reads them when it loads, so this process re-executes itself without them before
anything imports NumPy (only the benchmark command does this, never tests or CI). Compiler
caches point at a fresh temporary directory so that first calls are cold compiles.

OpenMP threads (PyTorch's, and Numba's "omp" threading layer) wait passively
(``OMP_WAIT_POLICY=PASSIVE`` unless set): with libgomp's default spin-waiting, a loaded
2-core machine slowed PyTorch's W8 step (hundreds of small parallel regions) 20-40x
(550-3600 ms; 30 ms passive in the same conditions), since a spinning thread burns the
time slice its partner needs to reach the barrier."""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when torch or Numba loads it
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")  # as importing fusegrad sets it (runtime/thread_waits.py)

_SLOW_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

if any(name in os.environ for name in _SLOW_BLAS):
    _env = {k: v for k, v in os.environ.items() if k not in _SLOW_BLAS}
    os.execve(sys.executable, [sys.executable, "-m", "benchmarks", *sys.argv[1:]], _env)

if sys.argv[1:2] == ["ddp"]:  # data-parallel scaling under mpiexec: its own command
    from .ddp import main as ddp_main  # noqa: E402
    sys.exit(ddp_main(sys.argv[2:]))

from .cli import main  # noqa: E402  (after the re-exec: NumPy must load with the clean environment)

sys.exit(main(sys.argv[1:]))
