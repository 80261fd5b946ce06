"""``torch.cuda.amp``'s deprecated spellings. Without a GPU both disable themselves with
PyTorch's warnings: a CUDA autocast region casts nothing (fusegrad's tensors are CPU
tensors), and a CUDA GradScaler passes losses and steps through unscaled."""
from __future__ import annotations

import warnings

from ..amp.grad_scaler import deprecated_scaler
from ..amp import autocast as _autocast
from ..amp import custom_bwd as _custom_bwd
from ..amp import custom_fwd as _custom_fwd
from ..ir import dtypes as D

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(_autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype: D.dtype = D.float16, cache_enabled: bool = True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        if enabled:
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=False, cache_enabled=cache_enabled)


GradScaler = deprecated_scaler("cuda")


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.cuda.amp.custom_fwd``: ``fusegrad.amp.custom_fwd(device_type="cuda")``."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``torch.cuda.amp.custom_bwd``: ``fusegrad.amp.custom_bwd(device_type="cuda")``."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _custom_bwd(bwd, device_type="cuda")
