"""Process-wide switches PyTorch programs set: the default device (only the CPU exists)
and deterministic algorithms (recorded and reported; fusegrad has no alternative
algorithms to choose between, so the flag changes nothing)."""
from __future__ import annotations

from typing import Any

from ..cuda import check_device
from .tensor import CPU, device

_SETTINGS = {"deterministic": False, "warn_only": False}


def set_default_device(dev: Any) -> None:
    """Accept the CPU (or None); a CUDA device raises PyTorch's not-compiled error."""
    check_device(dev)


def get_default_device() -> device:
    return CPU


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    _SETTINGS["deterministic"], _SETTINGS["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _SETTINGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _SETTINGS["warn_only"]
