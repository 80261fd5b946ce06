"""Pickling tensors between processes through shared memory, as ``torch.multiprocessing``.

Reducers registered with ``multiprocessing.reduction.ForkingPickler`` (what ``Queue``,
``Pipe``, ``Pool`` and a spawned ``Process``'s arguments pickle with) send a CPU tensor as
its shared-memory segment's descriptor plus its place there; a tensor not in shared memory
is moved there first (in place, as PyTorch does), so sender and receiver update the same
values. ``multiprocessing.reduction.DupFd`` carries the descriptor: to a child being
spawned directly, to any other process through the sender's resource sharer."""
from __future__ import annotations

import pickle
from multiprocessing import reduction

import numpy as np

from ..nn.parameter import Parameter
from ..runtime.tensor import Tensor, wrap
from . import segments
from .tensors import share_memory_


def _reduce_tensor(t: Tensor):
    if t._rg and t._grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    if type(t._data) is not np.ndarray:  # a CUDA or traced tensor: sent by value
        return t.__reduce_ex__(pickle.DEFAULT_PROTOCOL)
    share_memory_(t)
    a = t._data
    seg, offset = segments.locate(a)
    return (_rebuild_tensor, (type(t), reduction.DupFd(seg.fd), len(seg), offset, a.shape, a.dtype, a.strides,
                              a.flags.writeable, t._rg))


def _rebuild_tensor(cls, handle, nbytes: int, offset: int, shape: tuple, dtype: np.dtype, strides: tuple,
                    writeable: bool, requires_grad: bool) -> Tensor:
    flat = segments.attach(handle.detach(), nbytes)
    t = wrap(segments.view_in(flat, offset, shape, dtype, strides, writeable), cls)
    t._rg = requires_grad
    return t


def init_reductions() -> None:
    """Register the tensor reducers with ``ForkingPickler`` (by exact type, as it looks them up)."""
    for cls in (Tensor, Parameter):
        reduction.ForkingPickler.register(cls, _reduce_tensor)
