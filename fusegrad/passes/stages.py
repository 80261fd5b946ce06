"""Splitting a graph into stages that each compute a group of its outputs, run in order.

DistributedDataParallel uses it on a compiled backward: stage k computes the gradients of
bucket k (and only what they need that earlier stages did not compute), so each bucket's
all-reduce can start while the later stages still run. A value computed by one stage and
read by a later one is an extra output of the first and an input of the second."""
from __future__ import annotations

from typing import List, Sequence

from ..ir.graph import Graph, Var


class Stage:
    """One stage: ``graph`` (inputs: the values it reads from outside; consts: the source's
    consts it reads), which of the source's outputs it computes (``positions``, the first
    outputs of ``graph``), and then the values later stages read (``graph.outputs`` after
    those)."""

    def __init__(self, graph: Graph, positions: List[int]):
        self.graph = graph
        self.positions = positions


def split_outputs(graph: Graph, groups: Sequence[Sequence[int]]) -> List[Stage]:
    """Stages computing ``graph.outputs`` group by group (``groups``: output positions, each
    position in exactly one group; empty groups are skipped). Every equation runs in the
    first stage that needs it."""
    if sorted(p for g in groups for p in g) != list(range(len(graph.outputs))):
        raise ValueError(f"split_outputs: the groups {list(map(list, groups))} must cover the "
                         f"{len(graph.outputs)} outputs exactly once")
    producer = {e.out.id: e for e in graph.eqns}
    owner: dict = {}  # value id -> index of the stage that computes it
    groups = [list(g) for g in groups if g]
    for k, group in enumerate(groups):
        stack = [graph.outputs[p] for p in group]
        while stack:
            v = stack.pop()
            if isinstance(v, Var) and v.id in producer and v.id not in owner:
                owner[v.id] = k
                stack.extend(producer[v.id].inputs)
    eqns: List[list] = [[] for _ in groups]
    for e in graph.eqns:
        if e.out.id in owner:
            eqns[owner[e.out.id]].append(e)
    # what each stage reads that it does not compute
    reads: List[dict] = []
    for k, group in enumerate(groups):
        made = {e.out.id for e in eqns[k]}
        r: dict = {}
        for x in [a for e in eqns[k] for a in e.inputs] + [graph.outputs[p] for p in group]:
            if isinstance(x, Var) and x.id not in made:
                r[x.id] = x
        reads.append(r)
    consts = {v.id for v, _ in graph.consts}
    stages = []
    for k, group in enumerate(groups):
        later = {vid: v for r in reads[k + 1:] for vid, v in r.items() if owner.get(vid) == k}
        g = Graph()
        g.inputs = [v for vid, v in reads[k].items() if vid not in consts]
        g.consts = [(v, h) for v, h in graph.consts if v.id in reads[k]]
        g.eqns = eqns[k]
        g.outputs = [graph.outputs[p] for p in group] + list(later.values())
        stages.append(Stage(g, group))
    return stages
