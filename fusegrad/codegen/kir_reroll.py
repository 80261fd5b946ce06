"""Loop rerolling, a kernel-IR pass: a lane loop whose body repeats one block of
statements many times becomes a loop over the repetitions with the lanes innermost.

A chain of identical steps (W3: ``h = tanh(h * W[i] + b[i])`` for 200 rows of W) traces
to hundreds of equations, fuses into one loop group over h's 16 lanes and lowers to one
lane loop whose body repeats the same few statements 200 times, each reading the next row
of W. LLVM does not vectorize across the iterations of that loop (each is a long serial
chain) and compiles such a body slowly. Rerolled, it reads::

    serial for zq0 in 0..199:         # the steps after the first
      vector for i0 in 0..16:         # the lanes
        zp0_0 = zt0[i0]               # h from the step before (a carry)
        ...one step, reading W at (zq0 + 1) * 16 + i0...
        zt0[i0] = h

The pass looks at every lane loop (``vector``, or a ``parallel`` loop with no loop inside:
a flat parallel group) whose body is straight-line assignments, accumulator updates and stores. It finds runs
of blocks that repeat with the same operations, every buffer index advancing by a fixed
step per block (an index is split into a constant and the rest, which must be equal) and
every reference to a local advancing by the block length. The first block of a run stays
in the straight-line code before it; the others become the rerolled loop. Values cross
between the pieces through temp buffers (kir.Buffer role "temp"): a lane array for a
straight-line value read elsewhere, a carry for a value the next block reads, a stack (a
row per block) for block values read later (the backward half of a chain reads every
forward step). The pieces run in the original order and stores end the body (the pass
leaves a body alone otherwise), so every load still comes before every store, which keeps
values written in place over an operand (passes.memory) correct. The temps of a lane loop
inside a parallel loop (a reduction's chunk, kir_passes.chunk_reductions) are scratch
allocated by each iteration of that loop (kir.Scratch), so threads never share them and
they stay chunk-sized; a parallel lane loop becomes a serial loop over the blocks around
a parallel loop over the lanes, each lane its own temp elements.

Blocks may fold into accumulators (W5's gradient: two sums per layer, 64 in one loop),
each block into its own: in the rerolled loop, block ``b`` folds its lanes into a fresh
accumulator, added after the lane loop to row ``b`` of a temp (set to the reduction's
identity first), and later reads of the accumulator read that row. A flat serial loop that
only folds (the combine of a reduction's chunks) is rerolled the same way."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir.scalar_ops import REDUCE_OPS, reduce_identity
from .kir import (Acc, Assign, Buffer, Const, Guard, IBin, IExpr, Index, Kernel, Let, Load, Loop, Op, Ref, Scratch,
                  Store, Sym, Update, iadd, ifloordiv, imin, imul, isyms, map_body, rebuild, stmts, values)

MIN_BODY = 32  # shorter bodies compile and run fine unrolled
MIN_ITERS = 4  # fewest loop iterations (blocks after the first) worth a rerolled loop
MAX_PERIOD = 64  # longest block looked for, in statements
MIN_COPIES = 8  # stores of temp values in one segment from which they get loops of their own
COPY_GROUP = 4  # such stores per loop
TILE = 512  # most lanes a serial lane loop reroll at a time: its temps (a stack: a row per block) stay in cache


def reroll(k: Kernel) -> Kernel:
    """``k`` with each long lane loop rerolled where it repeats (see the module docstring);
    the same statements where nothing qualifies."""
    names = _Names()
    body = _walk(k.body, names)
    return Kernel(k.name, list(k.buffers) + names.temps, k.syms, body)


class _Names:
    """Fresh names for the pass's loop variables, carries and temp buffers (prefix ``z``,
    which lowering never uses)."""

    def __init__(self):
        self.temps: list = []
        self.loops = 0
        self.carries = 0
        self.hoists = 0

    def temp(self, dtype, size: IExpr) -> str:
        name = f"zt{len(self.temps)}"
        self.temps.append(Buffer(name, np.dtype(dtype), size, "temp"))
        return name

    def loop(self) -> str:
        self.loops += 1
        return f"zq{self.loops - 1}"

    def carry(self) -> str:
        self.carries += 1
        return f"zp{self.carries - 1}"

    def hoisted(self) -> str:
        self.hoists += 1
        return f"zh{self.hoists - 1}"

    def acc(self) -> str:
        self.hoists += 1
        return f"zs{self.hoists - 1}"


def _walk(body: list, names: _Names) -> list:
    out: list = []
    accs: dict = {}  # accumulators declared in this body so far -> Acc
    updates: dict = {}  # accumulator name -> how many updates of it this body holds
    for t in stmts(body):
        if isinstance(t, Update):
            updates[t.name] = updates.get(t.name, 0) + 1
    rows: dict = {}  # accumulator -> the temp element it became (a rerolled update's row)
    for s in body:
        if rows:
            s = map_body([s], lambda v: rebuild(v, lambda x: rows.get(x.name, x) if isinstance(x, Ref) else x))[0]
        if isinstance(s, Acc):
            accs[s.name] = s
        if isinstance(s, Loop):
            new = _reroll_tiled(s, names, _row_accs(s, accs, updates)) if _lane_loop(s) else None
            if new is not None:
                new, moved = new
                rows.update(moved)
                out = [t for t in out if not (isinstance(t, Acc) and t.name in moved)]
                out.extend(new)
                continue
            made = len(names.temps)
            inner = _walk(s.body, names)
            if s.kind == "parallel":  # temps made inside are each iteration's own
                inner = [Scratch(b.name) for b in names.temps[made:]] + inner
            s = Loop(s.var, s.extent, s.kind, inner)
        elif isinstance(s, Guard):
            s = Guard(s.cond, _walk(s.body, names))
        out.append(s)
    return out


def _lane_loop(s: Loop) -> bool:
    """Whether loop ``s`` may be rerolled: a lane loop (``vector``, or ``parallel`` with no
    loop inside: a flat parallel group), or a flat serial loop that only folds into
    accumulators it never reads (a reduction's combine of its chunks' partials), whose
    iterations are as independent as lanes."""
    if any(isinstance(t, (Loop, Guard)) for t in s.body):
        return s.kind == "vector"
    if s.kind != "serial":
        return True
    folded = {t.name for t in s.body if isinstance(t, Update)}
    return bool(folded) and all(isinstance(t, (Assign, Update, Let)) for t in s.body) and not any(
        isinstance(v, Ref) and v.name in folded for t in s.body if not isinstance(t, Let)
        for v in values(t.value))


def _row_accs(loop: Loop, accs: dict, updates: dict) -> dict:
    """The accumulators whose updates in ``loop`` may be rerolled (-> their Acc): declared
    in the loop's body (not further out), updated once there, numeric; in a rerolled loop
    each block folds into an accumulator of its own, then into a row of a temp."""
    if loop.kind == "parallel":  # (a parallel fold is chunked before: kir_passes.chunk_reductions)
        return {}
    return {n: a for n, a in accs.items() if updates.get(n) == 1 and np.dtype(a.dtype).kind != "b"}


def _reroll_tiled(loop: Loop, names: _Names, accs: dict) -> Optional[tuple]:
    """``_reroll_loop`` of a serial lane loop over more than TILE lanes, TILE lanes at a
    time (a serial loop over tiles around the rerolled code; the original lane variable
    a Let of the tile's); other loops as they are. Returns (statements, {accumulator: the
    temp element holding it}) or None."""
    width = _bound(loop.extent)
    if loop.kind == "parallel" or isinstance(width, int) and width <= TILE:
        new = _reroll_loop(loop, names, accs)
        return None if new is None else (new[0][0] + new[0][1], new[1])
    tile, lane = Sym(names.loop()), f"{loop.var}_t"
    lanes = imin(TILE, iadd(loop.extent, imul(tile, -TILE)))
    inner = Loop(lane, lanes, loop.kind, [Let(loop.var, iadd(imul(tile, TILE), Sym(lane)))] + loop.body)
    new = _reroll_loop(inner, names, accs)
    if new is None:
        return None
    (inits, body), rows = new
    return inits + [Loop(tile.name, ifloordiv(iadd(loop.extent, TILE - 1), TILE), "serial", body)], rows


def _bound(e: IExpr) -> IExpr:
    """An upper bound of extent ``e`` that reads no loop variable (a reduction chunk's
    ``min(CHUNK, n - c*CHUNK)`` lanes: CHUNK), or ``e`` itself."""
    if isinstance(e, IBin) and e.op == "min":
        sides = [x for x in (e.a, e.b) if isinstance(x, int)]
        return min(sides) if sides else e
    return e


# ---------------------------------------------------------------- statements as blocks
def _split(e: IExpr) -> tuple:
    """(rest, constant) with ``e == rest + constant``."""
    if isinstance(e, int):
        return 0, e
    if isinstance(e, IBin) and e.op == "+" and isinstance(e.b, int):
        rest, c = _split(e.a)
        return rest, c + e.b
    return e, 0


class _Stmt:
    """One statement of a lane loop body: the local it defines (or None for a store), its
    value's dtype, its shape ``sig`` (operations, constants and dtypes; blocks are compared
    by it) and its operands in order: ``("pos", k)`` (the local defined by statement k),
    ``("name", n)`` (defined before the loop) or ``("arr", buffer, rest, constant)`` (a
    load at, or for a store the element ``rest + constant``; buffer None: an Index value)."""
    __slots__ = ("stmt", "target", "sig", "ops")

    def __init__(self, stmt, defpos: dict, accs: dict):
        self.stmt = stmt
        self.ops: list = []
        if isinstance(stmt, Store):
            self.target = None
            self.ops.append(("arr", stmt.buf, *_split(stmt.index)))
            self.sig = ("S", self._shape(stmt.value, defpos))
        elif isinstance(stmt, Update):
            # an update of one of ``accs`` (see _row_accs) may be in a run, whose blocks then
            # fold into accumulators of their own; another never is (its fold would reorder)
            self.target = None
            acc = accs.get(stmt.name)
            self.sig = ("U", acc.op, np.dtype(acc.dtype)) if acc is not None else ("U", stmt.name, len(defpos))
            self.sig += (self._shape(stmt.value, defpos),)
        else:
            self.target = stmt.name
            self.sig = ("A", self._shape(stmt.value, defpos))

    def _shape(self, v, defpos: dict) -> tuple:
        if isinstance(v, Const):
            return ("c", repr(v.value), np.dtype(v.dtype))
        if isinstance(v, Ref):
            self.ops.append(("pos", defpos[v.name]) if v.name in defpos else ("name", v.name))
            return ("r", np.dtype(v.dtype))
        if isinstance(v, Load):
            self.ops.append(("arr", v.buf, *_split(v.index)))
            return ("l", np.dtype(v.dtype))
        if isinstance(v, Index):
            self.ops.append(("arr", None, *_split(v.expr)))
            return ("i", np.dtype(v.dtype))
        return ("o", v.op, np.dtype(v.dtype), v.params, tuple(self._shape(a, defpos) for a in v.args))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.stmt.value.dtype)


def _delta(a: tuple, b: tuple) -> Optional[tuple]:
    """How operand ``a`` of one block becomes ``b`` of the next, or None if they differ in kind."""
    if a[0] != b[0]:
        return None
    if a[0] == "arr":
        return ("arr", b[3] - a[3]) if a[1:3] == b[1:3] else None
    if a[0] == "pos":
        return ("pos", b[1] - a[1])
    return ("name",) if a == b else None


def _advance(a: tuple, d: tuple, r: int) -> tuple:
    if a[0] == "arr":
        return (*a[:3], a[3] + r * d[1])
    if a[0] == "pos":
        return ("pos", a[1] + r * d[1])
    return a


class _Run:
    """Blocks ``0..n-1`` of ``period`` statements from ``start``; ``deltas[j][o]`` advances
    operand o of statement j by one block. Blocks before ``first`` stay straight-line code
    (a block reading the one ``k`` blocks back needs ``k`` blocks before the loop)."""

    def __init__(self, start: int, period: int, n: int, deltas: list, first: int):
        self.start, self.period, self.n, self.deltas, self.first = start, period, n, deltas, first

    @property
    def loop_start(self) -> int:
        return self.start + self.first * self.period

    @property
    def end(self) -> int:
        return self.start + self.n * self.period

    def covers(self, p: int) -> bool:
        return self.start <= p < self.end

    def locate(self, p: int) -> tuple:
        """(block, position in block) of statement ``p``."""
        return divmod(p - self.start, self.period)


def _run_at(stmts: list, s: int, period: int) -> Optional[_Run]:
    """The run of blocks of ``period`` statements starting at ``s``, if it has at least
    ``MIN_ITERS + 1`` blocks."""
    n_all = len(stmts)
    if s + 2 * period > n_all:
        return None
    deltas = []
    for j in range(period):
        a, b = stmts[s + j], stmts[s + period + j]
        if a.sig != b.sig:
            return None
        d = [_delta(x, y) for x, y in zip(a.ops, b.ops)]
        if any(x is None for x in d):
            return None
        deltas.append(d)
    n = 2
    while s + (n + 1) * period <= n_all:
        for j in range(period):
            a, b = stmts[s + j], stmts[s + n * period + j]
            if a.sig != b.sig or any(_advance(x, d, n) != y for x, d, y in zip(a.ops, deltas[j], b.ops)):
                break
        else:
            n += 1
            continue
        break
    first = 1
    for j in range(period):
        for x, d in zip(stmts[s + j].ops, deltas[j]):
            if x[0] == "pos" and d[1] == period:  # moves with the blocks: how many back
                first = max(first, -((x[1] - s) // period))
    return _Run(s, period, n, deltas, first) if n - first >= MIN_ITERS else None


def _find_runs(stmts: list) -> list:
    """Runs, left to right, each the longest found at the first place one starts."""
    runs, s = [], 0
    while s < len(stmts):
        best, found = None, []
        for period in range(1, MAX_PERIOD + 1):
            if s + (MIN_ITERS + 1) * period > len(stmts):
                break
            if stmts[s + period].sig != stmts[s].sig or stmts[s + MIN_ITERS * period].sig != stmts[s].sig:
                continue  # cheap rejection: a run repeats its first statement at these places
            if any(period % q == 0 for q in found):
                continue  # blocks of a run found, taken several at a time: no longer
            run = _run_at(stmts, s, period)
            if run is not None:
                found.append(period)
                if best is None or run.n * run.period > best.n * best.period:
                    best = run
        if best is None:
            s += 1
            continue
        runs.append(best)
        s = best.end
    return runs


# ---------------------------------------------------------------- planning
class _Plan:
    """The segments of a rerolled body and the temps values cross them through."""

    def __init__(self, stmts: list, runs: list):
        self.stmts, self.runs = stmts, runs
        self.seg = [None] * len(stmts)  # statement -> run index, or None for straight-line code
        for k, run in enumerate(runs):
            for p in range(run.loop_start, run.end):
                self.seg[p] = k
        self.lane_arrays: set = set()  # straight-line statements read from other segments
        self.stacks: set = set()  # (run, position in block) kept for every block
        self.carries: set = set()  # (run, position in block) read by the next block

    def run_of(self, p: int) -> Optional[int]:
        """The run whose blocks (the peeled first one included) hold statement ``p``."""
        return next((k for k, r in enumerate(self.runs) if r.covers(p)), None)

    def segment(self, p: int) -> int:
        """Index of the straight-line segment holding (or preceding) statement ``p``."""
        return sum(1 for r in self.runs if r.loop_start <= p)

    def slot(self, at: int, op: tuple, d: Optional[tuple]) -> Optional[tuple]:
        """How operand ``op`` of statement ``at`` is read. In a rerolled loop ``at`` is in
        its run's block ``first`` (loop iteration 0) and the operand advances by ``d`` per
        block. Returns ("name", n), ("local", p), ("lane", p), ("carry", run, j) (the
        block before, in the loop), ("last", run, j) (the loop's last block, after it),
        ("stack", run, j, row at iteration 0, rows per iteration) or ("arr", buffer,
        rest, constant at iteration 0, constant per iteration); None when the rerolled
        code cannot read it."""
        k = self.seg[at]
        step = d[1] if d is not None and d[0] != "name" else 0
        if op[0] == "arr":
            return (*op, step)
        if op[0] == "name":
            return op
        p0 = op[1]  # at the first block computed there (iteration 0 in a loop)
        p1 = p0 + step * (self.runs[k].n - 1 - self.runs[k].first) if k is not None else p0  # at the last one
        if step == 0 and self.seg[p0] is None:  # a straight-line value (first blocks included)
            if k is None and self.segment(p0) == self.segment(at):
                return ("local", p0)
            self.lane_arrays.add(p0)
            return ("lane", p0)
        src = self.run_of(p0)
        if src is None or not self.runs[src].covers(p1):
            return None
        run = self.runs[src]
        (b0, j0), (b1, j1) = run.locate(p0), run.locate(p1)
        if j0 != j1 or step % run.period:
            return None
        c = step // run.period
        if src == k:
            first = run.first
            if c == 1 and b0 == first:
                return ("local", p0)
            if c == 1 and b0 == first - 1:
                self.carries.add((k, j0))
                return ("carry", k, j0)
            if b0 >= first or b1 >= run.n - 1:  # a block not computed yet when read
                return None
        elif c == 0 and b0 == run.n - 1 and b0 >= run.first:  # the loop's last value: its carry
            self.carries.add((src, j0))
            return ("last", src, j0)
        self.stacks.add((src, j0))
        return ("stack", src, j0, b0, c)


def _classify(plan: _Plan) -> tuple:
    """(statement index -> how each of its operands is read (see ``_Plan.slot``), None),
    or (None, index of a run whose loop cannot read an operand)."""
    reads = {}
    for p, st in enumerate(plan.stmts):
        k = plan.seg[p]
        if k is not None and p >= plan.runs[k].loop_start + plan.runs[k].period:
            continue  # the loop's first block speaks for the others
        if k is None:
            slots = [plan.slot(p, op, None) for op in st.ops]
        else:
            run = plan.runs[k]
            slots = [plan.slot(p, op, d) for op, d in zip(st.ops, run.deltas[(p - run.start) % run.period])]
        if any(x is None for x in slots):
            return None, k
        reads[p] = slots
    return reads, None


def _reroll_loop(loop: Loop, names: _Names, accs: dict) -> Optional[tuple]:
    """``loop`` rerolled: ((statements to run before it once, its statements), {accumulator
    of ``accs``: the temp element it became}), or None where it does not repeat."""
    lets = 0  # a reduction chunk's lane loop starts by naming the element (kir_passes.chunk_reductions)
    while lets < len(loop.body) and isinstance(loop.body[lets], Let):
        lets += 1
    body = loop.body[lets:]
    if len(body) < MIN_BODY or not all(isinstance(s, (Assign, Update, Store)) for s in body):
        return None
    first_store = next((p for p, s in enumerate(body) if isinstance(s, Store)), len(body))
    if not all(isinstance(s, Store) for s in body[first_store:]):
        return None  # stores must end the body (see the module docstring)
    defpos: dict = {}
    stmts = []
    for p, s in enumerate(body):
        st = _Stmt(s, defpos, accs)
        if st.target is not None:
            defpos[st.target] = p
        stmts.append(st)
    sigs: dict = {}
    for st in stmts:  # compared as ints from here, with what of the operands must match too
        key = (st.sig, tuple(op[:3] if op[0] == "arr" else op[:1] if op[0] == "pos" else op for op in st.ops))
        st.sig = sigs.setdefault(key, len(sigs))
    runs = _find_runs(stmts)
    while runs:
        plan = _Plan(stmts, runs)
        reads, bad = _classify(plan)
        if reads is not None:
            em = _Emitter(plan, reads, loop, names, accs)
            return em.statements(), em.rows
        if bad is None:
            return None
        r = runs[bad]  # its last blocks read what the loop cannot (e.g. a chain's prologue)
        if r.n - 1 - r.first >= MIN_ITERS:
            runs[bad] = _Run(r.start, r.period, r.n - 1, r.deltas, r.first)
        else:
            del runs[bad]
    return None


# ---------------------------------------------------------------- rewriting
class _Emitter:
    """The statements replacing lane loop ``loop``: straight-line segments as lane loops,
    runs as a serial loop over their blocks around a lane loop."""

    def __init__(self, plan: _Plan, reads: dict, loop: Loop, names: _Names, accs: dict):
        self.plan, self.reads, self.loop, self.names, self.accs = plan, reads, loop, names, accs
        self.folds: dict = {}  # an update in a rerolled loop -> the block's own accumulator
        self.rows: dict = {}  # a rerolled update's accumulator -> the temp element it became
        self.inits: list = []  # those temps' loops to the reductions' identity
        self.lane = Sym(loop.var)
        self.lets = [s for s in loop.body if isinstance(s, Let)]  # repeated in every lane loop
        self.width = lanes = _bound(loop.extent)  # a temp's elements per block (a row of a stack)
        stmts, runs = plan.stmts, plan.runs
        self.lane_arrays = {p: names.temp(stmts[p].dtype, lanes) for p in sorted(plan.lane_arrays)}
        self.stacks = {(k, j): names.temp(stmts[runs[k].start + j].dtype, imul(runs[k].n, lanes))
                       for k, j in sorted(plan.stacks)}
        # a stacked value's carry is its stack's row before (fewer arrays in a lane loop keep
        # LLVM's runtime alias checks few enough to vectorize it)
        self.carries = {(k, j): (names.temp(stmts[runs[k].start + j].dtype, lanes), names.carry())
                        for k, j in sorted(plan.carries - plan.stacks)}

    def _row(self, row: IExpr) -> IExpr:
        """Element ``lane`` of stack row ``row``."""
        return iadd(imul(row, self.width), self.lane)

    def _operand(self, sl: tuple, zq: Optional[Sym]):
        st = self.plan.stmts
        kind = sl[0]
        if kind == "name":
            return None  # the original operand stands
        if kind == "local":
            return Ref(st[sl[1]].target, st[sl[1]].dtype)
        if kind == "lane":
            return Load(self.lane_arrays[sl[1]], self.lane, st[sl[1]].dtype)
        if kind in ("carry", "last"):
            run = self.plan.runs[sl[1]]
            dt = st[run.start + sl[2]].dtype
            if sl[1:] in self.stacks:  # the block before (in the loop), or the last block
                row = iadd(zq, run.first - 1) if kind == "carry" else run.n - 1
                return Load(self.stacks[sl[1:]], self._row(row), dt)
            temp, name = self.carries[sl[1:]]
            return Ref(name, dt) if kind == "carry" else Load(temp, self.lane, dt)
        if kind == "stack":
            _, k, j, row0, c = sl
            row = iadd(imul(zq, c), row0) if zq is not None else row0
            return Load(self.stacks[(k, j)], self._row(row), st[self.plan.runs[k].start + j].dtype)
        _, buf, rest, const, step = sl  # arr
        index = iadd(iadd(rest, imul(zq, step)) if zq is not None else rest, const)
        return index if buf is None else Load(buf, index, None)

    def _statement(self, p: int, zq: Optional[Sym]) -> list:
        """Statement ``p`` reading its operands as planned (``zq``: the loop variable of
        its run's loop, None in straight-line code), then the temps its value goes to."""
        st = self.plan.stmts[p]
        vals = iter([self._operand(sl, zq) for sl in self.reads[p]])
        if isinstance(st.stmt, Store):
            dest = next(vals)
            out = [Store(dest.buf, dest.index, _rebuild(st.stmt.value, vals))]
        elif isinstance(st.stmt, Update):
            out = [Update(self.folds.get(p, st.stmt.name) if zq is not None else st.stmt.name,
                          _rebuild(st.stmt.value, vals))]
        else:
            out = [Assign(st.target, _rebuild(st.stmt.value, vals))]
        ref = Ref(st.target, st.dtype) if st.target is not None else None
        if ref is None:
            return out
        if p in self.lane_arrays:
            out.append(Store(self.lane_arrays[p], self.lane, ref))
        k = self.plan.run_of(p)
        if k is not None:
            b, j = self.plan.runs[k].locate(p)
            if (k, j) in self.stacks:
                row = iadd(zq, self.plan.runs[k].first) if zq is not None else b
                out.append(Store(self.stacks[(k, j)], self._row(row), ref))
            if (k, j) in self.carries:
                out.append(Store(self.carries[(k, j)][0], self.lane, ref))
        return out

    def _lanes(self, body: list) -> list:
        """A lane loop running ``body``, after the loads it reads at the same element in
        every lane, read once before it (a rerolled step's weight: LLVM would reload it per
        lane, since the loop's stores might alias it)."""
        lane = {self.loop.var} | {s.name for s in self.lets}
        stored = {s.buf for s in body if isinstance(s, Store)}
        hoisted: dict = {}

        def hoist(v):
            if not isinstance(v, Load) or v.buf in stored or lane & set(isyms(v.index)):
                return v
            key = (v.buf, v.index)
            if key not in hoisted:
                hoisted[key] = Assign(self.names.hoisted(), v)
            return Ref(hoisted[key].name, v.dtype)
        body = map_body(body, lambda x: rebuild(x, hoist))
        return list(hoisted.values()) + [Loop(self.loop.var, self.loop.extent, self.loop.kind, self.lets + body)]

    def _split_copies(self, body: list) -> list:
        """Lane loops running ``body``: when it stores many temp values (the stack rows a run
        left for the outputs: remat="none" keeps every step), those stores go COPY_GROUP to a
        loop, since one loop storing dozens of streams has too many possible overlaps for
        LLVM's runtime alias checks and stays scalar (and a loop per store compiles slowly
        inside a parallel chunk). The rest runs first: every load still comes before every
        store."""
        temps = {t.name for t in self.names.temps}
        copies = [s for s in body if isinstance(s, Store) and isinstance(s.value, Load) and s.value.buf in temps]
        if len(copies) < MIN_COPIES:
            return self._lanes(body)
        rest = [s for s in body if not any(s is c for c in copies)]
        groups = [copies[g:g + COPY_GROUP] for g in range(0, len(copies), COPY_GROUP)]
        return (self._lanes(rest) if rest else []) + [x for grp in groups for x in self._lanes(grp)]

    def _fold_rows(self, run: _Run, zq: Sym) -> tuple:
        """(the rerolled loop's accumulators, its statements folding them into their rows)
        for the updates of ``run``: block ``b`` folds into its own accumulator, added to row
        ``b - first`` of a temp per update (at the identity before), which later reads of the
        original accumulator load."""
        decls, folds = [], []
        for j in range(run.period):
            p = run.loop_start + j
            upd = self.plan.stmts[p].stmt
            if not isinstance(upd, Update):
                continue
            acc = self.accs[upd.name]
            dt, op, n = np.dtype(acc.dtype), acc.op, run.n - run.first
            own, temp = self.names.acc(), self.names.temp(dt, n)
            self.folds[p] = own
            decls.append(Acc(own, op, dt))
            row = Load(temp, zq, dt)
            folds.append(Store(temp, zq, Op(REDUCE_OPS[op], (row, Ref(own, dt)), dt)))
            z = self.names.loop()
            self.inits.append(Loop(z, n, "serial", [Store(temp, Sym(z), Const(reduce_identity(op, dt).item(), dt))]))
            for b in range(run.first, run.n):
                self.rows[self.plan.stmts[run.start + b * run.period + j].stmt.name] = Load(temp, b - run.first, dt)
        return decls, folds

    def statements(self) -> tuple:
        """(the temps' initializations, the statements replacing the loop)."""
        plan, runs = self.plan, self.plan.runs
        out: list = []
        p, total = 0, len(plan.stmts)
        while p < total:
            k = plan.seg[p]
            if k is None:
                body = []
                while p < total and plan.seg[p] is None:
                    body.extend(self._statement(p, None))
                    p += 1
                out.extend(self._split_copies(body))
                continue
            run = runs[k]
            zq = Sym(self.names.loop())
            decls, folds = self._fold_rows(run, zq)
            body = [Assign(name, Load(temp, self.lane, plan.stmts[run.start + j].dtype))
                    for (kk, j), (temp, name) in self.carries.items() if kk == k]
            for q in range(run.loop_start, run.loop_start + run.period):
                body.extend(self._statement(q, zq))
            out.append(Loop(zq.name, run.n - run.first, "serial", decls + self._lanes(body) + folds))
            p = run.end
        return self.inits, out


def _rebuild(v, vals):
    """Value ``v`` with its operands (in ``_Stmt``'s order) taken from ``vals``; None keeps
    the original; a load's dtype is the original's."""
    if isinstance(v, Const):
        return v
    if isinstance(v, (Ref, Load, Index)):
        new = next(vals)
        if new is None:
            return v
        if isinstance(v, Load) and isinstance(new, Load):
            return Load(new.buf, new.index, v.dtype)
        if isinstance(v, Index):
            return Index(new, v.dtype)
        return new
    return Op(v.op, tuple(_rebuild(a, vals) for a in v.args), v.dtype, v.params)
