"""Lowering from fusion's loop groups to the kernel IR (codegen.kir), for every backend.

One ``LoopGroup`` becomes one ``Kernel`` whose buffers are the values it reads from and
writes to memory (``LoweredGroup.binds`` names the Var behind each). Views of values in
memory (fusion's aliases) become index arithmetic on their base; each member becomes a
scalar assignment whose operation is its primitive's scalar rule (``Primitive.scalar``,
see fusegrad.ir.scalar_ops); a primitive without one raises ``Unsupported`` with the
primitive's reason. Stores come last in a loop body, so a value written over a dying
operand's memory (passes.memory) is read first.

With ``symbolic=True`` every non-trivial domain axis ``a`` has the extent symbol ``n<a>``
and strides are products of those symbols, so the kernel serves every size with the same
rank, dtypes and broadcast pattern (size-1 dims stay literal); the dims of a view's source
that are not the domain's (a slice's input, a reshape's split dims) and a slice's starts are
symbols too. With
``offsets=True`` sizes stay literal but the positions a slice starts at (``x[:, t]``'s ``t``)
are symbols ``o<k>``, so the groups of an unrolled loop that read at different positions
share a kernel."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, TypeVar

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var, numbering
from ..ir.scalar_ops import PREDICATE_OPERANDS
from ..passes.fusion import CallGroup, Fused, LoopGroup, is_reduction, reduce_map
from .backend import Unsupported
from .kir import (Acc, Assign, Buffer, Const, IExpr, Index, Kernel, Load, Loop, Op, Ref, Store, Sym, Update,
                  checked, iadd, ifloordiv, imod, imul, iprod, stmts)

T = TypeVar("T")  # an index form (slice_source)

# Sums over more elements than this accumulate floats in float64 (NumPy's pairwise sums
# stay accurate where a float32 running sum would not).
WIDE = 1 << 14
# A parallel group sums row by row (_Lowerer._columns) only over at least this many columns.
COLUMNS_MIN = 64


@dataclass
class LoweredGroup:
    """A loop group's kernel and, per kernel buffer (in order), the Var it holds;
    ``locals`` maps the kernel's scalar locals to the Var ids whose elements they hold (for
    passes that use facts about values, e.g. their signs); ``sizes`` a shape-symbolic
    kernel's symbols to their values in the group's domain (what a caller passes)."""
    kernel: Kernel
    binds: list
    locals: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)


def lower_group(fused: Fused, gi: int, symbolic: bool = False, name: Optional[str] = None,
                by_rows: bool = False, offsets: bool = False) -> LoweredGroup:
    """Kernel IR of loop group ``gi`` of ``fused`` (verified under ``FUSEGRAD_VERIFY=1``).
    ``by_rows``: sums over leading axes of a serial group accumulate row by row into temp
    buffers over the kept axes (see ``columns_ok``), for a backend whose threads run whole
    loop nests (a CPU; on a GPU, threads splitting such a nest would race on the
    accumulators)."""
    g = fused.groups[gi]
    assert isinstance(g, LoopGroup)
    lw = _Lowerer(fused, g, fused.outputs_of(gi), symbolic, by_rows, offsets)
    body = lw.run()
    bufs = [Buffer(n, v.dtype, iprod(shape), role) for n, (v, shape, role) in lw.buffers.items()] + lw.temps
    sizes = {f"n{a}": s for a, s in enumerate(g.domain) if s != 1} if symbolic else {}
    sizes.update(lw.extra or {})
    k = Kernel(name or f"k{gi}", bufs, tuple(sizes), body)
    return LoweredGroup(checked(k), [v for v, _, _ in lw.buffers.values()], {n: i for i, n in lw.names.items()}, sizes)


class Listing:
    """The "kernel" stage: every group of a fused graph as kernel IR (loop groups, shape-
    symbolic ones when ``symbolic``, column sums row by row when ``by_rows``: as the
    backend lowers them) or a library call, printed on demand."""

    def __init__(self, fused: Fused, symbolic: bool = False, by_rows: bool = False):
        self.fused, self.symbolic, self.by_rows = fused, symbolic, by_rows

    def __str__(self) -> str:
        with numbering(self.fused.graph.defined()):  # values numbered from %0 as in the fused listing
            return self._listing()

    def _listing(self) -> str:
        parts = []
        for gi, g in enumerate(self.fused.groups):
            if isinstance(g, CallGroup):
                parts.append(f"call {g.eqn!r}")
            else:
                try:
                    lg = lower_group(self.fused, gi, symbolic=self.symbolic, by_rows=self.by_rows)
                except Unsupported:  # a view needing concrete sizes: so is this kernel
                    lg = lower_group(self.fused, gi, by_rows=self.by_rows)
                binds = ", ".join(f"{b.name}={v!r}" for b, v in zip(lg.kernel.buffers, lg.binds))
                parts.append(f"{lg.kernel}\n  # buffers: {binds}")
        return "\n\n".join(parts)


def _loop_var(a: int) -> Sym:
    return Sym(f"i{a}")


class _Lowerer:
    def __init__(self, fused: Fused, g: LoopGroup, outs: list, symbolic: bool, by_rows: bool,
                 offsets: bool = False):
        self.f, self.g, self.outs, self.symbolic, self.by_rows = fused, g, outs, symbolic, by_rows
        # symbol -> value: slice starts (``offsets``, ``symbolic``), view sources' dims (``symbolic``)
        self.extra: Optional[dict] = {} if offsets or symbolic else None
        self.temps: list = []  # temp buffers (by_rows)
        self.dims = [1 if s == 1 else (Sym(f"n{a}") if symbolic else s) for a, s in enumerate(g.domain)]
        self.buffers: dict = {}  # kernel buffer name -> (Var, shape, role)
        self._buf_of: dict = {}  # var id -> kernel buffer name
        self.names: dict = {}  # var id -> local name
        self.flat = flat_ok(fused, g)

    # -- names
    def local(self, v: Var) -> str:
        return self.names.setdefault(v.id, f"m{len(self.names)}")

    def ref(self, v: Var) -> Ref:
        return Ref(self.local(v), v.dtype)

    def buffer(self, v: Var, shape: list, role: str) -> str:
        name = self._buf_of.get(v.id)
        if name is None:
            name = self._buf_of[v.id] = f"{'x' if role == 'in' else 'y'}{len(self.buffers)}"
            self.buffers[name] = (v, shape, role)
        return name

    # -- shapes and indices
    def shape_by_map(self, v: Var, m: tuple) -> list:
        """``v``'s dims as extents of the domain axes ``m`` places them on."""
        return [1 if s == 1 else self.dims[m[d]] for d, s in enumerate(v.shape)]

    def index_by_map(self, v: Var, m: tuple) -> list:
        return [0 if s == 1 else _loop_var(m[d]) for d, s in enumerate(v.shape)]

    def linear(self, idx: list, shape: list, v: Optional[Var]) -> IExpr:
        """The linear index at ``idx`` into ``shape`` (of ``v``; None: a temp buffer)."""
        if self.flat and v is not None:
            return 0 if v.size == 1 else _loop_var(0)
        strides, stride = [], 1
        for s in reversed(shape):
            strides.append(stride)
            stride = imul(stride, s)
        lin = 0
        for i, st in zip(idx, reversed(strides)):  # outer dims first: (i0*s0 + i1*s1) + i2
            lin = iadd(lin, imul(i, st))
        return lin

    def read(self, v, idx: list, shape: list):
        """The value of ``v`` at per-dim indices ``idx`` (``shape``: its dims)."""
        if v.id in self.g.maps:
            return self.ref(v)
        if v.id in self.f.aliases:
            e = self.f.aliases[v.id]
            bidx, bshape = self.view_index(e, idx, shape)
            return self.read(e.inputs[0], bidx, bshape)
        return Load(self.buffer(v, shape, "in"), self.linear(idx, shape, v), v.dtype)

    def view_index(self, e: Eqn, idx: list, shape: list) -> tuple:
        """(indices, dims) into view ``e``'s input, given those into its output."""
        x, out, p, prim = e.inputs[0], e.out, e.params, e.prim
        if prim is P.transpose:
            res, rs = [0] * x.ndim, [1] * x.ndim
            for d, src in enumerate(p["perm"]):
                res[src], rs[src] = idx[d], shape[d]
            return res, rs
        if prim is P.broadcast_to:
            off = out.ndim - x.ndim
            return ([0 if s == 1 else idx[d + off] for d, s in enumerate(x.shape)],
                    [1 if s == 1 else shape[d + off] for d, s in enumerate(x.shape)])
        if prim is P.reshape and [s for s in x.shape if s != 1] == [s for s in out.shape if s != 1]:
            kept = [(i, s) for i, s, c in zip(idx, shape, out.shape) if c != 1]
            it = iter(kept)
            pairs = [next(it) if s != 1 else (0, 1) for s in x.shape]
            return [i for i, _ in pairs], [s for _, s in pairs]
        xs = list(x.shape)
        if prim is P.flip:  # the same dims as its output
            axes = {a % x.ndim for a in p["axes"]}
            return [iadd(iadd(shape[d], -1), imul(i, -1)) if d in axes else i for d, i in enumerate(idx)], list(shape)
        if prim is P.slice_:
            at = self.offset if self.extra is not None else (lambda k: k)
            src = slice_source(p["key"], idx, lambda i, start, step: iadd(imul(i, step), at(start)), at)
            return src, [self.size(s) for s in xs]
        if prim is P.reshape:
            if 0 in xs:  # an empty source: the loops run no iteration, so nothing is read
                return [0] * len(xs), [self.size(s) for s in xs]
            res: list = [0] * len(xs)
            rs: list = [1] * len(xs)
            for src, dst in _reshape_groups(xs, list(out.shape)):
                flat: IExpr = 0  # the position within the group, from the output's indices
                for d in dst:
                    flat = iadd(imul(flat, shape[d]), idx[d])
                if len(src) == 1:  # dims merged into one: no division
                    res[src[0]], rs[src[0]] = flat, iprod(shape[d] for d in dst)
                    continue
                ext = [self.size(xs[d]) for d in src]
                for k, d in enumerate(src):
                    q = ifloordiv(flat, iprod(ext[k + 1:]))
                    res[d], rs[d] = (q if k == 0 else imod(q, ext[k])), ext[k]  # flat < size: no wrap on the first
            return res, rs
        raise Unsupported(f"kernel IR: no index rule for view {prim.name}")

    def offset(self, k: int) -> Sym:
        """A slice's start as a symbol the caller passes (``offsets`` or ``symbolic``)."""
        name = f"o{len(self.extra)}"
        self.extra[name] = k
        return Sym(name)

    def size(self, s: int) -> IExpr:
        """A view source's dim: a symbol the caller passes when ``symbolic`` (size 1 stays)."""
        if not self.symbolic or s == 1:
            return s
        name = f"s{len(self.extra)}"
        self.extra[name] = s
        return Sym(name)

    # -- structure
    def loops(self, axes: list, parallel: bool, body: list) -> list:
        """Nested loops over ``axes`` (the flat loop when flat) around ``body``; returns the
        list the innermost body goes to (``body`` itself when there are no axes)."""
        outer = cur = body
        for k, a in enumerate(axes):
            kind = "parallel" if parallel and k == 0 else ("vector" if k == len(axes) - 1 else "serial")
            extent = iprod(self.dims) if self.flat else self.dims[a]
            loop = Loop(f"i{a}", extent, kind)
            cur.append(loop)
            cur = loop.body
        return cur if axes else outer

    # -- members
    def operand(self, a, e: Eqn, dt: np.dtype):
        if not isinstance(a, Var):
            return Const(a, dt)
        m, off = self.g.maps[e.out.id], e.out.ndim - a.ndim
        am = tuple(m[d + off] for d in range(a.ndim))
        return self.read(a, self.index_by_map(a, am), self.shape_by_map(a, am))

    def value(self, e: Eqn):
        """The element value of a non-reduction member."""
        out = e.out
        if e.prim.kind == "view":
            return self.ref(e.inputs[0])
        if e.prim is P.full:
            return Const(e.params["value"], out.dtype)
        if e.prim is P.iota:
            m = self.g.maps[out.id]
            return Index(_loop_var(m[0]), out.dtype) if out.shape[0] != 1 else Const(0, out.dtype)
        if is_reduction(e):  # reduces only size-1 dims: a copy
            return _cast(self.reduce_input(e), out.dtype)
        op = e.prim.scalar
        if op is None or e.prim.no_lowering:
            raise Unsupported(f"{e.prim.name} has no kernel lowering: {e.prim.no_lowering or 'no scalar rule'}")
        dt = _operand_dtype(e)
        args = [self.operand(a, e, dt) for a in e.inputs]
        truth = PREDICATE_OPERANDS.get(op, ())
        args = [Op("ne", (x, Const(0, x.dtype)), np.dtype(np.bool_)) if i in truth and np.dtype(x.dtype).kind != "b"
                else x for i, x in enumerate(args)]
        params = tuple((k, np.dtype(v)) for k, v in sorted(e.params.items())) if op in ("cast", "reduce_precision") else ()
        return Op(op, tuple(args), out.dtype, params)

    def reduce_input(self, e: Eqn):
        xm = reduce_map(self.g, e)[0]
        x = e.inputs[0]
        return self.read(x, self.index_by_map(x, xm), self.shape_by_map(x, xm))

    def assign(self, body: list, e: Eqn) -> None:
        body.append(Assign(self.local(e.out), self.value(e)))

    def store(self, body: list, v: Var) -> None:
        m = self.g.maps[v.id]
        shape = self.shape_by_map(v, m)
        name = self.buffer(v, shape, "out")
        body.append(Store(name, self.linear(self.index_by_map(v, m), shape, v), self.ref(v)))

    # -- groups
    def run(self) -> list:
        g, body = self.g, []
        if not g.red_axes:
            axes = [0] if self.flat else [a for a, s in enumerate(g.domain) if s != 1]
            inner = self.loops(axes, g.parallel, body)
            for e in g.eqns:
                self.assign(inner, e)
            for v in self.outs:
                self.store(inner, v)
        else:
            self._phased(body)
        for s in stmts(body):  # a lane loop is innermost
            if isinstance(s, Loop) and s.kind == "vector" and any(isinstance(t, Loop) for t in stmts(s.body)):
                s.kind = "serial"
        return body

    def _phased(self, body: list) -> None:
        """Outer loops over kept axes; per reduction phase one inner loop nest."""
        g = self.g
        red = [a for a in g.red_axes if g.domain[a] != 1]
        outer = [a for a, s in enumerate(g.domain) if s != 1 and a not in g.red_axes]
        avail = phases(self.g)
        if self.by_rows and columns_ok(g, red, outer, avail):
            self._columns(body, red, outer)
            return
        inner = self.loops(outer, g.parallel, body)
        for k in range(max(avail.values(), default=0) + 1):
            if k:
                # with no kept axis to run in parallel, the reduction loop is the parallel one
                self._inner(k, inner, red, avail, g.parallel and not outer)
            for e in g.eqns:
                if g.is_outer(e.out) and avail[e.out.id] == k and not real_reduction(self.g, e):
                    self.assign(inner, e)
            for v in self.outs:
                if g.is_outer(v) and avail[v.id] == k:
                    self.store(inner, v)

    # -- sums over leading axes (bias gradients: column sums of a [batch, features] value)
    def _columns(self, body: list, red: list, outer: list) -> None:
        """Row by row into accumulator buffers over the kept axes, so that the inner loop
        walks memory contiguously (a column at a time strides by a whole row per element),
        then one loop over the kept axes for the sums and the outer values. A sum the group
        outputs in its own dtype, laid out as the kept axes, accumulates in its output
        buffer; the others in temps."""
        g = self.g
        kept = [self.dims[a] for a in outer]
        kidx = self.linear([_loop_var(a) for a in outer], kept, None)
        wide = self.symbolic or int(np.prod([g.domain[a] for a in red], dtype=np.int64)) > WIDE
        reds = [e for e in g.eqns if real_reduction(g, e)]
        outs = {v.id for v in self.outs}
        sums, direct = {}, set()
        for e in reds:
            dt = _acc_dtype(e, wide)
            m = g.maps[e.out.id]
            shape = self.shape_by_map(e.out, m)
            laid_out = self.linear(self.index_by_map(e.out, m), shape, e.out) == kidx
            if e.out.id in outs and dt == e.out.dtype and laid_out:
                sums[e.out.id] = (self.buffer(e.out, shape, "out"), dt)
                direct.add(e.out.id)
            else:
                sums[e.out.id] = (f"a{self.local(e.out)[1:]}", dt)
                self.temps.append(Buffer(sums[e.out.id][0], dt, iprod(kept), "temp"))
        zero = self.loops(outer, False, body)
        for name, dt in sums.values():
            zero.append(Store(name, kidx, Const(0, dt)))
        # kept axes before the summed ones stay outside them; threads split the first kept
        # axis, each running the rows of its own columns (a lone kept axis after the sums stays
        # serial: contiguous rows beat a thread per strided column)
        before = [a for a in outer if a < min(red)]
        split = g.parallel and len(outer) > 1
        order = outer[:1] + red + outer[1:] if split and not before else before + red + outer[len(before):]
        inner = self.loops(order, split, body)
        for e in g.eqns:
            if not g.is_outer(e.out):
                self.assign(inner, e)
        for e in reds:
            name, dt = sums[e.out.id]
            inner.append(Store(name, kidx, Op("add", (Load(name, kidx, dt), _cast(self.reduce_input(e), dt)), dt)))
        for v in self.outs:
            if not g.is_outer(v):
                self.store(inner, v)
        after = [e for e in g.eqns if g.is_outer(e.out) and not real_reduction(g, e)]
        read = {a.id for e in after for a in e.inputs if isinstance(a, Var)}
        stored = [v for v in self.outs if g.is_outer(v) and v.id not in direct]
        read.update(v.id for v in stored)
        if not after and not stored:  # every sum is in its output buffer already
            return
        inner = self.loops(outer, False, body)
        for e in g.eqns:
            if not g.is_outer(e.out):
                continue
            if real_reduction(g, e):
                if e.out.id in read:
                    name, dt = sums[e.out.id]
                    inner.append(Assign(self.local(e.out), _cast(Load(name, kidx, dt), e.out.dtype)))
            else:
                self.assign(inner, e)
        for v in stored:
            self.store(inner, v)

    def _inner(self, k: int, body: list, red: list, avail: dict, parallel: bool) -> None:
        g = self.g
        reds, stores, members = phase_work(g, self.outs, avail, k)
        if not reds and not stores:
            return
        size = int(np.prod([g.domain[a] for a in red], dtype=np.int64))
        wide = self.symbolic or size > WIDE
        accs = {}
        for e in reds:
            if e.prim.scalar in ("max", "min") and size == 0 and not self.symbolic:
                raise Unsupported(f"cpu backend: {e.prim.name} over an empty dimension (eager raises)")
            accs[e.out.id] = f"a{self.local(e.out)[1:]}_{k}"
            body.append(Acc(accs[e.out.id], e.prim.scalar, _acc_dtype(e, wide)))
        inner = self.loops(red, parallel, body)
        for e in members:  # a full value two phases need is computed in each (sibling loops)
            self.assign(inner, e)
        for e in reds:
            inner.append(Update(accs[e.out.id], self.reduce_input(e)))
        for v in stores:
            self.store(inner, v)
        for e in reds:
            acc = Ref(accs[e.out.id], _acc_dtype(e, wide))
            body.append(Assign(self.local(e.out), _cast(acc, e.out.dtype)))


