"""The equations that are not loop groups: matmul as a plan of CBLAS ``gemm`` calls into the
output (see cpu_blas), batch by batch, which the entry's program runs (cpu_program), and the
layout ops concatenate and pad as the lines of a kernel of their own, slice copies.
Operands are flat buffers; ``.reshape`` of a contiguous 1-d array is free in Numba."""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from .backend import Unsupported
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


class Gemm(NamedTuple):
    """How the cpu backend's entry runs a matmul equation: ``c = alpha * op(a) @ op(b) +
    beta * c`` (row-major, ``op`` transposing where ``ta``/``tb``) once per batch, at the
    batch's element offsets ``(a, b, c)`` in ``batches``; ``epilogue``, where set, is the
    value X copied into ``c`` first (fusion's matmul epilogue, ``beta * X``); with ``k == 0``
    there are no batches and ``c`` is zeroed."""
    dtype: str
    ta: bool
    tb: bool
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    alpha: float
    beta: float
    a: Var
    b: Var
    c: Var
    epilogue: Optional[Var]
    batches: list


def matmul_plan(e: Eqn) -> Optional[Gemm]:
    """The Gemm of matmul equation ``e``; None when its output is empty."""
    dt = _blas_dtype(e)
    ta, tb, m, n, k = _dims(e)
    a, b, out = e.inputs[0], e.inputs[1], e.out
    if out.size == 0:
        return None
    if len(e.inputs) == 3:
        return Gemm(dt, ta, tb, m, n, k, m if ta else k, k if tb else n, float(e.params["alpha"]),
                    float(e.params["beta"]), a, b, out, e.inputs[2], [(0, 0, 0)])
    if k == 0:
        return Gemm(dt, ta, tb, m, n, k, 1, 1, 1.0, 0.0, a, b, out, None, [])
    batch = out.shape[:-2]
    if (ta or tb) and batch:
        raise AssertionError("fusion marks only 2-d matmul operands transposed")
    shapes = e.params.get("shapes", (a.shape, b.shape))
    strided = e.params.get("strided", (None, None))
    trans, lds, at = [ta, tb], [None, None], []
    for j, (shape, mat) in enumerate(zip(shapes, (m * k, k * n))):
        xb = shape[:-2]
        if strided[j] is None:  # a contiguous operand: its matrices one after another
            strides, off = [mat * int(np.prod(xb[d + 1:])) for d in range(len(xb))], 0
        else:
            off, strides, lds[j], trans[j] = strided[j]
        # right-aligned batch broadcasting: (inner batch size, batch dim, stride) per dim that moves
        terms = [(int(np.prod(batch[len(batch) - len(xb) + d + 1:])), batch[len(batch) - len(xb) + d], strides[d])
                 for d in range(len(xb)) if xb[d] != 1 and strides[d]]
        at.append((off, terms))
    batches = [tuple(off + sum((bi // inner) % dim * st for inner, dim, st in terms) for off, terms in at)
               + (bi * m * n,) for bi in range(int(np.prod(batch)))]
    lda = lds[0] if lds[0] is not None else (m if trans[0] else k)
    ldb = lds[1] if lds[1] is not None else (k if trans[1] else n)
    return Gemm(dt, trans[0], trans[1], m, n, k, lda, ldb, 1.0, 0.0, a, b, out, None, batches)


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


_CALLS = {P.concatenate: _concatenate, P.pad: _pad}


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
