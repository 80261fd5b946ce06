"""Signature keys and guards of compiled code: what must match for a cached executable
to be reused."""
from __future__ import annotations

import functools
import types
from typing import Any

from ..func.pytree import OBJECT, flatten
from ..ir.dtypes import get_default_dtype
from ..runtime import autocast_state
from ..runtime.grad_mode import STATE
from ..runtime.tensor import Tensor


_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def _hashable(x: Any):
    if type(x) is types.FunctionType:
        return _function_key(x)
    try:
        hash(x)
        return x
    except TypeError:
        return repr(x)


def _function_key(f: types.FunctionType) -> Any:
    """A function argument's key: for a lambda or nested function whose defaults and closure
    hold only plain values, its code, globals and those values, so one made afresh at each
    call (``step(x, lambda t: t * 2)``) finds the graph traced for an equal one; else the
    function itself."""
    try:
        cells = tuple(c.cell_contents for c in f.__closure__ or ())
    except ValueError:  # (a cell not yet assigned)
        return f
    values = cells + (f.__defaults__ or ()) + tuple((f.__kwdefaults__ or {}).items())
    if all(type(v) in _PLAIN or (type(v) is tuple and all(type(e) in _PLAIN for e in v)) for v in values):
        return ("function", f.__code__, id(f.__globals__), values)
    return f


def _spec_key(spec) -> Any:
    if spec is None:
        return None
    if spec[0] is dict:
        return ("dict", tuple(spec[1]), _spec_key(spec[2]))
    if spec[0] is OBJECT:  # (a mapping or dataclass: its type, names and entries, not its template)
        return (OBJECT, spec[1], tuple(spec[2]), _spec_key(spec[3]))
    return (spec[0].__qualname__, tuple((n, _spec_key(s)) for n, s in spec[1]))


def signature(leaves: list, spec_key: Any, owner=None) -> tuple:
    """The cache key of a call: per argument leaf, a tensor's (shape, dtype,
    requires_grad) or a non-tensor's type and value; the argument structure (``spec_key``,
    from ``flatten_call``); grad mode; and, for a compiled Module, its training flag and
    the identity of its parameters; autocast's dtype (ops trace cast to it); the default
    dtype (factories and Python floats trace with it)."""
    parts = []
    for x in leaves:
        if isinstance(x, Tensor):
            d = x._data  # shape is a tuple and dtype hashable already (dtype.str costs 0.2 us)
            parts.append(("T", d.shape, d.dtype, x._rg))
        else:
            parts.append(("V", type(x).__qualname__, _hashable(x)))
    return (spec_key, tuple(parts), STATE.enabled, autocast_state.STATE.dtype, module_key(owner),
            get_default_dtype())


def grad_bits(leaves: list) -> tuple:
    """Whether each tensor argument has no .grad: part of the key of a function whose trace
    read or accumulated into an argument's .grad (``CaptureTrace.arg_grads``)."""
    return tuple(x._grad is None for x in leaves if isinstance(x, Tensor))


def module_key(owner) -> Any:
    """A compiled Module's part of the key: its training flag and what it holds."""
    if owner is None or not hasattr(owner, "named_parameters"):
        return None
    if hasattr(owner, "_parameters") and hasattr(owner, "_modules"):
        return owner.training, module_tensor_ids(owner)
    named = list(owner.named_parameters())
    if hasattr(owner, "named_buffers"):
        named += list(owner.named_buffers())
    return getattr(owner, "training", None), tuple((n, id(p)) for n, p in named)


def module_tensor_ids(m) -> tuple:
    """The identities of the parameters, buffers and submodules under module ``m``: what
    ``named_parameters``/``named_buffers`` would yield, read without building their dotted
    names (this guard runs at every call of a compiled function that names a model)."""
    ids, stack, seen = [], [m], set()
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        ids += map(id, m._parameters.values())
        ids += map(id, m._buffers.values())
        subs = [s for s in m._modules.values() if s is not None]
        ids += map(id, subs)
        stack += subs
    return tuple(ids)


def const_guard(consts: list, with_grad: bool = False) -> tuple:
    """What a graph's captured tensors must still look like: shape, dtype, requires_grad
    and, for graphs that traced a backward (``with_grad``), whether ``.grad`` is set,
    since the trace either created or accumulated it."""
    return tuple((h._data.shape, h._data.dtype, h._rg, with_grad and h._grad is None) for _, h in consts)


def flatten_call(args: tuple, kwargs: dict) -> tuple[list, Any, Any]:
    """(leaves, spec, spec key) of a call's arguments. The common call, tensors passed
    positionally, takes its spec and key from a per-count cache: its per-call cost matters."""
    if not kwargs and all(isinstance(a, Tensor) for a in args):
        return list(args), *_positional_spec(len(args))
    leaves, spec = flatten((list(args), dict(kwargs)))
    return leaves, spec, _spec_key(spec)


@functools.lru_cache(maxsize=64)
def _positional_spec(n: int) -> tuple:
    spec = flatten((list((None,) * n), {}))[1]
    return spec, _spec_key(spec)
