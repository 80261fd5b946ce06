"""W7: one training step of LeNet-5 (conv 6@5x5, max pool, conv 16@5x5, max pool, 120, 84,
10; ReLU; cross-entropy; SGD with momentum), batch 64 of 1x28x28.

Stresses convolution (fusegrad: a window gather and one GEMM per layer), pooling and a
compiled CNN training step. The model is the same ``nn`` code for fusegrad and PyTorch,
loaded with the same weights; the step (zero_grad, forward, ``loss.backward()``,
``opt.step()``) is compiled whole where the system can. No JAX entry: JAX's convolutions
and pooling are spelled differently (``lax.conv_general_dilated``, ``reduce_window``), not
the same program."""
from __future__ import annotations

from typing import Any

import numpy as np

import fusegrad

from . import systems as S
from .common import rng
from .harness import Entry, Results, Task, Timing, run_tasks

TITLE = "one SGD-momentum step of LeNet-5 (conv, pool, conv, pool, 120, 84, 10), batch 64 of 1x28x28"
SIZES = {"full": 64, "quick": 2}
LR, MOMENTUM = 0.01, 0.9


def make_model(T: Any) -> Any:
    nn = T.nn
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def inputs(size: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """Weights (by state_dict name, drawn here so every system starts alike), images and labels."""
    g = rng(7)
    shapes = {"0.weight": (6, 1, 5, 5), "0.bias": (6,), "3.weight": (16, 6, 5, 5), "3.bias": (16,),
              "7.weight": (120, 400), "7.bias": (120,), "9.weight": (84, 120), "9.bias": (84,),
              "11.weight": (10, 84), "11.bias": (10,)}
    weights = {}
    for name, shape in shapes.items():
        fan_in = int(np.prod(shapes[name.replace("bias", "weight")][1:]))
        weights[name] = g.uniform(-1, 1, shape).astype(np.float32) / np.float32(np.sqrt(fan_in))
    batch = SIZES[size]
    x = g.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    y = g.integers(0, 10, batch)
    return weights, x, y


def _prepare(T: Any, size: str, compile_with=None) -> S.Prepared:
    weights, x_np, y_np = inputs(size)
    model = make_model(T)
    with T.no_grad():
        for name, p in model.named_parameters():
            p.copy_(T.tensor(weights[name]))
    opt = T.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = T.tensor(x_np), T.tensor(y_np)

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = T.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    params = list(model.parameters())
    if compile_with is None:
        return S.Prepared(lambda: (step(x, y), params))
    if compile_with == "fusegrad":
        return S.fusegrad_compiled(lambda f: lambda: (f(x, y), params), step)
    compiled = S.torch_compile(step)
    return S.Prepared(lambda: (compiled(x, y), params))


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, lambda: _prepare(fusegrad, size)),
        Entry(S.FG_COMPILED, lambda: _prepare(fusegrad, size, "fusegrad")),
        Entry(S.TORCH_EAGER, lambda: _prepare(S.torch(), size)),
        Entry(S.TORCH_COMPILE, lambda: _prepare(S.torch(), size, "torch")),
    ]
    # compared: the loss and all ten parameters after the first step from identical weights
    return [Task("W7", "step", entries, rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
