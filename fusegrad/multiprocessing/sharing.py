"""The sharing-strategy setting of ``torch.multiprocessing``.

Both of PyTorch's strategies are accepted; both send a segment's descriptor (the
'file_descriptor' way), which leaves no named file behind to clean up."""
from __future__ import annotations

from typing import Set

_ALL = frozenset({"file_descriptor", "file_system"})


class _Setting:
    """The strategy in force in this process (one slot, not a mutable global)."""
    strategy = "file_descriptor"


def get_all_sharing_strategies() -> Set[str]:
    """The sharing strategies this platform supports."""
    return set(_ALL)


def get_sharing_strategy() -> str:
    """The strategy in force for sharing CPU tensors."""
    return _Setting.strategy


def set_sharing_strategy(new_strategy: str) -> None:
    """Set the strategy for sharing CPU tensors (one of ``get_all_sharing_strategies()``)."""
    if new_strategy not in _ALL:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}")
    _Setting.strategy = new_strategy
