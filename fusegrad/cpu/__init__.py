"""``fusegrad.cpu``: PyTorch's ``torch.cpu`` device module. The CPU is always there, one
device; its streams are synchronous, so ``synchronize`` has nothing to wait for. ``amp``
holds the deprecated ``torch.cpu.amp.autocast`` and ``GradScaler`` spellings."""
from __future__ import annotations

from . import amp

__all__ = ["amp", "current_device", "device_count", "is_available", "is_initialized", "synchronize"]


def is_available() -> bool:
    """Always True."""
    return True


def is_initialized() -> bool:
    """Always True: the CPU needs no initialization."""
    return True


def device_count() -> int:
    """1: the CPU is one device."""
    return 1


def current_device() -> str:
    """``"cpu"``, as PyTorch's."""
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU work runs synchronously."""
