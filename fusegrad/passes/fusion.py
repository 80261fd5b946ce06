"""Fusion: partition a Graph's equations into loop groups and library calls.

A ``LoopGroup`` is one loop nest over a ``domain`` shape. Every member value is a
function of the loop index: ``maps[var.id][d]`` names the loop axis that indexes the
var's dim ``d`` (``None`` for a size-1 dim). Members are elementwise ops, reductions over
the group's ``red_axes`` (all reductions of a group reduce the same axes, so softmax's
max, exp, sum and div share one nest: outer loops over the kept axes, one inner loop per
reduction phase) and views that only permute/insert/broadcast dims of a member.
A member var is "outer" when it does not depend on ``red_axes`` (a reduction's result and
its elementwise consumers) and "full" otherwise.

Views of values that live in memory (inputs, consts, group outputs) are not members of
any group: they are *aliases*, read through index arithmetic by whoever consumes them.
Everything else (matmul, concatenate, pad, ...) is a ``CallGroup`` whose operands are in
memory. ``Fused.outputs_of(group)`` are the member vars used outside their group.

Groups form in two steps: a pass in trace order grows the current loop group while the
next loop op fits it, then fusion by dependency merges each loop group into an earlier one
over the same domain where no cycle between groups results (``_merged_by_dependency``)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Graph, Var, dims_str, numbering
from .rewrite import rebuild, use_counts
from .strides import strided_view

Map = tuple  # per var dim: loop axis (int) or None

PARALLEL_MIN = 1 << 15  # below this many elements, thread start-up (~10 us) costs more than it saves
# In a program that also calls BLAS, loop groups up to this size run on one thread: Numba's
# OpenMP workers and OpenBLAS's threads both spin-wait after their parallel regions, so
# alternating the two pools makes each steal the cores from the other (measured on W2's
# training step: 2.5-3x slower with parallel loops than with serial ones between the GEMMs).
BLAS_SERIAL_MAX = 1 << 20
_REDUCE_OPS = ("+", "max", "min", "*")
_MEMBER_VIEWS = (P.transpose, P.broadcast_to, P.reshape)
MERGE_CANDIDATES = 8  # earlier loop groups over the same domain that a loop group tries to join
# A loop group reading more arrays than this is split into its independent parts (see
# _Fuser._independent_parts); an Adam update of one parameter reads a dozen.
WIDE_READS = 16
# Members of one loop group at most, unless it reads no more than FEW_READS stored arrays:
# Numba's compile time grows faster than a kernel's length, and a chain of steps each
# reading and writing arrays of its own (an unrolled LSTM's cell states recomputed for its
# backward from each step's gates) would otherwise become one kernel of hundreds of buffers
# that no other graph shares. A chain over a few arrays read at offsets (W3's) rerolls into
# a short loop instead (kir_reroll).
MAX_MEMBERS = 64
FEW_READS = 8


@dataclass
class LoopGroup:
    """One loop nest; see the module docstring."""
    domain: tuple
    red_axes: tuple = ()
    eqns: list = field(default_factory=list)
    maps: dict = field(default_factory=dict)
    serial: bool = False  # forced onto one thread (see BLAS_SERIAL_MAX)
    reads: set = field(default_factory=set)  # ids of the stored vars its members read (kept while fusing)

    @property
    def size(self) -> int:
        return int(np.prod(self.domain, dtype=np.int64))

    @property
    def parallel(self) -> bool:
        return not self.serial and self.size > PARALLEL_MIN

    def is_outer(self, v: Var) -> bool:
        return not any(a in self.red_axes for a in self.maps[v.id] if a is not None)


@dataclass
class CallGroup:
    """One equation run as a library call or a hand-written loop (matmul, concatenate, pad)."""
    eqn: Eqn


Group = Union[LoopGroup, CallGroup]


class _Copy:
    """Pseudo-primitive that materializes an alias (a view read through indices)."""
    name = "copy"
    kind = "elementwise"
    scalar = "copy"
    no_lowering = None


COPY = _Copy()


@dataclass
class Fused:
    """The fused program: groups in execution order, the view equations read as aliases
    (``aliases[var.id]``), the graph's (possibly copy-substituted) outputs, and the vars
    that live in memory."""
    graph: Graph
    groups: list
    aliases: dict
    outputs: list
    owner: dict  # var id -> group index, for members and call results

    def outputs_of(self, gi: int) -> list:
        """Vars computed by group ``gi`` that something outside it reads (in eqn order)."""
        return self._outs[gi]

    def finish(self) -> "Fused":
        used_outside: set = {v.id for v in self.outputs if isinstance(v, Var)}
        for gi, g in enumerate(self.groups):
            for e in _eqns(g):
                for a in e.inputs:
                    if isinstance(a, Var) and self.owner.get(a.id, gi) != gi:
                        used_outside.add(a.id)
        for e in self.aliases.values():
            used_outside.add(e.inputs[0].id)
        self._outs = [[e.out for e in _eqns(g) if e.out.id in used_outside] for g in self.groups]
        return self

    def __str__(self) -> str:
        with numbering(self.graph.defined()):
            return self._listing()

    def _listing(self) -> str:
        lines = []
        for gi, g in enumerate(self.groups):
            outs = ", ".join(repr(v) for v in self.outputs_of(gi))
            if isinstance(g, LoopGroup):
                red = f" reduce axes={g.red_axes}" if g.red_axes else ""
                par = " parallel" if g.parallel else ""
                lines.append(f"group {gi}: loop[{dims_str(g.domain)}]{red}{par} -> ({outs})")
                for e in g.eqns:
                    lines.append(f"    {_eqn_str(e)}")
            else:
                lines.append(f"group {gi}: call {_eqn_str(g.eqn)} -> ({outs})")
        for e in self.aliases.values():
            lines.append(f"alias {_eqn_str(e)}")
        lines.append(f"return ({', '.join(repr(v) for v in self.outputs)})")
        return "\n".join(lines)


def _eqn_str(e: Eqn) -> str:
    return repr(e) if e.prim is not COPY else f"{e.out!r}: {e.out.type_str()} = copy({e.inputs[0]!r})"


def reshaped_base(aliases: dict, v: Var) -> Optional[Var]:
    """The stored value that alias ``v`` reshapes, through a chain of reshapes only; None when
    ``v`` is no alias or some view in the chain moves elements (a transpose, a slice). Values
    live in memory in row-major order, so such a ``v`` is its base's buffer read whole."""
    if v.id not in aliases:
        return None
    while v.id in aliases:
        e = aliases[v.id]
        if e.prim is not P.reshape or not isinstance(e.inputs[0], Var):
            return None
        v = e.inputs[0]
    return v


