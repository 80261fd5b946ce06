"""Index simplification over the kernel IR: ``simplify_index`` rewrites every index
expression of a kernel knowing each loop variable's range.

Views lower to index arithmetic that splits and rejoins a linear index: reading a
``[6, 50176]`` buffer as ``[64, 6, 28, 28]`` through a reshape and a transpose gives
``((t + i*64) // 50176) * 50176 + (t + i*64) % 50176``, a division and a remainder per
element that also keep LLVM from vectorizing the loop, for what is just ``t + i*64``. The
pass works on sums of terms ``coefficient * atom`` (an atom is a symbol or a ``//``,
``%``, ``min`` or product that is not linear) with these exact rules (floor division, as
Python and Numba compute it, divisor ``n > 0``):
- ``(q*n + r) // n = q + r // n`` and ``(q*n + r) % n = r % n`` where every term of ``q*n``
  is a multiple of ``n``; ``r // n = 0`` and ``r % n = r`` where the variables' ranges keep
  ``r`` in ``[0, n)``;
- ``(g*b + r) // (g*m) = b // m`` and ``(g*b + r) % (g*m) = g*(b % m) + r`` where ``r`` lies
  in ``[0, g)``;
- ``c*n * (x // n) + c * (x % n) = c*x`` for any integer ``x``;
- ``min(a, b)`` is the one that is never larger.
Ranges come from the loops (``0 <= var < extent``), shape symbols (``>= 0``) and ``Let``
bindings (their expression's range)."""
from __future__ import annotations

import math
from typing import Optional

from .kir import (Guard, IBin, IExpr, Index, Kernel, Let, Load, Loop, Store, Sym, iadd, ifloordiv, imin, imod, imul,
                  map_values, rebuild)

Range = tuple  # (low or None, high or None): inclusive bounds, None where unbounded


def simplify_index(k: Kernel) -> Kernel:
    """``k`` with its index expressions simplified (see module docstring)."""
    ranges = {s: (0, None) for s in k.syms}
    return Kernel(k.name, list(k.buffers), k.syms, _body(k.body, ranges))


def _body(body: list, ranges: dict) -> list:
    out = []
    ranges = dict(ranges)

    def ix(e: IExpr) -> IExpr:
        return simplify(e, ranges)

    def val(v):
        if isinstance(v, Load):
            return Load(v.buf, ix(v.index), v.dtype)
        return Index(ix(v.expr), v.dtype) if isinstance(v, Index) else v

    for s in body:
        if isinstance(s, Loop):
            extent = ix(s.extent)
            hi = _range(extent, ranges)[1]
            s = Loop(s.var, extent, s.kind, _body(s.body, {**ranges, s.var: (0, None if hi is None else hi - 1)}))
        elif isinstance(s, Let):
            s = Let(s.name, ix(s.expr))
            ranges[s.name] = _range(s.expr, ranges)
        else:
            s = map_values(s, lambda v: rebuild(v, val))
            if isinstance(s, Store):
                s = Store(s.buf, ix(s.index), s.value)
            elif isinstance(s, Guard):
                s = Guard(s.cond, _body(s.body, ranges))
        out.append(s)
    return out


def simplify(e: IExpr, ranges: dict) -> IExpr:
    """``e`` simplified given the ``ranges`` of its symbols (name -> Range)."""
    return _expr(_linear(e, ranges), ranges)


# A linear form: ({atom: coefficient}, constant); atoms are Sym or non-linear IBin.
def _linear(e: IExpr, ranges: dict) -> tuple:
    if isinstance(e, int):
        return {}, e
    if isinstance(e, Sym):
        return {e: 1}, 0
    if e.op == "+":
        (ta, ca), (tb, cb) = _linear(e.a, ranges), _linear(e.b, ranges)
        return _add(ta, tb), ca + cb
    if e.op == "*":
        la, lb = _linear(e.a, ranges), _linear(e.b, ranges)
        if not la[0] or not lb[0]:  # one side constant
            (terms, c), k = (lb, la[1]) if not la[0] else (la, lb[1])
            return {a: v * k for a, v in terms.items() if v * k}, c * k
        return {imul(_expr(la, ranges), _expr(lb, ranges)): 1}, 0
    if e.op in ("//", "%"):
        lin, n = _linear(e.a, ranges), _expr(_linear(e.b, ranges), ranges)
        if isinstance(n, int) and n > 0:
            return _divmod(lin, n, e.op, ranges)
        atom = (ifloordiv if e.op == "//" else imod)(_expr(lin, ranges), n)
        return ({atom: 1}, 0) if not isinstance(atom, int) else ({}, atom)
    a, b = _expr(_linear(e.a, ranges), ranges), _expr(_linear(e.b, ranges), ranges)
    (la, ha), (lb, hb) = _range(a, ranges), _range(b, ranges)
    if ha is not None and lb is not None and ha <= lb:
        return _linear(a, ranges)
    if hb is not None and la is not None and hb <= la:
        return _linear(b, ranges)
    atom = imin(a, b)
    return ({atom: 1}, 0) if not isinstance(atom, int) else ({}, atom)


