"""``torch.jit``, as far as programs written for PyTorch use it to run code.

fusegrad has no TorchScript: ``script`` and ``trace`` return what they are given, which then
runs as the Python it is (TorchScript is a subset of Python with the same results), and
the decorators (``ignore``, ``unused``, ``export``) leave functions as they are. To compile
a function or module, use ``fusegrad.compile``. ``save`` pickles the module whole (as
``fusegrad.save(module, f)``) for ``load`` to give back; PyTorch's TorchScript archives
cannot be loaded."""
from __future__ import annotations

from typing import Any, Callable, Final  # noqa: F401  (torch.jit.Final)

__all__ = ["Final", "Future", "ScriptFunction", "ScriptModule", "annotate", "export", "fork", "ignore",
           "freeze", "is_scripting", "is_tracing", "load", "save", "script", "trace", "unused", "wait"]


class ScriptModule:
    """TorchScript's module type; nothing fusegrad returns is one."""


class ScriptFunction:
    """TorchScript's function type; nothing fusegrad returns is one."""


def script(obj: Any, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None) -> Any:
    """``obj`` itself (a function, module or class), run as Python."""
    return obj


def trace(func: Any, example_inputs=None, optimize=None, check_trace: bool = True, check_inputs=None,
          check_tolerance: float = 1e-5, strict: bool = True, _force_outplace: bool = False,
          _module_class=None, _compilation_unit=None, example_kwarg_inputs=None, _store_inputs: bool = True) -> Any:
    """``func`` itself: it runs define-by-run, so control flow that depends on the inputs is
    followed on every call (where a TorchScript trace would replay the example's path)."""
    return func


def ignore(drop: Any = False, **kwargs) -> Any:
    """Decorator (``@ignore`` or ``@ignore(drop=True)``): the function unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    return fn


def export(fn: Callable) -> Callable:
    return fn


def is_scripting() -> bool:
    """False: fusegrad code always runs as Python."""
    return False


def is_tracing() -> bool:
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    return the_value


class Future:
    """The result of ``fork``: computed when forked, returned by ``wait``."""

    def __init__(self, value: Any):
        self._value = value

    def wait(self) -> Any:
        return self._value

    def done(self) -> bool:
        return True

    def value(self) -> Any:
        return self._value


def freeze(mod: Any, preserved_attrs=None, optimize_numerics: bool = True) -> Any:
    """``mod`` itself (its weights are read as they are at every call); PyTorch's check that
    it is in eval mode."""
    if getattr(mod, "training", False):
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. Please call .eval() on "
                           "your module before freezing.")
    return mod


def fork(func: Callable, *args, **kwargs) -> Future:
    """``func(*args, **kwargs)`` run now (one thread of execution), as a Future."""
    return Future(func(*args, **kwargs))


def wait(future: Future) -> Any:
    return future.wait()


def save(m: Any, f: Any, _extra_files=None) -> None:
    """Save the (scripted or traced, so plain) module ``m`` whole, pickled in PyTorch's zip
    format as ``fusegrad.save(m, f)``: ``jit.load`` gives it back where its class can be
    imported. Not a TorchScript archive: PyTorch's ``jit.load`` cannot read it."""
    import pickle
    from .serialization import save as save_whole
    try:
        save_whole(m, f)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise RuntimeError(f"fusegrad.jit.save: the module is pickled whole, so its class must be importable "
                           f"(defined at a module's top level) and its attributes and hooks picklable (no lambdas) "
                           f"({e}); or save model.state_dict() with fusegrad.save") from None


def load(f: Any, map_location=None, _extra_files=None, _restore_shapes: bool = False) -> Any:
    """The module ``jit.save`` wrote (unpickled with its code: trusted files only). A
    TorchScript archive written by PyTorch has no Python module to rebuild and is refused."""
    import pickle
    from .serialization import load as load_whole
    try:
        return load_whole(f, map_location=map_location, weights_only=False)
    except (pickle.UnpicklingError, KeyError, RuntimeError, ImportError) as e:
        raise RuntimeError(f"fusegrad.jit.load: not a module saved by fusegrad.jit.save ({e}); fusegrad has no "
                           "TorchScript, so PyTorch's TorchScript archives cannot be loaded: load their "
                           "state_dict with fusegrad.load and load_state_dict instead") from None
