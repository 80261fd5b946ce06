"""The seed programs (PyTorch code with PyTorch's recorded answers) run unchanged."""
import pathlib
import subprocess
import sys

import pytest

RUN = pathlib.Path(__file__).resolve().parents[2] / "shared" / "seed_examples" / "run.py"


@pytest.mark.skipif(not RUN.exists(), reason="../shared/seed_examples is not beside this checkout")
def test_seed_examples_all_pass():
    p = subprocess.run([sys.executable, str(RUN), "--impl", "fusegrad"], capture_output=True, text=True, timeout=900)
    last = p.stdout.strip().splitlines()[-1]
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert last.endswith(" 0 failed"), last
