"""``torch.overrides``: the ``__torch_function__`` protocol's helpers that library code calls
first (``has_torch_function``, ``handle_torch_function``, ``is_tensor_like``). fusegrad's
own ops do not dispatch to ``__torch_function__``; these helpers let code written for it
run its own overrides where it asks for them."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .runtime.sparse_bindings import is_tensor

__all__ = ["handle_torch_function", "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
           "is_tensor_like"]


def is_tensor_like(inp: Any) -> bool:
    """A tensor, or an object whose type defines ``__torch_function__``."""
    return is_tensor(inp) or hasattr(type(inp), "__torch_function__")


def _overloaded(args: Iterable[Any]) -> list:
    """The arguments (one per type, in order) whose type overrides ``__torch_function__``."""
    seen, out = set(), []
    for a in args:
        t = type(a)
        if t not in seen and not is_tensor(a) and hasattr(t, "__torch_function__"):
            seen.add(t)
            out.append(a)
    return out


def has_torch_function(relevant_args: Iterable[Any]) -> bool:
    """Whether an argument's type (other than fusegrad's tensors) defines ``__torch_function__``."""
    return bool(_overloaded(relevant_args))


def has_torch_function_unary(arg: Any) -> bool:
    return has_torch_function((arg,))


def has_torch_function_variadic(*args: Any) -> bool:
    return has_torch_function(args)


def handle_torch_function(public_api: Callable, relevant_args: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
    """Call the first ``__torch_function__`` override that does not return ``NotImplemented``
    (as ``torch.overrides.handle_torch_function``); a TypeError where all do."""
    overloaded = _overloaded(relevant_args)
    types = tuple(type(a) for a in overloaded)
    for a in overloaded:
        result = type(a).__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    raise TypeError(f"no implementation found for '{getattr(public_api, '__module__', '')}."
                    f"{getattr(public_api, '__name__', public_api)}' on types that implement __torch_function__: "
                    f"{[type(a) for a in overloaded]}")
