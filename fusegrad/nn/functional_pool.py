"""Pooling and resizing as compositions of primitives.

Max and average pooling reduce the stacked window slices of the padded input (see
``functional_conv.window_slices``); max pooling picks its window element with argmax and a
gather, so the gradient goes to one element (the first maximum) as in PyTorch. Adaptive
pooling and resizing select input rows and columns with constant index or weight tables:
linear ones (adaptive average, bilinear) are matrix products with a constant matrix per dim."""
from __future__ import annotations

import math
import warnings
from typing import Optional, Sequence, Union

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from ..runtime import ops as O
from ..runtime.autocast_state import autocast_off, float32_policy
from ..runtime.composite import one_node
from ..runtime.factory import full_like, rand
from ..runtime.grad_mode import STATE as GRAD
from ..runtime.factory import tensor as _tensor
from ..runtime.ops import named, own
from ..runtime.tensor import Tensor
from ..runtime.type_info import channels_last_order
from .functional_conv import ntuple, windows
from ..tracer.trace import user_stacklevel

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices", "embedding_bag", "interpolate", "upsample", "pixel_shuffle",
           "pixel_unshuffle"]

IntOrTuple = Union[int, Sequence[int]]


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size: the last window must start inside the input or the
    left padding."""
    span = size + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def _pool_args(input: Tensor, n: int, kernel_size, stride, padding, dilation, ceil_mode: bool, name: str):
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{name}: Expected {n + 1}D or {n + 2}D input tensor, but got {list(input.shape)}")
    ks = ntuple(kernel_size, n, "kernel_size")
    st = ks if stride is None or (isinstance(stride, (list, tuple)) and not stride) else ntuple(stride, n, "stride")
    pad, dil = ntuple(padding, n, "padding"), ntuple(dilation, n, "dilation")
    if any(k <= 0 for k in ks):
        raise RuntimeError(f"{name}: kernel_size must be greater than zero, but got {list(ks)}")
    if any(s <= 0 for s in st):
        raise RuntimeError(f"{name}: stride must be greater than zero, but got {list(st)}")
    if any(d <= 0 for d in dil):
        raise RuntimeError(f"{name}: dilation must be greater than zero, but got {list(dil)}")
    for p, k, d in zip(pad, ks, dil):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
    if any(p > k // 2 for p, k in zip(pad, ks)):  # (PyTorch's shape check, of the undilated kernel too)
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padW = {pad[-1]}, "
                           f"padH = {pad[-2 if n > 1 else -1]}, kW = {ks[-1]}, kH = {ks[-2 if n > 1 else -1]}")
    sp = tuple(input.shape[-n:])
    outs = tuple(_pool_out(s, k, t, p, d, ceil_mode) for s, k, t, p, d in zip(sp, ks, st, pad, dil))
    if any(o <= 0 for o in outs):
        raise RuntimeError(f"{name}: Given input size: ({'x'.join(map(str, input.shape[-n - 1:]))}). Calculated "
                           f"output size: ({'x'.join(map(str, input.shape[-n - 1:-n] + outs))}). Output size is "
                           "too small")
    # right padding so that the last (ceil_mode) window fits
    pads = [(p, max((o - 1) * t + d * (k - 1) + 1 - s - p, 0))
            for s, k, t, p, d, o in zip(sp, ks, st, pad, dil, outs)]
    return ks, st, pad, dil, outs, pads


def _padded(x: Tensor, pads: list, value: float) -> Tensor:
    if not any(lo or hi for lo, hi in pads):
        return x
    return P.pad(x, widths=((0, 0),) * (x.ndim - len(pads)) + tuple(pads), value=value)


def _max_pool(input: Tensor, n: int, kernel_size, stride, padding, dilation, ceil_mode: bool,
              return_indices: bool, name: str):
    ks, st, pad, dil, outs, pads = _pool_args(input, n, kernel_size, stride, padding, dilation, ceil_mode, name)
    x = _padded(input, pads, -math.inf if input.dtype.is_floating_point else np.iinfo(input._data.dtype).min)
    axis = input.ndim - n
    win = windows(x, axis, ks, st, dil, outs, k_first=False)
    win = P.reshape(win, shape=tuple(input.shape[:axis]) + outs + (math.prod(ks),))
    which = P.argmax(win, axis=input.ndim, keepdims=True)
    vals = P.reshape(P.gather(win, which, axis=input.ndim), shape=tuple(input.shape[:axis]) + outs)
    vals = own(named(vals, f"MaxPool{n}DWithIndicesBackward0"), input, order=_follows(input))
    if not return_indices:
        return vals
    return vals, _flat_indices(P.reshape(which, shape=vals._data.shape), ks, st, pad, dil, input.shape[-n:])


def _flat_indices(which: Tensor, ks: tuple, st: tuple, pad: tuple, dil: tuple, sp: tuple) -> Tensor:
    """Window offsets (argmax over the stacked kernel offsets) as flat indices into the
    input's spatial dims, as max pooling's ``return_indices`` gives them: the flat index is
    the window's start plus a displacement that depends on the offset alone."""
    outs = tuple(which.shape[-len(ks):])
    strides = [math.prod(sp[i + 1:]) for i in range(len(sp))]
    disp = np.zeros(ks, dtype=np.int64)
    start = np.zeros(outs, dtype=np.int64)
    for i in range(len(ks)):
        shape = [1] * len(ks)
        shape[i] = -1
        disp = disp + (np.arange(ks[i]) * dil[i] * strides[i]).reshape(shape)
        start = start + ((np.arange(outs[i]) * st[i] - pad[i]) * strides[i]).reshape(shape)
    return O.add(_tensor(disp.reshape(-1))[which], _tensor(start))


