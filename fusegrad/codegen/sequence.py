"""Running a fused graph group by group from Python: each loop group's kernel by a kernel
runner (the reference interpreter, or a compiled kernel), library calls and views read
whole by their primitives' NumPy impls. The reference interpreter and the cpu backend's
shape-symbolic executables (codegen.cpu_symbolic) share it."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir.graph import Eqn, Var
from ..passes.fusion import CallGroup, Fused
from .kir_lower import LoweredGroup

# (group index, lowered group, {kernel buffer name: flat array}, {symbol: int}) -> None
Runner = Callable[[int, LoweredGroup, dict, dict], None]


class Sequence:
    """``Sequence(fused, lowered, runner)(arrays)``: the outputs of ``fused`` on its
    arguments ``arrays``; ``lowered`` maps each loop group's index to its LoweredGroup."""

    def __init__(self, fused: Fused, lowered: dict, runner: Runner):
        self.fused, self.lowered, self.runner = fused, lowered, runner
        self.args = fused.graph.arguments()
        self.syms = {gi: lg.sizes for gi, lg in lowered.items()}

    def __call__(self, arrays) -> tuple:
        fused = self.fused
        env = {v.id: np.asarray(a) for v, a in zip(self.args, arrays)}

        def get(v):
            if not isinstance(v, Var):
                return v
            if v.id not in env:  # a view read whole: evaluate it
                e = fused.aliases[v.id]
                env[v.id] = e.prim.impl(*map(get, e.inputs), **e.params)
            return env[v.id]

        for gi, g in enumerate(fused.groups):
            if isinstance(g, CallGroup):
                env[g.eqn.out.id] = call(g.eqn, list(map(get, g.eqn.inputs)))
                continue
            lg = self.lowered[gi]
            bufs = {}
            for b, v in zip(lg.kernel.buffers, lg.binds):
                bufs[b.name] = np.ascontiguousarray(get(v)).reshape(-1) if b.role == "in" else np.empty(v.size, v.dtype)
            self.runner(gi, lg, bufs, self.syms[gi])
            for b, v in zip(lg.kernel.buffers, lg.binds):
                if b.role != "in":
                    env[v.id] = bufs[b.name].reshape(v.shape)
        return tuple(np.asarray(get(v)) for v in fused.outputs)


def call(e: Eqn, ins: list) -> np.ndarray:
    """A library call's result by its primitive's impl (a matmul operand fusion marked
    ``transposed`` is its base, read transposed)."""
    params = dict(e.params)
    flags = params.pop("transposed", ())
    ins = [np.swapaxes(a, -1, -2) if t else a for a, t in zip(ins, flags)] + ins[len(flags):]
    return np.asarray(e.prim.impl(*ins, **params))
