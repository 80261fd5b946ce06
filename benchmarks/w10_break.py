"""W10: W2's training step with ``if loss.item() > threshold:`` in its middle (a graph break).

The step runs the forward, reads the loss as a Python number and picks the learning rate
from it, then runs ``loss.backward()`` and the SGD update. fusegrad computes the loss inside
the compiled code, guards ``loss > THRESHOLD`` and runs the rest (runtime.speculation), a
variant per branch; torch.compile breaks the graph there. Targets (issue 19): at most 1.0x
torch.compile's time and at most 0.5x fusegrad eager's."""
from __future__ import annotations

from typing import Any, Callable

import fusegrad

from . import systems as S
from .harness import Entry, Results, Task, Timing, run_tasks
from . import w2_mlp
from .w2_mlp import LR, fusegrad_compiled, torchlike

TITLE = "W2's SGD step with `if loss.item() > threshold:` between forward and backward"
THRESHOLD = 1.0


def pick_lr(loss: Any) -> float:
    """W2's learning rate, halved once the loss is at most THRESHOLD: read as a Python number."""
    if loss.item() > THRESHOLD:  # the graph break
        return LR
    return LR / 2


def make_step(T: Any) -> Callable:
    """W2's training step for fusegrad or torch (``T``), its learning rate from ``pick_lr``."""
    return w2_mlp.make_step(T, pick_lr)


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, torchlike(fusegrad, lambda f: f, size, make_step)),
        Entry(S.FG_COMPILED, lambda: fusegrad_compiled(size, make_step)),
        Entry(S.TORCH_EAGER, lambda: torchlike(S.torch(), lambda f: f, size, make_step)()),
        Entry(S.TORCH_COMPILE, lambda: torchlike(S.torch(), S.torch_compile, size, make_step)()),
    ]
    # compared: the loss and all six parameters after the first step from identical weights
    return [Task("W10", "step", entries, rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
