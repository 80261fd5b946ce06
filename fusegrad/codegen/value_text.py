"""The text of kernel IR values (codegen.kir) in the Python syntax both Numba renderers
(cpu_render, cuda_render) write; each supplies how an index and a scalar operation read.
``linear`` writes a linear index for the hand-written loops (cpu_index, cuda_index,
cuda_scan), ``copy_lines`` a copy loop for those of the cpu backend."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..passes.strides import row_major
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


def linear(idx: list, shape: tuple) -> str:
    """Linear index of a C-contiguous array of ``shape`` at per-dim index expressions."""
    const, terms = 0, []
    for e, st, s in zip(idx, row_major(shape), shape):
        if s == 1 or e == "0":
            continue
        if e.lstrip("-").isdigit():
            const += int(e) * st
        else:
            e = f"({e})" if " " in e and not (e.startswith("(") and e.endswith(")")) else e
            terms.append(e if st == 1 else f"{e} * {st}")
    if const or not terms:
        terms.append(str(const))
    return " + ".join(terms)


def copy_lines(dst: str, dst_at: str, src: str, src_at: str, n: int, var: str = "cp") -> list:
    """Lines copying ``n`` elements ``src[src_at:]`` to ``dst[dst_at:]`` with an explicit
    loop: Numba compiles a slice assignment ``dst[a:b] = src[c:d]`` several times slower,
    and the first one in a process costs seconds (its generic array-assignment code)."""
    def at(base: str) -> str:
        return var if base == "0" else f"{base} + {var}"
    return [f"for {var} in range({n}):", f"    {dst}[{at(dst_at)}] = {src}[{at(src_at)}]"]
