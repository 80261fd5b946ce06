"""``fusegrad.accelerator``: PyTorch's device-agnostic accelerator queries; there is no
accelerator (only the CPU)."""
from __future__ import annotations

from typing import Any, Optional


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def current_accelerator(check_available: bool = False) -> Optional[Any]:
    return None


def _none() -> None:
    raise RuntimeError("Cannot access accelerator device when none is available.")


def current_device_index() -> int:
    _none()


def set_device_index(device: Any) -> None:
    _none()


def synchronize(device: Any = None) -> None:
    _none()
