"""Autocast's per-thread state and the op policies that read it.

PyTorch's CPU autocast casts the operands of a short list of ops (matmul, linear, conv, ...)
to the low dtype, those of another list (losses, ``prod``, ``cdist``, ``trace``) to
float32, and those of a third (``index_copy``) to the widest among them; every other op runs
on what it is given, promoting as usual. Two decorators
below mark the ops of each list, a third ops on neither that are built from ops on one.
Inside a marked op autocast is off, as PyTorch excludes its autocast dispatch key there, so
an op built from others is cast once, at its boundary.
Only float16, bfloat16 and float32 operands are cast; float64 and integer ones never are."""
from __future__ import annotations

import functools
import threading
from typing import Callable, Optional

import numpy as np

_ELIGIBLE = (np.dtype(np.float32), np.dtype(np.float16))


class _State(threading.local):
    def __init__(self):
        self.dtype: Optional[np.dtype] = None  # the low dtype while CPU autocast is on, else None
        self.cache_enabled = True  # (reported only: fusegrad keeps no cache of casts)


STATE = _State()


def key():
    """What compiled code's signature includes: the active low dtype (None when off)."""
    return STATE.dtype


def _eligible(dt: np.dtype) -> bool:
    return dt in _ELIGIBLE or dt.name == "bfloat16"


def _cast_args(args: tuple, kwargs: dict, target: np.dtype):
    from .ops import to
    from .tensor import Tensor

    def cast(a):
        if isinstance(a, Tensor):
            dt = a._data.dtype
            return to(a, target) if dt != target and _eligible(dt) else a
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            return type(a)(cast(x) for x in a)
        return a
    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def in_low_precision(*tensors) -> tuple:
    """``tensors`` cast to the active low dtype, as an op on the low-precision list casts its
    operands (unchanged while autocast is off), for ops that cast inside their body."""
    low = STATE.dtype
    return tensors if low is None else _cast_args(tensors, {}, low)[0]


def _policy(target_of: Callable[[np.dtype], np.dtype]) -> Callable:
    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            low = STATE.dtype
            if low is None:
                return fn(*args, **kwargs)
            target = target_of(low)
            if target is not None:
                args, kwargs = _cast_args(args, kwargs, target)
            STATE.dtype = None
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.dtype = low
        return wrapper
    return deco


_F32 = np.dtype(np.float32)

#: ops that run in autocast's low dtype (PyTorch's CPU ``lower_precision_fp`` list)
lower_precision = _policy(lambda low: low)
#: ops that run in float32 under autocast (PyTorch's CPU ``fp32`` list: losses, prod, ...)
float32_policy = _policy(lambda low: _F32)
#: ops on neither list that are built from ops on one: they run on the dtypes given
autocast_off = _policy(lambda low: None)


def promote(fn: Callable) -> Callable:
    """An op of PyTorch's CPU ``promote`` list (``index_copy``): under autocast its floating
    operands are cast to the widest of their dtypes."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if STATE.dtype is None:
            return fn(*args, **kwargs)
        from .tensor import Tensor
        dts = {a._data.dtype for a in (*args, *kwargs.values()) if isinstance(a, Tensor) and _eligible(a._data.dtype)}
        if len(dts) > 1:
            args, kwargs = _cast_args(args, kwargs, _F32)
        return fn(*args, **kwargs)
    return wrapper
