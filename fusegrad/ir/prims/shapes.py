"""Shape arithmetic shared by the primitives' rules."""
from __future__ import annotations

import numpy as np


def shape_of(v) -> tuple:
    """The shape of a tensor, a Var or an array; () for a Python scalar."""
    d = getattr(v, "_data", None)  # a Tensor's payload already holds a plain tuple
    if d is not None:
        return d.shape
    return tuple(v.shape) if hasattr(v, "shape") else ()


def broadcast_shapes(*shapes) -> tuple:
    """NumPy broadcasting; raises ValueError naming the mismatched sizes."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-nd, 0):
        size = 1
        for s in shapes:
            if len(s) >= -i:
                d = s[i]
                if d != 1:
                    if size != 1 and d != size:
                        raise ValueError(f"the size {size} does not match the size {d} at dimension {nd + i}")
                    size = d
        out.append(size)
    return tuple(out)


def normalize_axes(axes, ndim: int) -> tuple:
    """Axes as a sorted tuple of non-negative ints; None means all."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    out = []
    for a in axes:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {a})")
        a = a % ndim if ndim else 0
        if a in out:  # (PyTorch's dim list holds each dim once)
            raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
        out.append(a)
    return tuple(sorted(out))


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)