def max_pool1d(input: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Maximum over sliding windows of (N, C, L) or (C, L); with ``return_indices`` also
    the flat position of each maximum."""
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool1d")


def max_pool2d(input: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Maximum over sliding windows of (N, C, H, W) or (C, H, W); with ``return_indices``
    also the flat position (h * W + w) of each maximum."""
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d")


@float32_policy
def max_pool3d(input: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Maximum over sliding windows of (N, C, D, H, W) or (C, D, H, W); with
    ``return_indices`` also the flat position (d * H * W + h * W + w) of each maximum."""
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


def _avg_divisor(sp: tuple, ks: tuple, st: tuple, pad: tuple, outs: tuple, count_include_pad: bool) -> np.ndarray:
    """How many elements each window averages: PyTorch clips windows at the padded edge, and
    without ``count_include_pad`` at the input's edge."""
    div = np.ones((), dtype=np.float64)
    for s, k, t, p, o in zip(sp, ks, st, pad, outs):
        start = np.arange(o) * t - p
        end = np.minimum(start + k, s + p)
        size = end - start
        if not count_include_pad:
            size = np.minimum(end, s) - np.maximum(start, 0)
        div = np.multiply.outer(div, size.astype(np.float64))
    return div


def _avg_pool(input: Tensor, n: int, kernel_size, stride, padding, ceil_mode: bool, count_include_pad: bool,
              divisor_override: Optional[int], name: str) -> Tensor:
    ks, st, pad, dil, outs, pads = _pool_args(input, n, kernel_size, stride, padding, 1, ceil_mode, name)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    integral = input.dtype == D.int64  # (PyTorch's kernel: the int64 sum divided, truncated)
    if not input.dtype.is_floating_point and not integral:
        from ..runtime.keywords import _type_name
        raise NotImplementedError(f'"{name}" not implemented for \'{_type_name(input.dtype)}\'')
    axis = input.ndim - n
    mode = "trunc" if integral else None

    def mean(x):  # (a float16 or bfloat16 x in float32, rounded once: one_node, as PyTorch's kernel)
        win = windows(_padded(x, pads, 0.0), axis, ks, st, dil, outs, k_first=False)
        total = P.reshape(P.reduce_sum(win, axes=(axis + 1,), keepdims=False), shape=tuple(x.shape[:axis]) + outs)
        if divisor_override is not None:
            return O.div(total, int(divisor_override) if integral else float(divisor_override), rounding_mode=mode)
        div = _avg_divisor(tuple(x.shape[-n:]), ks, st, pad, outs, count_include_pad)
        return O.div(total, _tensor(div.astype(x._data.dtype)), rounding_mode=mode)
    return own(one_node(f"AvgPool{n}DBackward0", mean, input), input, order=_follows(input))


def avg_pool1d(input: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Mean over sliding windows of (N, C, L) or (C, L)."""
    return _avg_pool(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None, "avg_pool1d")


def avg_pool2d(input: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Optional[int] = None) -> Tensor:
    """Mean over sliding windows of (N, C, H, W) or (C, H, W)."""
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool2d")


@float32_policy
def avg_pool3d(input: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Optional[int] = None) -> Tensor:
    """Mean over sliding windows of (N, C, D, H, W) or (C, D, H, W)."""
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                     "avg_pool3d")


# ---------------------------------------------------------------- power-average pooling
def _lp_pool(input: Tensor, n: int, norm_type: float, kernel_size, stride, ceil_mode: bool) -> Tensor:
    """PyTorch's ``lp_pool``: ``(sum over the window of x^p)^(1/p)``, computed as the
    window mean times the window size; ``p = +-inf`` is max pooling of ``|x|`` (of ``-|x|``,
    negated)."""
    from .functional import relu
    max_pool, avg_pool = {1: (max_pool1d, avg_pool1d), 2: (max_pool2d, avg_pool2d),
                          3: (max_pool3d, avg_pool3d)}[n]
    if isinstance(norm_type, (int, float)):
        if norm_type == math.inf:
            return max_pool(O.abs(input), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -math.inf:
            return O.neg(max_pool(O.neg(O.abs(input)), kernel_size, stride, 0, 1, ceil_mode))
    ks = ntuple(kernel_size, n, "kernel_size")
    out = avg_pool(O.pow(input, norm_type), kernel_size, stride, 0, ceil_mode)
    out = O.mul(O.mul(O.sign(out), relu(O.abs(out))), math.prod(ks))
    return O.pow(out, 1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: Union[int, float], kernel_size: int, stride: Optional[IntOrTuple] = None,
              ceil_mode: bool = False) -> Tensor:
    """Power-average pooling of (N, C, L) or (C, L): ``(sum of x^p over the window)^(1/p)``."""
    return _lp_pool(input, 1, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: Union[int, float], kernel_size: IntOrTuple,
              stride: Optional[IntOrTuple] = None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling of (N, C, H, W) or (C, H, W)."""
    return _lp_pool(input, 2, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: Union[int, float], kernel_size: IntOrTuple,
              stride: Optional[IntOrTuple] = None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling of (N, C, D, H, W) or (C, D, H, W)."""
    return _lp_pool(input, 3, norm_type, kernel_size, stride, ceil_mode)


# ---------------------------------------------------------------- max unpooling
def _unpool_output_size(input: Tensor, kernel_size: tuple, stride: tuple, padding: tuple, output_size) -> list:
    """PyTorch's unpooled spatial sizes: the default, or ``output_size`` (with or without
    N, C) checked to lie within a stride of it."""
    n = len(kernel_size)
    default = [(input.shape[input.ndim - n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        ret = default
    else:
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                             f"length of '{len(output_size)}'")
        for d in range(n):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < output_size[d] < hi:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
        ret = output_size
    for d in range(n):
        if ret[d] < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={ret[d]}")
    return [int(v) for v in ret]


def _max_unpool(input: Tensor, indices: Tensor, n: int, kernel_size, stride, padding, output_size) -> Tensor:
    from .functional import _concrete
    ks = ntuple(kernel_size, n, "kernel_size")
    st = ks if stride is None else ntuple(stride, n, "stride")
    pad = ntuple(padding, n, "padding")
    nd = max(n, 2)  # PyTorch unpools 1-d as 2-d
    if input.ndim not in (nd + 1, nd + 2) and n != 1:
        raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d Tensor, but got a tensor "
                           f"with {input.ndim} dimensions.")
    if n == 1 and input.ndim not in (2, 3):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with "
                           f"{input.ndim + 1} dimensions.")
    size = _unpool_output_size(input, ks, st, pad, output_size)
    if tuple(indices.shape) != tuple(input.shape):
        extra = [1] if n == 1 else []
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape) + extra}) but got indices tensor with shape: "
                           f"{list(indices.shape) + extra}")
    if indices.dtype != D.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype}")
    total = math.prod(size)
    if _concrete(indices) and indices.numel():
        lo, hi = int(O.amin(indices)), int(O.amax(indices))
        if lo < 0 or hi >= total:
            bad = lo if lo < 0 else hi
            dims = "x".join(map(str, size + [1] * (2 - n) if n == 1 else size))
            raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size {dims})")
    lead = tuple(input.shape[:input.ndim - n])
    rows = math.prod(lead)
    x = O.reshape(input, (rows, -1))
    idx = O.reshape(indices, (rows, -1))
    from ..runtime.factory import arange
    row = O.expand(O.unsqueeze(arange(rows), 1), tuple(idx.shape))
    zeros = P.full(shape=(rows, total), value=0.0, dtype=input._data.dtype)
    out = O.index_put(zeros, (row, idx), x)
    return own(named(O.reshape(out, lead + tuple(size)), f"MaxUnpool{nd}DBackward0"), input)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 padding: IntOrTuple = 0, output_size: Optional[Sequence[int]] = None) -> Tensor:
    """The partial inverse of ``max_pool1d``: ``input`` (N, C, L) placed at the flat
    positions ``indices`` of a zero (N, C, L_out)."""
    return _max_unpool(input, indices, 1, kernel_size, stride, padding, output_size)


@float32_policy
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 padding: IntOrTuple = 0, output_size: Optional[Sequence[int]] = None) -> Tensor:
    """The partial inverse of ``max_pool2d``: ``input`` (N, C, H, W) placed at the flat
    positions ``indices`` of a zero (N, C, H_out, W_out)."""
    return _max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


@float32_policy
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 padding: IntOrTuple = 0, output_size: Optional[Sequence[int]] = None) -> Tensor:
    """The partial inverse of ``max_pool3d``."""
    return _max_unpool(input, indices, 3, kernel_size, stride, padding, output_size)


# ---------------------------------------------------------------- adaptive pooling
def _adaptive_bounds(size: int, out: int) -> tuple:
    start = np.array([(i * size) // out for i in range(out)])
    end = np.array([-(-((i + 1) * size) // out) for i in range(out)])
    return start, end


def _adaptive_args(input: Tensor, output_size, n: int, name: str) -> tuple:
    if input.ndim not in (n + 1, n + 2) or any(s == 0 for s in input.shape[-n:]):
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor with non-zero spatial sizes, but got "
                           f"{list(input.shape)}")
    outs = output_size if isinstance(output_size, (list, tuple)) else (output_size,) * n
    if len(outs) != n:
        raise RuntimeError(f"{name}: output_size must be {n}")
    return tuple(s if o is None else int(o) for s, o in zip(input.shape[-n:], outs))


def _follows(input: Tensor):
    """The layout a pooled or resampled result has, as PyTorch's: ``input``'s channels-last
    order where it is laid out so, else None (C order)."""
    return channels_last_order(input._data)


def _along(x: Tensor, m: np.ndarray, axis: int) -> Tensor:
    """Contract dim ``axis`` of ``x`` with the constant matrix ``m`` (out, in): a pooling, in
    ``x``'s dtype whatever autocast says (the primitive, not autocast's matmul)."""
    x = O.movedim(x, axis, -1)
    x = P.matmul(x, _tensor(np.ascontiguousarray(m.T).astype(x._data.dtype)))
    return O.movedim(x, -1, axis)


def _adaptive_avg(input: Tensor, output_size, n: int, name: str) -> Tensor:
    outs = _adaptive_args(input, output_size, n, name)

    def mean(x):  # (a float16 or bfloat16 x in float32, rounded once: one_node, as PyTorch's kernel)
        for i, o in enumerate(outs):
            size = input.shape[input.ndim - n + i]
            start, end = _adaptive_bounds(size, o)
            m = np.zeros((o, size))
            for r, (a, b) in enumerate(zip(start, end)):
                m[r, a:b] = 1.0 / (b - a)
            x = _along(x, m, input.ndim - n + i)
        return x
    return own(one_node(f"AdaptiveAvgPool{n}DBackward0", mean, input), input, order=_follows(input))


def adaptive_avg_pool1d(input: Tensor, output_size: IntOrTuple) -> Tensor:
    """Average pooling to ``output_size`` positions: window i covers
    [floor(i L / o), ceil((i + 1) L / o))."""
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size: IntOrTuple) -> Tensor:
    """Average pooling of (N, C, H, W) or (C, H, W) to ``output_size`` (None keeps a dim)."""
    return _adaptive_avg(input, output_size, 2, "adaptive_avg_pool2d")


def _adaptive_max(input: Tensor, output_size, n: int, return_indices: bool, name: str):
    outs = _adaptive_args(input, output_size, n, name)
    sp = tuple(input.shape[-n:])
    x, tables = input, []
    for i, (s, o) in enumerate(zip(sp, outs)):
        start, end = _adaptive_bounds(s, o)
        k = int((end - start).max())
        # short windows repeat their first element: a duplicate never changes the maximum
        # and argmax keeps the first position
        tab = np.minimum(start[:, None] + np.arange(k)[None, :], end[:, None] - 1)
        tab = np.where(np.arange(k)[None, :] < (end - start)[:, None], tab, start[:, None])
        tables.append(tab)
        x = O.index_select(x, input.ndim - n + i, _tensor(tab.reshape(-1)))
    lead = tuple(input.shape[:input.ndim - n])
    shape = lead + tuple(a for o, t in zip(outs, tables) for a in (o, t.shape[1]))
    x = O.reshape(x, shape)
    nl = len(lead)
    perm = tuple(range(nl)) + tuple(nl + 2 * i for i in range(n)) + tuple(nl + 2 * i + 1 for i in range(n))
    x = O.reshape(O.permute(x, perm), lead + outs + (-1,))
    which = P.argmax(x, axis=x.ndim - 1, keepdims=True)
    vals = own(named(O.squeeze(P.gather(x, which, axis=x.ndim - 1), -1), f"AdaptiveMaxPool{n}DBackward0"), input,
               order=_follows(input))
    if not return_indices:
        return vals
    # flat index of each window offset, row-major over the per-dim tables
    table = np.zeros(outs + tuple(t.shape[1] for t in tables), dtype=np.int64)
    for i, tab in enumerate(tables):
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = tab.shape
        table = table + tab.reshape(shape) * math.prod(sp[i + 1:])
    table = O.expand(_tensor(table.reshape(outs + (-1,))), lead + outs + (-1,))
    flat = O.squeeze(O.gather(table, -1, which), -1)
    return vals, flat


def adaptive_max_pool1d(input: Tensor, output_size: IntOrTuple, return_indices: bool = False):
    """Max pooling of (N, C, L) or (C, L) to ``output_size`` positions."""
    return _adaptive_max(input, output_size, 1, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor, output_size: IntOrTuple, return_indices: bool = False):
    """Max pooling of (N, C, H, W) or (C, H, W) to ``output_size``."""
    return _adaptive_max(input, output_size, 2, return_indices, "adaptive_max_pool2d")


@float32_policy
def adaptive_avg_pool3d(input: Tensor, output_size: IntOrTuple) -> Tensor:
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size`` (None keeps a dim)."""
    return _adaptive_avg(input, output_size, 3, "adaptive_avg_pool3d")


@float32_policy
def adaptive_max_pool3d(input: Tensor, output_size: IntOrTuple, return_indices: bool = False):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size``."""
    return _adaptive_max(input, output_size, 3, return_indices, "adaptive_max_pool3d")


# ---------------------------------------------------------------- fractional max pooling
def repeated(v, n: int) -> tuple:
    """``v`` as a tuple, a single value repeated ``n`` times (PyTorch's ``_pair``/``_triple``,
    which keep floats: the output ratios)."""
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def _fractional_starts(u: Tensor, size: int, out: int, k: int) -> Tensor:
    """The start of each pooling region along one dim (N, C, out), for the per-plane samples
    ``u`` (N, C) in [0, 1), as PyTorch's kernel computes them in the input's dtype:
    ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (size - k) / (out - 1)``, the
    last region ending at the input's end."""
    last = full_like(O.unsqueeze(u, -1), size - k, dtype=D.int64)
    if out == 1:
        return last
    npdt = u.dtype.np
    alpha = _tensor(np.asarray(size - k, dtype=npdt) / np.asarray(out - 1, dtype=npdt))
    i = _tensor(np.arange(out - 1, dtype=npdt))
    scaled = O.mul(O.add(O.unsqueeze(u, -1), i), alpha).to(D.int64)  # (truncation: the values are >= 0)
    offset = O.unsqueeze(O.mul(u, alpha).to(D.int64), -1)
    return O.cat([O.sub(scaled, offset), last], -1)


def _fractional_sizes(input: Tensor, n: int, kernel_size, output_size, output_ratio, name: str) -> tuple:
    """The kernel and output sizes, checked as PyTorch checks them."""
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if input.ndim not in (n + 1, n + 2) or input.numel() == 0:
        raise RuntimeError(f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got: {list(input.shape)}")
    ks = ntuple(kernel_size, n, "kernel_size")
    sp = tuple(input.shape[-n:])
    if output_size is None:
        if isinstance(output_ratio, (list, tuple)) and len(output_ratio) > n:
            raise ValueError(f"{name} requires output_ratio to either be a single Int or tuple of Ints.")
        outs = tuple(int(s * r) for s, r in zip(sp, repeated(output_ratio, n)))
    else:
        outs = ntuple(output_size, n, "output_size")
    for dim, s, o, k in zip(("time", "height", "width")[-n:], sp, outs, ks):
        # (PyTorch's 3-d check is strict: the last region may not end at the input's end)
        if o + k - 1 > s or (n == 3 and o + k - 1 == s):
            where = f"{name}()" if n == 2 else f"{name}_out()"
            raise RuntimeError(f"{where}: pool {dim} {k} too large relative to input {dim} {s}")
    return ks, outs


def _checked_samples(u: Optional[Tensor], input: Tensor, lead: tuple, n: int) -> Tensor:
    """``u``, or ``rand(N, C, n)`` in the input's dtype when None, checked as PyTorch checks it;
    a first dim longer than the batch is cut to it."""
    if u is None:
        return rand(*lead, n, dtype=input.dtype, device=input.device)
    if u.dtype != input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if u.ndim != 3 or u.shape[0] < lead[0]:
        raise RuntimeError(f"Expect _random_samples of shape (N, C, {n}) with N no less than the input's batch "
                           f"size, but got {list(u.shape)}")
    if u.shape[1] != lead[1]:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if u.shape[2] != n:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {n}; got {u.shape[2]}.")
    return u[:lead[0]]


def _fractional_max_pool(input: Tensor, n: int, kernel_size, output_size, output_ratio, return_indices: bool,
                         _random_samples: Optional[Tensor], name: str):
    ks, outs = _fractional_sizes(input, n, kernel_size, output_size, output_ratio, name)
    sp = tuple(input.shape[-n:])
    x = input if input.ndim == n + 2 else O.unsqueeze(input, 0)
    lead = tuple(x.shape[:2])
    u = _checked_samples(_random_samples, input, lead, n)
    # the flat input index of every (output position, window offset): (N, C, *outs, *ks); the
    # 2-d kernel reads a plane's samples as (width, height), the 3-d one as (time, height, width)
    order = (1, 0) if n == 2 else tuple(range(n))
    flat = None
    for i in range(n):
        starts = _fractional_starts(u[..., order[i]], sp[i], outs[i], ks[i])
        pos = O.add(O.unsqueeze(starts, -1), _tensor(np.arange(ks[i])))  # (N, C, out_i, k_i)
        shape = [1] * (2 * n)
        shape[i], shape[n + i] = outs[i], ks[i]
        term = O.mul(O.reshape(pos, lead + tuple(shape)), math.prod(sp[i + 1:]))
        flat = term if flat is None else O.add(flat, term)
    flat = O.reshape(O.expand(flat, lead + outs + ks), lead + outs + (-1,))
    win = O.reshape(O.gather(O.reshape(x, lead + (-1,)), 2, O.reshape(flat, lead + (-1,))), flat.shape)
    which = O.argmax(win, -1, keepdim=True)
    vals = O.squeeze(O.gather(win, -1, which), -1)
    indices = O.squeeze(O.gather(flat, -1, which), -1)
    if input.ndim == n + 1:
        vals, indices = O.squeeze(vals, 0), O.squeeze(indices, 0)
    vals = own(named(vals, f"FractionalMaxPool{n}DBackward0"), input)
    return (vals, indices) if return_indices else vals


@float32_policy
def fractional_max_pool2d(input: Tensor, kernel_size: IntOrTuple, output_size: Optional[IntOrTuple] = None,
                          output_ratio=None, return_indices: bool = False,
                          _random_samples: Optional[Tensor] = None):
    """Fractional max pooling of (N, C, H, W) or (C, H, W) to ``output_size`` (or the input's
    size times ``output_ratio``): ``kernel_size`` windows at pseudo-random starts, drawn from
    ``_random_samples`` (N, C, 2) in [0, 1) (``rand`` when None); with ``return_indices``
    also the flat position (h * W + w) of each maximum."""
    return _fractional_max_pool(input, 2, kernel_size, output_size, output_ratio, return_indices, _random_samples,
                                "fractional_max_pool2d")


@float32_policy
def fractional_max_pool3d(input: Tensor, kernel_size: IntOrTuple, output_size: Optional[IntOrTuple] = None,
                          output_ratio=None, return_indices: bool = False,
                          _random_samples: Optional[Tensor] = None):
    """``fractional_max_pool2d`` over (N, C, T, H, W) or (C, T, H, W), with ``_random_samples``
    (N, C, 3)."""
    return _fractional_max_pool(input, 3, kernel_size, output_size, output_ratio, return_indices, _random_samples,
                                "fractional_max_pool3d")


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size: IntOrTuple,
                                       output_size: Optional[IntOrTuple] = None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Optional[Tensor] = None):
    """``fractional_max_pool2d`` returning the indices as well, whatever ``return_indices``."""
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size: IntOrTuple,
                                       output_size: Optional[IntOrTuple] = None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Optional[Tensor] = None):
    """``fractional_max_pool3d`` returning the indices as well, whatever ``return_indices``."""
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)


