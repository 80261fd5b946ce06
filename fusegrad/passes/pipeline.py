"""The optimization pipeline: simplify, fold, CSE, factored contractions and DCE to a fixed
point."""
from __future__ import annotations

import os
from typing import Callable, Optional

from ..ir.graph import Graph
from ..ir.verify import verify
from .cse import cse
from .dce import dce
from .embeds import gather_embeds
from .factor import factor_contractions
from .fold import fold
from .simplify import simplify

PASSES: list = [("embeds", gather_embeds), ("simplify", simplify), ("fold", fold), ("cse", cse),
               ("factor", factor_contractions), ("dce", dce)]
_MAX_ROUNDS = 4  # rules only shrink the graph; a few rounds reach the fixed point


def optimize(graph: Graph, on_pass: Optional[Callable[[str, Graph], None]] = None) -> Graph:
    """Run the passes until the graph stops shrinking. ``on_pass(name, graph)`` sees the
    result of each pass (FUSEGRAD_DUMP uses it); with ``FUSEGRAD_VERIFY=1`` the verifier
    checks each result."""
    check = os.environ.get("FUSEGRAD_VERIFY") == "1"
    for rnd in range(_MAX_ROUNDS):
        before = len(graph.eqns)
        for name, fn in PASSES:
            graph = fn(graph)
            if check:
                verify(graph)
            if on_pass is not None:
                on_pass(f"{rnd}.{name}", graph)
        if len(graph.eqns) == before:
            break
    return graph
