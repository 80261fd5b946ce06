"""``torch.backends.cuda``: the flags programs set at start-up (nanoGPT sets
``matmul.allow_tf32``) are kept and have no effect; scaled-dot-product attention has one
implementation here, used while the math or the flash switch is on (PyTorch's CPU kernels;
with both off it raises as PyTorch does)."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

# PyTorch's defaults: TF32 off for matmuls; reduced-precision reductions allowed
matmul = SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                         allow_bf16_reduced_precision_reduction=True)
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """Whether fusegrad was built with CUDA (its device kernels come from numba-cuda)."""
    from .. import cuda
    return cuda.is_available()


def _switch(name: str):
    def enable(enabled: bool) -> None:
        _SDP[name] = bool(enabled)

    def enabled() -> bool:
        return _SDP[name]
    return enable, enabled


enable_flash_sdp, flash_sdp_enabled = _switch("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _switch("mem_efficient")
enable_math_sdp, math_sdp_enabled = _switch("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _switch("cudnn")


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True):
    """The attention implementations allowed inside the block (all run the one here)."""
    before = dict(_SDP)
    _SDP.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient, cudnn=enable_cudnn)
    try:
        yield
    finally:
        _SDP.update(before)
