"""W1: ``grad`` of ``(sin(2x+1)*exp(-x*x) + tanh(x)).sum()``, x of 2^22 float32.

Stresses elementwise fusion, transcendental math and reductions. Also times the forward
alone (issue 3 quotes compiled forward against torch.compile). The floor is NumPy by hand:
the forward and the hand-derived gradient, one array op at a time."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import systems as S
from .common import rng, standard_entries
from .harness import Entry, Results, Task, Timing, run_tasks

TITLE = "grad of (sin(2x+1)*exp(-x*x) + tanh(x)).sum()"
SIZES = {"full": 2 ** 22, "quick": 2 ** 10}
NUMPY = "NumPy by hand"


def fn(T: Any, x: Any) -> Any:
    """The workload's function, in the namespace ``T`` (fusegrad, torch, jax.numpy, numpy)."""
    return (T.sin(2 * x + 1) * T.exp(-x * x) + T.tanh(x)).sum()


def numpy_grad(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forward and gradient by hand: d/dx = 2cos(2x+1)e - 2x sin(2x+1)e + 1 - tanh(x)^2."""
    u = 2 * x + 1
    s, e, t = np.sin(u), np.exp(-x * x), np.tanh(x)
    se = s * e
    value = (se + t).sum()
    return (2 * np.cos(u) * e - 2 * x * se + (1 - t * t)), value


def tasks(size: str) -> list[Task]:
    x = rng(1).standard_normal(SIZES[size]).astype(np.float32)
    grad_floor = Entry(NUMPY, lambda: S.Prepared(lambda: numpy_grad(x)[0]))
    forward_floor = Entry(NUMPY, lambda: S.Prepared(lambda: fn(np, x)))
    # the forward is a sum of 2^22 terms: summation order differs between systems
    return [Task("W1", "grad", standard_entries(fn, [x], "grad") + [grad_floor], rtol=1e-4, atol=1e-5),
            Task("W1", "forward", standard_entries(fn, [x], "forward") + [forward_floor], rtol=1e-4, atol=1e-3)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
