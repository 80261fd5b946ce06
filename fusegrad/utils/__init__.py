"""``fusegrad.utils``: activation checkpointing (``utils.checkpoint``)."""
from . import checkpoint

__all__ = ["checkpoint"]
