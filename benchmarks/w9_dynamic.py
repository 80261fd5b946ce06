"""W9: W2's MLP training step run over 20 different batch sizes from 32 to 160, odd ones
included (dynamic shapes).

One call runs the 20 steps, one per size; the first call's time (every trace and compile
included) is the workload's figure, the median of later calls the steady state. Targets
(issue 19): at most 2 compiles (``cache_info()``; sizes after the second reuse the
shape-symbolic kernels) and the total at most 0.5x torch.compile's (default ``dynamic``)."""
from __future__ import annotations

from typing import Any, Callable

import fusegrad

from . import systems as S
from .harness import Entry, Results, Task, Timing, run_tasks
from .w2_mlp import inputs, make_step

TITLE = "W2's SGD step over 20 batch sizes 32..160 (odd ones included)"
SIZES = {"full": [32, 160, 33, 64, 65, 96, 97, 100, 127, 128, 129, 131, 140, 150, 151, 155, 157, 159, 37, 48],
         "quick": [4, 5, 6, 7]}


def _runner(T: Any, wrap: Callable[[Callable], Callable], size: str) -> Callable[[], S.Prepared]:
    def build() -> S.Prepared:
        sizes = SIZES[size]
        params_np, x_np, onehot_np = inputs("full" if size == "full" else "quick")
        params = [T.tensor(p, requires_grad=True) for p in params_np]
        batches = [(T.tensor(x_np[:n] if n <= len(x_np) else x_np.repeat(2, 0)[:n]),
                    T.tensor(onehot_np[:n] if n <= len(onehot_np) else onehot_np.repeat(2, 0)[:n])) for n in sizes]
        step = wrap(make_step(T))

        def call():
            return [step(params, x, o) for x, o in batches], params
        info = getattr(step, "cache_info", None)
        return S.Prepared(call, compiler_notes=(lambda: [f"compiles {info()['compiles']}, symbolic sizes "
                                                         f"{info()['symbolic_sizes']}"]) if info else lambda: [])
    return build


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, _runner(fusegrad, lambda f: f, size)),
        Entry(S.FG_COMPILED, _runner(fusegrad, fusegrad.compile, size)),
        Entry(S.TORCH_EAGER, lambda: _runner(S.torch(), lambda f: f, size)()),
        Entry(S.TORCH_COMPILE, lambda: _runner(S.torch(), S.torch_compile, size)()),
    ]
    return [Task("W9", "steps", entries, rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
