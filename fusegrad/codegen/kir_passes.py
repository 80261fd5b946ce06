"""Passes over the kernel IR (codegen.kir), for every renderer. Each returns a new kernel
and leaves its input alone; ``optimize`` runs them in order, verifying after each.

- ``reroll`` (kir_reroll): long lane loops of repeated blocks become loops over the blocks.
- ``hoist_index``: index arithmetic computed once where its operands are known. Inside a
  loop nest a load at ``(i0*n1 + i1)*n2 + i2`` would multiply out the outer part at every
  inner iteration; the pass binds each largest compound subexpression that does not
  depend on a loop with a ``Let`` before that loop (at the top of the enclosing body),
  one binding per distinct subexpression (common subexpressions shared), and index
  expressions read the binding."""
from __future__ import annotations

from typing import Callable

from .kir_reroll import reroll
from .kir import IBin, IExpr, Index, Kernel, Let, Load, Loop, Guard, Op, Assign, Store, Update, Sym, isyms, verify


def hoist_index(k: Kernel) -> Kernel:
    """``k`` with its loop-invariant index arithmetic bound before the loops (see module
    docstring)."""
    counter = [0]
    body = _hoist(k.body, set(k.syms), counter)
    return Kernel(k.name, list(k.buffers), k.syms, body)


def _hoist(body: list, avail: set, counter: list) -> list:
    """``body`` (whose statements may read the integer names ``avail``) with the compound
    index subexpressions of its loops that read only ``avail`` bound at its top."""
    found: dict = {}  # subexpression -> let name, in order of first appearance

    def candidates(e: IExpr) -> None:
        if not isinstance(e, IBin):
            return
        if set(isyms(e)) <= avail:
            if e not in found:
                found[e] = f"t{counter[0]}"
                counter[0] += 1
            return
        candidates(e.a)
        candidates(e.b)

    for s in body:
        if isinstance(s, Loop):
            _each_index(s.body, candidates)
    subst = {e: Sym(n) for e, n in found.items()}
    out: list = [Let(n, e) for e, n in found.items()]
    for s in body:
        s = _rewrite(s, lambda e: _replace(e, subst)) if subst and isinstance(s, Loop) else s
        if isinstance(s, Loop):
            s = Loop(s.var, s.extent, s.kind, _hoist(s.body, avail | {s.var} | set(found.values()), counter))
        out.append(s)
    return out


def _replace(e: IExpr, subst: dict) -> IExpr:
    if e in subst:
        return subst[e]
    if isinstance(e, IBin):
        return IBin(e.op, _replace(e.a, subst), _replace(e.b, subst))
    return e


def _values_index(v, fn: Callable) -> None:
    if isinstance(v, Load):
        fn(v.index)
    elif isinstance(v, Index):
        fn(v.expr)
    elif isinstance(v, Op):
        for a in v.args:
            _values_index(a, fn)


def _each_index(body: list, fn: Callable) -> None:
    """Call ``fn`` on every index expression of ``body`` (loop extents included)."""
    for s in body:
        if isinstance(s, Loop):
            fn(s.extent)
            _each_index(s.body, fn)
        elif isinstance(s, Guard):
            _values_index(s.cond, fn)
            _each_index(s.body, fn)
        elif isinstance(s, Store):
            fn(s.index)
            _values_index(s.value, fn)
        elif isinstance(s, (Assign, Update)):
            _values_index(s.value, fn)
        elif isinstance(s, Let):
            fn(s.expr)


def _rewrite_value(v, fn: Callable):
    if isinstance(v, Load):
        return Load(v.buf, fn(v.index), v.dtype)
    if isinstance(v, Index):
        return Index(fn(v.expr), v.dtype)
    if isinstance(v, Op):
        return Op(v.op, tuple(_rewrite_value(a, fn) for a in v.args), v.dtype, v.params)
    return v


def _rewrite(s, fn: Callable):
    """Statement ``s`` with ``fn`` applied to each of its index expressions (nested ones too)."""
    if isinstance(s, Loop):
        return Loop(s.var, fn(s.extent), s.kind, [_rewrite(t, fn) for t in s.body])
    if isinstance(s, Guard):
        return Guard(_rewrite_value(s.cond, fn), [_rewrite(t, fn) for t in s.body])
    if isinstance(s, Store):
        return Store(s.buf, fn(s.index), _rewrite_value(s.value, fn))
    if isinstance(s, Assign):
        return Assign(s.name, _rewrite_value(s.value, fn))
    if isinstance(s, Update):
        return Update(s.name, _rewrite_value(s.value, fn))
    if isinstance(s, Let):
        return Let(s.name, fn(s.expr))
    return s


PASSES = (reroll, hoist_index)


def optimize(k: Kernel, passes=PASSES) -> Kernel:
    """``k`` after each of ``passes`` in turn, verified after every one."""
    for p in passes:
        k = verify(p(k))
    return k
