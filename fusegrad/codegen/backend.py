"""The backend interface: what turns an optimized Graph into something callable.

A ``Backend`` has ``name`` and ``compile(graph, donate=None, symbolic=False) -> Executable``. An
``Executable`` is called with NumPy arrays ordered ``graph.inputs`` then ``graph.consts``
and returns a tuple of arrays, one per ``graph.outputs``. ``donate`` maps an output's
position to an argument's position whose array the caller overwrites with that output
afterwards anyway (an in-place update of a parameter): the executable may compute the
output straight into that array, and then returns a view of it; ``kernel_source()`` is its generated code and
the optional ``stages`` dict maps stage names (e.g. ``"fused"``) to IR (its str() is the listing).
``symbolic=True`` asks for kernels whose extents and strides are runtime values, shared by
graphs that differ only in sizes (same rank, dtypes and broadcast pattern): a front end
that traces one function at several sizes compiles each distinct kernel once (the cpu
backend: codegen.cpu_symbolic; a backend without such kernels may ignore it).
A backend that cannot lower an op raises ``Unsupported`` (the compiler falls back to
eager for that signature). A backend may also have ``compile_backward`` (same arguments),
which the compiler uses for backward graphs instead (a backend people write sees forward
graphs only: runtime/graph_module.py). Backends register by name; ``"cpu"`` registers itself from
``fusegrad.codegen.cpu`` when that module exists."""
from __future__ import annotations

import importlib
import threading
from typing import Callable, Optional, Protocol, runtime_checkable

import numpy as np

from ..ir.graph import Graph


class Unsupported(NotImplementedError):
    """A backend has no lowering for something in the graph; ``reason`` says what."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@runtime_checkable
class Executable(Protocol):
    def __call__(self, *arrays: np.ndarray) -> tuple: ...

    def kernel_source(self) -> str: ...


@runtime_checkable
class Backend(Protocol):
    name: str

    def compile(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False,
                blas_nearby: bool = False) -> Executable: ...


_FACTORIES: dict[str, Callable[[], Backend]] = {}
_INSTANCES: dict[str, Backend] = {}
_LOCK = threading.Lock()
# Modules that register a backend on import, tried the first time that name is asked for.
_PROVIDERS = {"cpu": "fusegrad.codegen.cpu", "cuda": "fusegrad.codegen.cuda"}
# torch.compile's backend names, for programs that spell them out: its default compiler is
# ours, and its tracing-only backends run the traced graph as "eager" does
ALIASES = {"inductor": "cpu", "aot_eager": "eager", "aot_eager_decomp_partition": "eager"}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Register ``factory() -> Backend`` under ``name`` (replacing any previous one)."""
    with _LOCK:
        _FACTORIES[name] = factory
        _INSTANCES.pop(name, None)


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``. A known backend whose module is missing or
    fails to import (codegen not available) resolves to ``"eager"``; the caller sees
    that from ``backend.name`` and records it. Unknown names raise ValueError."""
    name = ALIASES.get(name, name)
    if name not in _FACTORIES and name in _PROVIDERS:
        try:
            importlib.import_module(_PROVIDERS[name])
        except ImportError:
            pass
    with _LOCK:
        if name not in _FACTORIES:
            if name in _PROVIDERS:
                name = "eager"
            else:
                raise ValueError(f"unknown backend {name!r}; registered: {sorted(_FACTORIES)} (and torch's "
                                 f"{', '.join(sorted(ALIASES))})")
        inst = _INSTANCES.get(name)
        if inst is None:
            inst = _INSTANCES[name] = _FACTORIES[name]()
        return inst


def _eager_factory() -> Backend:
    from ..runtime.interpreter import EagerBackend
    return EagerBackend()


register_backend("eager", _eager_factory)
