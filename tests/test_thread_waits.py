"""Importing fusegrad makes idle OpenMP and OpenBLAS workers wait passively
(runtime/thread_waits.py), before NumPy loads, unless the user chose otherwise."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = ("import sys, os; import fusegrad; "
         "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")


def _run(**env) -> list:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT")}
    clean.update(env, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE], env=clean, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_sets_passive_waits_where_unset_and_keeps_the_users():
    assert _run() == ["PASSIVE", "16"]
    assert _run(OMP_WAIT_POLICY="ACTIVE", OPENBLAS_THREAD_TIMEOUT="28") == ["ACTIVE", "28"]


def test_the_settings_precede_numpys_import():
    """OpenBLAS reads its setting when NumPy loads it: the first import of numpy must see it."""
    code = ("import os, sys\n"
            "class Spy:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'numpy':\n"
            "            print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), flush=True)\n"
            "            sys.meta_path.remove(self)\n"
            "sys.meta_path.insert(0, Spy())\n"
            "import fusegrad\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": ROOT}, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split()[0] == "16", out.stdout
