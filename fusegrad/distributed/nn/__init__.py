"""``fusegrad.distributed.nn``: collectives that autograd differentiates (PyTorch's
``torch.distributed.nn``)."""
from .functional import all_reduce

__all__ = ["all_reduce"]