def _add(ta: dict, tb: dict) -> dict:
    out = dict(ta)
    for a, v in tb.items():
        out[a] = out.get(a, 0) + v
        if not out[a]:
            del out[a]
    return out


def _divmod(lin: tuple, n: int, op: str, ranges: dict) -> tuple:
    """``lin // n`` or ``lin % n`` as a linear form (n > 0)."""
    terms, c = lin
    q = {a: v // n for a, v in terms.items() if v % n == 0}
    rest = ({a: v for a, v in terms.items() if v % n}, c % n)
    r = _expr(rest, ranges)
    lo, hi = _range(r, ranges)
    if lo is not None and hi is not None and 0 <= lo and hi < n:
        return (q, c // n) if op == "//" else rest
    for g in sorted({math.gcd(n, v) for v in terms.values()} - {1, n}, reverse=True):
        small = ({a: v for a, v in terms.items() if v % g}, c % g)
        lo, hi = _range(_expr(small, ranges), ranges)
        if lo is not None and hi is not None and 0 <= lo and hi < g:
            big = ({a: v // g for a, v in terms.items() if v % g == 0}, c // g)
            if op == "//":
                return _divmod(big, n // g, "//", ranges)
            mt, mc = _divmod(big, n // g, "%", ranges)
            return _add({a: v * g for a, v in mt.items()}, small[0]), mc * g + small[1]
    if op == "%":
        return {IBin("%", r, n): 1}, 0
    return _add(q, {IBin("//", r, n): 1}), c // n


def _expr(lin: tuple, ranges: dict) -> IExpr:
    """The linear form as an expression, after rejoining ``n*(x//n) + x%n`` into ``x``."""
    terms, c = lin
    terms = dict(terms)
    for atom in list(terms):
        if isinstance(atom, IBin) and atom.op == "//" and isinstance(atom.b, int) and atom in terms:
            mod = IBin("%", atom.a, atom.b)
            m = terms.get(mod)
            if m and terms[atom] == m * atom.b:
                del terms[atom], terms[mod]
                xt, xc = _linear(atom.a, ranges)
                terms = _add(terms, {a: v * m for a, v in xt.items()})
                c += xc * m
    out: IExpr = 0
    for atom, v in sorted(terms.items(), key=lambda kv: _order(kv[0])):
        out = iadd(out, imul(atom, v))
    return iadd(out, c)


def _order(atom) -> tuple:
    """Symbols first (loop variables in name order), then compound atoms."""
    return (0, atom.name) if isinstance(atom, Sym) else (1, str(atom))


def _range(e: IExpr, ranges: dict) -> Range:
    """Inclusive bounds of ``e``'s values given ``ranges`` (None: unbounded)."""
    if isinstance(e, int):
        return e, e
    if isinstance(e, Sym):
        return ranges.get(e.name, (None, None))
    (la, ha), (lb, hb) = _range(e.a, ranges), _range(e.b, ranges)
    if e.op == "+":
        return _opt(la, lb, int.__add__), _opt(ha, hb, int.__add__)
    if e.op == "*":
        if None in (la, ha, lb, hb):
            return (0, None) if la is not None and la >= 0 and lb is not None and lb >= 0 else (None, None)
        p = [la * lb, la * hb, ha * lb, ha * hb]
        return min(p), max(p)
    if e.op == "min":
        return _opt(la, lb, min), (hb if ha is None else ha if hb is None else min(ha, hb))
    if isinstance(e.b, int) and e.b > 0:
        n = e.b
        if e.op == "//":
            return (None if la is None else la // n), (None if ha is None else ha // n)
        if la is not None and ha is not None and 0 <= la and ha < n:
            return la, ha
        return 0, n - 1
    return None, None


def _opt(a: Optional[int], b: Optional[int], f) -> Optional[int]:
    return None if a is None or b is None else f(a, b)
