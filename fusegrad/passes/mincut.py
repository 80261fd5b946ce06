"""A small max-flow / min-cut (Edmonds–Karp) for choosing what compiled training saves."""
from __future__ import annotations

from collections import deque

INF = float("inf")


class FlowGraph:
    """Directed graph with capacities; nodes are any hashables."""

    def __init__(self):
        self.cap: dict = {}  # (u, v) -> residual capacity
        self.adj: dict = {}

    def add_edge(self, u, v, cap: float) -> None:
        for a, b in ((u, v), (v, u)):
            self.adj.setdefault(a, set()).add(b)
            self.cap.setdefault((a, b), 0)
        self.cap[(u, v)] += cap

    def _path(self, s, t) -> dict:
        parent = {s: None}
        q = deque([s])
        while q and t not in parent:
            u = q.popleft()
            for v in self.adj.get(u, ()):
                if v not in parent and self.cap[(u, v)] > 0:
                    parent[v] = u
                    q.append(v)
        return parent

    def min_cut(self, s, t) -> set:
        """Run max-flow from ``s`` to ``t``; return the nodes on the source side of a
        minimum cut. Raises ValueError if every cut is infinite."""
        while True:
            parent = self._path(s, t)
            if t not in parent:
                return set(parent)
            push, v = INF, t
            while parent[v] is not None:
                push = min(push, self.cap[(parent[v], v)])
                v = parent[v]
            if push == INF:
                raise ValueError("no finite cut separates source and sink")
            v = t
            while parent[v] is not None:
                u = parent[v]
                self.cap[(u, v)] -= push
                self.cap[(v, u)] += push
                v = u
