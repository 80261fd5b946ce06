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
from .value_text import copy_lines

_INDENT = "    "


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
    lines = copy_lines(buf(out), "0", buf(x), "0", out.size) if buf(x) != buf(out) else []
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


def _box(out: str, out_shape: tuple, x: str, x_shape: tuple, offsets: tuple) -> list:
    """Lines copying C-contiguous ``x`` into the box of ``out`` at per-dim ``offsets``: loops
    over the leading dims around a copy of each contiguous run (Numba compiles an n-d slice
    assignment many times slower than loops)."""
    n = len(x_shape)
    j = n  # the trailing dims x spans whole are one run with the dim before them
    while j > 0 and x_shape[j - 1] == out_shape[j - 1] and offsets[j - 1] == 0:
        j -= 1
    if j == 0:
        return copy_lines(out, "0", x, "0", int(np.prod(x_shape)))
    inner = int(np.prod(x_shape[j:]))
    run = x_shape[j - 1] * inner
    lines, xi, oi = [], [], [offsets[j - 1] * inner]  # index terms (ints: constants)
    for d in range(j - 1):
        o_stride = int(np.prod(out_shape[d + 1:]))
        oi.append(offsets[d] * o_stride)
        if x_shape[d] > 1:
            lines.append(f"{_INDENT * len(xi)}for c{d} in range({x_shape[d]}):")
            xi.append(f"c{d} * {int(np.prod(x_shape[d + 1:]))}")
            oi.append(f"c{d} * {o_stride}")
    xs, os_ = _sum(xi), _sum(oi)
    return lines + [_INDENT * len(xi) + ln for ln in copy_lines(out, os_, x, xs, run)]


def _sum(terms: list) -> str:
    const = sum(t for t in terms if isinstance(t, int))
    return " + ".join([t for t in terms if isinstance(t, str)] + ([str(const)] if const else [])) or "0"


def _concatenate(e: Eqn, buf: Callable[[Var], str]) -> list:
    out, axis = e.out, e.params["axis"] % e.out.ndim
    lines, start = [], 0
    for x in e.inputs:
        if x.shape[axis]:
            offsets = tuple(start if d == axis else 0 for d in range(out.ndim))
            lines += _box(buf(out), out.shape, buf(x), x.shape, offsets)
        start += x.shape[axis]
    return lines


def _pad(e: Eqn, buf: Callable[[Var], str]) -> list:
    x, out = e.inputs[0], e.out
    lines = [f"{buf(out)}[:] = {literal(e.params['value'], out.dtype)}"]
    if x.size:
        lines += _box(buf(out), out.shape, buf(x), x.shape, tuple(lo for lo, _ in e.params["widths"]))
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