def columns_ok(g: LoopGroup, red: list, outer: list, avail: dict) -> bool:
    """True if a reducing group is computed row by row into accumulator arrays over its kept
    axes (``_Lowerer._columns``): a group whose sums all reduce the axes ``red``, one run of
    axes followed by kept axes of ``outer`` (a bias gradient's batch axis, a mean over time
    of [batch, time, features]), in one phase (``avail``: see ``phases``), with no full
    value reading an outer one."""
    if not red or not outer or max(red) > max(outer) or any(min(red) < a < max(red) for a in outer):
        return False
    before = [a for a in outer if a < min(red)]
    columns = int(np.prod([g.domain[a] for a in outer if a > max(red)], dtype=np.int64))
    if (g.parallel or before) and columns < COLUMNS_MIN:
        return False  # a few long columns: a loop each beats rows too short to vectorize
    for e in g.eqns:
        if real_reduction(g, e):
            if e.prim.scalar != "+" or avail[e.out.id] != 1:
                return False
        elif not g.is_outer(e.out) and any(isinstance(a, Var) and a.id in g.maps and g.is_outer(a)
                                           for a in e.inputs):
            return False
    return True


def slice_source(key: tuple, idx: Sequence[T], affine: Callable[[T, int, int], T],
                 const: Callable[[int], T]) -> List[T]:
    """The index into a ``slice_`` view's input for index ``idx`` into its output, in any
    index form (kernel IR expressions, emitted source): ``affine(i, start, step)`` for a
    ranged dim, ``const(k)`` for an integer key; ``None`` entries (new dims) drop theirs."""
    res, it = [], iter(idx)
    for k in key:
        if k is None:
            next(it)
        elif isinstance(k, tuple):
            start, _, step = k
            res.append(affine(next(it), start, step))
        else:
            res.append(const(k))
    res.extend(it)  # dims the key does not mention are taken whole
    return res


