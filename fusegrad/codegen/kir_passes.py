"""Passes over the kernel IR (codegen.kir), for every renderer. Each returns a new kernel
and leaves its input alone; ``optimize`` runs them in order (each result verified under
``FUSEGRAD_VERIFY=1``).

- ``simplify_index`` (kir_index): index arithmetic simplified knowing the loops' ranges
  (a view's split and rejoined linear index is the index again).
- ``count_nans``: a float max/min accumulator folds with the NaN-ignoring ``fmax``/``fmin``
  (a plain compare and select, which vectorizes) and counts the NaNs it saw in an integer
  accumulator beside it; the result is NaN where the count is not 0, as NumPy's is.
- ``chunk_reductions``: a parallel loop folding into accumulators declared outside it runs
  as parallel chunks of ``CHUNK`` iterations; each chunk folds into accumulators of its own
  in a plain inner loop (which LLVM vectorizes; a parallel reduction alone does not) and
  stores them in temp buffers, combined in chunk order after the loop. No parallel
  reduction variables remain (Numba copies a loop body's IR once per such variable: W5's
  gradient, 64 sums in one loop, took 71 s to compile with them), and the sum does not
  depend on the thread schedule.
- ``reroll`` (kir_reroll): long lane loops of repeated blocks become loops over the blocks.
- ``straighten`` (kir_straight): fewer straight-line statements (copies propagated, locals
  read once inlined, repeated blocks rerolled).
- ``hoist_index``: index arithmetic computed once where its operands are known. Inside a
  loop nest a load at ``(i0*n1 + i1)*n2 + i2`` would multiply out the outer part at every
  inner iteration; the pass binds each largest compound subexpression that does not
  depend on a loop with a ``Let`` before that loop (at the top of the enclosing body),
  one binding per distinct subexpression (common subexpressions shared), and index
  expressions read the binding."""
from __future__ import annotations

from typing import Callable

from .kir_index import simplify_index
from .kir_reroll import reroll
from .kir_straight import straighten
import numpy as np

from .kir import (Acc, Assign, Buffer, Const, Guard, IBin, IExpr, Index, Kernel, Let, Load, Loop, Op, Ref, Store, Sym,
                  Update, checked, iadd, ifloordiv, imin, imul, isyms, map_stmts, map_values, rebuild, stmts)

CHUNK = 1 << 14  # iterations per parallel chunk of a reduction: big enough to amortize, fits L2
_INT64 = np.dtype(np.int64)


def count_nans(k: Kernel) -> Kernel:
    """``k`` with its float max/min accumulators NaN-counting (see module docstring)."""
    return Kernel(k.name, list(k.buffers), k.syms, _count_nans(k.body, {}))


def _count_nans(body: list, counted: dict) -> list:
    """``counted``: accumulator name -> its NaN count's name, for those declared so far."""
    counted = dict(counted)
    out: list = []
    for s in body:
        if isinstance(s, Acc) and s.op in ("max", "min") and np.dtype(s.dtype).kind == "f":
            counted[s.name] = f"{s.name}_n"
            out += [Acc(s.name, "f" + s.op, s.dtype), Acc(counted[s.name], "+", _INT64)]
        elif isinstance(s, Update) and s.name in counted:
            r = Ref(f"{s.name}_r", s.value.dtype)
            isnan = Op("ne", (r, r), np.dtype(np.bool_))
            out += [Assign(r.name, s.value), Update(s.name, r),
                    Update(counted[s.name], Op("cast", (isnan,), _INT64, (("dtype", _INT64),)))]
        elif isinstance(s, (Loop, Guard)):
            inner = _count_nans(s.body, counted)
            s = Loop(s.var, s.extent, s.kind, inner) if isinstance(s, Loop) else Guard(_with_nan(s.cond, counted), inner)
            out.append(s)
        else:
            out.append(map_values(s, lambda v: _with_nan(v, counted)))
    return out


def _with_nan(v, counted: dict):
    """Value ``v`` with each read of a NaN-counting accumulator NaN where it counted one."""
    def read(x):
        if not (isinstance(x, Ref) and x.name in counted):
            return x
        none = Op("eq", (Ref(counted[x.name], _INT64), Const(0, _INT64)), np.dtype(np.bool_))
        return Op("where", (none, x, Const(float("nan"), x.dtype)), x.dtype)
    return rebuild(v, read)


def chunk_reductions(k: Kernel) -> Kernel:
    """``k`` with its parallel reduction loops chunked (see module docstring)."""
    temps: list = []
    body = _chunk(k.body, {}, temps)
    return Kernel(k.name, list(k.buffers) + temps, k.syms, body)