def _eqns(g: Group) -> list:
    return g.eqns if isinstance(g, LoopGroup) else [g.eqn]


def is_reduction(e: Eqn) -> bool:
    return e.prim.kind == "reduce" and e.prim.scalar in _REDUCE_OPS


def is_loop_op(e: Eqn) -> bool:
    """Ops computed per element inside a loop group."""
    return e.prim.kind == "elementwise" or is_reduction(e) or e.prim in (P.full, P.iota)


# ---------------------------------------------------------------- dims maps
def _covers(domain: tuple, red_axes: tuple, m: Map) -> bool:
    """A member must use every non-trivial axis (full) or exactly the kept ones (outer),
    so nothing is computed or stored redundantly across loop iterations."""
    used = {a for a in m if a is not None}
    if len(used) != sum(a is not None for a in m):
        return False  # two dims on one axis: a diagonal, not expressible as a member
    need = {a for a, s in enumerate(domain) if s != 1}
    kept = need - set(red_axes)
    return used == need or used == kept


def _default_map(g: LoopGroup, shape: tuple) -> Optional[Map]:
    """Right-aligned placement of ``shape`` on the domain (NumPy broadcasting)."""
    off = len(g.domain) - len(shape)
    if off < 0:
        return None
    m = []
    for d, s in enumerate(shape):
        if s == 1:
            m.append(None)
        elif g.domain[off + d] == s:
            m.append(off + d)
        else:
            return None
    return tuple(m)


