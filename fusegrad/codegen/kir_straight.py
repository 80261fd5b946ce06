"""Straight-line code, a kernel-IR pass: the statements outside loops get fewer.

A kernel with many small reductions (W5's gradient: 64 sums of 32 layers) ends, after
kir_reroll has folded their rerolled updates into rows of temps, with hundreds of
straight-line statements: each partial stored into its chunk's row, each result cast,
copied and stored into its part of the output. Numba compiles every one of them (inside a
parallel loop, once more for the outlined body), so this pass

- propagates copies: ``b = a`` of a local ``a`` is dropped and ``b`` reads ``a``;
- inlines a local read once, by a later statement of the same body, into that statement
  when nothing between them stores to a buffer it loads or updates an accumulator it reads;
- rerolls runs of repeated straight-line blocks (the same operations, each buffer index
  advancing by a fixed step per block, locals read only inside their block) into a serial
  loop over the blocks, run in the same order.

Statements keep their order, so results are bit for bit those of the code before."""
from __future__ import annotations

from typing import Optional

from .kir import (Acc, Assign, Guard, Kernel, Load, Loop, Ref, Store, Sym, Update, iadd, imul, map_values, rebuild,
                  stmt_values, stmts, values)
from .kir_reroll import _find_runs, _rebuild, _Stmt

MIN_STATEMENTS = 16  # a run of fewer straight-line statements stays as it is


def straighten(k: Kernel) -> Kernel:
    """``k`` with its straight-line code simplified (see the module docstring)."""
    loops = [0]
    temps = frozenset(b.name for b in k.buffers if b.role == "temp")
    return Kernel(k.name, list(k.buffers), k.syms, _body(k.body, loops, temps))


def _body(body: list, loops: list, temps: frozenset) -> list:
    """``body`` simplified, and the bodies inside it; an innermost loop's body (a lane loop,
    LLVM's to vectorize) stays as lowering and kir_reroll wrote it."""
    body = [Loop(s.var, s.extent, s.kind, _body(s.body, loops, temps))
            if isinstance(s, Loop) and any(isinstance(t, (Loop, Guard)) for t in s.body) else
            Guard(s.cond, _body(s.body, loops, temps)) if isinstance(s, Guard) else s for s in body]
    body = _inline(_propagate_copies(body), temps)
    return _reroll_straight(body, loops)


def _reads(s) -> set:
    """Names statement ``s`` reads (nested statements included)."""
    return {v.name for t in stmts([s]) for x in stmt_values(t) for v in values(x) if isinstance(v, Ref)}


def _substitute(s, subst: dict):
    """Statement ``s`` (and those inside it) with each ``Ref`` named in ``subst`` replaced."""
    def fn(v):
        return subst.get(v.name, v) if isinstance(v, Ref) else v
    if isinstance(s, (Loop, Guard)):
        inner = [_substitute(t, subst) for t in s.body]
        return Loop(s.var, s.extent, s.kind, inner) if isinstance(s, Loop) else Guard(rebuild(s.cond, fn), inner)
    return map_values(s, lambda v: rebuild(v, fn))


def _propagate_copies(body: list) -> list:
    # an accumulator (declared here or further out) may still change: its copies stay
    changing = {s.name for s in stmts(body) if isinstance(s, (Acc, Update))}
    subst: dict = {}
    out = []
    for s in body:
        s = _substitute(s, subst) if subst else s
        if isinstance(s, Assign) and isinstance(s.value, Ref) and s.value.name not in changing:
            subst[s.name] = s.value
            continue
        out.append(s)
    return out


