"""``torch.autograd.graph``: hooks on the tensors autograd saves for backward."""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from ..runtime.nodes import Node
from ..runtime.saved_hooks import STATE
from ..runtime.tensor import Tensor

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "Node", "register_multi_grad_hook"]


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


class _Handles:
    """Removes every tensor hook of one ``register_multi_grad_hook``."""

    def __init__(self, handles: list):
        self._handles = handles

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


def register_multi_grad_hook(tensors, fn: Callable, *, mode: str = "all"):
    """``fn`` runs once per backward over ``tensors``: with mode "all", after the gradients of
    all of them that this backward computes, as ``fn(grads)`` (None for the others); with
    mode "any", ``fn(grad)`` with the first gradient computed. Returns a handle whose
    ``remove()`` unregisters it."""
    from ..runtime.dispatch import _edge
    from ..runtime.engine import RUNNING, will_run
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    state = {"graph": None}

    def hook_of(i: int) -> Callable:
        def hook(grad):
            graph = RUNNING.graph
            if state["graph"] is not graph:  # the first of this backward's gradients
                state["graph"] = graph
                state["grads"] = [None] * len(tensors)
                state["left"] = 1 if mode == "any" else \
                    sum(1 for t in tensors if t.requires_grad and will_run(graph, _edge(t)[0]))
            if state["left"] <= 0:
                return None
            state["grads"][i] = grad
            state["left"] -= 1
            if state["left"] == 0:
                fn(grad) if mode == "any" else fn(tuple(state["grads"]))
            return None
        return hook
    return _Handles([t.register_hook(hook_of(i)) for i, t in enumerate(tensors) if t.requires_grad])


# ---------------------------------------------------------------- gradient edges and version counters

class GradientEdge(NamedTuple):
    """An edge of the autograd graph: the node a tensor's gradient flows into and which of its
    inputs it is (``fusegrad.autograd.grad`` does not take one in place of a tensor)."""
    node: Node
    output_nr: int
    ownership_token: Optional[Node] = None


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge of ``tensor``: its ``grad_fn`` and output number, or its gradient accumulator for a leaf."""
    from ..runtime.dispatch import _edge
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    return GradientEdge(*_edge(tensor))


def increment_version(tensor) -> None:
    """Bump the version counter of ``tensor`` (or of each of an iterable of tensors), as an
    in-place write does, so that a saved copy of it is detected as modified in backward."""
    for t in ((tensor,) if isinstance(tensor, Tensor) else tensor):
        t._bump()


__all__ += ["GradientEdge", "get_gradient_edge", "increment_version"]
