"""Saved-tensor hooks (``autograd.graph.saved_tensors_hooks``): while a pair is active, each
tensor an autograd node saves for its backward is passed to ``pack_hook`` when the node is
recorded, and what that returned to ``unpack_hook`` when the backward needs the tensor."""
from __future__ import annotations

import threading


class _State(threading.local):
    def __init__(self):
        self.stack: list = []  # (pack_hook, unpack_hook), innermost last
        self.disabled = None  # disable_saved_tensors_hooks's message while it is active


STATE = _State()


class Packed:
    """A saved tensor as its pack hook returned it, with the unpack hook to get it back."""
    __slots__ = ("value", "unpack_hook")

    def __init__(self, value, unpack_hook):
        self.value = value
        self.unpack_hook = unpack_hook

    def unpack(self):
        from .tensor import Tensor
        t = self.unpack_hook(self.value)
        if not isinstance(t, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(t).__name__}")
        return t


class PackedArgs(tuple):
    """A node's operands where some are ``Packed`` (a plain tuple means none is)."""
    __slots__ = ()

    def unpacked(self) -> tuple:
        return tuple(unpack(a) for a in self)


def pack(t):
    """``t`` packed by the innermost active hooks (``t`` itself when none are active)."""
    if not STATE.stack:
        return t
    stack = STATE.stack
    pack_hook, unpack_hook = stack[-1]
    STATE.stack = []  # what the hook itself computes is not packed (as PyTorch: no recursion)
    try:
        return Packed(pack_hook(t), unpack_hook)
    finally:
        STATE.stack = stack


def unpack(x):
    return x.unpack() if type(x) is Packed else x
