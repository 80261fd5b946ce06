"""Part views as offsets: a lowered loop group holding several parts of a larger buffer (a
concatenation computed in place: each part written by an earlier loop group straight into
its rows), or the larger buffer and a part of it, addresses that buffer at the parts'
offsets instead.

Parts written by one kernel become stores into one buffer at advancing offsets, which
kir_reroll turns into a loop (W3's gradient has hundreds), and the entry passes the whole
buffer. A kernel's lone part stays a buffer of its own, which the program passes at its
offset (cpu_program's operands carry one), so that the kernel's code does not depend on
where the part lies: the steps of an unrolled loop share one kernel."""
from __future__ import annotations

from collections import Counter
from typing import Callable

from .kir import Assign, Buffer, Guard, Kernel, Load, Loop, Op, Store, Update, iadd
from .kir_lower import LoweredGroup

_ROLES = {frozenset({"in"}): "in", frozenset({"out"}): "out"}


def onto_parts(lg: LoweredGroup, part_of: Callable) -> LoweredGroup:
    """``lg`` with each buffer whose Var ``part_of(var)`` places in a larger one, as
    ``(whole Var, offset)``, replaced by accesses to the whole at that offset (one kernel
    buffer per whole, read and/or written), where the kernel holds several parts of that
    whole or the whole itself; None leaves a buffer as it is. A lone part stays a buffer of
    its own, which the entry passes at its offset: the kernel's code then does not depend on
    where the part lies, so the steps of an unrolled loop, each writing its own row of a
    stacked result, share one kernel."""
    moved: dict = {}  # kernel buffer name -> (name of the whole's buffer, offset)
    wholes: dict = {}  # whole Var id -> position in the new buffers
    bufs, binds = [], []
    places = [part_of(v) for v in lg.binds]
    bound = {v.id for v in lg.binds}
    parts = Counter(p[0].id for p in places if p is not None)
    for b, v, place in zip(lg.kernel.params(), lg.binds, places):
        if place is not None and parts[place[0].id] < 2 and place[0].id not in bound:
            place = None
        if place is None:
            bufs.append(b)
            binds.append(v)
            continue
        whole, off = place
        at = wholes.get(whole.id)
        if at is None:
            at = wholes[whole.id] = len(bufs)
            bufs.append(Buffer(b.name, whole.dtype, whole.size, b.role))
            binds.append(whole)
        else:
            old = bufs[at]
            role = _ROLES.get(frozenset({old.role, b.role}), "inout")
            bufs[at] = Buffer(old.name, old.dtype, old.size, role)
        moved[b.name] = (bufs[at].name, off)
    if not moved:
        return lg
    k = lg.kernel
    temps = [b for b in k.buffers if b.role == "temp"]
    return LoweredGroup(Kernel(k.name, bufs + temps, k.syms, [_moved(s, moved) for s in k.body]), binds, lg.locals,
                        lg.sizes)


def _value(v, moved: dict):
    if isinstance(v, Load) and v.buf in moved:
        name, off = moved[v.buf]
        return Load(name, iadd(v.index, off), v.dtype)
    if isinstance(v, Op):
        return Op(v.op, tuple(_value(a, moved) for a in v.args), v.dtype, v.params)
    return v


def _moved(s, moved: dict):
    if isinstance(s, Loop):
        return Loop(s.var, s.extent, s.kind, [_moved(t, moved) for t in s.body])
    if isinstance(s, Guard):
        return Guard(_value(s.cond, moved), [_moved(t, moved) for t in s.body])
    if isinstance(s, Store):
        name, off = moved.get(s.buf, (s.buf, 0))
        return Store(name, iadd(s.index, off), _value(s.value, moved))
    if isinstance(s, Assign):
        return Assign(s.name, _value(s.value, moved))
    if isinstance(s, Update):
        return Update(s.name, _value(s.value, moved))
    return s
