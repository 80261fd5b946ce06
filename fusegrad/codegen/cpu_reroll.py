"""Loop rerolling: a lane loop whose body repeats one block of statements many times
becomes a loop over the repetitions with the lanes innermost.

A chain of identical steps (W3: ``h = tanh(h * W[i] + b[i])`` for 200 rows of W) traces
to hundreds of equations, fuses into one loop group over h's 16 lanes and generates one
``for i0 in range(16)`` whose body repeats the same few statements 200 times, each
reading the next row of W. LLVM does not vectorize across the iterations of that loop
(each is a long serial chain) and compiles such a body slowly. Rerolled, it reads::

    for zq in range(1, 200):          # the steps
        for i0 in range(16):          # the lanes: one vector
            zp0 = zc0[i0]             # h from the step before
            ...one step, reading W at row zq...
            zc0[i0] = h

This pass works on the generated statements of one lane loop: ``m<k> = <expr>``, stores
``buf[np.uint64(i0 + c)] = m<k>`` and accumulator updates. It finds runs of blocks that
repeat with every buffer offset and every reference advancing by a fixed step per block.
The first block of a run stays in the straight-line code before it; the others become
the rerolled loop. Values cross between the pieces through small arrays: a lane array for
a straight-line value read elsewhere, a carry array for a value the next block reads, a
stack (a row per block) for block values read later (the backward half of a chain reads
every forward step). The pieces run in the original order, so every load still comes
before every store (stores end the body), which keeps values written in place over an
operand (passes.memory) correct. A body with anything else is left as it is."""
from __future__ import annotations

import re
from typing import Callable, Optional

import numpy as np

MIN_BODY = 32  # shorter bodies compile and run fine unrolled
MIN_ITERS = 4  # fewest loop iterations (blocks after the first) worth a rerolled loop
MAX_PERIOD = 64  # longest block looked for, in statements

_LOOP = re.compile(r"^( *)for i0 in range\((\d+)\):$")
_TOKEN = re.compile(r"\b(?:(?P<buf>[A-Za-z_]\w*)\[np\.uint64\(i0(?: \+ (?P<off>\d+))?\)\]"
                    r"|(?P<cbuf>[A-Za-z_]\w*)\[(?P<coff>\d+)\]|(?P<loc>[mr]\d+)\b)")
_DEF = re.compile(r"^([mr]\d+) = ")
# index variables of other loops, and this pass's own names: a body using them is left alone
_FOREIGN = re.compile(r"\b(?:i\d+|c\d+|z[a-z]\w*)\b|prange|\bfor\b|:$")


class _Stmt:
    """One statement: the local it defines (or None), its text with operands replaced by
    ``{}`` (the signature blocks are compared by), and the operands in order: ``("pos", k)``
    (the local defined by statement k), ``("name", n)`` (defined before the loop) or
    ``("arr", buffer, offset, lane)`` (element ``i0 + offset`` of a buffer, or element
    ``offset`` when ``lane`` is False)."""
    __slots__ = ("target", "sig", "ops")

    def __init__(self, target: Optional[str], sig: str, ops: list):
        self.target, self.sig, self.ops = target, sig, ops


def _parse(line: str, views: dict, defpos: dict) -> Optional[_Stmt]:
    m = _DEF.match(line)
    target, rest = (m.group(1), line[m.end():]) if m else (None, line)
    ops, parts, at = [], [], 0
    for t in _TOKEN.finditer(rest):
        parts.append(_escape(rest[at:t.start()]))
        at = t.end()
        parts.append("{}")
        if t.group("loc"):
            name = t.group("loc")
            ops.append(("pos", defpos[name]) if name in defpos else ("name", name))
        else:
            lane = t.group("buf") is not None
            base = t.group("buf") if lane else t.group("cbuf")
            off = int((t.group("off") if lane else t.group("coff")) or 0)
            base, start = views.get(base, (base, 0))
            ops.append(("arr", base, off + start, lane))
    parts.append(_escape(rest[at:]))
    sig = ("{T} = " if target else "") + "".join(parts)
    if _FOREIGN.search(sig.replace("{}", "").replace("{T}", "")):
        return None
    return _Stmt(target, sig, ops)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _delta(a: tuple, b: tuple) -> Optional[tuple]:
    """How operand ``a`` of one block becomes ``b`` of the next, or None if they differ in kind."""
    if a[0] != b[0]:
        return None
    if a[0] == "arr":
        return ("arr", b[2] - a[2]) if a[1] == b[1] and a[3] == b[3] else None
    if a[0] == "pos":
        return ("pos", b[1] - a[1])
    return ("name",) if a == b else None


