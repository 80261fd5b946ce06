"""``torch.autograd.forward_ad``: forward-mode AD with dual tensors.

Inside ``with dual_level():``, ``make_dual(primal, tangent)`` gives a tensor whose every op
also computes its tangent, by the primitives' JVP rules; ``unpack_dual(t)`` returns
``(primal, tangent)``. Leaving the level drops every tangent. One level at a time, as PyTorch."""
from __future__ import annotations

from collections import namedtuple
from typing import Optional

from ..runtime.forward_state import STATE, get_tangent, set_tangent
from ..runtime.tensor import Tensor

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


def enter_dual_level() -> int:
    """Open a new dual level and return its index."""
    if STATE.level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    STATE.level = 0
    return 0


def exit_dual_level(*, level: Optional[int] = None) -> None:
    """Close the current dual level; the tangents of its dual tensors are dropped."""
    if level is None:
        level = STATE.level
    if level != STATE.level or level is None:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    STATE.level = None
    STATE.tangents.clear()


def _current_level(level: Optional[int]) -> int:
    if level is None:
        level = STATE.level
    if level is None:
        raise RuntimeError("make_dual can only be used inside a dual_level context: use "
                           "`with fwAD.dual_level():` (import torch.autograd.forward_ad as fwAD)")
    return level


def make_dual(tensor: Tensor, tangent: Tensor, *, level: Optional[int] = None) -> Tensor:
    """A view of ``tensor`` carrying ``tangent`` as its forward gradient."""
    _current_level(level)
    if not (tensor.dtype.is_floating_point and tangent.dtype.is_floating_point):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}"
                         if not tensor.dtype.is_floating_point else
                         f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    STATE.busy = True  # the view itself carries no tangent from the primal
    try:
        dual = tensor.view_as(tensor)
    finally:
        STATE.busy = False
    set_tangent(dual, tangent if tangent.dtype == tensor.dtype else tangent.to(tensor.dtype))
    return dual


def unpack_dual(tensor: Tensor, *, level: Optional[int] = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``; the tangent is None outside a level or without one."""
    if STATE.level is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    tangent = get_tangent(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    STATE.busy = True
    try:
        primal = tensor.view_as(tensor)
    finally:
        STATE.busy = False
    return UnpackedDualTensor(primal, tangent)


class dual_level:
    """``with dual_level():`` opens a dual level for its block (also a decorator)."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> bool:
        exit_dual_level()
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper
