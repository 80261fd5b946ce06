"""``torch._dynamo``'s public corner: the same functions as ``fusegrad.compiler``, and its
``config`` (``recompile_limit`` is compile's limit of signatures per function)."""
from ..compiler import (allow_in_graph, assume_constant_result, disable, graph_break, is_compiling,  # noqa: F401
                        is_dynamo_compiling, mark_dynamic, mark_static, reset)
from . import config  # noqa: F401
