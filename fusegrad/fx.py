"""``torch.fx``'s names that a ``compile`` backend people write meets: the ``GraphModule``
it is handed (``fusegrad.runtime.graph_module``)."""
from .runtime.graph_module import FxGraph as Graph, GraphModule, Node  # noqa: F401

__all__ = ["Graph", "GraphModule", "Node"]
