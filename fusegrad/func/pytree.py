"""Minimal pytrees: nested tuples, lists and dicts with tensor (or other) leaves; also the
containers models return: other mappings (``OrderedDict``, a ``ModelOutput``, ``UserDict``)
and dataclass instances, rebuilt as their own type (a copy of the original, its entries
replaced)."""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Callable

#: the first item of an object container's spec: (OBJECT, type, names, spec, template, mapping)
OBJECT = "object"


def flatten(tree) -> tuple[list, Any]:
    """Leaves in order and a spec to rebuild the structure."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for x in tree:
            l, s = flatten(x)
            leaves += l
            specs.append((len(l), s))
        return leaves, (type(tree), specs)
    if type(tree) is dict:
        keys = list(tree.keys())
        l, s = flatten([tree[k] for k in keys])
        return l, (dict, keys, s)
    kind = _KINDS.get(type(tree))
    if kind is None:
        kind = _KINDS[type(tree)] = ("mapping" if isinstance(tree, Mapping) else
                                     "fields" if dataclasses.is_dataclass(tree) and not isinstance(tree, type) else "")
    if kind == "mapping":
        keys = list(tree.keys())
        l, s = flatten([tree[k] for k in keys])
        return l, (OBJECT, type(tree), keys, s, _template(tree, keys, True), True)
    if kind == "fields":
        names = [f.name for f in dataclasses.fields(tree)]
        l, s = flatten([getattr(tree, n) for n in names])
        return l, (OBJECT, type(tree), names, s, _template(tree, names, False), False)
    return [tree], None


#: cache: a type -> "mapping", "fields" (a dataclass) or "" (a leaf): the checks cost an ABC
#: lookup per leaf, and flattening a call's arguments is on compiled code's per-call path
_KINDS: dict = {}


def _template(obj, names: list, mapping: bool):
    """A shallow copy of ``obj`` with its entries cleared (None), to copy again when rebuilding;
    None where it cannot be copied so (rebuilt as a dict, or the dataclass from its fields)."""
    try:
        t = copy.copy(obj)
        for n in names:
            _put(t, n, None, mapping)
        return t
    except Exception:  # noqa: BLE001 - an object that refuses copying or None entries
        return None


def _put(obj, name, value, mapping: bool) -> None:
    if mapping:
        obj[name] = value
    if not mapping or (isinstance(name, str) and name in getattr(obj, "__dataclass_fields__", ())):
        object.__setattr__(obj, name, value)  # (a frozen dataclass too; a dataclass that is a dict: both)


def children(spec) -> list:
    """(leaf count, spec) of each element of a flattened tuple or list."""
    return spec[1]


def unflatten(spec, leaves) -> Any:
    it = iter(leaves)
    return _build(spec, it)


def _build(spec, it):
    if spec is None:
        return next(it)
    if spec[0] is dict:
        _, keys, s = spec
        vals = _build(s, it)
        return dict(zip(keys, vals))
    if spec[0] is OBJECT:
        _, typ, names, s, template, mapping = spec
        vals = _build(s, it)
        if template is None:
            return dict(zip(names, vals)) if mapping else typ(**dict(zip(names, vals)))
        obj = copy.copy(template)
        for n, v in zip(names, vals):
            _put(obj, n, v, mapping)
        return obj
    typ, specs = spec
    vals = [_build(s, it) for _, s in specs]
    if typ is tuple or typ is list:
        return typ(vals)
    try:
        return typ(*vals)  # namedtuple
    except TypeError:
        return typ(vals)


def tree_map(fn: Callable, tree) -> Any:
    leaves, spec = flatten(tree)
    return unflatten(spec, [fn(x) for x in leaves])
