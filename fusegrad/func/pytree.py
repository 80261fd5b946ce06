"""Minimal pytrees: nested tuples, lists and dicts with tensor (or other) leaves."""
from __future__ import annotations

from typing import Any, Callable


def flatten(tree) -> tuple[list, Any]:
    """Leaves in order and a spec to rebuild the structure."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for x in tree:
            l, s = flatten(x)
            leaves += l
            specs.append((len(l), s))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        keys = list(tree.keys())
        l, s = flatten([tree[k] for k in keys])
        return l, (dict, keys, s)
    return [tree], None


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
