"""``torch._dynamo.testing``'s counting backends, for tests of how often a function compiles."""
from __future__ import annotations

from typing import Callable

__all__ = ["CompileCounter"]


class CompileCounter:
    """A ``compile`` backend that counts the graphs it is handed (``frame_count``) and their
    operations (``op_count``), and runs each op by op."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm, example_inputs) -> Callable:
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0
