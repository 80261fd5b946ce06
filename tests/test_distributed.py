"""fusegrad.distributed and DistributedDataParallel under real MPI jobs: each test launches
``mpiexec -n N`` on tests/distributed/checks.py (the checks compare against NumPy and against
single-process training) with a timeout, so a hang fails instead of blocking the suite."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "tests" / "distributed" / "checks.py"
pytest.importorskip("mpi4py", reason="the dist extra (mpi4py + mpich) is not installed")
# the mpich wheel puts mpiexec beside the interpreter, which need not be on PATH
_BESIDE = Path(sys.executable).parent / "mpiexec"
MPIEXEC = str(_BESIDE) if _BESIDE.exists() else shutil.which("mpiexec")
pytestmark = [pytest.mark.distributed,
              pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install mpich)")]


def mpiexec(n: int, args: list, timeout: float) -> subprocess.CompletedProcess:
    """Run ``python args`` on n ranks on this host. ``-launcher fork`` starts the ranks as
    local processes (no ssh needed in containers); PYTHONPATH carries this checkout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    return subprocess.run([MPIEXEC, "-launcher", "fork", "-n", str(n), sys.executable, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def run_checks(n: int, names: list, timeout: float = 240) -> str:
    p = mpiexec(n, [CHECKS, *names], timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    for name in names:
        ranks = sorted(int(r) for r in re.findall(rf"PASS {name} rank (\d+)", out))
        assert ranks == list(range(n)), f"{name}: passed on ranks {ranks}\n{out[-6000:]}"
    return out


ALL = ["collectives", "object_collectives", "all_to_all_exchanges", "bfloat16_and_bool_collectives",
       "ddp_bfloat16_model", "subgroups",
       "mismatched_shapes", "ddp_matches_single_process", "ddp_no_sync_accumulation",
       "ddp_unused_parameters_buffers_state_dict",
       "ddp_broadcasts_rank0_parameters", "ddp_gradient_layouts_differ_across_ranks", "ddp_compiled",
       "distributed_sampler", "sync_batch_norm"]


def test_two_ranks_collectives_ddp_sampler():
    """Collectives vs NumPy; DDP (20 SGD and 20 Adam steps, float64) equal to one process on the
    concatenated batch to 1e-6 (in fact ~1e-16); no_sync; unused parameters; buffers;
    state_dict keys; gradient layouts differing across ranks; compiled Sequential under DDP;
    the sampler's partition."""
    out = run_checks(2, ALL)
    assert out.count("SGD: max |param - single process|") == 2


def test_three_ranks():
    run_checks(3, ["collectives", "object_collectives", "all_to_all_exchanges", "subgroups", "mismatched_shapes",
                   "ddp_matches_single_process", "ddp_unused_parameters_buffers_state_dict", "distributed_sampler",
                   "sync_batch_norm"])


@pytest.mark.parametrize("name,message", [("failing_rank", "boom on purpose"),
                                          ("failing_rank_after_cleanup", "boom after cleanup")])
def test_failing_rank_aborts_every_rank_quickly(name, message):
    """A rank's uncaught exception ends the job, also after it destroyed its process group in a
    ``finally`` (that hung: the abort hook went with the group)."""
    t0 = time.perf_counter()
    p = mpiexec(3, [CHECKS, name], timeout=60)
    took = time.perf_counter() - t0
    err = p.stdout + p.stderr
    assert p.returncode != 0
    assert f"rank 1 of 3 raised ValueError: {message}" in err, err[-3000:]
    assert "MPI_Abort" in err
    assert took < 25, f"the job took {took:.1f}s to end"  # the other ranks would otherwise sleep 30s


def test_example_ddp_train_checksums_agree():
    p = mpiexec(2, [ROOT / "examples" / "ddp_train.py", "--steps", "5"], timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    sums = dict(re.findall(r"rank (\d+) final parameter checksum ([-0-9.e+]+)", out))
    assert sorted(sums) == ["0", "1"] and sums["0"] == sums["1"], out[-3000:]
    assert len(re.findall(r"rank [01] step \d+ loss", out)) == 10


def test_import_and_errors_without_mpi4py():
    """fusegrad imports without mpi4py; using distributed then says what to install."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'mpi4py':\n"
            "            raise ImportError('blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import fusegrad as fg\n"
            "assert not fg.distributed.is_available() and not fg.distributed.is_initialized()\n"
            "try:\n"
            "    fg.distributed.init_process_group('mpi')\n"
            "except RuntimeError as e:\n"
            "    assert 'pip install' in str(e), e\n"
            "    print('ok')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.strip() == "ok", p.stderr[-2000:]
