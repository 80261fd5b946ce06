"""Graph-to-graph passes: simplification, folding, CSE, DCE (``optimize`` runs them all)
and the autodiff transforms (``vjp_graph``, ``jvp_graph``, ``partition``)."""
from .cse import cse
from .dce import dce
from .fold import fold
from .pipeline import optimize
from .simplify import simplify

__all__ = ["cse", "dce", "fold", "optimize", "simplify"]
