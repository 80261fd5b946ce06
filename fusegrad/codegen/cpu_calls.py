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
    a, b = e.params.get("shapes", (e.inputs[0].shape, e.inputs[1].shape))
    ta, tb = e.params.get("transposed", (False, False))
    m, k = a[::-1] if ta else a[-2:]
    n = b[0] if tb else b[-1]
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
    out = e.out
    O = buf(out)
    if out.size == 0:
        return []
    if k == 0:
        return [f"{O}[:] = 0"]
    batch = out.shape[:-2]
    shapes = e.params.get("shapes", (e.inputs[0].shape, e.inputs[1].shape))
    strided = e.params.get("strided", (None, None))
    if not batch and strided == (None, None):
        return [gemm_call(dt, ta, tb, m, n, k, 1.0, buf(e.inputs[0]), buf(e.inputs[1]), 0.0, O)]
    if (ta or tb) and batch:
        raise AssertionError("fusion marks only 2-d matmul operands transposed")
    lines = [f"for bi in range({int(np.prod(batch))}):"] if batch else []
    ops, trans, lds = [], [ta, tb], [None, None]
    for j, (x, shape, mat) in enumerate(zip(e.inputs[:2], shapes, (m * k, k * n))):
        layout = strided[j]
        xb = shape[:-2]
        if layout is None:  # a contiguous operand: its matrices one after another
            strides, off = [mat * int(np.prod(xb[d + 1:])) for d in range(len(xb))], 0
        else:
            off, strides, lds[j], trans[j] = layout
        at = [str(off)] if off else []  # the operand's offset in batch bi
        for d in range(len(xb)):  # right-aligned batch broadcasting
            od = len(batch) - len(xb) + d
            if xb[d] != 1 and strides[d]:
                inner = int(np.prod(batch[od + 1:]))
                at.append(f"((bi // {inner}) % {batch[od]}) * {strides[d]}")
        name = f"{'ab'[j]}o"
        if at:
            lines.append(f"{_INDENT if batch else ''}{name} = {' + '.join(at)}")
            ops.append(f"{buf(x)}[{name}:]")
        else:
            ops.append(buf(x))
    lines.append((_INDENT if batch else "") + gemm_call(dt, trans[0], trans[1], m, n, k, 1.0, ops[0], ops[1], 0.0,
                                                        f"{O}[bi * {m * n}:]" if batch else O, lds[0], lds[1]))
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
