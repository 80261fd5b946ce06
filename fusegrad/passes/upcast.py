"""Half-precision graphs computed in float32, as Inductor does: every bfloat16/float16 value
becomes a float32 value, and the graph keeps the rounding the program asks for.

- A cast to a half dtype (autocast's casts before a matmul, ``.to(bfloat16)``) becomes a
  cast to float32 then ``reduce_precision`` to that dtype: exactly eager's value there.
- A value that enters half precision from elsewhere (``full``, random numbers, a reduction
  with a half ``dtype=``: an equation with a half result and no half operand) is rounded
  the same way.
- A matmul's result is rounded too (a GEMM stores it in the half dtype, in eager and in
  torch.compile alike, before what follows reads it).
- Elementwise and other ops on half operands compute in float32 without rounding each
  result: they differ from eager only by the rounding of those intermediates (as
  torch.compile's results do).

The graph's half inputs, consts and outputs become float32; ``upcast`` says which, so the
backend converts them at its boundary (see codegen.half_boundary)."""
from __future__ import annotations

import numpy as np

from ..ir.dtypes import _BF16
from ..ir import prims as P
from ..ir.graph import Eqn, Graph, Var

HALF = (np.dtype(np.float16), np.dtype(_BF16))
_F32 = np.dtype(np.float32)


def has_half(graph: Graph) -> bool:
    """Whether any value of ``graph`` is bfloat16 or float16."""
    return any(v.dtype in HALF for v in graph.defined())


def upcast(graph: Graph) -> Graph:
    """``graph`` with its bfloat16/float16 values computed in float32 (module docstring);
    the same graph when it has none."""
    if not has_half(graph):
        return graph
    new: dict = {}  # var id -> the float32 Var standing for a half Var

    def var(v: Var) -> Var:
        if v.dtype not in HALF:
            return v
        if v.id not in new:
            new[v.id] = Var(v.shape, _F32, v.trace)
            new[v.id].recompute = v.recompute
        return new[v.id]

    def operand(a):
        return var(a) if isinstance(a, Var) else a

    eqns: list = []

    def emit(prim, ins: tuple, params: dict, out: Var, where) -> Var:
        eqns.append(Eqn(prim, ins, params, out, where))
        return out

    for e in graph.eqns:
        ins = tuple(operand(a) for a in e.inputs)
        half_in = any(isinstance(a, Var) and a.dtype in HALF for a in e.inputs)
        out_half = e.out.dtype in HALF
        half_param = "dtype" in e.params and np.dtype(e.params["dtype"]) in HALF  # full, random, cast
        if not (half_in or out_half or half_param):
            eqns.append(e)
            continue
        if e.prim is P.cast:
            x = ins[0]
            if out_half:  # round exactly as the cast does
                if x.dtype != _F32:  # float64 -> float32 -> half rounds as float64 -> half: 24 >= 2 * 11 + 2 bits
                    x = emit(P.cast, (x,), {"dtype": _F32}, Var(x.shape, _F32, x.trace), e.where)
                emit(P.reduce_precision, (x,), {"dtype": e.out.dtype}, var(e.out), e.where)
            else:  # from a half value, now float32
                eqns.append(Eqn(P.cast, (x,), e.params, e.out, e.where))
            continue
        params = {**e.params, "dtype": _F32} if half_param else e.params
        # the value enters half precision here, or a product (a library GEMM's result, stored in
        # the half dtype by eager and by torch.compile alike): round it as eager does
        if out_half and (not half_in or e.prim is P.matmul):
            mid = emit(e.prim, ins, params, Var(e.out.shape, _F32, e.out.trace), e.where)
            emit(P.reduce_precision, (mid,), {"dtype": e.out.dtype}, var(e.out), e.where)
        else:
            emit(e.prim, ins, params, var(e.out), e.where)
    g = Graph()
    g.inputs = [var(v) for v in graph.inputs]
    g.consts = [(var(v), h) for v, h in graph.consts]
    g.eqns = eqns
    g.outputs = [operand(o) for o in graph.outputs]
    return g
