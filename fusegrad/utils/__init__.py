"""``fusegrad.utils``: activation checkpointing (``utils.checkpoint``) and data loading
(``utils.data``)."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
