"""fusegrad.amp: automatic mixed precision (``autocast`` regions and ``GradScaler``)."""
from .autocast_mode import (autocast, custom_bwd, custom_fwd, get_autocast_cpu_dtype, get_autocast_dtype,
                            is_autocast_available, is_autocast_cpu_enabled, is_autocast_enabled)
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype", "get_autocast_cpu_dtype",
           "is_autocast_cpu_enabled", "is_autocast_available", "custom_fwd", "custom_bwd"]