def _inline(body: list, temps: frozenset) -> list:
    """``body`` with each local read once inlined (see the module docstring). Parameter
    buffers may share memory (a value computed in place over an operand), so a load from
    one never moves past a store to another; a temp is no other buffer's memory."""
    uses: dict = {}
    for p, s in enumerate(body):
        for n in _reads(s):
            uses.setdefault(n, []).append(p)
    out = list(body)
    for p in range(len(out)):
        s = out[p]  # (with the locals inlined into it so far)
        if not isinstance(s, Assign) or len(uses.get(s.name, ())) != 1:
            continue
        q = uses[s.name][0]
        user = out[q]
        if q <= p or isinstance(user, (Loop, Guard)) or \
                sum(1 for v in values(user.value) if isinstance(v, Ref) and v.name == s.name) != 1:
            continue
        loads = {v.buf for v in values(s.value) if isinstance(v, Load)}
        reads = {v.name for v in values(s.value) if isinstance(v, Ref)}
        between = [t for x in out[p + 1:q] if x is not None for t in stmts([x])]
        stored = {t.buf for t in between if isinstance(t, Store)}
        if stored & loads or (stored - temps and loads - temps) or \
                any(isinstance(t, (Update, Assign, Acc)) and t.name in reads for t in between):
            continue
        out[q] = _substitute(user, {s.name: s.value})
        out[p] = None
    return [s for s in out if s is not None]


def _reroll_straight(body: list, loops: list) -> list:
    out: list = []
    p = 0
    while p < len(body):
        q = p
        while q < len(body) and isinstance(body[q], (Assign, Store)):
            q += 1
        out += _stretch(body[p:q], body[q:], loops) if q - p >= MIN_STATEMENTS else body[p:q]
        if q < len(body):
            out.append(body[q])
        p = q + 1
    return out


def _stretch(part: list, after: list, loops: list) -> list:
    """Straight-line statements ``part`` (``after``: the rest of their body) with their runs
    of repeated blocks rerolled."""
    defpos: dict = {}
    sts = []
    for p, s in enumerate(part):
        st = _Stmt(s, defpos, {})
        if st.target is not None:
            defpos[st.target] = p
        sts.append(st)
    sigs: dict = {}
    for st in sts:
        key = (st.sig, tuple(op[:3] if op[0] == "arr" else op[:1] if op[0] == "pos" else op for op in st.ops))
        st.sig = sigs.setdefault(key, len(sigs))
    later = set().union(*(_reads(s) for s in after)) if after else set()
    out: list = []
    p = 0
    for run in _find_runs(sts):
        if run.n * run.period < MIN_STATEMENTS or not _closed(sts, run, later):
            continue
        out += part[p:run.start]
        zq = Sym(f"zr{loops[0]}")
        loops[0] += 1
        out.append(Loop(zq.name, run.n, "serial",
                        [_advanced(sts[run.start + j], run.deltas[j], zq) for j in range(run.period)]))
        p = run.end
    return out + part[p:]


def _closed(sts: list, run, later: set) -> bool:
    """Whether ``run``'s blocks read locals of their own block or from before the run only,
    and nothing after the run reads the locals its blocks define."""
    for j in range(run.period):
        for op, d in zip(sts[run.start + j].ops, run.deltas[j]):
            if op[0] != "pos":
                continue
            inside = run.start <= op[1] < run.start + run.period
            if not (inside and d[1] == run.period or op[1] < run.start and d[1] == 0):
                return False
    defined = {st.target for st in sts[run.start:run.end] if st.target is not None}
    after = set().union(*(_reads(st.stmt) for st in sts[run.end:])) if run.end < len(sts) else set()
    return not defined & (later | after)


def _advanced(st: _Stmt, deltas: list, zq: Sym):
    """The first block's statement ``st`` with each buffer index advancing by its step per
    iteration of ``zq``."""
    def operand(op, d) -> Optional[object]:
        if op[0] != "arr":
            return None
        _, buf, rest, const = op
        index = iadd(iadd(rest, imul(zq, d[1])), const)
        return index if buf is None else Load(buf, index, None)
    vals = iter([operand(op, d) for op, d in zip(st.ops, deltas)])
    s = st.stmt
    if isinstance(s, Store):
        dest = next(vals)
        return Store(dest.buf, dest.index, _rebuild(s.value, vals))
    return Assign(s.name, _rebuild(s.value, vals))
