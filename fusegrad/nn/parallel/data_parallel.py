"""``nn.DataParallel``: PyTorch's single-process wrapper that splits a batch over GPUs. Here
it runs the module itself on the whole batch (what PyTorch does without GPUs, or with one);
for several processes or devices use ``DistributedDataParallel``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..module import Module


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: calls ``module``;
    its state dict's keys carry the ``module.`` prefix, as PyTorch's."""

    def __init__(self, module: Module, device_ids: Optional[Sequence[Any]] = None,
                 output_device: Optional[Any] = None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)
