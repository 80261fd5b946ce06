"""The reference interpreter of the kernel IR: runs a ``kir.Kernel`` element by element
with NumPy scalars, so tests check what a kernel computes without compiling it. Each
scalar operation means what ``fusegrad.ir.scalar_ops`` says; loads and stores check their
index against the buffer (an out-of-range index raises IndexError naming it). It is slow
(a Python step per element): for tests, at small sizes. Temp buffers are the kernel's own."""
from __future__ import annotations

import numpy as np

from ..ir.scalar_ops import OPS, REDUCE_OPS, reduce_identity
from ..passes.fusion import Fused, LoopGroup
from .kir import Acc, Assign, Const, Extern, Guard, Index, Kernel, Let, Load, Loop, Op, Ref, Scratch, Store, Update, ieval


def run(k: Kernel, buffers: dict, syms: dict | None = None) -> dict:
    """Execute ``k`` on ``buffers`` (buffer name -> flat array; outputs are written in
    place) with shape symbols ``syms`` (name -> int); returns ``buffers``."""
    env = dict(syms or {})
    missing = [s for s in k.syms if s not in env]
    if missing:
        raise ValueError(f"kernel {k.name}: no value for symbols {missing}")
    for b in k.params():
        a = buffers[b.name]
        if a.ndim != 1 or a.dtype != np.dtype(b.dtype) or a.size != ieval(b.size, env):
            raise ValueError(f"kernel {k.name}: buffer {b.name} must be {np.dtype(b.dtype)}[{ieval(b.size, env)}], "
                             f"got {a.dtype}{list(a.shape)}")
    temps = {b.name: _unset(b, env) for b in k.buffers if b.role == "temp"}
    _Run(k, {**buffers, **temps}).body(k.body, env)
    return buffers


def _unset(b, env: dict) -> np.ndarray:
    """A fresh temp buffer: NaN (or -1), so a kernel reading one before writing it shows."""
    return np.full(ieval(b.size, env), -1 if np.dtype(b.dtype).kind in "iub" else np.nan, b.dtype)


def run_fused(fused: Fused, arrays: list, symbolic: bool = False, kernels: dict | None = None) -> tuple:
    """The outputs of a fused graph on ``arrays`` (its arguments, in order), each loop
    group run by interpreting its kernel IR (``symbolic``: the shape-symbolic kernel, its
    symbols bound to the group's sizes); library calls, and views read outside loop
    groups, run with their primitives' NumPy impls (codegen.sequence). ``kernels`` maps
    group indices to a kernel run in place of the group's own (e.g. a symbolic one lowered
    at other sizes; its buffers bind by position)."""
    from .kir_lower import lower_group
    from .sequence import Sequence
    lowered = {gi: lower_group(fused, gi, symbolic=symbolic)
               for gi, g in enumerate(fused.groups) if isinstance(g, LoopGroup)}

    def interpret(gi, lg, bufs, syms):
        k = (kernels or {}).get(gi, lg.kernel)
        run(k, {b.name: bufs[own.name] for b, own in zip(k.buffers, lg.kernel.buffers)}, syms)
    return Sequence(fused, lowered, interpret)(arrays)


class _Run:
    def __init__(self, k: Kernel, buffers: dict):
        self.k, self.bufs = k, buffers
        self.accs: dict = {}  # accumulator name -> reduce op

    def body(self, stmts: list, env: dict) -> None:
        for s in stmts:
            if isinstance(s, Loop):
                for i in range(ieval(s.extent, env)):
                    env[s.var] = i
                    self.body(s.body, env)
                env.pop(s.var, None)
            elif isinstance(s, Assign):
                env[s.name] = self.value(s.value, env)
            elif isinstance(s, Store):
                self.bufs[s.buf][self._at(s.buf, s.index, env)] = self.value(s.value, env)
            elif isinstance(s, Acc):
                self.accs[s.name] = s.op
                env[s.name] = reduce_identity(s.op, np.dtype(s.dtype))
            elif isinstance(s, Update):
                acc = env[s.name]
                v = np.asarray(self.value(s.value, env)).astype(acc.dtype)[()]
                env[s.name] = OPS[REDUCE_OPS[self.accs[s.name]]].ref((acc, v), acc.dtype, {})
            elif isinstance(s, Let):
                env[s.name] = ieval(s.expr, env)
            elif isinstance(s, Guard):
                if self.value(s.cond, env):
                    self.body(s.body, env)
            elif isinstance(s, Scratch):
                self.bufs[s.buf] = _unset(self.k.buffer(s.buf), env)
            elif isinstance(s, Extern):
                raise NotImplementedError(f"kernel {self.k.name}: the interpreter has no library call {s.fn}")

    def _at(self, buf: str, index, env: dict) -> int:
        i = ieval(index, env)
        if not 0 <= i < self.bufs[buf].size:
            raise IndexError(f"kernel {self.k.name}: index {i} of {buf} is outside its {self.bufs[buf].size} elements")
        return i

    def value(self, v, env: dict):
        if isinstance(v, Const):
            return np.asarray(v.value).astype(v.dtype)[()]
        if isinstance(v, Ref):
            return env[v.name]
        if isinstance(v, Load):
            return self.bufs[v.buf][self._at(v.buf, v.index, env)]
        if isinstance(v, Index):
            return np.asarray(ieval(v.expr, env)).astype(v.dtype)[()]
        assert isinstance(v, Op)
        args = [self.value(a, env) for a in v.args]
        r = OPS[v.op].ref(args, v.operand_dtype(), dict(v.params))
        return np.asarray(r).astype(v.dtype)[()]
