"""A compiled backward run in stages, one autograd node per stage, so that the gradients of
each group of inputs reach their leaves (and run the leaves' post-accumulate-grad hooks)
before the next stage starts.

``CompiledFunction._set_gradient_groups`` asks for it; DistributedDataParallel does, with
its gradient buckets as the groups, so that each bucket's all-reduce overlaps the rest of
the compiled backward. The backward graph is split by ``passes.stages.split_outputs``
(stage k computes group k's gradients and only what they need beyond earlier stages) and
each stage is compiled on its own; the autograd nodes are chained stage 0 -> 1 -> ...,
each handing its gradients to the engine ahead of the link to the next stage (the
engine runs ready nodes first in, first out), while the values a later stage reads stay
in the call's ``_Run``. Inputs outside every group get their gradients from the last stage."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..codegen.backend import Unsupported
from ..ir.graph import Var
from ..passes.stages import split_outputs
from .grad_mode import STATE
from .tensor import Tensor, wrap


def assignment(plan, primals: list, group_of: dict, n_groups: int) -> tuple:
    """Per gradient of ``plan`` (its ``wrt`` positions), the group of its primal
    (``n_groups`` for primals in no group)."""
    return tuple(group_of.get(id(primals[i]), n_groups) for i in plan.wrt)


def stages_for(plan, assign: tuple) -> Optional[list]:
    """The compiled stages of ``plan``'s backward for ``assign`` (cached on the plan), or
    None when there is nothing to split or the backend cannot compile a stage."""
    if assign in plan.staged:
        return plan.staged[assign]
    order = sorted(set(assign))
    stages = None
    if len(order) > 1 and plan.build is not None:
        groups = [[j for j, s in enumerate(assign) if s == k] for k in order]
        try:
            stages = [(plan.build(st.graph), st) for st in split_outputs(plan.stages["backward"], groups)]
        except Unsupported:
            stages = None
    plan.staged[assign] = stages
    return stages


class _Run:
    """One call's staged backward: the residuals (``ctx``), and during a backward the values
    later stages read, or every gradient when the backward ran whole (create_graph, or
    gradients that are traced values)."""

    def __init__(self, plan, ctx, stages: list, run_whole):
        self.plan, self.ctx, self.stages = plan, ctx, stages
        self.run_whole = run_whole  # the unstaged backward: (*grads) -> gradients per wrt
        self.env: Optional[dict] = None
        self.whole: Optional[tuple] = None

    def stage(self, k: int, *grads: Tensor) -> tuple:
        if k == 0:
            self._start(grads)
        exe, st = self.stages[k]
        n = len(st.positions)
        if self.whole is not None:
            outs = tuple(self.whole[p] for p in st.positions)
        else:
            env = self.env
            res = exe(*[env[v.id] for v in st.graph.arguments()])
            env.update((v.id, a) for v, a in zip(st.graph.outputs[n:], res[n:]))
            outs = tuple(wrap(a) for a in res[:n])
        if k + 1 < len(self.stages):
            return outs + (wrap(np.zeros(())),)  # the link that makes stage k + 1 ready
        self.env = self.whole = None
        return outs

    def _start(self, grads) -> None:
        if STATE.enabled or any(type(g._data) is Var for g in grads):
            self.whole = self.run_whole(*grads)
            return
        self.ctx.check()
        bwd = self.plan.stages["backward"]
        arrays = list(self.ctx.residuals) + [g._data for g in grads]
        self.env = {v.id: a for v, a in zip(bwd.inputs, arrays)}
        self.env.update((v.id, h) for (v, _), h in zip(bwd.consts, self.plan.read_bwd_holders()))


def attach(node_cls, plan, ctx, stages: list, run_whole, edges: Sequence, out_meta: tuple) -> object:
    """The chain of stage nodes (``edges``: one per gradient of ``plan``); returns the first,
    the grad_fn of the compiled call's outputs. Only the last node holds ``ctx``: releasing
    it after a backward frees the residuals, which every stage reads."""
    run = _Run(plan, ctx, stages, run_whole)
    nxt = None
    for k in reversed(range(len(stages))):
        node = node_cls.__new__(node_cls)
        own = [edges[p] for p in stages[k][1].positions]
        node._init(tuple(own) + (((nxt, 0),) if nxt is not None else ()))
        node.ctx = ctx if nxt is None else None
        node.n_out = len(out_meta) if k == 0 else 1
        node.out_meta = out_meta if k == 0 else (((), np.dtype(np.float64)),)
        node.backward_fn = _bound(run, k)
        nxt = node
    return nxt


def _bound(run: _Run, k: int):
    def backward_fn(*grads):
        return run.stage(k, *grads)
    return backward_fn


def group_index(groups: Sequence[Sequence[Tensor]]) -> dict:
    """id(tensor) -> its group's position."""
    return {id(t): k for k, ts in enumerate(groups) for t in ts}

