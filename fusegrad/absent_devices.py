"""Device families PyTorch has and fusegrad never runs on (Intel XPU, Apple MPS): their
availability queries, as the modules ``fusegrad.xpu`` and ``fusegrad.mps`` (programs that
pick a device ask ``torch.xpu.is_available()``)."""
from __future__ import annotations

import sys
import types


def _absent(name: str, what: str) -> types.ModuleType:
    m = types.ModuleType(f"fusegrad.{name}", f"``fusegrad.{name}``: no {what} devices here.")
    m.is_available = lambda: False
    m.device_count = lambda: 0
    sys.modules[m.__name__] = m
    return m


xpu = _absent("xpu", "Intel XPU")
mps = _absent("mps", "Apple Metal")
