"""A small max-flow / min-cut (Dinic's algorithm) for choosing what compiled training saves."""
from __future__ import annotations

from collections import deque

INF = float("inf")


class FlowGraph:
    """Directed graph with capacities; nodes are any hashables (numbered as they come).
    Edges live in flat lists, each beside its reverse (edge ``e``'s is ``e ^ 1``)."""

    def __init__(self):
        self.index: dict = {}  # node -> number
        self.nodes: list = []
        self.adj: list = []  # per node, its edges
        self.to: list = []
        self.cap: list = []

    def _node(self, u) -> int:
        i = self.index.get(u)
        if i is None:
            i = self.index[u] = len(self.nodes)
            self.nodes.append(u)
            self.adj.append([])
        return i

    def add_edge(self, u, v, cap: float) -> None:
        a, b = self._node(u), self._node(v)
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(cap)
        self.adj[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0)

    def _levels(self, s: int) -> list:
        """Each node's BFS distance from ``s`` over edges with capacity left (-1: unreached)."""
        level = [-1] * len(self.nodes)
        level[s] = 0
        q = deque([s])
        adj, to, cap = self.adj, self.to, self.cap
        while q:
            u = q.popleft()
            for e in adj[u]:
                v = to[e]
                if level[v] < 0 and cap[e] > 0:
                    level[v] = level[u] + 1
                    q.append(v)
        return level

    def _blocking_flow(self, s: int, t: int, level: list) -> None:
        """Saturate every shortest path of the level graph (depth-first, each node's edges
        tried once: ``nxt`` keeps where it stopped)."""
        adj, to, cap = self.adj, self.to, self.cap
        nxt = [0] * len(self.nodes)
        path: list = []  # edges from s to u
        u = s
        while True:
            if u == t:
                push = min(cap[e] for e in path)
                if push == INF:
                    raise ValueError("no finite cut separates source and sink")
                for e in path:
                    cap[e] -= push
                    cap[e ^ 1] += push
                path, u = [], s
                continue
            edges, k = adj[u], nxt[u]
            while k < len(edges) and not (cap[edges[k]] > 0 and level[to[edges[k]]] == level[u] + 1):
                k += 1
            nxt[u] = k
            if k < len(edges):
                path.append(edges[k])
                u = to[edges[k]]
            elif u == s:
                return
            else:  # a dead end: leave it, and step past the edge that led here
                level[u] = -1
                u = to[path.pop() ^ 1]
                nxt[u] += 1

    def min_cut(self, s, t) -> set:
        """Run max-flow from ``s`` to ``t``; return the nodes on the source side of a
        minimum cut (those the source still reaches: the smallest such side, whichever
        maximum flow is found). Raises ValueError if every cut is infinite."""
        si, ti = self._node(s), self._node(t)
        while True:
            level = self._levels(si)
            if level[ti] < 0:
                return {self.nodes[i] for i, d in enumerate(level) if d >= 0}
            self._blocking_flow(si, ti, level)