def _elementwise_map(g: LoopGroup, e: Eqn) -> Optional[Map]:
    shape = e.out.shape
    m: list = [None] * len(shape)
    for a in e.inputs:
        if not (isinstance(a, Var) and a.id in g.maps):
            continue
        am, off = g.maps[a.id], len(shape) - a.ndim
        for d, ax in enumerate(am):
            if ax is None:
                continue
            if m[d + off] is not None and m[d + off] != ax:
                return None
            m[d + off] = ax
    dflt = _default_map(g, shape)
    for d, s in enumerate(shape):
        if s != 1 and m[d] is None:
            if dflt is None:
                return None
            m[d] = dflt[d]
    return tuple(m)


def _view_map(g: LoopGroup, e: Eqn) -> Optional[Map]:
    """Map of a view of a member, when the view only moves, adds or drops dims."""
    src = g.maps[e.inputs[0].id]
    x, out = e.inputs[0], e.out
    prim = e.prim
    if prim is P.transpose:
        return tuple(src[p] for p in e.params["perm"])
    if prim is P.reshape:
        if [s for s in x.shape if s != 1] != [s for s in out.shape if s != 1]:
            return None
        axes = iter(a for a, s in zip(src, x.shape) if s != 1)
        return tuple(next(axes) if s != 1 else None for s in out.shape)
    if prim is P.broadcast_to:
        off = out.ndim - x.ndim
        dflt = _default_map(g, out.shape)
        m = []
        for d, s in enumerate(out.shape):
            if d >= off and x.shape[d - off] == s:
                m.append(src[d - off])
            elif dflt is not None:
                m.append(dflt[d])
            else:
                return None
        return tuple(m)
    return None


def reduce_map(g: LoopGroup, e: Eqn) -> Optional[tuple]:
    """(input map, out map, reduced loop axes) or None."""
    x = e.inputs[0]
    xm = g.maps.get(x.id) if isinstance(x, Var) else None
    if xm is None:
        xm = _default_map(g, x.shape)
        if xm is None:
            return None
    axes = e.params["axes"]
    red = tuple(sorted(xm[a] for a in axes if xm[a] is not None))
    om = tuple(None if d in axes else xm[d] for d in range(x.ndim)) if e.params["keepdims"] else \
        tuple(xm[d] for d in range(x.ndim) if d not in axes)
    return xm, om, red


