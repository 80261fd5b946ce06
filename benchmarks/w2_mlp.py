"""W2: one training step of an MLP 784-512-512-10 with ReLU, softmax cross-entropy and SGD,
batch 128.

Stresses matmul (BLAS) with fused epilogues and a compiled backward. The step is one
function that runs the forward, ``loss.backward()`` and the SGD update in place, compiled
whole where the system can (issue 4: fusegrad compiles it as one graph; torch.compile
breaks the graph at ``backward``). Targets are one-hot float32 so that every system runs the
same arithmetic. JAX's step is the functional equivalent (``value_and_grad``, new params).

The floor is the matmuls alone in NumPy. BENCHMARKS.md says "the six GEMMs"; a step of three
layers needs eight (three forward, three weight gradients, two input gradients), and a floor
that skipped required work would not be one, so all eight are timed."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import fusegrad

from . import systems as S
from .common import rng
from .harness import Entry, Results, Task, Timing, run_tasks

TITLE = "one SGD step of an MLP 784-512-512-10, ReLU, softmax cross-entropy, batch 128"
SIZES = {"full": (128, (784, 512, 512, 10)), "quick": (8, (12, 16, 16, 10))}
LR = 0.01
NUMPY = "NumPy GEMMs only (8)"


def loss_fn(params: list, x: Any, onehot: Any, relu: Callable, log_softmax: Callable) -> Any:
    """Mean softmax cross-entropy of the MLP; ``relu``/``log_softmax`` come from the system."""
    W1, b1, W2, b2, W3, b3 = params
    h = relu(x @ W1 + b1)
    h = relu(h @ W2 + b2)
    return -(log_softmax(h @ W3 + b3) * onehot).sum() / x.shape[0]


def make_step(T: Any, pick_lr: Callable[[Any], float] = lambda loss: LR) -> Callable:
    """The training step for fusegrad or torch (``T``): forward, backward, SGD in place
    with the learning rate ``pick_lr(loss)`` (W10 reads the loss there: a graph break)."""
    def log_softmax(z: Any) -> Any:
        return T.log_softmax(z, dim=1)

    def step(params: list, x: Any, onehot: Any) -> Any:
        loss = loss_fn(params, x, onehot, T.relu, log_softmax)
        lr = pick_lr(loss)
        loss.backward()
        with T.no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
        return loss
    return step


def inputs(size: str) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    batch, widths = SIZES[size]
    g = rng(2)
    params = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        params.append((g.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        params.append(np.zeros(fan_out, np.float32))
    x = g.standard_normal((batch, widths[0])).astype(np.float32)
    onehot = np.eye(widths[-1], dtype=np.float32)[g.integers(0, widths[-1], batch)]
    return params, x, onehot


def torchlike(T: Any, wrap: Callable[[Callable], Callable], size: str,
              make: Callable[[Any], Callable] = make_step) -> Callable[[], S.Prepared]:
    """Build a fusegrad or torch entry: fresh leaf parameters, the step ``make(T)`` wrapped
    by ``wrap``."""
    def build() -> S.Prepared:
        params_np, x_np, onehot_np = inputs(size)
        params = [T.tensor(p, requires_grad=True) for p in params_np]
        x, onehot = T.tensor(x_np), T.tensor(onehot_np)
        step = wrap(make(T))
        return S.Prepared(lambda: (step(params, x, onehot), params))
    return build


def fusegrad_compiled(size: str, make: Callable[[Any], Callable] = make_step) -> S.Prepared:
    """The fusegrad.compile entry of the step ``make(fusegrad)``."""
    params_np, x_np, onehot_np = inputs(size)
    params = [fusegrad.tensor(p, requires_grad=True) for p in params_np]
    x, onehot = fusegrad.tensor(x_np), fusegrad.tensor(onehot_np)
    return S.fusegrad_compiled(lambda step: lambda: (step(params, x, onehot), params), make(fusegrad))


def _jax(size: str) -> S.Prepared:
    jax = S.jax()
    params_np, x_np, onehot_np = inputs(size)

    def step(params: list, x: Any, onehot: Any) -> tuple:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, onehot, jax.nn.relu,
                                                  lambda z: jax.nn.log_softmax(z, axis=1))
        return loss, [p - LR * g for p, g in zip(params, grads)]

    jitted = S.jax_jit(step)
    state = {"params": [jax.numpy.asarray(p) for p in params_np]}
    x, onehot = jax.numpy.asarray(x_np), jax.numpy.asarray(onehot_np)

    def call() -> tuple:
        loss, state["params"] = jitted(state["params"], x, onehot)
        return loss, state["params"]
    return S.Prepared(call)


def _numpy_gemms(size: str) -> S.Prepared:
    """The eight matmuls of a step on operands of the right shapes, nothing else."""
    params, x, _ = inputs(size)
    W1, _, W2, _, W3, _ = params
    g = rng(5)
    h1, h2 = (g.standard_normal((x.shape[0], W.shape[1])).astype(np.float32) for W in (W1, W2))
    d1, d2, d3 = (g.standard_normal((x.shape[0], W.shape[1])).astype(np.float32) for W in (W1, W2, W3))

    def call() -> tuple:
        return (x @ W1, h1 @ W2, h2 @ W3,           # forward
                h2.T @ d3, d3 @ W3.T,               # layer 3: dW, dx
                h1.T @ d2, d2 @ W2.T,               # layer 2: dW, dx
                x.T @ d1)                           # layer 1: dW
    return S.Prepared(call)


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, torchlike(fusegrad, lambda f: f, size)),
        Entry(S.FG_COMPILED, lambda: fusegrad_compiled(size)),
        Entry(S.TORCH_EAGER, lambda: torchlike(S.torch(), lambda f: f, size)()),
        Entry(S.TORCH_COMPILE, lambda: torchlike(S.torch(), S.torch_compile, size)()),
        Entry(S.JAX_JIT, lambda: _jax(size)),
        Entry(NUMPY, lambda: _numpy_gemms(size), comparable=False),
    ]
    # compared: the loss and all six parameters after the first step from identical weights
    return [Task("W2", "step", entries, rtol=1e-4, atol=1e-5)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