# ---------------------------------------------------------------- resizing
def _scales(input: Tensor, n: int, size, scale_factor) -> tuple:
    """Output sizes and the source-per-output scale of each spatial dim."""
    sp = tuple(input.shape[-n:])
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None else
                         "either size or scale_factor should be defined")
    if size is not None:
        outs = tuple(size) if isinstance(size, (list, tuple)) else (size,) * n
        if len(outs) != n:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(sp)} and output size of {list(outs)}. Please "
                             "provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, "
                             "...,oK) format.")
        return tuple(int(o) for o in outs), tuple(s / o if o else math.inf for s, o in zip(sp, outs))
    sf = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * n
    if len(sf) != n:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                         f"with spatial dimensions of {list(sp)} and scale_factor of shape {scale_factor}. Please "
                         "provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, "
                         "...,sK) format.")
    outs = tuple(int(math.floor(s * f)) for s, f in zip(sp, sf))
    return outs, tuple(1.0 / f for f in sf)


def _linear_matrix(size: int, out: int, scale: float, align_corners: bool) -> np.ndarray:
    """The (out, size) matrix of 1-d linear interpolation, PyTorch's source coordinates."""
    m = np.zeros((out, size))
    for i in range(out):
        if align_corners:
            src = i * (size - 1) / (out - 1) if out > 1 else 0.0
        else:
            src = max((i + 0.5) * scale - 0.5, 0.0)
        i0 = min(int(math.floor(src)), size - 1)
        i1 = min(i0 + 1, size - 1)
        lam = src - i0
        m[i, i0] += 1.0 - lam
        m[i, i1] += lam
    return m


