"""The text of kernel IR values (codegen.kir) in the Python syntax both Numba renderers
(cpu_render, cuda_render) write; each supplies how an index and a scalar operation read."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .cpu_scalar import literal
from .kir import Const, Index, Load, Op, Ref


def value_text(v, index: Callable, op: Callable) -> str:
    """``v`` as an expression: ``index(expr)`` writes a load's index, ``op(v, args)`` an
    operation on its operands' texts."""
    if isinstance(v, Const):
        return literal(v.value, v.dtype)
    if isinstance(v, Ref):
        return v.name
    if isinstance(v, Load):
        return f"{v.buf}[{index(v.index)}]"
    if isinstance(v, Index):
        return f"np.{np.dtype(v.dtype).name}({v.expr})"
    assert isinstance(v, Op)
    return op(v, [value_text(a, index, op) for a in v.args])
