"""``torch.sym_int``, ``sym_float``, ``sym_max``, ``sym_min``, ``sym_not``, ``sym_sqrt``,
``sym_ite`` and ``sym_sum``: PyTorch's arithmetic on sizes that may be symbolic. fusegrad's
traces see sizes as Python ints (a symbolic size is a guard, not a value), so they are the
plain Python operations."""
from __future__ import annotations

import math
from typing import Any, Iterable

from .exports import op


@op(method=False)
def sym_int(a) -> int:
    """``int(a)``, truncating toward zero."""
    return int(a)


@op(method=False)
def sym_float(a) -> float:
    return float(a)


@op(method=False)
def sym_max(a, b):
    return a if a >= b else b


@op(method=False)
def sym_min(a, b):
    return a if a <= b else b


@op(method=False)
def sym_not(a) -> bool:
    return not a


@op(method=False)
def sym_sqrt(a) -> float:
    return math.sqrt(a)


@op(method=False)
def sym_ite(b, t: Any, f: Any) -> Any:
    """``t if b else f``."""
    return t if b else f


@op(method=False)
def sym_sum(args: Iterable):
    return sum(args)
