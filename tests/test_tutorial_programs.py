"""PyTorch-tutorial-style programs (tests/tutorials/), run once with PyTorch and once with only
their imports changed to fusegrad: the printed output must be the same.

The programs: a DataLoader training loop that saves a checkpoint, reloads it and trains on; a
mixed precision loop (autocast, GradScaler skipping overflowing float16 steps); a Jacobian by
forward-mode AD; and two after pytorch/examples: time_sequence_prediction's LSTM cells trained
by L-BFGS in float64, and word_language_model's LSTM language model (truncated BPTT, gradient
clipping, SGD through ``p.data``, the whole model saved and loaded); and a compiled training
step that checks its loss for NaN and returns ``loss.item()`` for early stopping. They start from fixed
weights (no random numbers: the two libraries' generators differ) and print what a tutorial
prints."""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = ["data_loader_training.py", "amp_training.py", "forward_ad_jacobian.py", "sine_lstm_lbfgs.py",
            "word_language_model.py", "compiled_early_stopping.py"]
MARK = "=== program "

# the only edit: `import torch` -> `import fusegrad as torch`; `import torch.x` / `from torch.x` -> fusegrad.x
_IMPORTS = [(re.compile(r"^import torch$", re.M), "import fusegrad as torch"),
            (re.compile(r"^import torch\.", re.M), "import fusegrad."),
            (re.compile(r"^from torch(?=[ .])", re.M), "from fusegrad")]


def to_fusegrad(src: str) -> str:
    for pat, rep in _IMPORTS:
        src = pat.sub(rep, src)
    return src


def run_all(paths: list) -> str:
    """Run each program (in one fresh interpreter, one after another); their stdout with markers."""
    code = ("import runpy, sys\n"
            "for p in sys.argv[1:]:\n"
            f"    print({MARK!r} + p.rsplit('/', 1)[-1], flush=True)\n"
            "    runpy.run_path(p, run_name='__main__')\n"
            "    sys.stdout.flush()\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, env=env,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"{paths}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def _by_program(out: str) -> dict:
    parts = out.split(MARK)[1:]
    return {p.split("\n", 1)[0]: p.split("\n", 1)[1] for p in parts}


@pytest.mark.torch
def test_tutorial_programs_print_the_same_with_fusegrad(tmp_path):
    pytest.importorskip("torch")
    originals, changed = [], []
    for name in PROGRAMS:
        path = os.path.join(HERE, "tutorials", name)
        src = open(path).read()
        new = to_fusegrad(src)
        diff = [(a, b) for a, b in zip(src.splitlines(), new.splitlines()) if a != b]
        assert diff and all(a.startswith(("import torch", "from torch")) for a, _ in diff), name
        out = tmp_path / name
        out.write_text(new)
        originals.append(path)
        changed.append(str(out))
    want, got = _by_program(run_all(originals)), _by_program(run_all(changed))
    assert list(want) == list(got) == PROGRAMS
    for name in PROGRAMS:
        assert want[name].count("\n") >= 5, f"{name} printed too little to compare:\n{want[name]}"
        assert got[name] == want[name], f"{name}\n--- PyTorch:\n{want[name]}\n--- fusegrad:\n{got[name]}"
