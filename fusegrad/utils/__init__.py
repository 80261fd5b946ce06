"""``fusegrad.utils``: activation checkpointing (``utils.checkpoint``), data loading
(``utils.data``) and timing (``utils.benchmark``)."""
from . import benchmark, checkpoint, data

__all__ = ["benchmark", "checkpoint", "data"]
