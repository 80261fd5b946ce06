"""functionalize, as torch.func.functionalize.

fusegrad's tracer already records in-place updates as new values (a trace has no
mutation to remove), so functionalizing is about what the caller observes, as PyTorch
documents it: the function runs on copies of its tensor arguments, so no output aliases an
input, and the arguments it updated in place receive their final values at the end."""
from __future__ import annotations

import functools
from typing import Callable

from ..runtime import ops as O
from ..runtime.tensor import Tensor
from .pytree import flatten, unflatten

__all__ = ["functionalize"]

_REMOVE = ("mutations", "mutations_and_views")


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """``func`` with its mutations made functional; ``remove``: "mutations" or
    "mutations_and_views" (the same here: fusegrad outputs never alias the arguments)."""
    if remove not in _REMOVE:
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. Valid options "
            f"are:\n     remove='mutations': all inplace and out= operators will be removed from the program, "
            f"and replaced with their out-of-place equivalents.\n     remove='mutations_and_views': In addition "
            f"to the above, all aliasing operators {{view}} will be replaced with their non-aliasing "
            f"counterparts, {{view}}_copy.\n")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        leaves, spec = flatten([list(args), kwargs])
        copies = [O.clone(x) if isinstance(x, Tensor) else x for x in leaves]
        # an update in place bumps the version eagerly and rebinds the value under a trace
        states = [(c._version, c._data) if isinstance(c, Tensor) else None for c in copies]
        a, k = unflatten(spec, copies)
        out = func(*a, **k)
        for x, c, s in zip(leaves, copies, states):
            if s is not None and (c._version != s[0] or c._data is not s[1]):
                x.copy_(c)
        return out
    return wrapper
