"""Fusion by dependency (passes/fusion.py): loop groups over the same domain merge when no
cycle between groups results, whatever the trace order, and a value read only inside its
own loop is never stored. Structure is checked on ``fuse``'s output; values against eager
in one compiled graph."""
from __future__ import annotations

import numpy as np

import fusegrad as fg
from fusegrad.passes.fusion import COPY, CallGroup, LoopGroup, fuse
from helpers import check, graph_of


def _loops(fused) -> list:
    return [g for g in fused.groups if isinstance(g, LoopGroup)]


def _stored(fused) -> set:
    """Ids of the values some group writes to memory."""
    return {v.id for gi in range(len(fused.groups)) for v in fused.outputs_of(gi)}


def _producer(graph, prim):
    return next(e.out for e in graph.eqns if e.prim is prim)


def _across_call(x, y, w):
    a = fg.sin(x)
    b = fg.exp(y @ w)  # a library call between a and its reader
    return b, a * 2


def test_a_loop_moves_past_an_unrelated_call():
    g = graph_of(_across_call, [np.ones((5, 5), np.float32)] * 3)
    fused = fuse(g)
    assert len(_loops(fused)) == 1 and len(fused.groups) == 2, str(fused)
    assert isinstance(fused.groups[0], CallGroup)  # the merged loop runs after the matmul it reads
    assert _producer(g, fg.ir.prims.sin).id not in _stored(fused), str(fused)


def _interleaved(x, z):
    a = fg.sin(x)
    b = fg.exp(z)  # another domain in between
    return b, a * 2


def test_independent_domains_do_not_split_a_loop():
    g = graph_of(_interleaved, [np.ones((4, 5), np.float32), np.ones(3, np.float32)])
    fused = fuse(g)
    assert sorted(len(lg.eqns) for lg in _loops(fused)) == [1, 2], str(fused)
    assert _producer(g, fg.ir.prims.sin).id not in _stored(fused), str(fused)


def _independent(x, y, w):
    p = fg.tanh(x)
    m = w @ w
    q = fg.cos(y)
    return p, m, q


def test_independent_loops_over_one_domain_merge():
    fused = fuse(graph_of(_independent, [np.ones((3, 4), np.float32), np.ones((3, 4), np.float32),
                                         np.ones((4, 4), np.float32)]))
    assert len(_loops(fused)) == 1 and len(fused.groups) == 2, str(fused)


def _cycle(x, w):
    a = fg.sin(x)
    m = a @ w  # reads a, and the loop after reads m: a and c cannot share a loop
    return fg.exp(m) + a


def test_no_merge_through_a_group_between():
    g = graph_of(_cycle, [np.ones((4, 4), np.float32)] * 2)
    fused = fuse(g)
    kinds = [type(gr).__name__ for gr in fused.groups]
    assert kinds == ["LoopGroup", "CallGroup", "LoopGroup"], str(fused)


def _two_reductions(x, y):
    return x.sum(0), y.sum(1), y.amax(0)  # the amax may join the first sum, not the second


def test_reductions_over_other_axes_stay_apart():
    fused = fuse(graph_of(_two_reductions, [np.ones((4, 5), np.float32)] * 2))
    loops = _loops(fused)
    assert len(loops) == 2, str(fused)
    assert sorted(lg.red_axes for lg in loops) == [(0,), (1,)], str(fused)


def _everything(x, y, w, z):
    return _across_call(x, y, w) + _interleaved(x, z) + _independent(x, y, w) + (_cycle(x, w),) \
        + _two_reductions(x, y)


def test_merged_groups_compute_what_eager_does(rng):
    arrs = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3)] + \
           [rng.standard_normal(3).astype(np.float32)]
    check(_everything, arrs, tol=dict(rtol=2e-5, atol=2e-6))


def _reshaped_operands(x, w):
    a = fg.tanh(x)                                     # a loop group's output
    m = a.reshape(6, 4) @ w                            # a call reading its reshape
    n = m.reshape(2, 12).reshape(3, 8) @ x.reshape(8, 3)  # a chain of reshapes; an argument's reshape
    t = a.t().reshape(4, 6) @ x.reshape(6, 4)          # a transpose moves elements: copied
    return n, t


def test_calls_read_reshapes_of_stored_values_in_place(rng):
    arrs = [rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)]
    fused = fuse(graph_of(_reshaped_operands, arrs), read_reshapes=True)  # as the cpu backend fuses
    copies = [e for lg in _loops(fused) for e in lg.eqns if e.prim is COPY]
    assert len(copies) == 1, str(fused)  # only the transposed operand is materialized
    assert fused.aliases[copies[0].inputs[0].id].prim is fg.ir.prims.reshape  # of the transpose
    check(_reshaped_operands, arrs, tol=dict(rtol=2e-5, atol=2e-5))
