"""``torch.autograd.graph``: hooks on the tensors autograd saves for backward."""
from __future__ import annotations

from typing import Callable

from ..runtime.nodes import Node
from ..runtime.saved_hooks import STATE

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node"]


class saved_tensors_hooks:
    """While active, each tensor saved for backward goes through ``pack_hook(tensor)`` when it is
    saved and ``unpack_hook(packed)`` when backward reads it; the innermost pair applies."""

    def __init__(self, pack_hook: Callable, unpack_hook: Callable):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if STATE.disabled:
            raise RuntimeError(STATE.disabled)
        STATE.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc) -> bool:
        STATE.stack.pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are moved to the CPU when saved and back to their device when unpacked
    (fusegrad's tensors live on the CPU: they are copied, as PyTorch copies CPU tensors)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack_to_cpu(tensor):
            packed = tensor.detach().clone()
            return tensor.device, packed

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:
    """Registering saved-tensor hooks inside this block raises RuntimeError with ``error_message``."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        self._prev = STATE.disabled
        STATE.disabled = self.error_message
        return self

    def __exit__(self, *exc) -> bool:
        STATE.disabled = self._prev
        return False