_LINEAR_MODES = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "area") + tuple(_LINEAR_MODES)


def _source(i: int, size: int, out: int, scale: float, align_corners: bool) -> float:
    """PyTorch's source coordinate of output ``i`` (area_pixel_compute_source_index, unclamped)."""
    if align_corners:
        return i * (size - 1) / (out - 1) if out > 1 else 0.0
    return (i + 0.5) * scale - 0.5


def _cubic_weights(t: float, a: float) -> tuple:
    """The four cubic-convolution weights at fraction ``t`` past the second tap (Keys, ``a``)."""
    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _cubic_matrix(size: int, out: int, scale: float, align_corners: bool) -> np.ndarray:
    """The (out, size) matrix of 1-d bicubic interpolation (a = -0.75, taps clamped at the edges)."""
    m = np.zeros((out, size))
    for i in range(out):
        src = _source(i, size, out, scale, align_corners)
        f = math.floor(src)
        for k, w in enumerate(_cubic_weights(src - f, -0.75)):
            m[i, min(max(f - 1 + k, 0), size - 1)] += w
    return m


def _antialiased_matrix(size: int, out: int, scale: float, align_corners: bool, cubic: bool) -> np.ndarray:
    """The (out, size) matrix of PyTorch's antialiased resampling: the triangle (bilinear) or
    cubic (a = -0.5) filter stretched by the downscaling factor, normalized per output."""
    if align_corners:
        scale = (size - 1) / (out - 1) if out > 1 else 0.0
    support = (2.0 if cubic else 1.0) * (scale if scale >= 1.0 else 1.0)
    inv = 1.0 / scale if scale >= 1.0 else 1.0

    def filt(x):
        x = abs(x)
        if cubic:
            a = -0.5
            return ((a + 2) * x - (a + 3)) * x * x + 1 if x < 1 else (
                ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0)
        return 1.0 - x if x < 1 else 0.0
    m = np.zeros((out, size))
    for i in range(out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size)
        w = np.array([filt((j - center + 0.5) * inv) for j in range(lo, hi)])
        total = w.sum()
        m[i, lo:hi] = w / total if total != 0 else w
    return m


