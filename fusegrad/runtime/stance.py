"""``torch.compiler.set_stance``: how compiled functions behave for a while. ``"default"``
compiles; ``"force_eager"`` runs every compiled function's Python eagerly;
``"eager_on_recompile"`` runs eagerly a call that would compile a function again (its
compiled signatures still run); ``"fail_on_recompile"`` raises ``RecompileError`` there.
Usable as a call, a context manager (restoring the stance before it) and a decorator."""
from __future__ import annotations

import functools
from typing import Callable, Optional

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


class _Stance:
    """The stance in effect (explicit process state, as grad mode's)."""
    name = "default"
    force_eager = False


STANCE = _Stance()


class set_stance:  # noqa: N801 - PyTorch's name; a class so that it is also a context manager
    """Set the stance now (see the module docstring); as a context manager or decorator the
    previous stance comes back afterwards."""

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: Optional[Callable] = None) -> None:
        if stance not in STANCES:
            raise RuntimeError(f"invalid torch.compile stance '{stance}'")
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        self.previous = STANCE.name
        _apply(stance)

    def __enter__(self) -> "set_stance":
        return self

    def __exit__(self, *exc) -> None:
        _apply(self.previous)

    def __call__(self, fn: Callable) -> Callable:
        stance, previous = STANCE.name, self.previous
        _apply(previous)  # (as a decorator: the stance holds while fn runs)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            before = STANCE.name
            _apply(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _apply(before)
        return wrapper


def _apply(name: str) -> None:
    STANCE.name = name
    STANCE.force_eager = name == "force_eager"
