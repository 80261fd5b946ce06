"""The argument helpers custom layers import from ``torch.nn.modules.utils``: ``_pair(3)``
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
