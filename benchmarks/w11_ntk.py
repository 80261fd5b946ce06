"""W11: the neural tangent kernel of a 3-layer MLP 64-128-128-10 over a batch of 64 by 64:
``vmap(jacrev(f))`` of ``functional_call`` over the parameters, then the kernel matrix
(``einsum('Naf,Mbf->NMab')`` summed over the parameters), as torch.func's NTK tutorial.

Targets (issue 19): fusegrad.func without compile at most 1.0x torch.func's time; with
``fusegrad.compile`` at most 0.5x."""
from __future__ import annotations

from typing import Any

import numpy as np

import fusegrad

from . import systems as S
from .common import rng
from .harness import Entry, Results, Task, Timing, run_tasks

TITLE = "NTK of an MLP 64-128-128-10: vmap(jacrev(functional_call)) over 64x64 inputs"
SIZES = {"full": (64, (64, 128, 128, 10)), "quick": (4, (6, 8, 8, 3))}


def _weights(size: str) -> tuple:
    n, widths = SIZES[size]
    g = rng(11)
    params = {}
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        params[f"{2 * i}.weight"] = (g.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32)
        params[f"{2 * i}.bias"] = (0.1 * g.standard_normal(b)).astype(np.float32)
    return params, g.standard_normal((n, widths[0])).astype(np.float32), \
        g.standard_normal((n, widths[0])).astype(np.float32), widths


def make_ntk(T: Any, func: Any, net: Any, params: dict):
    def fnet_single(p, x):
        return func.functional_call(net, p, (x.unsqueeze(0),)).squeeze(0)

    def ntk(x1, x2):
        j1 = func.vmap(func.jacrev(fnet_single), (None, 0))(params, x1)
        j2 = func.vmap(func.jacrev(fnet_single), (None, 0))(params, x2)
        return T.stack([T.einsum("Naf,Mbf->NMab", j1[k].flatten(2), j2[k].flatten(2)) for k in j1]).sum(0)
    return ntk


def _build(T: Any, size: str, compiled: bool) -> S.Prepared:
    p_np, x1_np, x2_np, widths = _weights(size)
    layers = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers += [T.nn.Linear(a, b)] + ([T.nn.Tanh()] if i < len(widths) - 2 else [])
    net = T.nn.Sequential(*layers)
    params = {k: T.tensor(v) for k, v in p_np.items()}
    ntk = make_ntk(T, T.func, net, params)
    if compiled:
        ntk = fusegrad.compile(ntk)
    x1, x2 = T.tensor(x1_np), T.tensor(x2_np)
    return S.Prepared(lambda: ntk(x1, x2))


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, lambda: _build(fusegrad, size, False)),
        Entry(S.FG_COMPILED, lambda: _build(fusegrad, size, True)),
        Entry(S.TORCH_EAGER, lambda: _build(S.torch(), size, False)),
    ]
    return [Task("W11", "ntk", entries, rtol=1e-3, atol=1e-4)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
