"""The IR: dtypes, primitives and their rules, the graph, printer and verifier."""
from . import prims  # noqa: F401  (registers every primitive)
from .graph import Eqn, Graph, Var
from .primitive import PRIMS, Primitive

__all__ = ["Eqn", "Graph", "Var", "PRIMS", "Primitive"]
