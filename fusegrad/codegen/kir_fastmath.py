"""Kernel passes that choose among fastmath's functions (codegen.fastmath), for renderers
that call them (cpu_render). Both annotate ``Op`` nodes with a ``variant`` param; a
renderer prints the function the variant names and nothing else:

- ``trig_guard``: fastmath's sin/cos reduce their argument exactly only for |x| <=
  ``TRIG_MAX``. In ``"fast"`` mode the kernel counts the arguments beyond it into a
  one-element float32 buffer ``GUARD`` (added to, so one buffer serves every kernel of a
  graph; non-zero means the caller reruns exactly) and calls the "guarded" variants, which
  skip the clamps only such arguments need. Inside a parallel loop the count goes to an
  accumulator private to the iteration, folded into the kernel's once at its end: the one
  shape of a parallel reduction Numba accepts. In ``"exact"`` mode each sin/cos selects
  libm (variant ``"libm"``) for those arguments instead. ``bounded`` keeps the clamped
  functions (a graph that range-checks computed indices in the fast kernel could fail
  that check on unclamped values).
- ``choose_variants``: every operation fastmath has a function for gets a variant: the
  non-inlined ``"call"`` when the kernel has more such operations than ``MAX_INLINED``
  (each inlined copy costs LLVM ~50 ms and megabytes: W3, 200 tanh, took 15 s);
  else the one the operation asks for (``"guarded"``, or ``"nonpositive"`` for an exp of a
  value the caller knows is <= 0: one scaling step instead of two) or, in a loop shorter
  than ``SHORT_LOOP`` (which LLVM unrolls instead of vectorizing) or outside every loop,
  the ``"scalar"`` one, where fastmath has them; else ``"fast"``, its plain function.
  Operations fastmath has no function for get no variant (the renderer's libm form)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .fastmath import FUNCS, TRIG_MAX, VARIANTS
from .kir import (Acc, Buffer, Const, Guard, Kernel, Load, Loop, Op, Ref, Store, Update, map_body, map_values, rebuild,
                  stmt_values, stmts, values)

GUARD = "trig_count"  # the count buffer
_TOTAL = "trig_n"  # the kernel's count
MAX_INLINED = 24
SHORT_LOOP = 64
_F32 = np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)


def variant(v: Op) -> Optional[str]:
    """The variant ``v`` is annotated with (None: none)."""
    return dict(v.params).get("variant")


def with_variant(v: Op, kind: Optional[str]) -> Op:
    params = tuple(p for p in v.params if p[0] != "variant") + ((("variant", kind),) if kind else ())
    return Op(v.op, v.args, v.dtype, tuple(sorted(params)))


def _fast(v) -> bool:
    """True if ``v`` is an operation fastmath has a function for."""
    return isinstance(v, Op) and (v.op, np.dtype(v.operand_dtype()).name) in FUNCS and variant(v) != "libm"


def _trig(v) -> bool:
    return _fast(v) and v.op in ("sin", "cos")


# ---------------------------------------------------------------- the trig guard
def trig_guard(k: Kernel, mode: str, bounded: bool = False) -> Kernel:
    """``k`` with its fastmath sin/cos guarded in ``mode`` "fast" or "exact" (see module
    docstring); ``k`` itself when it has none. A "fast" kernel gets the float32 buffer
    ``GUARD`` of one element as its last parameter (before the temps)."""
    if not any(_trig(x) for s in stmts(k.body) for x in stmt_values(s)):
        return k
    kind = None if bounded else "guarded"
    if mode == "exact":
        return Kernel(k.name, list(k.buffers), k.syms, map_body(k.body, lambda v: _exact(v, kind)))
    body = [Acc(_TOTAL, "+", _F32)] + _count(k.body, _TOTAL, kind) + [
        Store(GUARD, 0, Op("add", (Load(GUARD, 0, _F32), Ref(_TOTAL, _F32)), _F32))]
    temps = [b for b in k.buffers if b.role == "temp"]
    return Kernel(k.name, k.params() + [Buffer(GUARD, _F32, 1, "inout")] + temps, k.syms, body)


def _beyond(x) -> Op:
    """``|x| > TRIG_MAX`` (+-inf and NaN: the exact rerun gives the same NaN, and leaving
    inf out took one more compare per element, 2% of W1's gradient)."""
    dt = np.dtype(x.dtype)
    return Op("gt", (Op("abs", (x,), dt), Const(TRIG_MAX[dt.name], dt)), _BOOL)


def _exact(v, kind: Optional[str]):
    return rebuild(v, lambda x: Op("where", (_beyond(x.args[0]), with_variant(x, "libm"), with_variant(x, kind)),
                                   x.dtype) if _trig(x) else x)


def _count(body: list, target: str, kind: Optional[str]) -> list:
    """``body`` counting its sin/cos arguments beyond TRIG_MAX into accumulator ``target``
    (a float32 sum, or a bool "any" private to a parallel iteration)."""
    out: list = []
    seen: set = set()  # sin and cos of one value (their gradients): counted once
    for s in body:
        if isinstance(s, Loop) and s.kind == "parallel" and any(_trig(x) for t in stmts(s.body)
                                                                 for x in stmt_values(t)):
            private = f"{_TOTAL}_{s.var}"
            inner = [Acc(private, "max", _BOOL)] + _count(s.body, private, kind) + [
                Update(target, Op("where", (Ref(private, _BOOL), Const(1.0, _F32), Const(0.0, _F32)), _F32))]
            out.append(Loop(s.var, s.extent, s.kind, inner))
            continue
        if isinstance(s, (Loop, Guard)):
            inner = _count(s.body, target, kind)
            out.append(Loop(s.var, s.extent, s.kind, inner) if isinstance(s, Loop) else Guard(s.cond, inner))
            continue
        for x in stmt_values(s):
            for v in values(x):
                if _trig(v) and v.args[0] not in seen:
                    seen.add(v.args[0])
                    big = _beyond(v.args[0])
                    out.append(Update(target, big if target != _TOTAL else
                                      Op("where", (big, Const(1.0, _F32), Const(0.0, _F32)), _F32)))
        out.append(map_values(s, lambda v: _marked(v, kind)))
    return out


def _marked(v, kind: Optional[str]):
    return rebuild(v, lambda x: with_variant(x, kind) if _trig(x) else x)


# ---------------------------------------------------------------- variants
def choose_variants(k: Kernel, nonpositive: frozenset = frozenset()) -> Kernel:
    """``k`` with a variant on each operation fastmath has a function for (see module
    docstring); ``nonpositive``: names of the locals and buffers whose values are <= 0."""
    n = sum(_fast(v) for s in stmts(k.body) for x in stmt_values(s) for v in values(x))
    outline = n > MAX_INLINED

    def pick(v, short: bool):
        if not _fast(v):
            return v
        if outline:
            return with_variant(v, "call")
        key = (v.op, np.dtype(v.operand_dtype()).name)
        x = v.args[0]
        want = variant(v) or ("nonpositive" if isinstance(x, (Ref, Load)) and
                              (x.name if isinstance(x, Ref) else x.buf) in nonpositive else None)
        for kind in (want, "scalar" if short else None):
            if kind and (*key, kind) in VARIANTS:
                return with_variant(v, kind)
        return with_variant(v, "fast")

    def body(stmts_: list, short: bool) -> list:
        out = []
        for s in stmts_:
            if isinstance(s, Loop):
                out.append(Loop(s.var, s.extent, s.kind,
                                body(s.body, isinstance(s.extent, int) and s.extent < SHORT_LOOP)))
            elif isinstance(s, Guard):
                out.append(Guard(rebuild(s.cond, lambda v: pick(v, short)), body(s.body, short)))
            else:
                out.append(map_values(s, lambda x: rebuild(x, lambda v: pick(v, short))))
        return out
    return Kernel(k.name, list(k.buffers), k.syms, body(k.body, True))
