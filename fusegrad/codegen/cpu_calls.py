"""Emit the equations that are not loop groups: matmul through BLAS (``np.dot`` into the
output, batch by batch) and the layout ops concatenate and pad as slice copies.
Operands are flat buffers; ``.reshape`` of a contiguous 1-d array is free in Numba."""
from __future__ import annotations

from typing import Callable

import numpy as np
from numba import types

from ..ir.graph import Eqn, Var
from .backend import Unsupported
from .cpu_scalar import literal

_INDENT = "    "


def _nd(name: str, shape: tuple) -> str:
    return f"{name}.reshape(({', '.join(map(str, shape))},))"


# numba's own GEMM entry (what np.dot calls), by symbol so kernels stay cacheable; with
# voidptr operands so generated code passes ``array.ctypes``. Column-major BLAS: see _gemm.
_XXGEMM = types.ExternalFunction("numba_xxgemm", types.intc(
    types.char, types.char, types.char, types.intp, types.intp, types.intp, types.voidptr, types.voidptr,
    types.intp, types.voidptr, types.intp, types.voidptr, types.voidptr, types.intp))
PRELUDE = "from fusegrad.codegen.cpu_calls import _XXGEMM as _fg_xxgemm"


def _gemm(e: Eqn, buf: Callable[[Var], str], tag: str) -> list:
    """``out = alpha * op(A) @ op(B) + beta * X`` as one GEMM into ``out`` after copying X
    there (fusion's matmul epilogue). Row-major C = A @ B is column-major C^T = B^T @ A^T,
    so BLAS gets B first; a C-contiguous buffer is its transpose in column-major order."""
    from numba.np.linalg import ensure_blas
    ensure_blas()
    a, b, x = e.inputs
    out = e.out
    ta, tb = e.params.get("transposed", (False, False))
    m, k = a.shape[::-1] if ta else a.shape
    n = b.shape[0] if tb else b.shape[1]
    A, B, X, O = buf(a), buf(b), buf(x), buf(out)
    dt = f"np.{out.dtype.name}"
    kind = {"float32": ord("s"), "float64": ord("d")}.get(out.dtype.name)
    if kind is None:
        raise Unsupported(f"cpu backend: GEMM of {out.dtype}")
    lines = [f"{O}[:] = {X}"] if X != O else []
    return lines + [
        f"al{tag} = np.full(1, {float(e.params['alpha'])!r}, {dt})",
        f"be{tag} = np.full(1, {float(e.params['beta'])!r}, {dt})",
        f"_fg_xxgemm({kind}, {ord('t') if tb else ord('n')}, {ord('t') if ta else ord('n')}, {n}, {m}, {k}, "
        f"al{tag}.ctypes, {B}.ctypes, {k if tb else n}, {A}.ctypes, {m if ta else k}, be{tag}.ctypes, "
        f"{O}.ctypes, {n})"]


def _matmul(e: Eqn, buf: Callable[[Var], str], tag: str = "0") -> list:
    if len(e.inputs) == 3:
        return _gemm(e, buf, tag)
    a, b = e.inputs
    out = e.out
    if out.dtype.kind != "f" or a.dtype != b.dtype:
        raise Unsupported(f"cpu backend: matmul of {a.dtype}/{b.dtype} (BLAS takes float32/float64)")
    ta, tb = e.params.get("transposed", (False, False))
    m, k = a.shape[::-1] if ta else a.shape[-2:]
    n = b.shape[0] if tb else b.shape[-1]
    A, B, O = buf(a), buf(b), buf(out)
    if out.size == 0:
        return []
    if k == 0:
        return [f"{O}[:] = 0"]
    if out.ndim == 2 and a.ndim == 2 and b.ndim == 2:
        # a transposed operand is the .T of its C-contiguous value: an F-contiguous view that
        # Numba hands to BLAS with the transpose flag, no copy
        A2 = f"{_nd(A, (k, m))}.T" if ta else _nd(A, (m, k))
        B2 = f"{_nd(B, (n, k))}.T" if tb else _nd(B, (k, n))
        return [f"np.dot({A2}, {B2}, {_nd(O, (m, n))})"]
    if ta or tb:
        raise AssertionError("fusion marks only 2-d matmul operands transposed")
    batch = out.shape[:-2]
    lines = [f"for bi in range({int(np.prod(batch))}):"]
    offs = []
    for x, (r, c) in ((a, (m, k)), (b, (k, n))):
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
    lines.append(f"{_INDENT}np.dot({_nd(f'{A}[ao:ao + {sa}]', (m, k))}, {_nd(f'{B}[bo:bo + {sb}]', (k, n))}, "
                 f"{_nd(f'{O}[bi * {m * n}:(bi + 1) * {m * n}]', (m, n))})")
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


_CALLS = {"concatenate": _concatenate, "pad": _pad}  # matmul takes a tag: emit_call's first case


def emit_call(e: Eqn, buf: Callable[[Var], str], tag: str = "0") -> list:
    """Source lines (unindented) for one library-call equation; ``tag`` makes the local
    names of this call unique within the entry function."""
    if e.prim.name == "matmul":
        return _matmul(e, buf, tag)
    fn = _CALLS.get(e.prim.name)
    if fn is not None:
        return fn(e, buf)
    from .cpu_index import CALLS
    fn = CALLS.get(e.prim.name)
    if fn is None:
        raise Unsupported(f"cpu backend has no lowering for {e.prim.name}")
    return fn(e, buf, tag)
