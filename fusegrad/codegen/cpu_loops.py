"""Emit one fused loop group as Python/Numba source lines.

Every buffer is a flat C-contiguous 1-d array, so an element of a value in memory is read
at a linear index computed from per-dim index expressions; views of memory (aliases) turn
into index arithmetic on their base. Loop variable ``i<a>`` runs over domain axis ``a``.
Stores come last in a loop body so that a value written in place over a dying operand
(see passes.memory) is read before it is overwritten."""
from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from ..ir.scalar_ops import PREDICATE_OPERANDS
from ..passes.fusion import Fused, LoopGroup, reduce_map, is_reduction
from .backend import Unsupported
from .cpu_render import SHORT_LOOP
from .kir_reroll import MIN_BODY
from .cpu_scalar import GUARD, Lowering, literal
from .kir_lower import flat_ok, phase_work, phases, real_reduction, slice_source

_INDENT = "    "
CHUNK = 1 << 14  # elements per parallel chunk of a reduction: big enough to amortize, fits L2
# A loop body with more transcendental calls than this calls fastmath's non-inlined
# functions: every inlined copy costs LLVM ~50 ms and megabytes (W3: 200 tanh, 15 s).
MAX_INLINED = 24


# ---------------------------------------------------------------- index arithmetic
def _strides(shape: tuple) -> list:
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return st[::-1]


def linear(idx: list, shape: tuple) -> str:
    """Linear index of a C-contiguous array of ``shape`` at per-dim index expressions."""
    const, terms = 0, []
    for e, st, s in zip(idx, _strides(shape), shape):
        if s == 1 or e == "0":
            continue
        if e.lstrip("-").isdigit():
            const += int(e) * st
        else:
            e = f"({e})" if " " in e and not (e.startswith("(") and e.endswith(")")) else e
            terms.append(e if st == 1 else f"{e} * {st}")
    if const or not terms:
        terms.append(str(const))
    return " + ".join(terms)


def view_index(e: Eqn, idx: list) -> list:
    """Index expressions into a view's input, given those into its output."""
    x, out, p, prim = e.inputs[0], e.out, e.params, e.prim
    if prim is P.transpose:
        res = [""] * x.ndim
        for d, src in enumerate(p["perm"]):
            res[src] = idx[d]
        return res
    if prim is P.broadcast_to:
        off = out.ndim - x.ndim
        return ["0" if s == 1 else idx[d + off] for d, s in enumerate(x.shape)]
    if prim is P.flip:
        axes = {a % x.ndim for a in p["axes"]}
        return [f"({x.shape[d] - 1} - {i})" if d in axes else i for d, i in enumerate(idx)]
    if prim is P.slice_:
        return slice_source(p["key"], idx, _affine, str)
    if prim is P.reshape:
        if [s for s in x.shape if s != 1] == [s for s in out.shape if s != 1]:
            it = iter(i for i, s in zip(idx, out.shape) if s != 1)
            return [next(it) if s != 1 else "0" for s in x.shape]
        flat = linear(idx, out.shape)
        res = []
        for d, (st, s) in enumerate(zip(_strides(x.shape), x.shape)):
            q = f"({flat})" if st == 1 else f"(({flat}) // {st})"
            res.append("0" if s == 1 else (q if d == 0 else f"({q} % {s})"))  # flat < size: no wrap on dim 0
        return res
    raise Unsupported(f"cpu backend: no index rule for view {prim.name}")


def _ux(e: str) -> str:
    """An in-bounds linear index as uint64. A signed index makes Numba select ``i + len`` for
    negative i; inside a prange body LLVM cannot prove i >= 0 (the chunk bounds come from
    the scheduler), so it kept that select per lane and turned every load and store into a
    gather/scatter (W1: 2-3x slower). Generated indices never wrap, so unsigned is exact."""
    return e if e.isdigit() else f"np.uint64({e})"


def _affine(i: str, start: int, step: int) -> str:
    core = i if step == 1 else f"{step} * {i}"
    return core if start == 0 else f"({start} + {core})"


