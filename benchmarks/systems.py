"""The systems compared, loaded on demand so that a missing one skips its rows.

Every loader raises :class:`Unavailable` with a readable note instead of letting an
ImportError escape: the suite must run (and say what it skipped) wherever only fusegrad
and NumPy are installed, as in CI."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Optional

import fusegrad
from fusegrad.runtime.kernel_cache import modules_loaded

FG_EAGER = "fusegrad eager"
FG_COMPILED = "fusegrad compiled"
TORCH_EAGER = "PyTorch eager"
TORCH_COMPILE = "torch.compile"
JAX_JIT = "JAX jit"

#: The systems every fusegrad figure is quoted against, as ratios.
ANCHORS = (TORCH_EAGER, TORCH_COMPILE, JAX_JIT)

#: Threads for every system (BENCHMARKS.md: both cores in use).
THREADS = 2


class Unavailable(Exception):
    """A system cannot run here (not installed, or it failed to build); the message says why."""


@functools.cache
def torch() -> ModuleType:
    """PyTorch, limited to both cores."""
    try:
        import torch as _torch
    except ImportError as exc:
        raise Unavailable(f"torch not installed ({exc})") from None
    _torch.set_num_threads(THREADS)
    return _torch


@functools.cache
def jax() -> ModuleType:
    """JAX, in its default float32 mode."""
    try:
        import jax as _jax
    except ImportError as exc:
        raise Unavailable(f"jax not installed ({exc})") from None
    return _jax


def torch_compile(fn: Callable) -> Callable:
    """``torch.compile(fn)``; compile errors surface on the first call and are reported there."""
    return torch().compile(fn)


def jax_jit(fn: Callable) -> Callable[..., Any]:
    """``jax.jit(fn)`` wrapped to block until the result is computed (JAX dispatches asynchronously)."""
    jitted = jax().jit(fn)
    block = jax().block_until_ready
    return lambda *args: block(jitted(*args))


@dataclass
class Prepared:
    """A zero-argument call ready to be timed, and how to ask it whether it fell back to eager."""

    call: Callable[[], Any]
    fallback_reason: Callable[[], Optional[str]] = lambda: None
    compiler_notes: Callable[[], list[str]] = lambda: []
    #: ms of the call that traced and compiled, when that was not the first call (see FusegradCompiled)
    late_compile_ms: Callable[[], Optional[float]] = lambda: None
    #: the kernel modules that call compiled
    late_compile_kernels: Callable[[], int] = lambda: 0


class FusegradCompiled:
    """``fusegrad.compile(fn, **options)``; when it records a fallback in ``cache_info()``,
    its rows still run and say so instead of vanishing."""

    def __init__(self, fn: Callable, **options: Any):
        self.fn = fusegrad.compile(fn, **options)
        self.eager_calls = 0  # calls before the one that compiled (an optimizer's state warm-up)
        self.compile_ms: Optional[float] = None
        self.compile_kernels = 0

    def __call__(self, *args: Any) -> Any:
        if self.compile_ms is not None:
            return self.fn(*args)
        loaded = modules_loaded()
        start = time.perf_counter()
        out = self.fn(*args)
        if getattr(self.fn, "cache_info", lambda: {})().get("compiles"):
            self.compile_ms = (time.perf_counter() - start) * 1e3
            self.compile_kernels = modules_loaded() - loaded
        else:
            self.eager_calls += 1
        return out

    def late_compile_kernels(self) -> int:
        """The kernel modules the compiling call compiled, when earlier calls ran eagerly."""
        return self.compile_kernels if self.eager_calls else 0

    def late_compile_ms(self) -> Optional[float]:
        """The compiling call's time when earlier calls ran eagerly (compile runs a step whose
        optimizer has no state yet eagerly, and traces the next), else None."""
        return self.compile_ms if self.eager_calls else None

    def fallback_reason(self) -> Optional[str]:
        """None when the compiled path ran; otherwise why it ran eagerly."""
        info = getattr(self.fn, "cache_info", lambda: {})()
        if not info.get("fallbacks"):
            return None
        breaks = [str(b) for b in info.get("graph_breaks") or []]
        return "; ".join(breaks) or f"{info['fallbacks']} fallback(s) recorded by cache_info()"

    def compiler_notes(self) -> list[str]:
        """``cache_info()["notes"]`` (e.g. a backend substituted), worth showing beside a figure."""
        return [str(n) for n in getattr(self.fn, "cache_info", lambda: {})().get("notes") or []]


def fusegrad_compiled(make_call: Callable[[Callable], Callable[[], Any]], fn: Callable,
                      **options: Any) -> Prepared:
    """Compile ``fn`` and bind it with ``make_call`` into a :class:`Prepared`."""
    compiled = FusegradCompiled(fn, **options)
    return Prepared(make_call(compiled), compiled.fallback_reason, compiled.compiler_notes, compiled.late_compile_ms,
                    compiled.late_compile_kernels)
