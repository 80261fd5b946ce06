"""``torch.cpu.amp``'s deprecated spellings of ``fusegrad.amp.autocast("cpu")`` and
``GradScaler("cpu")``, still found in CPU training scripts."""
from __future__ import annotations

import warnings

from ..amp.grad_scaler import deprecated_scaler
from ..amp import autocast as _autocast
from ..ir import dtypes as D

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast):
    """``torch.cpu.amp.autocast(enabled=True, dtype=torch.bfloat16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype: D.dtype = D.bfloat16, cache_enabled: bool = True):
        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


GradScaler = deprecated_scaler("cpu")