# ---------------------------------------------------------------- grouping
class _Fuser:
    def __init__(self, graph: Graph, read_reshapes: bool = False, read_strided: bool = False,
                 fill_bases: bool = False):
        self.graph = graph
        self.read_reshapes = read_reshapes
        self.read_strided = read_strided
        self.filled = _filled_bases(graph) if fill_bases else {}
        self.groups: list = []
        self.aliases: dict = {}
        self.cur: Optional[LoopGroup] = None
        self.subst: dict = {}

    def run(self) -> Fused:
        folded, epilogue = _gemm_epilogues(self.graph)
        for e in self.graph.eqns:
            if e.out.id in folded or e.out.id in self.filled:
                continue
            if e.out.id in epilogue:
                self._call(epilogue[e.out.id])
                continue
            e = self._substituted(e)
            if e.prim.kind == "view":
                self._view(e)
            elif is_loop_op(e):
                if not (self.cur is not None and self._join(self.cur, e)):
                    self._open(e)
            else:
                self._call(e)
        outs = [self._materialized(v) if isinstance(v, Var) else v for v in self.graph.outputs]
        self.groups = [part for g in self._merged_by_dependency() for part in self._independent_parts(g)]
        owner = {e.out.id: gi for gi, g in enumerate(self.groups) for e in _eqns(g)}
        return Fused(self.graph, self.groups, self.aliases, outs, owner).finish()

    def _substituted(self, e: Eqn) -> Eqn:
        if not any(isinstance(a, Var) and a.id in self.subst for a in e.inputs):
            return e
        ins = tuple(self.subst.get(a.id, a) if isinstance(a, Var) else a for a in e.inputs)
        return Eqn(e.prim, ins, e.params, e.out, e.where)

    def _open(self, e: Eqn) -> None:
        dom = e.inputs[0].shape if is_reduction(e) else e.out.shape
        self.cur = LoopGroup(tuple(dom))
        self.groups.append(self.cur)
        if not self._join(self.cur, e):  # a fresh group takes any loop op
            raise AssertionError(f"cannot start a loop group with {e!r}")

    def _reads_current(self, g: LoopGroup, e: Eqn) -> bool:
        """True if ``e`` reads, through an alias, memory that group ``g`` is still writing."""
        for a in e.inputs:
            while isinstance(a, Var) and a.id in self.aliases:
                a = self.aliases[a.id].inputs[0]
                if a.id in g.maps:
                    return True
        return False

    def _join(self, g: LoopGroup, e: Eqn) -> bool:
        if self._reads_current(g, e):
            return False
        reads = {a.id for a in map(self._stored_base, e.inputs) if isinstance(a, Var) and a.id not in g.maps}
        if len(g.eqns) >= MAX_MEMBERS and len(g.reads | reads) > FEW_READS:
            return False
        red_axes = g.red_axes
        if is_reduction(e):
            r = reduce_map(g, e)
            if r is None:
                return False
            xm, m, red = r
            if not _full(g, xm) or (red and red_axes and red != red_axes):
                return False
            # earlier members cover every axis (see _covers), so they all stay "full"
            red_axes = red_axes or red
        else:
            m = _elementwise_map(g, e)
        if m is None or not _covers(g.domain, red_axes, m):
            return False
        g.red_axes = red_axes
        g.maps[e.out.id] = m
        g.eqns.append(e)
        g.reads |= reads
        return True

    def _view(self, e: Eqn) -> None:
        if not (self.cur is not None and self._join_view(self.cur, e)):
            self.aliases[e.out.id] = e

    @staticmethod
    def _join_view(g: LoopGroup, e: Eqn) -> bool:
        """Make view ``e`` of a member of ``g`` a member too, when it only moves dims."""
        if e.inputs[0].id not in g.maps or e.prim not in _MEMBER_VIEWS:
            return False
        m = _view_map(g, e)
        if m is None or not _covers(g.domain, g.red_axes, m):
            return False
        g.maps[e.out.id] = m
        g.eqns.append(e)
        return True

    def _call(self, e: Eqn) -> None:
        if e.prim is P.matmul:
            e = self._transposed_operands(e)
            if self.read_strided and len(e.inputs) == 2:
                e = self._strided_operands(e)
        elif e.prim in (P.index_put, P.scatter_add) and isinstance(e.inputs[0], Var) \
                and e.inputs[0].id in self.filled:
            e = Eqn(e.prim, (self.filled[e.inputs[0].id],) + tuple(e.inputs[1:]), e.params, e.out, e.where)
        ins = tuple(self._materialized(a) if isinstance(a, Var) and not self._read_in_place(a) else a
                    for a in e.inputs)
        e = Eqn(e.prim, ins, e.params, e.out, e.where)
        self.cur = None
        self.groups.append(CallGroup(e))

    def _read_in_place(self, a: Var) -> bool:
        """A reshape of stored memory is that memory (every stored value is row-major): a
        backend that resolves such operands to their base (``read_reshapes``) reads it
        without a copy."""
        return self.read_reshapes and reshaped_base(self.aliases, a) is not None

    def _transposed_operands(self, e: Eqn) -> Eqn:
        """A 2-d matmul operand that is the transpose of a 2-d value is read as that value
        with a BLAS transpose flag (``params["transposed"]``), not copied first."""
        if not (e.out.ndim == 2 and all(isinstance(a, Var) and a.ndim == 2 for a in e.inputs)):
            return e
        ins, flags = list(e.inputs), [False, False]
        for k, a in enumerate(ins[:2]):
            v = self.aliases.get(a.id)
            if v is not None and v.prim is P.transpose and tuple(v.params["perm"]) == (1, 0) \
                    and isinstance(v.inputs[0], Var) and v.inputs[0].ndim == 2:
                ins[k], flags[k] = v.inputs[0], True
        if not any(flags):
            return e
        return Eqn(e.prim, tuple(ins), dict(e.params, transposed=tuple(flags)), e.out, e.where)

    def _strided_operands(self, e: Eqn) -> Eqn:
        """A matmul operand that views a stored value with a strided layout whose matrix
        dims BLAS can read (one of them unit-stride: a leading dimension, transposed or not),
        such as an attention head sliced out of a fused QKV projection, is read in place:
        the operand becomes the stored value and ``params["strided"]`` its layout per
        operand, (offset, batch strides, leading dimension, transposed), or None."""
        ins, layouts = list(e.inputs), [None, None]
        flags = e.params.get("transposed", (False, False))
        for k, a in enumerate(e.inputs):
            if flags[k] or not isinstance(a, Var) or a.id not in self.aliases or self._read_in_place(a):
                continue
            view = strided_view(self.aliases, a)
            if view is None:
                continue
            base, off, strides = view
            (rows, cols), (sr, sc) = a.shape[-2:], strides[-2:]
            if (sc == 1 or cols == 1) and (rows == 1 or sr >= max(cols, 1)):
                layout = (off, strides[:-2], sr if rows > 1 else cols, False)
            elif (sr == 1 or rows == 1) and (cols == 1 or sc >= max(rows, 1)):
                layout = (off, strides[:-2], sc if cols > 1 else rows, True)
            else:
                continue
            ins[k], layouts[k] = base, layout
        if layouts == [None, None]:
            return e
        return Eqn(e.prim, tuple(ins), dict(e.params, strided=tuple(layouts),
                                            shapes=tuple(a.shape for a in e.inputs)), e.out, e.where)

    # ------------------------------------------------------------ fusion by dependency
    def _merged_by_dependency(self) -> list:
        """The groups with each loop group merged into an earlier one over the same domain
        where that creates no cycle between groups (as Inductor's scheduler fuses by
        dependency, not trace order): independent loops share one pass, and a value whose
        readers all end up in its own loop is never stored.

        Groups are taken in execution order. Loop group ``g`` may join an earlier loop group
        ``c`` when the merged group either stays at ``c``'s place (``g`` reads nothing
        computed after ``c``) or moves to ``g``'s place (nothing after ``c`` reads ``c``);
        library calls never move, so their order (random draws included) is kept."""
        order: list = []  # group ids in execution order
        groups: dict = {}  # id -> group
        ancestors: dict = {}  # id -> bit set of the ids it reads from, transitively
        owner: dict = {}  # var id -> id of the group computing it
        by_domain: dict = {}  # domain -> ids of loop groups over it, oldest first
        for gid, g in enumerate(self.groups):
            anc = 0
            for d in self._reads(g, owner):
                anc |= ancestors[d] | (1 << d)
            target = self._merge_target(g, anc, order, groups, ancestors, by_domain) \
                if isinstance(g, LoopGroup) else None
            if target is None:
                order.append(gid)
                groups[gid] = g
                ancestors[gid] = anc
                if isinstance(g, LoopGroup):
                    by_domain.setdefault(g.domain, []).append(gid)
                target = gid
            else:  # the merged group, and whatever reads it, now read what g reads
                anc &= ~(1 << target)
                for k in order:
                    if k == target or ancestors[k] >> target & 1:
                        ancestors[k] |= anc
            for e in _eqns(g):
                owner[e.out.id] = target
        return [groups[i] for i in order]

    def _reads(self, g: Group, owner: dict) -> set:
        """Ids of the groups whose results ``g`` reads, directly or through aliases."""
        out = set()
        for e in _eqns(g):
            for a in e.inputs:
                while isinstance(a, Var):
                    if a.id in owner:
                        out.add(owner[a.id])
                    v = self.aliases.get(a.id)
                    a = v.inputs[0] if v is not None else None
        return out

    def _merge_target(self, g: LoopGroup, anc: int, order: list, groups: dict, ancestors: dict,
                      by_domain: dict) -> Optional[int]:
        """Merge ``g`` into the nearest legal candidate; return its id (None: no merge)."""
        for cid in reversed(by_domain.get(g.domain, [])[-MERGE_CANDIDATES:]):
            pos = order.index(cid)
            later = order[pos + 1:]
            stays = not any(anc >> k & 1 for k in later)
            moves = not stays and not any(ancestors[k] >> cid & 1 for k in later)
            if not (stays or moves):
                continue  # a group between them reads c and is read by g: a cycle
            merged = self._combined(groups[cid], g)
            if merged is None:
                continue
            groups[cid] = merged
            if moves:
                order.pop(pos)
                order.append(cid)
            return cid
        return None

    def _combined(self, c: LoopGroup, g: LoopGroup) -> Optional[LoopGroup]:
        """One loop group computing ``c``'s members then ``g``'s, or None when some member
        of ``g`` cannot join (its dims map differently, other reduction axes, or it reads
        through a view memory the group itself writes)."""
        m = LoopGroup(c.domain, c.red_axes, list(c.eqns), dict(c.maps), c.serial, set(c.reads))
        for e in g.eqns:
            if not (self._join_view(m, e) if e.prim.kind == "view" else self._join(m, e)):
                return None
        return m

    def _independent_parts(self, g: Group) -> list:
        """A wide ``g`` (reading more than WIDE_READS arrays) as loop groups that share no
        work: members connected by one reading the other or by reading the same stored
        array of more than one element stay together. Fusion by dependency puts independent
        loops over one domain side by side; an optimizer's per-parameter updates so become
        one loop over dozens of arrays, which LLVM does not vectorize (it gives up on the
        run-time overlap checks between them) and compiles slowly, while apart they are
        identical loops that share one kernel (so do their scalar bias corrections)."""
        if not isinstance(g, LoopGroup) or len(self._stored_reads(g)) <= WIDE_READS:
            return [g]
        parent = list(range(len(g.eqns)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i
        member = {e.out.id: i for i, e in enumerate(g.eqns)}
        reader: dict = {}  # stored var id -> the first member reading it
        for i, e in enumerate(g.eqns):
            for a in map(self._stored_base, e.inputs):
                if isinstance(a, Var) and a.id in member:
                    parent[root(i)] = root(member[a.id])
                elif isinstance(a, Var) and a.size > 1:
                    parent[root(i)] = root(reader.setdefault(a.id, i))
        parts: dict = {}
        for i, e in enumerate(g.eqns):
            parts.setdefault(root(i), []).append(e)
        if len(parts) == 1:
            return [g]
        out = []
        for eqns in parts.values():
            red = g.red_axes if any(is_reduction(e) for e in eqns) else ()
            maps = {e.out.id: g.maps[e.out.id] for e in eqns}
            if not red and g.red_axes and not all(_full(g, m) for m in maps.values()):
                return [g]  # a member kept only over the outer axes needs the group's reduction
            out.append(LoopGroup(g.domain, red, eqns, maps, g.serial))
        return out

    def _stored_reads(self, g: LoopGroup) -> set:
        """Ids of the stored vars (aliases followed to their bases) members of ``g`` read."""
        return {a.id for e in g.eqns for a in map(self._stored_base, e.inputs)
                if isinstance(a, Var) and a.id not in g.maps}

    def _stored_base(self, a):
        """Operand ``a`` with aliases followed to the stored var they view (a literal as is)."""
        while isinstance(a, Var) and a.id in self.aliases:
            a = self.aliases[a.id].inputs[0]
        return a

    def _materialized(self, v: Var) -> Var:
        """``v`` itself when it will live in memory, else a copy of the alias ``v``."""
        if v.id not in self.aliases:
            return v
        if v.id in self.subst:
            return self.subst[v.id]
        c = Var(v.shape, v.dtype)
        e = Eqn(COPY, (v,), {}, c)
        self.cur = None
        self._open(e)
        self.cur = None
        self.subst[v.id] = c
        return c


def _gemm_epilogues(graph: Graph) -> tuple:
    """Find ``X + c * (A @ B)`` (also ``X - c * (A @ B)``, an SGD update) where the product
    and its scaled value have no other reader: one BLAS GEMM computes it into a copy of ``X``
    (``beta = 1``), with no pass over memory for the product. Returns (ids of the matmul and
    mul equations to skip, {id of the add/sub output: the fused matmul equation that replaces
    it}); the fused equation is a matmul with inputs (A, B, X) and params alpha, beta."""
    producer, uses = {e.out.id: e for e in graph.eqns}, use_counts(graph, output_weight=2)
    folded, epilogue = set(), {}
    for e in graph.eqns:
        if e.prim not in (P.add, P.sub) or e.out.ndim != 2 or e.out.dtype.kind != "f" or e.out.size == 0:
            continue
        for pos in (1, 0) if e.prim is P.add else (1,):
            m, x = e.inputs[pos], e.inputs[1 - pos]
            em = producer.get(m.id) if isinstance(m, Var) else None
            if em is None or em.prim is not P.mul or uses.get(m.id) != 1 or not isinstance(x, Var) \
                    or x.shape != e.out.shape or x.dtype != e.out.dtype:
                continue
            lits = [a for a in em.inputs if not isinstance(a, Var)]
            gs = [a for a in em.inputs if isinstance(a, Var)]
            if len(lits) != 1 or len(gs) != 1 or isinstance(lits[0], (bool, np.bool_)) \
                    or not isinstance(lits[0], (int, float, np.integer, np.floating)) \
                    or not math.isfinite(lits[0]) or lits[0] == 0:
                # BLAS skips the product when alpha is 0, losing 0 * inf = nan; and an
                # infinite alpha has no literal in the generated source
                continue
            g = gs[0]
            mm = producer.get(g.id)
            if mm is None or mm.prim is not P.matmul or uses.get(g.id) != 1 or g.shape != e.out.shape \
                    or g.dtype != e.out.dtype or m.shape != e.out.shape:
                continue
            a, b = mm.inputs
            if not (isinstance(a, Var) and isinstance(b, Var) and a.ndim == 2 and b.ndim == 2
                    and a.dtype == b.dtype == g.dtype and a.shape[1] > 0):
                continue
            alpha = float(lits[0]) if e.prim is P.add else -float(lits[0])
            params = dict(mm.params, alpha=alpha, beta=1.0)
            epilogue[e.out.id] = Eqn(mm.prim, (a, b, x), params, e.out, e.where)
            folded.update((mm.out.id, em.out.id))
            break
    return folded, epilogue


def _filled_bases(graph: Graph) -> dict:
    """{id of a constant fill: its value} for the fills whose only reader is an index_put or
    scatter_add into them (the zeros a gather's or a pooling's backward scatters into): the
    call takes the value as its base and fills its output itself, so the fill is never
    computed, stored and copied."""
    uses = use_counts(graph)
    fills = {e.out.id: e.params["value"] for e in graph.eqns if e.prim is P.full}
    return {x.id: fills[x.id] for e in graph.eqns if e.prim in (P.index_put, P.scatter_add)
            for x in e.inputs[:1] if isinstance(x, Var) and x.id in fills and uses[x.id] == 1}


def _full(g: LoopGroup, m: Map) -> bool:
    return {a for a in m if a is not None} == {a for a, s in enumerate(g.domain) if s != 1}


def _without_stop_gradients(graph: Graph) -> Graph:
    """``graph`` with each stop_gradient's readers (outputs too) reading its operand: the
    identity once the graph is differentiated, and a copy per stop_gradient would cost a
    pass over memory each. An output that becomes an input or another output is fine: the
    cpu backend returns an input as a copy, and memory.donations skips both."""
    subst = {e.out.id: e.inputs[0] for e in graph.eqns
             if e.prim is P.stop_gradient and isinstance(e.inputs[0], Var)}
    if not subst:
        return graph
    return rebuild(graph, [e for e in graph.eqns if e.out.id not in subst], subst)


def fuse(graph: Graph, read_reshapes: bool = False, read_strided: bool = False,
         fill_bases: bool = False, blas_nearby: bool = False) -> Fused:
    """Partition ``graph`` into loop groups, library calls and aliases (in execution order).
    With ``read_reshapes`` a library call's operand that reshapes stored memory stays that
    alias (the backend reads its base's buffer, see ``reshaped_base``) instead of a copy;
    with ``read_strided`` a matmul reads strided views of stored values in place (see
    ``_Fuser._strided_operands``); with ``fill_bases`` an index_put or scatter_add into a
    constant fill takes the value as its base operand (``_filled_bases``). Loop groups up to
    BLAS_SERIAL_MAX run on one thread when the graph calls BLAS or ``blas_nearby`` says that
    BLAS runs between its calls."""
    fused = _Fuser(_without_stop_gradients(graph), read_reshapes, read_strided, fill_bases).run()
    if blas_nearby or any(isinstance(g, CallGroup) and g.eqn.prim is P.matmul for g in fused.groups):
        for g in fused.groups:
            if isinstance(g, LoopGroup) and g.size <= BLAS_SERIAL_MAX:
                g.serial = True
    return fused
