"""``nn.Buffer``: a tensor marked to be registered as a module buffer when assigned to a
Module attribute (``persistent``: whether ``state_dict`` holds it)."""
from __future__ import annotations

from typing import Optional

from ..runtime.tensor import Tensor
from .parameter import alias_as


class Buffer(Tensor):
    """A Tensor that a Module registers as a buffer on assignment. Shares memory with ``data``
    (detached, keeping its ``requires_grad``), as PyTorch's; unlike PyTorch's, whose instances
    are plain Tensors tagged as buffers, its type is ``Buffer`` (fusegrad's Tensor takes no tags)."""
    __slots__ = ("persistent",)

    def __new__(cls, data: Optional[Tensor] = None, *, persistent: bool = True) -> "Buffer":
        b = alias_as(cls, data)
        if data is not None:
            b.requires_grad_(data.requires_grad)
        b.persistent = persistent
        return b

    def __init__(self, data: Optional[Tensor] = None, *, persistent: bool = True):
        # Tensor.__init__ would rebuild the payload that __new__ already set
        pass