def _resampling_matrix(size: int, out: int, scale: float, align_corners: bool, mode: str,
                       antialias: bool) -> np.ndarray:
    """The (out, size) weights of one bilinear or bicubic pass."""
    if antialias:
        return _antialiased_matrix(size, out, scale, align_corners, mode == "bicubic")
    if mode == "bicubic":
        return _cubic_matrix(size, out, scale, align_corners)
    return _linear_matrix(size, out, scale, align_corners)


def _uint8_pass(x: Tensor, m: np.ndarray, axis: int) -> Tensor:
    """One pass of PyTorch's uint8 image resampling (its integer kernels, after Pillow-SIMD) along
    ``axis`` of ``x`` (float64 holding uint8 values), weights ``m``: rounded to integers of
    ``precision`` fraction bits (as many as keep the largest below 2**15), the products summed
    exactly, then rounded by a shift and saturated to [0, 255]."""
    wmax = m.max() if m.size else 0.0
    precision = 0
    while precision < 22 and int(0.5 + wmax * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    v = m * (1 << precision)
    w16 = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5))  # (C's (int)(v +- 0.5))
    acc = O.add(_along(x, w16, axis), float(1 << (precision - 1)) if precision else 0.0)
    return O.clamp(O.floor(O.mul(acc, 1.0 / (1 << precision))), 0, 255)


