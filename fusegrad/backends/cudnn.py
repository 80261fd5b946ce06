"""``torch.backends.cudnn`` without cuDNN: the flags programs set (``benchmark``,
``deterministic``, ``enabled``, ``allow_tf32``) are kept and have no effect."""
from __future__ import annotations

from typing import Optional

benchmark = False
deterministic = False
enabled = True
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> Optional[int]:
    return None
