"""Process-wide switches PyTorch programs set: the default device of the factories
and deterministic algorithms (recorded and reported; fusegrad has no alternative
algorithms to choose between, so the flag changes nothing)."""
from __future__ import annotations

from typing import Any

from . import devices
from .devices import device

_SETTINGS = {"deterministic": False, "warn_only": False}


def set_default_device(dev: Any) -> None:
    """The device factories create tensors on when given none (None: the CPU); a CUDA
    device without CUDA raises PyTorch's not-compiled error."""
    devices.set_default(dev if dev is not None else "cpu")


def get_default_device() -> device:
    return devices.DEFAULT[-1]


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    _SETTINGS["deterministic"], _SETTINGS["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _SETTINGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _SETTINGS["warn_only"]
