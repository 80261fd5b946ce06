"""``torch._inductor``: only its ``config``, which programs tune before compiling."""
from . import config  # noqa: F401
