"""Python state a traced function changes: the lists and dicts it names or is given (a
metrics log, a counter in a dict), the lists and dicts its modules hold, and the plain
attributes of other objects of the user's it names. A compiled graph replays tensor work
only, so a trace that changed such state is undone and becomes a graph break: the
function's Python then runs at every call (compile's segments), as it does eagerly. (A
user module's own plain attributes break where they are set: ``nn.Module.__setattr__``.)"""
from __future__ import annotations

import os
import types
from typing import Iterable, Optional

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # fusegrad/
_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def _users(o) -> bool:
    """An object of a class defined outside fusegrad, with attributes of its own."""
    if isinstance(o, _NOT_STATE) or not hasattr(o, "__dict__"):
        return False
    module = __import__("sys").modules.get(type(o).__module__)
    where = getattr(module, "__file__", None) or ""
    return not os.path.abspath(where).startswith(_PACKAGE)


def _plain(d: dict) -> dict:
    """A module's or object's attributes other than tensors and its modules' own stores."""
    from ..runtime.tensor import Tensor
    return {k: v for k, v in d.items()
            if k not in ("_parameters", "_buffers", "_modules") and not isinstance(v, Tensor)}


def snapshot(objects: Iterable) -> list:
    """(kind, container, its shallow copy) for the state reachable from ``objects``, one
    level down: lists, dicts, and the plain attributes of user objects (not modules)."""
    held, seen = [], set()

    def hold(o, depth: int) -> None:
        if id(o) in seen:
            return
        seen.add(id(o))
        if isinstance(o, list):
            held.append(("a list", o, list(o)))
            inner = list(o)
        elif isinstance(o, dict):
            held.append(("a dict", o, dict(o)))
            inner = list(o.values())
        elif hasattr(o, "named_parameters") and hasattr(o, "__dict__"):  # a module: its attributes set break
            inner = list(_plain(o.__dict__).values())
        elif _users(o):
            held.append((f"an attribute of a {type(o).__name__}", o.__dict__, _plain(o.__dict__)))
            inner = list(o.__dict__.values())
        else:
            return
        if depth > 0:
            for v in inner:
                hold(v, depth - 1)

    for o in objects:
        hold(o, 1)
    return held


def restore_changed(held: list) -> Optional[str]:
    """Put back every container of ``held`` that changed; what changed first, or None."""
    changed = None
    for kind, c, before in held:
        if kind == "a list":
            if len(c) != len(before) or any(a is not b for a, b in zip(c, before)):
                c[:] = before
                changed = changed or kind
            continue
        now = c if kind == "a dict" else _plain(c)
        if now.keys() != before.keys() or any(now[k] is not v for k, v in before.items()):
            for k in [k for k in now if k not in before]:
                del c[k]
            c.update(before)
            changed = changed or kind
    return changed