def _nearest_sources(size: int, out: int, scale: np.float32, exact: bool, n: int) -> np.ndarray:
    """The source index of each output along one dim, as PyTorch's kernels compute it: in
    float32 (nearest-exact's offset in float64), and, for 2-d nearest, the sizes that stay or
    double read the same or the halved index whatever the scale says (its forward kernel's
    shortcut; the 1-d and 3-d ones have none)."""
    i = np.arange(out)
    if n == 2 and not exact and out in (size, 2 * size):
        return i if out == size else i >> 1
    if exact:
        src = np.floor(((i + 0.5) * np.float64(scale)).astype(np.float32))
    else:
        src = np.floor(i.astype(np.float32) * scale)
    return np.minimum(src.astype(np.int64), size - 1)


@autocast_off
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: Optional[bool] = None, recompute_scale_factor: Optional[bool] = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of (N, C, *sp), one to three of them: modes nearest,
    nearest-exact, area, linear (1-d), bilinear and bicubic (2-d, with ``antialias``),
    trilinear (3-d). Each is separable: per spatial dim an index selection or a contraction
    with a constant (out, in) weight matrix."""
    n = input.ndim - 2
    if mode not in _MODES:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) "
                                  f"for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if n not in (1, 2, 3) or (mode in _LINEAR_MODES and _LINEAR_MODES[mode] != n):
        want = {1: "3D", 2: "4D", 3: "5D"}.get(_LINEAR_MODES.get(mode, 0))
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {want} input" if want else
                                  f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         "4-D tensor as input")
    outs, scales = _scales(input, n, size, scale_factor)
    if recompute_scale_factor and all(o > 0 for o in outs):  # (a size 0 is refused below)
        scales = tuple(s / o for s, o in zip(input.shape[2:], outs))
    # (PyTorch's CPU kernels: nearest takes uint8 and floats, bilinear/bicubic uint8 too)
    if not input.dtype.is_floating_point and input.dtype != D.uint8 or \
            input.dtype == D.uint8 and mode not in ("bilinear", "bicubic") and not mode.startswith("nearest"):
        from ..runtime.keywords import _type_name
        what = {"area": f"adaptive_avg_pool{n}d", "bicubic": "compute_indices_weights_cubic",
                "nearest": "compute_indices_weights_nearest", "nearest-exact": "compute_indices_weights_nearest"}.get(
            mode, "compute_indices_weights_linear")
        raise NotImplementedError(f'"{what}" not implemented for \'{_type_name(input.dtype)}\'')
    if mode == "area":
        return _adaptive_avg(input, outs, n, "adaptive_avg_pool")
    if any(o <= 0 for o in outs) or any(s <= 0 for s in input.shape[2:]):
        names = ("D", "H", "W")[3 - n:]
        sizes = [", ".join(f"{d}: {v}" for d, v in zip(names, vs)) for vs in (input.shape[2:], outs)]
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({sizes[0]})"
                           f"{' and' if n == 1 else ''} output ({sizes[1]})")
    x = input
    if mode.startswith("nearest"):
        exact = "Exact" if mode == "nearest-exact" else ""
        for i, (s, o, sc) in enumerate(zip(input.shape[2:], outs, scales)):
            given = scale_factor is not None and not recompute_scale_factor
            src = _nearest_sources(s, o, np.float32(sc) if given else np.float32(s) / np.float32(o), bool(exact), n)
            x = O.index_select(x, 2 + i, _tensor(src))
        return own(named(x, f"Upsample{'Nearest' + exact}{n}DBackward0"), input, order=_follows(input))
    passes = list(enumerate(zip(input.shape[2:], outs, scales)))
    if input.dtype == D.uint8:
        # images: PyTorch's integer kernels, the last dim first; a dim that keeps its size is skipped
        x = O.to(x, D.float64)
        for i, (s, o, sc) in passes[::-1]:
            if s != o:
                x = _uint8_pass(x, _resampling_matrix(s, o, sc, bool(align_corners), mode, antialias), 2 + i)
        return own(O.to(x, D.uint8), input, order=_follows(input))
    low = input.dtype in (D.float16, D.bfloat16)
    if low:  # in float32, rounded once at the end, as PyTorch's kernels accumulate
        x = O.to(x, D.float32)
    for i, (s, o, sc) in passes:
        # as PyTorch's separable kernels, the linear ones copy a dim that keeps its size (a
        # scale of 1.1 on 4 pixels); its bicubic one resamples it
        if s != o or mode == "bicubic" and not antialias:
            x = _along(x, _resampling_matrix(s, o, sc, bool(align_corners), mode, antialias), 2 + i)
    if low:
        x = O.to(x, input.dtype)
    kind = {"linear": "Linear1D", "bilinear": "Bilinear2D", "bicubic": "Bicubic2D", "trilinear": "Trilinear3D"}[mode]
    return own(named(x, f"Upsample{kind}{'Aa' if antialias else ''}Backward0"), input, order=_follows(input))


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: Optional[bool] = None) -> Tensor:
    """Deprecated alias of ``interpolate``."""
    _deprecated_upsample("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = upscale_factor
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, C, H, W = input.shape
    if input.ndim < 3 or C % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={C if input.ndim >= 3 else 0} is not divisible by "
                           f"{r * r}")
    lead = tuple(lead)
    nl = len(lead)
    x = O.reshape(input, lead + (C // (r * r), r, r, H, W))
    x = O.permute(x, tuple(range(nl)) + tuple(nl + i for i in (0, 3, 1, 4, 2)))
    return own(O.reshape(x, lead + (C // (r * r), H * r, W * r)), input, order=_follows(input))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = downscale_factor
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, C, H, W = input.shape
    if H % r or W % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but "
                           f"input.size(-2)={H} and input.size(-1)={W} are not divisible by {r}")
    lead = tuple(lead)
    nl = len(lead)
    x = O.reshape(input, lead + (C, H // r, r, W // r, r))
    x = O.permute(x, tuple(range(nl)) + tuple(nl + i for i in (0, 2, 4, 1, 3)))
    return own(O.reshape(x, lead + (C * r * r, H // r, W // r)), input, order=_follows(input))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, C, *) with its channels reordered as (groups, C / groups) transposed."""
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    n, rest = input.shape[0], tuple(input.shape[2:])
    x = O.transpose(O.reshape(input, n, groups, c // groups, *rest), 1, 2)
    return named(O.reshape(O.contiguous(x), n, c, *rest), "ChannelShuffleBackward0")


def _deprecated_upsample(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=user_stacklevel())


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")``."""
    _deprecated_upsample("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)``."""
    _deprecated_upsample("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """``max_pool1d`` returning ``(values, indices)`` whatever ``return_indices`` says."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """``max_pool2d`` returning ``(values, indices)`` whatever ``return_indices`` says."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False):
    """``max_pool3d`` returning ``(values, indices)`` whatever ``return_indices`` says."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """``adaptive_max_pool3d`` returning ``(values, indices)`` whatever ``return_indices`` says."""
    return adaptive_max_pool3d(input, output_size, return_indices=True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """``adaptive_max_pool1d`` returning ``(values, indices)`` whatever ``return_indices`` says."""
    return adaptive_max_pool1d(input, output_size, return_indices=True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """``adaptive_max_pool2d`` returning ``(values, indices)`` whatever ``return_indices`` says."""
    return adaptive_max_pool2d(input, output_size, return_indices=True)


# ---------------------------------------------------------------- embedding bags
def _bag_table(offsets: Tensor, n: int, include_last_offset: bool):
    """(positions (B, L) into the flat input, valid (B, L)) for the bags that ``offsets``
    start: from concrete offsets a table as wide as the longest bag; from traced ones every
    position, kept where it falls in the bag."""
    from .functional import _concrete
    num_bags = offsets.shape[0] - (1 if include_last_offset else 0)
    if _concrete(offsets):
        off = np.asarray(offsets.detach().numpy(), dtype=np.int64)
        if off.size and off[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                               f"position 0. However, got {off[0]}")
        if (np.diff(off) < 0).any():  # (decreasing offsets: torch's bounds check fails, with its message)
            raise RuntimeError("Expected i < index_size to be true, but got false.  (Could this error message be "
                               "improved?  If so, please report an enhancement request to PyTorch.)")
        if off.size and off[-1] > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of "
                               f"{off[-1]}")
        ends = np.append(off[1:], n)[:num_bags] if not include_last_offset else off[1:]
        starts = off[:num_bags]
        lengths = np.maximum(ends - starts, 0)
        width = max(int(lengths.max()) if lengths.size else 0, 1)
        j = np.arange(width)[None, :]
        pos = np.minimum(starts[:, None] + j, max(n - 1, 0))
        return _tensor(pos), _tensor(j < lengths[:, None])
    from ..runtime.factory import arange
    idx = arange(n, dtype=offsets.dtype)
    bag = O.sub(O.sum(O.le(O.unsqueeze(offsets, 0), O.unsqueeze(idx, 1)), 1), 1)  # bag of each position
    valid = O.eq(O.unsqueeze(bag, 0), O.unsqueeze(arange(num_bags, dtype=bag.dtype), 1))
    return O.expand(O.unsqueeze(idx, 0), (num_bags, n)), valid


def embedding_bag(input: Tensor, weight: Tensor, offsets: Optional[Tensor] = None, max_norm: Optional[float] = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Optional[Tensor] = None, include_last_offset: bool = False,
                  padding_idx: Optional[int] = None) -> Tensor:
    """Sums, means or maxima of bags of ``weight`` rows: the rows of a 2-D ``input`` (B, N),
    or the runs of a 1-D ``input`` that ``offsets`` start. Empty bags give zeros; the
    ``padding_idx`` entries are left out of every bag; ``per_sample_weights`` (mode "sum")
    scales each row."""
    from .functional import _check_indices, _concrete, _embedding_renorm_, one_hot
    if weight.dtype == D.int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                      "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                      stacklevel=user_stacklevel())
        weight, input = input, weight
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    _check_indices(input, "embedding_bag")
    num, dim = weight.shape
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise RuntimeError("padding_idx must be within the number of embeddings, -" + str(num) + " through "
                               + str(num - 1) + ", but got " + str(padding_idx))
        padding_idx = padding_idx % num
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                           f"'per_sample_weights'; but type {weight.type()} does not equal "
                           f"{per_sample_weights.type()} (while checking arguments for embedding_bag)")
    if _concrete(input) and input.numel() and (int(O.amin(input)) < 0 or int(O.amax(input)) >= num):
        bad = [int(v) for v in O.reshape(input, (-1,)).tolist() if not 0 <= v < num][0]
        raise RuntimeError(f"Index {O.reshape(input, (-1,)).tolist().index(bad)} of input takes value {bad} which "
                           f"is not in the valid range [0, {num})")
    flat = O.reshape(input, (-1,))
    if input.ndim == 2:
        idx, psw = input, per_sample_weights
        valid = None
    else:
        pos, valid = _bag_table(offsets, input.shape[0], include_last_offset)
        if input.shape[0] == 0:
            total = O.sum(weight[0:0], 0, keepdim=True)
            return named(O.expand(total, (pos.shape[0], dim)), "EmbeddingBagBackward0")
        idx = flat[pos]
        psw = None if per_sample_weights is None else per_sample_weights[pos]
    if padding_idx is not None:
        keep = O.ne(idx, padding_idx)
        valid = keep if valid is None else O.logical_and(valid, keep)
    if sparse and weight.requires_grad and GRAD.enabled:  # (compiled: a custom Function, run eagerly)
        if scale_grad_by_freq:
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        from .sparse_grad import SparseEmbedding
        rows = SparseEmbedding.apply(weight, idx, None, valid)  # (valid: the bags' positions, padding left out)
    else:
        rows = weight[idx]  # (B, L, D)
    if scale_grad_by_freq:
        counts = O.sum(one_hot(O.to(flat, D.int64), num), 0)
        freq = O.unsqueeze(O.to(counts[idx], rows.dtype), -1)
        frozen = rows.detach()
        rows = O.add(frozen, O.div(O.sub(rows, frozen), freq))
    if psw is not None:
        rows = O.mul(rows, O.unsqueeze(psw, -1))
    mask = None if valid is None else O.unsqueeze(valid, -1)
    if mode == "max":
        if mask is not None:
            rows = O.where(mask, rows, -math.inf)
        which = P.argmax(rows, axis=1, keepdims=True)
        out = O.squeeze(P.gather(rows, which, axis=1), 1)
        if valid is not None:
            out = O.where(O.any(valid, 1, keepdim=True), out, 0.0)
        return named(out, "EmbeddingBagBackward0")
    if mask is not None:
        rows = O.where(mask, rows, 0.0)
    out = O.sum(rows, 1)
    if mode == "mean":
        if valid is None:
            out = O.div(out, float(idx.shape[1]))
        else:
            count = O.clamp_min(O.sum(O.to(valid, out.dtype), 1, keepdim=True), 1.0)
            out = O.div(out, count)
    return named(out, "EmbeddingBagBackward0")
