"""Emit the equations that are not loop groups: matmul as CBLAS ``gemm`` calls into the
output (see cpu_blas), batch by batch, and the layout ops concatenate and pad as slice copies.
Operands are flat buffers; ``.reshape`` of a contiguous 1-d array is free in Numba."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from .backend import Unsupported
from .cpu_blas import gemm_call
from .cpu_scalar import literal

_INDENT = "    "


def _nd(name: str, shape: tuple) -> str:
    return f"{name}.reshape(({', '.join(map(str, shape))},))"


def _dims(e: Eqn) -> tuple:
    """(transposed a, transposed b, m, n, k) of a matmul equation."""
    a, b = e.inputs[:2]
    ta, tb = e.params.get("transposed", (False, False))
    m, k = a.shape[::-1] if ta else a.shape[-2:]
    n = b.shape[0] if tb else b.shape[-1]
    return ta, tb, m, n, k


def _blas_dtype(e: Eqn) -> str:
    a, b = e.inputs[:2]
    if e.out.dtype.name not in ("float32", "float64") or a.dtype != b.dtype:
        raise Unsupported(f"cpu backend: matmul of {a.dtype}/{b.dtype} (BLAS takes float32/float64)")
    return e.out.dtype.name


def _gemm(e: Eqn, buf: Callable[[Var], str]) -> list:
    """``out = alpha * op(A) @ op(B) + beta * X`` as one GEMM into ``out`` after copying X
    there (fusion's matmul epilogue)."""
    dt = _blas_dtype(e)
    ta, tb, m, n, k = _dims(e)
    x, out = e.inputs[2], e.out
    lines = [f"{buf(out)}[:] = {buf(x)}"] if buf(x) != buf(out) else []
    return lines + [gemm_call(dt, ta, tb, m, n, k, float(e.params["alpha"]), buf(e.inputs[0]), buf(e.inputs[1]),
                              float(e.params["beta"]), buf(out))]


def _matmul(e: Eqn, buf: Callable[[Var], str]) -> list:
    if len(e.inputs) == 3:
        return _gemm(e, buf)
    dt = _blas_dtype(e)
    ta, tb, m, n, k = _dims(e)
    a, b = e.inputs
    out = e.out
    A, B, O = buf(a), buf(b), buf(out)
    if out.size == 0:
        return []
    if k == 0:
        return [f"{O}[:] = 0"]
    if out.ndim == 2 and a.ndim == 2 and b.ndim == 2:
        return [gemm_call(dt, ta, tb, m, n, k, 1.0, A, B, 0.0, O)]
    if ta or tb:
        raise AssertionError("fusion marks only 2-d matmul operands transposed")
    batch = out.shape[:-2]
    lines = [f"for bi in range({int(np.prod(batch))}):"]
    offs = []
    for x in (a, b):
        xb = x.shape[:-2]
        terms, stride = [], 1
        for d in range(len(xb) - 1, -1, -1):  # right-aligned batch broadcasting
            od = len(batch) - len(xb) + d
            if xb[d] != 1:
                inner = int(np.prod(batch[od + 1:]))
                terms.append(f"((bi // {inner}) % {batch[od]}) * {stride}")
            stride *= xb[d]
        offs.append(" + ".join(terms) or "0")
    (ao, bo), sa, sb = offs, m * k, k * n
    lines.append(f"{_INDENT}ao = ({ao}) * {sa}")
    lines.append(f"{_INDENT}bo = ({bo}) * {sb}")
    lines.append(_INDENT + gemm_call(dt, False, False, m, n, k, 1.0, f"{A}[ao:]", f"{B}[bo:]", 0.0,
                                     f"{O}[bi * {m * n}:]"))
    return lines


def _region(shape: tuple, axis: int, start: int, size: int) -> str:
    return ", ".join(f"{start}:{start + size}" if d == axis else ":" for d in range(len(shape)))


def _concatenate(e: Eqn, buf: Callable[[Var], str]) -> list:
    out, axis = e.out, e.params["axis"] % e.out.ndim
    O, lines, start = _nd(buf(out), out.shape), [], 0
    for x in e.inputs:
        if x.shape[axis]:
            lines.append(f"{O}[{_region(out.shape, axis, start, x.shape[axis])}] = {_nd(buf(x), x.shape)}")
        start += x.shape[axis]
    return lines


def _pad(e: Eqn, buf: Callable[[Var], str]) -> list:
    x, out = e.inputs[0], e.out
    lines = [f"{buf(out)}[:] = {literal(e.params['value'], out.dtype)}"]
    if x.size:
        key = ", ".join(f"{lo}:{lo + s}" for (lo, _), s in zip(e.params["widths"], x.shape))
        lines.append(f"{_nd(buf(out), out.shape)}[{key}] = {_nd(buf(x), x.shape)}")
    return lines


_CALLS = {P.matmul: _matmul, P.concatenate: _concatenate, P.pad: _pad}


def emit_call(e: Eqn, buf: Callable[[Var], str], tag: str = "0") -> list:
    """Source lines (unindented) for one library-call equation; ``tag`` makes the local
    names of this call unique within the entry function."""
    fn = _CALLS.get(e.prim)
    if fn is not None:
        return fn(e, buf)
    from .cpu_index import CALLS
    fn = CALLS.get(e.prim)
    if fn is None:
        raise Unsupported(f"cpu backend has no lowering for {e.prim.name}")
    return fn(e, buf, tag)
