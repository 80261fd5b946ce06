"""Python state a traced function changes: the lists and dicts it names or is given (a
metrics log, a counter in a dict), the lists and dicts its modules hold, and the plain
attributes of other objects it names (a data loader's iterator, a scheduler, an optimizer
of the user's counting steps in Python), and the training mode of the modules it names. A
compiled graph replays tensor work only, so a trace that changed such state is undone and
becomes a graph break: the function's Python then runs at every call (compile's segments),
as it does eagerly. (A module attribute the user's code sets breaks where it is set:
``nn.Module.__setattr__``.)"""
from __future__ import annotations

import builtins
import collections
import contextlib
import sys
import threading
import types
from typing import Iterable, Iterator, Optional

@contextlib.contextmanager
def printing_breaks(tr) -> Iterator[None]:
    """While ``tr`` traces: ``print()`` from the traced code (on this thread) is a graph break,
    since a replayed graph would not print; its segments then print at every call."""
    real, owner = builtins.print, threading.get_ident()

    def breaking_print(*args, **kwargs):
        # (another thread's, or into a buffer of the code's own, as Numba's compiler writes its
        # annotations when a kernel first compiles inside the traced call: no output)
        if threading.get_ident() != owner or kwargs.get("file") not in (None, sys.stdout, sys.stderr):
            return real(*args, **kwargs)
        from .trace import user_frame
        tr.graph_break(f"print() at {user_frame()} (output each call makes, which a replayed graph would not)")

    builtins.print = breaking_print
    try:
        yield
    finally:
        builtins.print = real


_NOT_STATE = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def _holds_state(o) -> bool:
    """An object whose attributes are Python state (a data loader's iterator, a learning
    rate scheduler, the user's own); not tensors and random generators, which compiled
    graphs read and advance themselves."""
    if isinstance(o, _NOT_STATE) or not hasattr(o, "__dict__"):
        return False
    from ..runtime.factory import Generator
    from ..runtime.tensor import Tensor
    return not isinstance(o, (Tensor, Generator))


def _plain(d: dict, tensors: bool = False) -> dict:
    """A module's or object's attributes other than its modules' own stores, and other than
    tensors unless ``tensors`` (a user's object: a metric's running count rebound)."""
    from ..runtime.tensor import Tensor
    return {k: v for k, v in d.items()
            if k not in ("_parameters", "_buffers", "_modules") and (tensors or not isinstance(v, Tensor))}


def _users(o) -> bool:
    """Whether ``o``'s class and its bases are the user's (not fusegrad's: an optimizer or a
    scheduler replaces its own tensors under guards of its own)."""
    own = __name__.split(".")[0]
    return all(c is object or (getattr(c, "__module__", None) or "").split(".")[0] != own for c in type(o).__mro__)


def unrestorable(objects: Iterable) -> Optional[str]:
    """The type of an iterator among ``objects`` (a generator, a data loader's iterator,
    ``iter(list)``), whose position a trace could not put back, or None: a function that
    names one runs in segments from the start, so each ``next()`` runs once per call."""
    for o in objects:
        if hasattr(type(o), "__next__"):
            return type(o).__name__
    return None


def snapshot(objects: Iterable) -> list:
    """(kind, container, its shallow copy) for the state reachable from ``objects``, two
    levels down: lists, dicts, sets, deques, the plain attributes of objects other than
    modules, and the training mode of modules and their submodules."""
    held, seen = [], set()

    def hold(o, depth: int) -> None:
        if id(o) in seen:
            return
        seen.add(id(o))
        if isinstance(o, list):
            held.append(("a list", o, list(o)))
            inner = list(o)
        elif isinstance(o, (set, collections.deque)):  # (ids seen, a moving window of losses)
            held.append((f"a {type(o).__name__}", o, list(o)))
            inner = []
        elif isinstance(o, dict):
            held.append(("a dict", o, dict(o)))
            inner = list(o.values())
        elif hasattr(o, "named_parameters") and hasattr(o, "__dict__"):  # a module: its attributes set break
            modules = list(o.modules())
            held.append(("a module's training mode", modules, [m.training for m in modules]))
            # the containers it and its submodules hold (an anchor generator's cache of grids)
            inner = [v for m in modules for v in _plain(m.__dict__).values()]
        elif _holds_state(o):
            held.append((f"an attribute of a {type(o).__name__}", o.__dict__, _plain(o.__dict__, _users(o))))
            inner = list(o.__dict__.values())
        else:
            return
        if depth > 0:
            for v in inner:
                hold(v, depth - 1)

    for o in objects:
        hold(o, 2)  # (an optimizer of the user's, its state dict, a parameter's entry: a step count)
    return held