def _chunk(body: list, accs: dict, temps: list) -> list:
    """``accs``: accumulator name -> Acc, for those declared around ``body``; the partials'
    buffers go to ``temps``."""
    accs = dict(accs)
    out: list = []
    for s in body:
        if isinstance(s, Acc):
            accs[s.name] = s
        if isinstance(s, Loop):
            folded = _folds(s.body, accs)
            if s.kind == "parallel" and folded:
                out += _chunked(s, folded, temps)
                continue
            s = Loop(s.var, s.extent, s.kind, _chunk(s.body, accs, temps))
        elif isinstance(s, Guard):
            s = Guard(s.cond, _chunk(s.body, accs, temps))
        out.append(s)
    return out


def _folds(body: list, accs: dict) -> dict:
    """Accumulators of ``accs`` (declared outside ``body``) that ``body`` updates -> the dtype
    of a chunk's own accumulator: the values' float type for a float one (a chunk's sum
    is short; the combined one keeps the accumulator's width), else the accumulator's."""
    res: dict = {}
    for s in stmts(body):
        if isinstance(s, Update) and s.name in accs and s.name not in res:
            a, v = np.dtype(accs[s.name].dtype), np.dtype(s.value.dtype)
            res[s.name] = (accs[s.name], v if a.kind == "f" and v.kind == "f" else a)
    return res


def _chunked(loop: Loop, folded: dict, temps: list) -> list:
    """Parallel ``loop`` as chunks, each folding into its own accumulators, their partials
    stored per chunk (a row of a buffer per dtype, added to ``temps``; one buffer rather
    than one per accumulator keeps the parallel loop's arguments few) and combined in order
    after it."""
    c, j, q = Sym(f"{loop.var}_c"), f"{loop.var}_j", f"{loop.var}_k"
    chunks = ifloordiv(iadd(loop.extent, CHUNK - 1), CHUNK)
    own = {n: f"{n}_c" for n in folded}
    by_dtype: dict = {}  # a partials buffer's dtype -> the accumulators it holds, in order
    for n, (_, dt) in folded.items():
        by_dtype.setdefault(np.dtype(dt), []).append(n)
    part = {dt: f"{loop.var}_p{g}" for g, dt in enumerate(by_dtype)}
    slot = {n: (part[dt], len(names), k) for dt, names in by_dtype.items() for k, n in enumerate(names)}
    nested = any(isinstance(t, Loop) for t in loop.body)
    first = imul(c, CHUNK)
    width = min(CHUNK, loop.extent) if isinstance(loop.extent, int) else CHUNK  # bounds the lanes of a chunk
    inner = Loop(j, imin(width, iadd(loop.extent, imul(c, -CHUNK))), "serial" if nested else "vector",
                 [Let(loop.var, iadd(first, Sym(j)))] + _renamed(loop.body, own))
    chunk = [Acc(own[n], a.op, dt) for n, (a, dt) in folded.items()] + [inner] + \
        [Store(slot[n][0], iadd(imul(c, slot[n][1]), slot[n][2]), Ref(own[n], dt)) for n, (_, dt) in folded.items()]
    temps += [Buffer(part[dt], dt, imul(chunks, len(names)), "temp") for dt, names in by_dtype.items()]
    return [
        Loop(c.name, chunks, "parallel", chunk),
        Loop(q, chunks, "serial", [Update(n, Load(slot[n][0], iadd(imul(Sym(q), slot[n][1]), slot[n][2]), dt))
                                   for n, (_, dt) in folded.items()])]


def _renamed(body: list, names: dict) -> list:
    """``body`` with updates of the accumulators ``names`` maps folding into their new names."""
    return map_stmts(body, lambda s: Update(names[s.name], s.value) if isinstance(s, Update) and s.name in names else s)


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
            each_index(s.body, candidates)
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


def each_index(body: list, fn: Callable) -> None:
    """Call ``fn`` on every index expression of ``body`` (loop extents included)."""
    for s in body:
        if isinstance(s, Loop):
            fn(s.extent)
            each_index(s.body, fn)
        elif isinstance(s, Guard):
            _values_index(s.cond, fn)
            each_index(s.body, fn)
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


# chunks first: a reduction's chunk is rerolled inside (its temps are the chunk's scratch,
# cache-sized), so a long parallel reduction keeps one pass over memory
PASSES = (simplify_index, count_nans, chunk_reductions, reroll, straighten, hoist_index)


def optimize(k: Kernel, passes=PASSES) -> Kernel:
    """``k`` after each of ``passes`` in turn, each result verified under ``FUSEGRAD_VERIFY=1``
    (``kir.checked``)."""
    for p in passes:
        k = checked(p(k))
    return k
