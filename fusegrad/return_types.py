"""``torch.return_types``: the named tuples that ops return (``max``, ``sort``, ``topk``,
``linalg_svd``, ...), for ``isinstance`` checks and annotations; each is registered where
its op is defined (``runtime.ops._return_type``)."""
from __future__ import annotations

from .runtime.ops import RETURN_TYPES


def __getattr__(name: str) -> type:
    try:
        return RETURN_TYPES[name]
    except KeyError:
        raise AttributeError(f"module 'fusegrad.return_types' has no attribute '{name}'") from None


def __dir__() -> list:
    return sorted(RETURN_TYPES)
