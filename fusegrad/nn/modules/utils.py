"""The helpers programs import from ``torch.nn.modules.utils``: ``_pair(3)``
is ``(3, 3)``, an iterable passes as a tuple."""
from __future__ import annotations

import collections.abc
from itertools import repeat
from typing import Any, Callable


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """``t`` reversed, each element repeated ``n`` times (conv's padding for F.pad)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults) -> list:
    """``out_size`` with its None entries taken from the last dims of ``defaults``."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip ``prefix`` (``"module."`` of a DDP model, ``"_orig_mod."`` of a compiled one)
    from the keys of ``state_dict`` in place, and from its ``_metadata`` if it has one."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        for key in list(meta.keys()):
            # '' is the wrapper's own entry; 'module' (the prefix without its dot) the model's
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                meta[key[len(prefix):]] = meta.pop(key)
