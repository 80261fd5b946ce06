"""PyTorch's control-flow operators ``torch.cond`` and ``torch.while_loop``. Eagerly (and
under ``compile``, where reading the predicate is a value the trace guards on or breaks
at) they are the Python ``if`` and ``while`` they stand for."""
from __future__ import annotations

from typing import Callable, Sequence

from .exports import op
from .tensor import Tensor


def _truth(pred, what: str) -> bool:
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected {what} to be bool or single-element tensor, but got {pred}.")
        return bool(pred.item())
    if not isinstance(pred, (bool, int, float)):
        raise RuntimeError(f"Expected {what} to be bool or single-element tensor, but got {pred!r}.")
    return bool(pred)


@op(method=False)
def cond(pred, true_fn: Callable, false_fn: Callable, operands: Sequence = ()):
    """``true_fn(*operands)`` if ``pred`` (a bool or a one-element tensor) holds, else ``false_fn(*operands)``."""
    return (true_fn if _truth(pred, "pred") else false_fn)(*operands)


@op(method=False)
def while_loop(cond_fn: Callable, body_fn: Callable, carried_inputs: Sequence) -> tuple:
    """``carried = body_fn(*carried)`` while ``cond_fn(*carried)`` holds; the final values, as a tuple."""
    carried = tuple(carried_inputs)
    while _truth(cond_fn(*carried), "cond_fn's result"):
        out = body_fn(*carried)
        carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return carried