# ---------------------------------------------------------------- emission
class LoopEmitter:
    """Writes the source lines of one loop group. ``buf(var)`` names the flat array that
    holds a var in memory; ``num(var)`` numbers vars in the generated code (stable across
    processes, unlike Var ids, so the source and its cache key are too); ``fused``
    supplies aliases."""

    def __init__(self, fused: Fused, g: LoopGroup, outs: list, buf: Callable[[Var], str], lw: Lowering,
                 num: Callable[[Var], int]):
        self.f, self.g, self.outs, self.buf, self.lw, self.num = fused, g, outs, buf, lw, num
        self.flat = flat_ok(fused, g)
        self.lines: list = []
        self.guarded = _guarded(g, lw)
        self._private = f"{GUARD}_p"  # per-iteration (or per-chunk) count inside a prange loop
        self.outline = sum(e.prim.kind == "elementwise" and lw.transcendental(e.prim.scalar, _operand_dtype(e))
                           for e in g.eqns) > MAX_INLINED
        self.short = _short(g, self.flat)

    # -- reading values
    def read(self, v, idx: list) -> str:
        if not isinstance(v, Var):
            raise AssertionError("literals are typed by the caller")
        if v.id in self.g.maps:
            return f"m{self.num(v)}"
        if v.id in self.f.aliases:
            e = self.f.aliases[v.id]
            return self.read(e.inputs[0], view_index(e, idx))
        if self.flat:
            return f"{self.buf(v)}[{'0' if v.size == 1 else _ux('i0')}]"
        return f"{self.buf(v)}[{_ux(linear(idx, v.shape))}]"

    def _idx(self, m: tuple) -> list:
        return ["0" if a is None else f"i{a}" for a in m]

    def operand(self, a, e: Eqn, dt: np.dtype) -> str:
        if not isinstance(a, Var):
            return literal(a, dt)
        m, off = self.g.maps[e.out.id], e.out.ndim - a.ndim
        return self.read(a, ["0" if s == 1 else f"i{m[d + off]}" for d, s in enumerate(a.shape)])

    def value(self, e: Eqn) -> str:
        """The element expression of a non-reduction member."""
        if e.prim.kind == "view":
            return f"m{self.num(e.inputs[0])}"
        if e.prim is P.full:
            return literal(e.params["value"], e.out.dtype)
        if e.prim is P.iota:
            return f"np.{e.out.dtype.name}(i{self.g.maps[e.out.id][0]})" if e.out.shape[0] != 1 else literal(0, e.out.dtype)
        if is_reduction(e):  # reduces only size-1 dims: a copy
            return f"np.{e.out.dtype.name}({self._reduce_input(e)})"
        dt = _operand_dtype(e)
        args = [self.operand(a, e, dt) for a in e.inputs]
        self.lw.nonpositive.update(s for a, s in zip(e.inputs, args)
                                   if isinstance(a, Var) and a.id in self.lw.nonpositive_vars)
        truth = PREDICATE_OPERANDS.get(e.prim.scalar, ())
        args = [self._as_bool(a, s, i in truth) for i, (a, s) in enumerate(zip(e.inputs, args))]
        return self.lw.expr(e.prim.scalar, args, dt, e.params)

    @staticmethod
    def _as_bool(a, s: str, want: bool) -> str:
        return f"({s} != 0)" if want and isinstance(a, Var) and a.dtype.kind != "b" else s

    def _reduce_input(self, e: Eqn) -> str:
        xm = reduce_map(self.g, e)[0]
        x = e.inputs[0]
        return self.read(x, ["0" if s == 1 else f"i{xm[d]}" for d, s in enumerate(x.shape)])

    def store(self, v: Var) -> str:
        if self.flat:
            return f"{self.buf(v)}[{'0' if v.size == 1 else _ux('i0')}] = m{self.num(v)}"
        return f"{self.buf(v)}[{_ux(linear(self._idx(self.g.maps[v.id]), v.shape))}] = m{self.num(v)}"

    # -- structure
    def _loops(self, axes: list, par_first: bool, base: int = 0) -> int:
        """Open one loop per axis at depth ``base`` (one loop over every element when flat);
        returns the number of loops opened."""
        for k, a in enumerate(axes):
            rng = "prange" if par_first and k == 0 else "range"
            self.emit(base + k, f"for i{a} in {rng}({self.g.size if self.flat else self.g.domain[a]}):")
        return len(axes)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * (self.depth0 + depth) + text)

    def assign(self, depth: int, e: Eqn) -> None:
        """The statements the lowering asked for (the out-of-range counts of fast sin/cos
        arguments, see cpu_scalar.Lowering), then ``m<n> = <element expression>``."""
        value = self.value(e)
        for ln in self.lw.drain():
            self.emit(depth, ln)
        self.emit(depth, f"m{self.num(e.out)} = {value}")

    def run(self, depth0: int = 1) -> list:
        self.depth0 = depth0
        g = self.g
        self.lines.append(f"{_INDENT * depth0}# loop group over [{','.join(map(str, g.domain))}]"
                          + (f" reducing axes {g.red_axes}" if g.red_axes else ""))
        if any(s == 0 for s in g.domain) and not g.red_axes:
            return self.lines  # nothing to compute
        self.lw.outline, self.lw.scalar = self.outline, self.short
        self.lw.seen, self.lw.nonpositive = set(), set()
        try:
            if not g.red_axes:
                axes = [0] if self.flat else [a for a, s in enumerate(g.domain) if s != 1]
                d = self._par_loops(axes, g.parallel)
                self._body(d, g.eqns, self.outs)
                self._guard_close(axes, g.parallel)
            else:
                self._phased()
        finally:
            self.lw.guard_target = GUARD
            self.lw.outline = self.lw.scalar = False
        return self.lines

    # -- huge sin/cos argument counts (see cpu_scalar.Lowering): Numba accepts a prange
    # reduction only as one update per iteration, so counts inside a prange loop go to a
    # variable private to the iteration, added to GUARD once at its end.
    def _guard_open(self, depth: int) -> None:
        if self.guarded:
            self.emit(depth, f"{self._private} = False")
            self.lw.guard_target = self._private

    def _guard_close_at(self, depth: int) -> None:
        if self.guarded:
            self.emit(depth, f"{GUARD} += np.float32(1) if {self._private} else np.float32(0)")
            self.lw.guard_target = GUARD

    def _par_loops(self, axes: list, par: bool) -> int:
        """``_loops`` with the private count opened inside a parallel first loop."""
        if not (par and axes and self.guarded):
            return self._loops(axes, par)
        self._loops(axes[:1], True)
        self._guard_open(1)
        return 1 + self._loops(axes[1:], False, 1)

    def _guard_close(self, axes: list, par: bool) -> None:
        if par and axes:
            self._guard_close_at(1)

    def _body(self, d: int, eqns: list, stores: list) -> None:
        for e in eqns:
            self.assign(d, e)
        for v in stores:
            self.emit(d, self.store(v))

    def _phased(self) -> None:
        """Outer loops over kept axes; per reduction phase one inner loop nest."""
        g = self.g
        red = [a for a in g.red_axes if g.domain[a] != 1]
        outer = [a for a, s in enumerate(g.domain) if s != 1 and a not in g.red_axes]
        avail = phases(self.g)
        if self._columns_ok(red, outer, avail):
            self._columns(red, outer)
            return
        d = self._par_loops(outer, g.parallel)
        last = max(avail.values(), default=0)
        for k in range(last + 1):
            if k:
                self._inner(k, d, red, avail, par=g.parallel and not outer)
            for e in g.eqns:
                if g.is_outer(e.out) and avail[e.out.id] == k and not real_reduction(self.g, e):
                    self.assign(d, e)
            for v in self.outs:
                if g.is_outer(v) and avail[v.id] == k:
                    self.emit(d, self.store(v))
        self._guard_close(outer, g.parallel)

    # -- sums over leading axes (bias gradients: column sums of a [batch, features] value)
    def _columns_ok(self, red: list, outer: list, avail: dict) -> bool:
        """A serial group whose sums all reduce axes before every kept axis, in one phase,
        with no full value reading an outer one: ``_columns`` applies."""
        g = self.g
        if g.parallel or not red or not outer or max(red) > min(outer):
            return False
        for e in g.eqns:
            if real_reduction(self.g, e):
                if e.prim.scalar != "+" or avail[e.out.id] != 1:
                    return False
            elif not g.is_outer(e.out) and any(isinstance(a, Var) and a.id in g.maps and g.is_outer(a)
                                               for a in e.inputs):
                return False
        return True

    def _columns(self, red: list, outer: list) -> None:
        """Row by row into accumulator arrays over the kept axes, so that the inner loop walks
        memory contiguously (a column at a time strides by a whole row per element), then
        one loop over the kept axes for the sums and the outer values."""
        g = self.g
        kept = tuple(g.domain[a] for a in outer)
        kidx = linear([f"i{a}" for a in outer], kept)
        wide = int(np.prod([g.domain[a] for a in red])) > CHUNK
        reds = [e for e in g.eqns if real_reduction(self.g, e)]
        for e in reds:
            dt = self._acc_dtype(e, wide)
            self.emit(0, f"a{self.num(e.out)} = np.zeros({int(np.prod(kept))}, np.{dt.name})")
        d = self._loops(sorted(red + outer), False)
        for e in g.eqns:
            if not g.is_outer(e.out):
                self.assign(d, e)
        for e in reds:
            self.emit(d, f"a{self.num(e.out)}[{kidx}] += {self._reduce_input(e)}")
        for v in self.outs:
            if not g.is_outer(v):
                self.emit(d, self.store(v))
        d = self._loops(outer, False)
        for e in g.eqns:
            if not g.is_outer(e.out):
                continue
            if real_reduction(self.g, e):
                self._acc_final(d, e, f"[{kidx}]")
            else:
                self.assign(d, e)
        for v in self.outs:
            if g.is_outer(v):
                self.emit(d, self.store(v))

    def _inner(self, k: int, d: int, red: list, avail: dict, par: bool) -> None:
        g = self.g
        reds, stores, body = phase_work(g, self.outs, avail, k)
        if not reds and not stores:
            return
        wide = int(np.prod([g.domain[a] for a in red])) > CHUNK
        for e in reds:
            self._acc_init(d, e, "", wide or par)
        if par:
            # Chunked: the parallel loop runs over chunks, each summing its own accumulator in
            # a plain inner loop that LLVM vectorizes (a prange reduction alone does not).
            # Each chunk stores its partial in an array, combined in chunk order after the
            # loop: no prange reduction variables (Numba copies the loop body's IR once per
            # such variable: W5's gradient, 64 sums in one loop, took 71 s to compile, now
            # 18 s) and the same sum whatever the thread schedule.
            n, a0 = g.domain[red[0]], red[0]
            chunks = -(-n // CHUNK)
            for e in reds:
                self._partials_init(d, e, chunks)
            self.emit(d, f"for c{a0} in prange({chunks}):")
            self._guard_open(d + 1)
            for e in reds:
                self._acc_init(d + 1, e, "c", False)
            self.emit(d + 1, f"for i{a0} in range(c{a0} * {CHUNK}, min({n}, c{a0} * {CHUNK} + {CHUNK})):")
            depth = d + 2 + self._loops(red[1:], False, d + 2)
        else:
            depth = d + self._loops(red, False, d)
        sfx = "c" if par else ""
        for e in body:
            self.assign(depth, e)
        for e in reds:
            self._acc_update(depth, e, self._reduce_input(e), sfx)
        for v in stores:
            self.emit(depth, self.store(v))
        if par:
            self._guard_close_at(d + 1)
            for e in reds:
                self._partials_store(d + 1, e, f"c{a0}")
            self.emit(d, f"for k{a0} in range({chunks}):")
            for e in reds:
                self._acc_update(d + 1, e, f"p{self.num(e.out)}[k{a0}]", "", combine=f"q{self.num(e.out)}[k{a0}]")
        for e in reds:
            self._acc_final(d, e)

    # -- reductions
    def _acc_dtype(self, e: Eqn, wide: bool) -> np.dtype:
        """Sums of many floats accumulate in float64; integers and bools in int64 (NumPy)."""
        dt = e.inputs[0].dtype
        if e.prim.scalar in "+*":
            return np.dtype(np.float64) if dt.kind == "f" and wide else (np.dtype(np.int64) if dt.kind in "iub" else dt)
        return dt

    def _acc_init(self, d: int, e: Eqn, sfx: str, wide: bool) -> None:
        op, dt = e.prim.scalar, self._acc_dtype(e, wide)
        name = f"{self.num(e.out)}{sfx}"
        if op in ("max", "min"):
            x = e.inputs[0]
            if any(x.shape[a] == 0 for a in e.params["axes"]):
                raise Unsupported(f"cpu backend: {e.prim.name} over an empty dimension (eager raises)")
            if dt.kind == "b":
                init = literal(op == "min", dt)
            else:
                big = np.inf if dt.kind == "f" else np.iinfo(dt).max
                init = literal(-big if op == "max" else big, dt) if dt.kind == "f" else \
                    literal(np.iinfo(dt).min if op == "max" else big, dt)
            if dt.kind == "f":
                self.emit(d, f"n{name} = 0")
        else:
            init = literal(0 if op == "+" else 1, dt)
        self.emit(d, f"a{name} = {init}")

    def _partials(self, e: Eqn) -> list:
        """(array name, chunk-private name, dtype) of what a chunked reduction keeps per
        chunk: its accumulator and, for a float max/min, its NaN count."""
        num = self.num(e.out)
        res = [(f"p{num}", f"a{num}c", self._acc_dtype(e, False))]
        if e.prim.scalar in ("max", "min") and e.inputs[0].dtype.kind == "f":
            res.append((f"q{num}", f"n{num}c", np.dtype(np.int64)))
        return res

    def _partials_init(self, d: int, e: Eqn, chunks: int) -> None:
        for arr, _, dt in self._partials(e):
            self.emit(d, f"{arr} = np.empty({chunks}, np.{dt.name})")

    def _partials_store(self, d: int, e: Eqn, chunk: str) -> None:
        for arr, private, _ in self._partials(e):
            self.emit(d, f"{arr}[{chunk}] = {private}")

    def _acc_update(self, d: int, e: Eqn, v: str, sfx: str, combine: Optional[str] = None) -> None:
        """Fold ``v`` into the accumulator; ``combine``: ``v`` is a chunk's partial and this
        its NaN count (max/min)."""
        op, name = e.prim.scalar, f"{self.num(e.out)}{sfx}"
        acc = f"a{name}"
        if op not in ("max", "min"):
            self.emit(d, f"{acc} {op}= {v}")
            return
        self.emit(d, f"r{name} = {v}")
        self.emit(d, f"{acc} = {op}({acc}, r{name})")
        if e.inputs[0].dtype.kind == "f":  # max/min drop NaN; NumPy propagates it
            self.emit(d, f"n{name} += {combine}" if combine is not None else f"n{name} += r{name} != r{name}")

    def _acc_final(self, d: int, e: Eqn, at: str = "") -> None:
        """``m<n>`` = the finished reduction: accumulator ``a<n>`` (element ``at`` of it when
        it is an array, as in ``_columns``) in the result's type."""
        acc = f"a{self.num(e.out)}{at}"
        if e.prim.scalar in ("max", "min") and e.inputs[0].dtype.kind == "f":
            acc = f"({acc} if n{self.num(e.out)} == 0 else np.nan)"
        cast = f"({acc} != 0)" if e.out.dtype.kind == "b" else f"np.{e.out.dtype.name}({acc})"
        self.emit(d, f"m{self.num(e.out)} = {cast}")


def _operand_dtype(e: Eqn) -> np.dtype:
    """The type literals take: the result's, except for predicates (their operands')."""
    if e.out.dtype.kind != "b" or e.prim is P.where:
        return e.out.dtype
    return next((a.dtype for a in e.inputs if isinstance(a, Var)), e.out.dtype)


def _guarded(g: LoopGroup, lw: Lowering) -> bool:
    """True if a member of ``g`` lowers with ``lw`` to a fast sin/cos that counts huge arguments."""
    return any(e.prim.kind == "elementwise" and lw.guards(e.prim.scalar, _operand_dtype(e)) for e in g.eqns)


def _short(g: LoopGroup, flat: bool) -> bool:
    """True if ``g``'s innermost loop is too short to vectorize (see SHORT_LOOP)."""
    inner = [s for s in g.domain if s != 1]
    return (math.prod(inner) if flat else (inner[-1] if inner else 1)) < SHORT_LOOP


def shareable(fused: Fused, g: LoopGroup, lw: Lowering) -> bool:
    """True if loop group ``g`` needs none of the forms only this emitter writes, so the
    kernel-IR renderer (cpu_render) serves it as well, as a kernel shared by every group of
    the same structure: elementwise only (reductions take chunked, column or NaN-counting
    forms here), no guarded sin/cos, no fastmath variant chosen by a sign fact about an
    operand, no transcendental in a loop too short to vectorize; but always a serial body
    long enough to reroll (only the kernel-IR path rerolls: kir_reroll)."""
    if not g.parallel and len(g.eqns) >= MIN_BODY:
        return True
    if g.red_axes or _guarded(g, lw):
        return False
    if _short(g, flat_ok(fused, g)) and any(e.prim.kind == "elementwise" and lw.transcendental(e.prim.scalar, _operand_dtype(e))
                                           for e in g.eqns):
        return False
    return not any(isinstance(a, Var) and a.id in lw.nonpositive_vars for e in g.eqns for a in e.inputs)


def guarded(fused: Fused, lw: Lowering) -> bool:
    """True if lowering ``fused`` with ``lw`` may leave ``lw.guarded`` non-empty, known before
    lowering. It errs only towards True: a sin/cos that is never lowered (a dead value, a
    group over no elements) still counts."""
    return any(isinstance(g, LoopGroup) and _guarded(g, lw) for g in fused.groups)


def emit_loop_group(fused: Fused, g: LoopGroup, outs: list, buf: Callable[[Var], str], lw: Lowering,
                    num: Callable[[Var], int]) -> list:
    """Source lines (indented for the entry function's body) of loop group ``g``."""
    return LoopEmitter(fused, g, outs, buf, lw, num).run()

