"""``fusegrad.multiprocessing``: Python's ``multiprocessing`` whose pickler sends CPU tensors
through shared memory, as ``torch.multiprocessing``.

``model.share_memory()`` before starting processes (forked or spawned) and a tensor put in a
``Queue`` give every process the same memory: in-place updates (an optimizer's step) in one
are seen by all. ``spawn(fn, args, nprocs)`` runs ``fn(i, *args)`` in ``nprocs`` processes."""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403  (Process, Queue, Pool, get_context, ...)

from ..nn.module import Module
from ..runtime.tensor import Tensor
from .reductions import init_reductions
from .sharing import get_all_sharing_strategies, get_sharing_strategy, set_sharing_strategy
from .spawn import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,
                    SpawnContext, spawn, start_processes)
from .tensors import is_shared, module_share_memory, share_memory_

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies", "spawn",
           "start_processes", "SpawnContext", "ProcessContext", "ProcessException", "ProcessRaisedException",
           "ProcessExitedException"] + multiprocessing.__all__

init_reductions()
# the methods, until Tensor and Module define them themselves
Tensor.share_memory_ = share_memory_
Tensor.is_shared = is_shared
Module.share_memory = module_share_memory