def hold_names(names: Iterable) -> list:
    """Held records (see ``snapshot``) of the global and closure names ``names`` gives as
    (read, write) pairs: a helper's ``global step; step += 1`` rebinds one, a running
    average ``global ema; ema = 0.9 * ema + 0.1 * loss`` another."""
    return [("a global or closure name", (read, write), read()) for read, write in names]


_VALUES = (bool, int, float, complex, str, bytes, type(None))


def _same(a, b, empty: set) -> bool:
    """Whether ``b`` in place of ``a`` changes nothing a program could see: the same object,
    an equal number or string, or a fresh empty container of ``a``'s type where ``a`` was
    empty before (``empty``: their ids; a scaler's per-step bookkeeping, made anew at each
    step)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t in _VALUES or (isinstance(a, tuple) and all(type(v) in _VALUES for v in a + b)):  # (a torch.Size too)
        return a == b
    return id(a) in empty and isinstance(b, (dict, list, set)) and not b


def restore_changed(held: list) -> Optional[str]:
    """Put back every container of ``held`` that changed; what changed first, or None."""
    empty = {id(c) for kind, c, before in held if kind in ("a list", "a dict") and not before}
    replaced = set()  # empty containers swapped for fresh ones: what happens to them is not seen
    for kind, c, before in held:
        if kind.startswith("an attribute"):
            now = {**_plain(c), **{k: c[k] for k in before if k in c}}
            replaced.update(id(v) for k, v in before.items() if k in now and now[k] is not v and _same(v, now[k], empty))
    changed = None
    for kind, c, before in held:
        if id(c) in replaced:
            continue
        if kind == "a global or closure name":
            read, write = c
            if not _same(before, read(), empty):
                write(before)
                changed = changed or kind
            continue
        if kind == "a module's training mode":  # (model.eval() inside, not undone by its end)
            if [m.training for m in c] != before:
                for m, mode in zip(c, before):
                    m.__dict__["training"] = mode
                changed = changed or kind
            continue
        if kind == "a list":
            if len(c) != len(before) or not all(_same(a, b, empty) for a, b in zip(before, c)):
                c[:] = before
                changed = changed or kind
            continue
        if kind in ("a set", "a deque"):
            if (c != set(before)) if kind == "a set" else (
                    len(c) != len(before) or not all(_same(a, b, empty) for a, b in zip(before, c))):
                c.clear()
                c.update(before) if kind == "a set" else c.extend(before)
                changed = changed or kind
            continue
        now = c if kind == "a dict" else {**_plain(c), **{k: c[k] for k in before if k in c}}
        if now.keys() != before.keys() or not all(_same(v, now[k], empty) for k, v in before.items()):
            for k in [k for k in now if k not in before]:
                del c[k]
            c.update(before)
            changed = changed or kind
    return changed


def global_modes() -> tuple:
    """The process-wide modes a function may set for the code after it: grad mode and the
    default dtype (``torch.set_grad_enabled(False)`` at the top of an ``evaluate()``)."""
    from ..ir.dtypes import get_default_dtype
    from ..runtime.grad_mode import STATE
    return STATE.enabled, get_default_dtype()


def restore_modes(before: tuple) -> Optional[str]:
    """Put back the modes of ``global_modes()`` that changed since ``before``; which did, or None."""
    if not before:
        return None
    from ..ir.dtypes import set_default_dtype
    from ..runtime.grad_mode import STATE
    enabled, default = before
    now = global_modes()
    changed = None
    if now[1] != default:
        set_default_dtype(default)
        changed = "the default dtype"
    if now[0] != enabled:
        STATE.enabled = enabled
        changed = "the grad mode"
    return changed
