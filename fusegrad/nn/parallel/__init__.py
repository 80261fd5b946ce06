"""``fusegrad.nn.parallel``: ``DistributedDataParallel`` over ``fusegrad.distributed``, and
``DataParallel``."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
