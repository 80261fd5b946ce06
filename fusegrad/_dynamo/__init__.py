"""``torch._dynamo``'s public corner: the same functions as ``fusegrad.compiler``, and its
``config`` (``recompile_limit`` is compile's limit of signatures per function)."""
from ..compiler import disable, is_compiling, is_dynamo_compiling, mark_dynamic, mark_static, reset  # noqa: F401
from . import config  # noqa: F401