def _reshape_groups(src: list, dst: list) -> list:
    """A reshape's dims in groups ``(source dims, output dims)`` of equal products, in
    order (size-1 dims left out; sizes nonzero)."""
    si = [d for d, s in enumerate(src) if s != 1]
    di = [d for d, s in enumerate(dst) if s != 1]
    groups, i, j = [], 0, 0
    while i < len(si):
        a, b = [si[i]], [di[j]]
        pa, pb = src[si[i]], dst[di[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                a.append(si[i])
                pa, i = pa * src[si[i]], i + 1
            else:
                b.append(di[j])
                pb, j = pb * dst[di[j]], j + 1
        groups.append((a, b))
    return groups


def flat_ok(f: Fused, g: LoopGroup) -> bool:
    """True if ``g`` runs as one flat loop: no reduction, and every access at the loop's
    own element or at a scalar (one loop over contiguous memory vectorizes best)."""
    if not g.domain or g.red_axes:
        return False
    ident = tuple(a if s != 1 else None for a, s in enumerate(g.domain))
    for e in g.eqns:
        if _scalar_broadcast(f, g, e):
            continue
        if e.prim.kind == "view" or e.prim is P.iota or g.maps[e.out.id] != ident[len(g.domain) - e.out.ndim:] \
                or e.out.shape != g.domain:
            return False
        for a in e.inputs:
            if isinstance(a, Var) and a.id not in g.maps and (
                    (a.id in f.aliases and not _scalar_broadcast(f, g, f.aliases[a.id]))
                    or (a.size != 1 and a.shape != e.out.shape and a.id not in f.aliases)):
                return False
    return True


def _scalar_broadcast(f: Fused, g: LoopGroup, e: Eqn) -> bool:
    """A broadcast of one element held in memory (e.g. a gradient's seed): every element
    of the loop reads that element, so it keeps the loop flat."""
    x = e.inputs[0] if e.inputs else None
    return (e.prim is P.broadcast_to and isinstance(x, Var) and x.size == 1
            and x.id not in g.maps and x.id not in f.aliases)


def phase_work(g: LoopGroup, outs: list, avail: dict, k: int) -> tuple:
    """(reductions, full values stored, full members computed) of inner loop ``k`` of a
    reducing group (``avail``: see ``phases``; ``outs``: the group's stored values)."""
    reds = [e for e in g.eqns if real_reduction(g, e) and avail[e.out.id] == k]
    stores = [v for v in outs if not g.is_outer(v) and avail[v.id] == k]
    need = {e.inputs[0].id for e in reds if isinstance(e.inputs[0], Var)} | {v.id for v in stores}
    members = []
    for e in reversed(g.eqns):  # full values the phase needs, transitively
        if e.out.id in need and not g.is_outer(e.out):
            members.append(e)
            need.update(a.id for a in e.inputs if isinstance(a, Var))
    return reds, stores, members[::-1]


def real_reduction(g: LoopGroup, e: Eqn) -> bool:
    """True if ``e`` reduces some non-trivial axis of ``g``."""
    return is_reduction(e) and bool(reduce_map(g, e)[2])


def phases(g: LoopGroup) -> dict:
    """var id -> phase of a reducing group's members: for outer values, the inner loop
    after which they are known; for full values, the first inner loop that can compute them."""
    avail: dict = {}
    for e in g.eqns:
        deps = [a for a in e.inputs if isinstance(a, Var) and a.id in g.maps]
        if real_reduction(g, e):
            avail[e.out.id] = avail.get(deps[0].id, 1) if deps else 1
        elif g.is_outer(e.out):
            avail[e.out.id] = max((avail[a.id] for a in deps), default=0)
        else:
            avail[e.out.id] = max([avail[a.id] + (1 if g.is_outer(a) else 0) for a in deps] + [1])
    return avail


def _cast(v, dt: np.dtype):
    dt = np.dtype(dt)
    return v if np.dtype(v.dtype) == dt else Op("cast", (v,), dt, (("dtype", dt),))


def _acc_dtype(e: Eqn, wide: bool) -> np.dtype:
    """Sums of many floats accumulate in float64; integers and bools in int64 (NumPy)."""
    dt = e.inputs[0].dtype
    if e.prim.scalar in ("+", "*"):
        return np.dtype(np.float64) if dt.kind == "f" and wide else (np.dtype(np.int64) if dt.kind in "iub" else dt)
    return dt


def _operand_dtype(e: Eqn) -> np.dtype:
    """The type literals take: the result's, except for predicates (their operands')."""
    if e.out.dtype.kind != "b" or e.prim is P.where:
        return e.out.dtype
    return next((a.dtype for a in e.inputs if isinstance(a, Var)), e.out.dtype)
