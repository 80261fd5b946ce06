"""W10: W2's training step with ``if loss.item() > threshold:`` in its middle (a graph break).

The step runs the forward, reads the loss as a Python number and picks the learning rate
from it, then runs ``loss.backward()`` and the SGD update. fusegrad compiles the code on
both sides of the break as segments (runtime.segments); torch.compile breaks the graph there
too. Targets (issue 19): at most 1.0x torch.compile's time and at most 0.5x fusegrad eager's."""
from __future__ import annotations

from typing import Any, Callable

import fusegrad

from . import systems as S
from .harness import Entry, Results, Task, Timing, run_tasks
from .w2_mlp import LR, SIZES, inputs, loss_fn

TITLE = "W2's SGD step with `if loss.item() > threshold:` between forward and backward"
THRESHOLD = 1.0


def make_step(T: Any) -> Callable:
    """The training step for fusegrad or torch (``T``)."""
    def log_softmax(z: Any) -> Any:
        return T.log_softmax(z, dim=1)

    def step(params: list, x: Any, onehot: Any) -> Any:
        loss = loss_fn(params, x, onehot, T.relu, log_softmax)
        if loss.item() > THRESHOLD:  # the graph break
            lr = LR
        else:
            lr = LR / 2
        loss.backward()
        with T.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
        return loss
    return step


def _torchlike(T: Any, wrap: Callable[[Callable], Callable], size: str) -> Callable[[], S.Prepared]:
    def build() -> S.Prepared:
        params_np, x_np, onehot_np = inputs(size)
        params = [T.tensor(p, requires_grad=True) for p in params_np]
        x, onehot = T.tensor(x_np), T.tensor(onehot_np)
        step = wrap(make_step(T))
        return S.Prepared(lambda: (step(params, x, onehot), params))
    return build


def _fusegrad_compiled(size: str) -> S.Prepared:
    params_np, x_np, onehot_np = inputs(size)
    params = [fusegrad.tensor(p, requires_grad=True) for p in params_np]
    x, onehot = fusegrad.tensor(x_np), fusegrad.tensor(onehot_np)
    return S.fusegrad_compiled(lambda step: lambda: (step(params, x, onehot), params), make_step(fusegrad))


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, _torchlike(fusegrad, lambda f: f, size)),
        Entry(S.FG_COMPILED, lambda: _fusegrad_compiled(size)),
        Entry(S.TORCH_EAGER, lambda: _torchlike(S.torch(), lambda f: f, size)()),
        Entry(S.TORCH_COMPILE, lambda: _torchlike(S.torch(), S.torch_compile, size)()),
    ]
    # compared: the loss and all six parameters after the first step from identical weights
    return [Task("W10", "step", entries, rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
