"""``nn.utils.stateless``: PyTorch's older home of ``functional_call`` (now ``torch.func``)."""
from __future__ import annotations

from ...func import functional_call

__all__ = ["functional_call"]
