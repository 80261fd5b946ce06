"""W3: ``grad`` w.r.t. W, b (both 200x16) of ``h = tanh(h*W[i] + b[i])`` for i in 0..199,
then ``h.sum()``.

Stresses per-op overhead: a long chain of tiny ops must become one kernel. The starting
``h`` (not specified by BENCHMARKS.md) is a fixed random 16-vector input that is not
differentiated. Also times the forward alone (issue 3)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .common import rng, standard_entries
from .harness import Results, Task, Timing, run_tasks

TITLE = "grad of a 200-step tanh chain on 16 lanes w.r.t. W, b (200x16)"
SIZES = {"full": (200, 16), "quick": (8, 4)}


def fn(T: Any, W: Any, b: Any, h: Any) -> Any:
    """The chain in the namespace ``T``; also W5's function (there W, b are vectors of scalars)."""
    for i in range(W.shape[0]):
        h = T.tanh(h * W[i] + b[i])
    return h.sum()


def inputs(size: str) -> list[np.ndarray]:
    steps, width = SIZES[size]
    g = rng(3)
    # weights near 1 keep the chain's gradient from vanishing over 200 steps
    W = (1.0 + 0.1 * g.standard_normal((steps, width))).astype(np.float32)
    b = (0.1 * g.standard_normal((steps, width))).astype(np.float32)
    h = g.standard_normal(width).astype(np.float32)
    return [W, b, h]


def tasks(size: str) -> list[Task]:
    args = inputs(size)
    return [Task("W3", "grad", standard_entries(fn, args, "grad", argnums=(0, 1)), rtol=1e-4, atol=1e-5),
            Task("W3", "forward", standard_entries(fn, args, "forward"), rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
