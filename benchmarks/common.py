"""Entries for workloads written once against a torch-like namespace ``T``.

W1, W3 and W4 define their function as ``fn(T, *arrays)`` using only ``T.sin``, ``T.tanh``,
``@``, indexing and ``.sum()``, which fusegrad, torch, ``jax.numpy`` and NumPy all spell
alike, so every system runs literally the same arithmetic. The transforms (``grad``,
``jacrev``, ``hessian``) are spelled alike too: ``fusegrad.func``, ``torch.func`` and
``jax``."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence, Union

import numpy as np

import fusegrad

from . import systems as S
from .harness import Entry

#: "forward" (the function itself) or the name of a transform in fusegrad.func / torch.func / jax.
Transform = str
Argnums = Union[int, tuple]


def _apply(transforms: Any, transform: Transform, fn: Callable, argnums: Argnums) -> Callable:
    return fn if transform == "forward" else getattr(transforms, transform)(fn, argnums=argnums)


def _bind(fn: Callable, args: Sequence[Any]) -> Callable[[], Any]:
    return lambda: fn(*args)


def fusegrad_entries(fn: Callable, inputs: Sequence[np.ndarray], transform: Transform,
                     argnums: Argnums = 0) -> list[Entry]:
    """fusegrad eager and ``fusegrad.compile`` of the transformed function."""
    def eager() -> S.Prepared:
        args = [fusegrad.tensor(a) for a in inputs]
        return S.Prepared(_bind(_apply(fusegrad.func, transform, functools.partial(fn, fusegrad), argnums), args))

    def compiled() -> S.Prepared:
        args = [fusegrad.tensor(a) for a in inputs]
        f = _apply(fusegrad.func, transform, functools.partial(fn, fusegrad), argnums)
        return S.fusegrad_compiled(lambda cf: _bind(cf, args), f)

    return [Entry(S.FG_EAGER, eager), Entry(S.FG_COMPILED, compiled)]


def anchor_entries(fn: Callable, inputs: Sequence[np.ndarray], transform: Transform,
                   argnums: Argnums = 0) -> list[Entry]:
    """PyTorch eager, torch.compile and JAX jit of the same transformed function."""
    def torch_eager() -> S.Prepared:
        torch = S.torch()
        args = [torch.from_numpy(a.copy()) for a in inputs]
        return S.Prepared(_bind(_apply(torch.func, transform, functools.partial(fn, torch), argnums), args))

    def torch_compiled() -> S.Prepared:
        torch = S.torch()
        args = [torch.from_numpy(a.copy()) for a in inputs]
        f = _apply(torch.func, transform, functools.partial(fn, torch), argnums)
        return S.Prepared(_bind(S.torch_compile(f), args))

    def jax_jit() -> S.Prepared:
        jax = S.jax()
        args = [jax.numpy.asarray(a) for a in inputs]  # on the device before timing
        return S.Prepared(_bind(S.jax_jit(_apply(jax, transform, functools.partial(fn, jax.numpy), argnums)), args))

    return [Entry(S.TORCH_EAGER, torch_eager), Entry(S.TORCH_COMPILE, torch_compiled), Entry(S.JAX_JIT, jax_jit)]


def standard_entries(fn: Callable, inputs: Sequence[np.ndarray], transform: Transform,
                     argnums: Argnums = 0) -> list[Entry]:
    """Every system's entry for ``transform`` of ``fn`` on ``inputs``."""
    return fusegrad_entries(fn, inputs, transform, argnums) + anchor_entries(fn, inputs, transform, argnums)


def rng(seed: int) -> np.random.Generator:
    """The inputs' generator: fixed per workload, so every run sees the same data."""
    return np.random.default_rng(seed)