def _advance(a: tuple, d: tuple, r: int) -> tuple:
    if a[0] == "arr":
        return ("arr", a[1], a[2] + r * d[1], a[3])
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


class _Plan:
    """The segments of a rerolled body and the arrays values cross them through."""

    def __init__(self, stmts: list, runs: list, lanes: int):
        self.stmts, self.runs, self.lanes = stmts, runs, lanes
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
        its run's block ``first`` and the operand advances by ``d`` per block (``zq``).
        Returns ("text", s), ("local", name), ("lane", p), ("carry", run, j),
        ("stack", run, j, row at zq = 0, rows per zq) or ("arr", buffer, offset at
        zq = 0, offset per zq, lane); None when it cannot be read in the rerolled code."""
        k = self.seg[at]
        step = d[1] if d is not None and d[0] != "name" else 0
        first = self.runs[k].first if k is not None else 0
        if op[0] == "arr":
            return ("arr", op[1], op[2] - step * first, step, op[3])
        if op[0] == "name":
            return ("text", op[1])
        p0 = op[1]  # at the first block computed there (zq = first in a loop)
        p1 = p0 + step * (self.runs[k].n - 1 - first) if k is not None else p0  # at the last one
        if step == 0 and self.seg[p0] is None:  # a straight-line value (first blocks included)
            if k is None and self.segment(p0) == self.segment(at):
                return ("local", self.stmts[p0].target)
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
            if c == 1 and b0 == first:
                return ("local", self.stmts[p0].target)
            if c == 1 and b0 == first - 1:
                self.carries.add((k, j0))
                return ("carry", k, j0)
            if b0 >= first or b1 >= run.n - 1:  # a block not computed yet when read
                return None
        self.stacks.add((src, j0))
        return ("stack", src, j0, b0 - c * first, c)


def _index(a: int, b: int, lane: bool = True) -> str:
    """``np.uint64(i0 + a + b * zq)`` without zero terms (without i0 unless ``lane``)."""
    terms = ["i0"] if lane else []
    if a or not lane:
        terms.append(str(a))
    if b:
        terms.append("zq" if b == 1 else f"{b} * zq")
    return f"np.uint64({' + '.join(terms)})".replace("+ -", "- ")


def _find_runs(stmts: list) -> list:
    """Runs, left to right, each the longest found at the first place one starts."""
    runs, s = [], 0
    while s < len(stmts):
        best = None
        for period in range(1, MAX_PERIOD + 1):
            if s + (MIN_ITERS + 1) * period > len(stmts):
                break
            run = _run_at(stmts, s, period)
            if run is not None and (best is None or run.n * run.period > best.n * best.period):
                best = run
        if best is None:
            s += 1
            continue
        runs.append(best)
        s = best.end
    return runs


def reroll(lines: list, views: dict, dtype_of: Callable[[str], Optional[np.dtype]]) -> list:
    """``lines`` (one loop group's source lines) with each long lane loop
    (``for i0 in range(N):``) rerolled where it repeats; unchanged where nothing qualifies. ``views`` maps buffer
    names that are slices of another buffer to (base, offset); ``dtype_of`` gives the type
    of a local (``m<k>``), or None when unknown."""
    out, k = [], 0
    while k < len(lines):
        m = _LOOP.match(lines[k])
        if m is None:
            out.append(lines[k])
            k += 1
            continue
        indent, lanes = m.group(1), int(m.group(2))
        inner = indent + "    "
        end = k + 1
        while end < len(lines) and lines[end].startswith(inner):
            end += 1
        body = lines[k + 1:end]
        new = None
        if len(body) >= MIN_BODY and all(not ln[len(inner)].isspace() for ln in body):
            new = _reroll_loop([ln[len(inner):] for ln in body], lanes, views, dtype_of, indent)
        out.extend(new if new is not None else lines[k:end])
        k = end
    return out


def _reroll_loop(body: list, lanes: int, views: dict, dtype_of, indent: str) -> Optional[list]:
    defpos: dict = {}
    stmts = []
    for k, ln in enumerate(body):
        st = _parse(ln, views, defpos)
        if st is None or (st.target is not None and st.target in defpos):
            return None
        if st.target is not None:
            defpos[st.target] = k
        stmts.append(st)
    runs = _find_runs(stmts)
    while runs:
        plan = _Plan(stmts, runs, lanes)
        reads, bad = _classify(plan)
        if reads is not None:
            return _emit(plan, reads, dtype_of, indent)
        if bad is None:
            return None
        r = runs[bad]  # its last blocks read what the loop cannot (e.g. a chain's prologue)
        if r.n - 1 - r.first >= MIN_ITERS:
            runs[bad] = _Run(r.start, r.period, r.n - 1, r.deltas, r.first)
        else:
            del runs[bad]
    return None


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


def _emit(plan: _Plan, reads: dict, dtype_of, indent: str) -> Optional[list]:
    n, runs = plan.lanes, plan.runs
    names = {}
    alloc = []

    def array(key, size: int, target: str) -> Optional[str]:
        dt = dtype_of(target)
        if dt is None:
            return None
        names[key] = f"z{key[0]}{len(names)}"
        alloc.append(f"{indent}{names[key]} = np.empty({size}, np.{np.dtype(dt).name})")
        return names[key]

    for p in sorted(plan.lane_arrays):
        if array(("t", p), n, plan.stmts[p].target) is None:
            return None
    for k, j in sorted(plan.stacks):
        if array(("s", k, j), runs[k].n * n, plan.stmts[runs[k].start + j].target) is None:
            return None
    for k, j in sorted(plan.carries):
        if array(("c", k, j), n, plan.stmts[runs[k].start + j].target) is None:
            return None

    def text(p: int, slots: list, original: str) -> str:
        vals = []
        for sl in slots:
            kind = sl[0]
            if kind in ("text", "local"):
                vals.append(sl[1])
            elif kind == "arr":
                vals.append(f"{sl[1]}[{_index(sl[2], sl[3], sl[4])}]")
            elif kind == "lane":
                vals.append(f"{names[('t', sl[1])]}[np.uint64(i0)]")
            elif kind == "carry":
                vals.append(f"zp{sl[1]}_{sl[2]}")
            else:  # stack
                vals.append(f"{names[('s', sl[1], sl[2])]}[{_index(sl[3] * n, sl[4] * n)}]")
        return original.replace("{T}", plan.stmts[p].target or "").format(*vals)

    def writes(p: int, block) -> list:
        """Where the value of statement ``p`` goes besides its local (block: its block's
        index expression inside a loop, an int in straight-line code)."""
        st, res = plan.stmts[p], []
        if st.target is None:
            return res
        if p in plan.lane_arrays:
            res.append(f"{names[('t', p)]}[np.uint64(i0)] = {st.target}")
        k = plan.run_of(p)
        if k is not None:
            b, j = runs[k].locate(p)
            if (k, j) in plan.stacks:
                idx = _index(n * b, 0) if isinstance(block, int) else _index(0, n)
                res.append(f"{names[('s', k, j)]}[{idx}] = {st.target}")
            if (k, j) in plan.carries:
                res.append(f"{names[('c', k, j)]}[np.uint64(i0)] = {st.target}")
        return res

    for run in runs:  # a loop reuses block 1's locals for every block: one type each
        for j in range(run.period):
            ts = {str(dtype_of(plan.stmts[run.start + b * run.period + j].target)) for b in range(run.n)
                  if plan.stmts[run.start + j].target is not None}
            if len(ts) > 1 or "None" in ts:
                return None
    out = list(alloc)
    p, total = 0, len(plan.stmts)
    while p < total:
        k = plan.seg[p]
        if k is None:
            out.append(f"{indent}for i0 in range({n}):")
            while p < total and plan.seg[p] is None:
                out.append(f"{indent}    {text(p, reads[p], plan.stmts[p].sig)}")
                out.extend(f"{indent}    {w}" for w in writes(p, 0))
                p += 1
            continue
        run = runs[k]
        first = run.loop_start
        out.append(f"{indent}for zq in range({run.first}, {run.n}):")
        out.append(f"{indent}    for i0 in range({n}):")
        deep = indent + "        "
        for kk, j in sorted(plan.carries):
            if kk == k:
                out.append(f"{deep}zp{k}_{j} = {names[('c', k, j)]}[np.uint64(i0)]")
        for q in range(first, first + run.period):
            out.append(deep + text(q, reads[q], plan.stmts[q].sig))
            out.extend(deep + w for w in writes(q, "zq"))
        p = run.end
    return out
