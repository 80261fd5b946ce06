"""Kernel IR of the layout calls ``concatenate`` and ``pad``, for backends that run them
as loop kernels (the cuda backend; the cpu backend writes slice copies, cpu_calls).

Each is one loop nest over the output's elements whose guarded stores pick the source:
for concatenate, the operand whose range along the axis holds the element; for pad, the
operand inside the borders and the fill value outside. Every load is under the guard
that keeps its index inside its buffer."""
from __future__ import annotations

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from .backend import Unsupported
from .kir import Buffer, Const, Guard, Index, Kernel, Load, Loop, Op, Store, Sym, iadd, imul, verify
from .kir_lower import LoweredGroup

_I64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


def lower_layout(e: Eqn, name: str = "layout") -> LoweredGroup:
    """The kernel of a ``concatenate`` or ``pad`` equation (Unsupported for others)."""
    if e.prim is P.concatenate:
        return _concatenate(e, name)
    if e.prim is P.pad:
        return _pad(e, name)
    raise Unsupported(f"kernel IR: no layout kernel for {e.prim.name}")


def _linear(idx: list, shape: tuple):
    lin, stride = 0, 1
    for i, s in zip(reversed(idx), reversed(shape)):
        lin = iadd(lin, imul(i if s != 1 else 0, stride))
        stride *= s
    return lin


def _within(i, lo: int, hi: int):
    """``lo <= i < hi`` as a bool value."""
    at = Index(i, _I64)
    return Op("and", (Op("ge", (at, Const(lo, _I64)), _BOOL), Op("lt", (at, Const(hi, _I64)), _BOOL)), _BOOL)


def _all(conds: list):
    out = conds[0]
    for c in conds[1:]:
        out = Op("and", (out, c), _BOOL)
    return out


def _nest(out: Var, body: list) -> tuple:
    """(loop list, innermost body, per-dim index) over ``out``'s dims."""
    top, cur, idx = [], None, []
    for d, s in enumerate(out.shape):
        if s == 1:
            idx.append(0)
            continue
        kind = "parallel" if not top else "serial"
        lp = Loop(f"i{d}", s, kind)
        (cur.body if cur is not None else top).append(lp)
        cur = lp
        idx.append(Sym(f"i{d}"))
    (cur.body if cur is not None else top).extend(body)
    return top, idx


def _concatenate(e: Eqn, name: str) -> LoweredGroup:
    out, axis = e.out, e.params["axis"] % e.out.ndim
    bufs, binds, body = [Buffer("y0", out.dtype, out.size, "out")], [out], []
    _, idx = _nest(out, [])
    start = 0
    for k, x in enumerate(e.inputs):
        n = x.shape[axis]
        if n and x.size:
            b = f"x{len(bufs)}"
            bufs.append(Buffer(b, x.dtype, x.size, "in"))
            binds.append(x)
            xi = [iadd(i, -start) if d == axis else i for d, i in enumerate(idx)]
            cond = _within(idx[axis], start, start + n) if out.shape[axis] != 1 else Const(True, _BOOL)
            body.append(Guard(cond, [Store("y0", _linear(idx, out.shape), Load(b, _linear(xi, x.shape), x.dtype))]))
        start += n
    loops, _ = _nest(out, body)
    return LoweredGroup(verify(Kernel(name, bufs, (), loops)), binds)


def _pad(e: Eqn, name: str) -> LoweredGroup:
    x, out = e.inputs[0], e.out
    widths = e.params["widths"]
    _, idx = _nest(out, [])
    at = _linear(idx, out.shape)
    fill = Store("y0", at, Const(e.params["value"], out.dtype))
    bufs, binds = [Buffer("y0", out.dtype, out.size, "out")], [out]
    if not x.size:
        body = [fill]
    else:
        bufs.append(Buffer("x1", x.dtype, x.size, "in"))
        binds.append(x)
        conds = [_within(i, lo, lo + s) for i, (lo, _), s, o in zip(idx, widths, x.shape, out.shape) if o != 1]
        inside = _all(conds) if conds else Const(True, _BOOL)
        xi = [iadd(i, -lo) for i, (lo, _) in zip(idx, widths)]
        body = [Guard(inside, [Store("y0", at, Load("x1", _linear(xi, x.shape), x.dtype))]),
                Guard(Op("not", (inside,), _BOOL), [fill])]
    loops, _ = _nest(out, body)
    return LoweredGroup(verify(Kernel(name, bufs, (), loops)), binds)
