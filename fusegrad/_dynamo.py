"""``torch._dynamo``'s public corner: the same functions as ``fusegrad.compiler``."""
from .compiler import disable, is_compiling, is_dynamo_compiling, mark_dynamic, mark_static, reset  # noqa: F401
