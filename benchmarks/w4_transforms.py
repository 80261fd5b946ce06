"""W4: ``jacrev`` of ``tanh(W@x+b)*x`` and ``hessian`` of its sum, x of 64.

Stresses composed transforms on small dense math: the Jacobian and Hessian are both 64x64."""
from __future__ import annotations

from typing import Any

import numpy as np

from .common import rng, standard_entries
from .harness import Results, Task, Timing, run_tasks

TITLE = "jacrev of tanh(W@x+b)*x and hessian of its sum, x of 64"
SIZES = {"full": 64, "quick": 8}


def fn(T: Any, x: Any, W: Any, b: Any) -> Any:
    """The vector function, in the namespace ``T``; differentiated w.r.t. x (argument 0)."""
    return T.tanh(W @ x + b) * x


def scalar_fn(T: Any, x: Any, W: Any, b: Any) -> Any:
    """Its sum, whose Hessian is the second task."""
    return fn(T, x, W, b).sum()


def tasks(size: str) -> list[Task]:
    n = SIZES[size]
    g = rng(4)
    args = [g.standard_normal(n).astype(np.float32),
            (g.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
            (0.1 * g.standard_normal(n)).astype(np.float32)]
    return [Task("W4", "jacrev", standard_entries(fn, args, "jacrev"), rtol=1e-4, atol=1e-5),
            Task("W4", "hessian", standard_entries(scalar_fn, args, "hessian"), rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
