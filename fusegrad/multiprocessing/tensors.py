"""``Tensor.share_memory_``, ``Tensor.is_shared`` and ``Module.share_memory``: moving CPU
tensor data into shared memory (``segments``), where processes that receive the tensor
(``reductions``) or are forked afterwards update the same values."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Var
from ..runtime.tensor import Tensor
from . import segments


def _host_array(t: Tensor, what: str):
    """``t``'s NumPy array (concrete, a graph break while tracing), or None for a tensor on
    a device (whose memory other processes reach through the device, not this module)."""
    d = t._data
    if type(d) is not np.ndarray and type(d) is not Var:
        return None
    return t._concrete(what)


def share_memory_(self: Tensor) -> Tensor:
    """Move this tensor's data into shared memory, keeping its values; a no-op if it is
    already there, or for a CUDA tensor. Returns ``self``.

    The whole buffer the data views moves (as PyTorch moves the whole storage), and the
    tensor's ``_base`` (the tensor it is a view or ``.data`` alias of) is repointed there too;
    ``.data``, ``.detach()`` and views made afterwards share the memory. Other views made
    before keep the old, private memory: unlike PyTorch, an update through them is not seen
    here, so share a tensor before taking views of it. ``.grad`` is not moved
    (``Module.share_memory`` moves it)."""
    a = _host_array(self, "Tensor.share_memory_()")
    if a is None or segments.locate(a) is not None:
        return self
    self._data, moved = segments.relocate(a)
    base = self._base
    if base is not None and (b := moved(base._data)) is not None:
        base._data = b
    return self


def is_shared(self: Tensor) -> bool:
    """Whether this tensor's data is in shared memory (always, for a CUDA tensor)."""
    a = _host_array(self, "Tensor.is_shared()")
    return a is None or segments.locate(a) is not None


def module_share_memory(self):
    """``Module.share_memory()``: move every parameter, buffer and parameter gradient of
    this module and its submodules into shared memory, in place. Returns the module."""
    return self._apply(share_memory_)
