"""``torch._dynamo.config``: the settings programs set before compiling, with PyTorch's
defaults. ``recompile_limit`` (alias ``cache_size_limit``) is read by ``compile``: the
signatures one compiled function keeps before further ones run eagerly (or, with
``fail_on_recompile_limit_hit``, raise); ``error_on_recompile`` makes any recompile raise;
``automatic_dynamic_shapes`` False keeps a changed size static (a compile per size). The others are
accepted and do not change fusegrad's compiler (its graph breaks always fall back to eager
code, as ``suppress_errors`` asks; it specializes and generalizes sizes on its own rules)."""
from __future__ import annotations

import contextlib
import sys
import types

recompile_limit = 8
accumulated_recompile_limit = 256
suppress_errors = False
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
automatic_dynamic_shapes = True
assume_static_by_default = True
specialize_int = False
optimize_ddp = True
inline_inbuilt_nn_modules = True
error_on_recompile = False
fail_on_recompile_limit_hit = False
_ALIASES = {"cache_size_limit": "recompile_limit", "accumulated_cache_size_limit": "accumulated_recompile_limit"}


class _Patch(contextlib.ContextDecorator):
    """Settings changed inside a ``with`` block or a decorated function, restored after."""

    def __init__(self, changes: dict) -> None:
        self.changes, self.saved = changes, []

    def __enter__(self):
        module = sys.modules[__name__]
        self.saved.append({name: getattr(module, name) for name in self.changes})
        for name, value in self.changes.items():
            setattr(module, name, value)
        return self

    def __exit__(self, *exc) -> None:
        module = sys.modules[__name__]
        for name, value in self.saved.pop().items():
            setattr(module, name, value)


def patch(arg1=None, arg2=None, **kwargs) -> _Patch:
    """``config.patch(name, value)``, ``config.patch({name: value})`` or
    ``config.patch(name=value)``: a context manager and decorator setting them meanwhile."""
    changes = dict(kwargs)
    if isinstance(arg1, str):
        changes[arg1] = arg2
    elif isinstance(arg1, dict):
        changes.update(arg1)
    for name in changes:
        getattr(sys.modules[__name__], name)  # (an unknown name raises now, as PyTorch's)
    return _Patch(changes)


class _Config(types.ModuleType):
    """Reads and writes of the old names reach the new ones; unknown names are refused, as
    PyTorch's config module refuses them."""

    def __getattr__(self, name: str):
        if name in _ALIASES:
            return getattr(self, _ALIASES[name])
        raise AttributeError(f"torch._dynamo.config.{name} does not exist")

    def __setattr__(self, name: str, value) -> None:
        name = _ALIASES.get(name, name)
        if not name.startswith("_") and name not in self.__dict__:
            raise AttributeError(f"torch._dynamo.config.{name} does not exist")
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Config
