"""``fusegrad.nn.parallel``: ``DistributedDataParallel`` over ``fusegrad.distributed``."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
