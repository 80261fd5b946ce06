"""``torch._dynamo``'s public corner: the same functions as ``fusegrad.compiler``, its
``config`` (``recompile_limit`` is compile's limit of signatures per function), its errors
(``exc``) and ``explain``."""
from ..compiler import (allow_in_graph, assume_constant_result, disable, explain, graph_break,  # noqa: F401
                        is_compiling, is_dynamo_compiling, mark_dynamic, mark_static, reset)
from . import config, exc  # noqa: F401
