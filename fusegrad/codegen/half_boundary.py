"""A backend's executable for a half-precision graph that it computes in float32
(passes.upcast): bfloat16/float16 arguments are converted to float32 before the call and
those outputs rounded back (nearest even, overflow to inf, NaN kept) after it. NumPy
arrays are converted by NumPy; a backend whose executables take device arrays passes
``device``, an object whose ``widen(array)`` and ``narrow(array, dtype)`` convert those
where they are (codegen.cuda_half)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.graph import Graph
from ..passes.upcast import HALF, upcast

_F32 = np.dtype(np.float32)


class HalfBoundary:
    """``inner`` (compiled from ``upcast(graph)``) called with and returning ``graph``'s
    dtypes; other attributes (stages, kernel_source, ...) are inner's."""

    def __init__(self, inner, graph: Graph, device=None):
        self._inner, self._device = inner, device
        self._args = [k for k, v in enumerate(graph.arguments()) if v.dtype in HALF]
        self._outs = [(k, v.dtype) for k, v in enumerate(graph.outputs) if getattr(v, "dtype", None) in HALF]

    def __call__(self, *arrays) -> tuple:
        arrays = list(arrays)
        for k in self._args:
            a = arrays[k]
            arrays[k] = np.asarray(a).astype(_F32) if self._device is None or _on_host(a) else self._device.widen(a)
        res = list(self._inner(*arrays))
        with np.errstate(over="ignore", invalid="ignore"):
            for k, dt in self._outs:
                r = res[k]
                res[k] = r.astype(dt) if self._device is None or _on_host(r) else self._device.narrow(r, dt)
        return tuple(res)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def _on_host(a) -> bool:
    return isinstance(a, (np.ndarray, np.generic))


def compile_upcast(compile_fn, graph: Graph, donate: Optional[dict] = None, device=None):
    """``compile_fn(graph, donate)`` for a graph without half values; for one with them,
    that of ``upcast(graph)`` behind a HalfBoundary converting with ``device`` (no donation
    involving a half value: the kernel's float32 copy is not the caller's array)."""
    up = upcast(graph)
    if up is graph:
        return compile_fn(graph, donate)
    boundary = HalfBoundary(None, graph, device)
    half_args, half_outs = set(boundary._args), {k for k, _ in boundary._outs}
    kept = {o: a for o, a in (donate or {}).items() if o not in half_outs and a not in half_args}
    boundary._inner = compile_fn(up, kept or None)
    return boundary
