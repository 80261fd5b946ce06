"""``fusegrad.utils``: activation checkpointing (``utils.checkpoint``), data loading
(``utils.data``), timing (``utils.benchmark``) and pytrees (``utils._pytree``)."""
from . import benchmark, checkpoint, data

__all__ = ["benchmark", "checkpoint", "data"]
