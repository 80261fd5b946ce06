"""``torch._dynamo``'s public corner: the same functions as ``fusegrad.compiler``, its
``config`` (``recompile_limit`` is compile's limit of signatures per function), its errors
(``exc``) and ``explain``."""
from ..compiler import (allow_in_graph, assume_constant_result, disable, dont_skip_tracing, explain,  # noqa: F401
                        forbid_in_graph, graph_break, is_compiling, is_dynamo_compiling, mark_dynamic,
                        mark_static, mark_static_address, maybe_mark_dynamic, nonstrict_trace, reset,
                        substitute_in_graph)
from . import config, exc, testing  # noqa: F401
