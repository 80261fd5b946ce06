"""Convolutions, ``unfold``/``fold``, as compositions of layout primitives and one GEMM.

A convolution gathers its input windows with K strided slices of the (padded) input, one per
kernel offset, concatenated into a column matrix (im2col), and multiplies it by the weight
matrix in a single BLAS GEMM per group. Every piece is an existing primitive, so convolutions
run in eager mode, autograd (col2im is the slices' VJP: zero-embeds summed), ``fusegrad.func``
transforms and ``compile`` alike. A transposed convolution is the convolution of the
zero-dilated input with the flipped, transposed kernel."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np

from ..ir import prims as P
from ..runtime import ops as O
from ..runtime.autocast_state import lower_precision
from ..runtime.factory import tensor as _tensor
from ..runtime.dispatch import INFERENCE_SAVED
from ..runtime.grad_mode import STATE as GRAD
from ..runtime.ops import named, own
from ..runtime.type_info import channels_last_order
from ..runtime.tensor import Tensor

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "unfold", "fold"]

IntOrTuple = Union[int, Sequence[int]]


def ntuple(v: IntOrTuple, n: int, what: str) -> tuple:
    """``v`` as an n-tuple of ints (an int repeats)."""
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {what} to be a single integer value or a list of {n} values to match "
                               f"the convolution dimensions, but got {what}={list(v)}")
        return tuple(int(a) for a in v)
    return (int(v),) * n


def out_size(size: int, k: int, stride: int, lo: int, hi: int, dilation: int) -> int:
    """Windows along one dim of ``size`` padded by (lo, hi)."""
    return (size + lo + hi - dilation * (k - 1) - 1) // stride + 1


def window_table(sizes: tuple, ks: tuple, stride: tuple, dilation: tuple, outs: tuple, k_first: bool) -> np.ndarray:
    """Flat positions in a row-major ``sizes`` grid of every window element: (K, L) with
    kernel offsets first, else (L, K); both enumerate row-major."""
    n = len(sizes)
    flat_stride = [math.prod(sizes[i + 1:]) for i in range(n)]
    k_part = np.zeros(ks, dtype=np.int64)
    l_part = np.zeros(outs, dtype=np.int64)
    for i in range(n):
        shape = [1] * n
        shape[i] = -1
        k_part = k_part + (np.arange(ks[i]) * dilation[i] * flat_stride[i]).reshape(shape)
        l_part = l_part + (np.arange(outs[i]) * stride[i] * flat_stride[i]).reshape(shape)
    k_part, l_part = k_part.reshape(-1), l_part.reshape(-1)
    return k_part[:, None] + l_part[None, :] if k_first else l_part[:, None] + k_part[None, :]


def windows(x: Tensor, first: int, ks: tuple, stride: tuple, dilation: tuple, outs: tuple, k_first: bool) -> Tensor:
    """The sliding windows over ``x``'s spatial dims ``first .. first + len(ks)``, gathered
    with one constant index table: those dims become (K, L) (``k_first``) or (L, K). One
    gather forward and one scatter-add backward, however large the kernel."""
    shp = x._data.shape
    n = len(ks)
    sizes = shp[first:first + n]
    flat = P.reshape(x, shape=shp[:first] + (math.prod(sizes),) + shp[first + n:])
    key = tuple((0, s, 1) for s in shp[:first]) + ("T",) + tuple((0, s, 1) for s in shp[first + n:])
    table = _tensor(window_table(sizes, ks, stride, dilation, outs, k_first))
    return P.index(flat, table, key=key)


def _padding(padding, n: int, ks: tuple, stride: tuple, dilation: tuple, what: str) -> list:
    """(lo, hi) per spatial dim for int/tuple/"valid"/"same" padding."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        pads = []
        for k, d in zip(ks, dilation):
            total = d * (k - 1)
            pads.append((total // 2, total - total // 2))
        return pads
    p = ntuple(padding, n, "padding")
    if any(a < 0 for a in p):
        raise RuntimeError(f"{what}: negative padding is not supported")
    return [(a, a) for a in p]


def _pad_input(x: Tensor, pads: list, mode: str) -> Tensor:
    if not any(lo or hi for lo, hi in pads):
        return x
    if mode == "zeros":
        widths = ((0, 0),) * (x.ndim - len(pads)) + tuple(pads)
        return P.pad(x, widths=widths, value=0.0)
    from .functional import pad
    flat = [a for lo, hi in reversed(pads) for a in (lo, hi)]
    return pad(x, flat, mode=mode)


@lower_precision
def convolution(input: Tensor, weight: Tensor, bias: Optional[Tensor], stride, padding, dilation, groups: int,
                n: int, name: str, padding_mode: str = "zeros") -> Tensor:
    """The n-d convolution (cross-correlation) of ``input`` (N, C, *sp) or (C, *sp) with
    ``weight`` (O, C // groups, *k)."""
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of "
                           f"size: {list(input.shape)}")
    if input.ndim == n + 1:
        return O.squeeze(convolution(O.unsqueeze(input, 0), weight, bias, stride, padding, dilation, groups, n,
                                     name, padding_mode), 0)
    if weight.ndim != n + 2:
        raise RuntimeError(f"weight should have {n + 2} dimensions for {name}, but got weight of size "
                           f"{list(weight.shape)}")
    if input._inf and GRAD.enabled and (weight._rg or (bias is not None and bias._rg)):
        raise RuntimeError(INFERENCE_SAVED)  # (PyTorch's convolution saves its input; ours saves its windows)
    N, C = input.shape[:2]
    O_, Cg = weight.shape[:2]
    ks = tuple(weight.shape[2:])
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if Cg * groups != C:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {Cg * groups} channels, but got {C} channels instead")
    if O_ % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(weight.shape)} instead")
    stride, dilation = ntuple(stride, n, "stride"), ntuple(dilation, n, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if bias is not None and tuple(bias.shape) != (O_,):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
                           f"{O_} elements, but got bias of size {list(bias.shape)} instead")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) should be the same")
    pads = _padding(padding, n, ks, stride, dilation, name)
    sp = tuple(input.shape[2:])
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(sp, pads))
    if any(p < d * (k - 1) + 1 for p, k, d in zip(padded, ks, dilation)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(str(d * (k - 1) + 1) for k, d in zip(ks, dilation))}). Kernel size "
                           "can't be greater than actual input size")
    outs = tuple(out_size(s, k, st, lo, hi, d) for s, k, st, (lo, hi), d in zip(sp, ks, stride, pads, dilation))
    # channels first, batch last: the windows (C, K, L, N) are one matrix per group
    x = _pad_input(input, pads, padding_mode)
    x = P.transpose(x, perm=(1,) + tuple(range(2, n + 2)) + (0,))
    cols = windows(x, 1, ks, stride, dilation, outs, k_first=True)
    K, L = math.prod(ks), N * math.prod(outs)
    if groups == 1:
        w, c = P.reshape(weight, shape=(O_, Cg * K)), P.reshape(cols, shape=(C * K, L))
    else:
        w, c = P.reshape(weight, shape=(groups, O_ // groups, Cg * K)), P.reshape(cols, shape=(groups, Cg * K, L))
    low = input._data.dtype if input._data.dtype.itemsize == 2 and bias is not None else None
    if low is not None:  # float16/bfloat16 with a bias: rounded once, after it (as PyTorch's oneDNN kernel)
        w, c, bias = (P.cast(v, dtype=np.dtype(np.float32)) for v in (w, c, bias))
    out = P.reshape(P.matmul(w, c), shape=(O_,) + outs + (N,))
    if bias is not None:
        out = P.add(out, P.reshape(bias, shape=(O_,) + (1,) * (n + 1)))
    if low is not None:
        out = P.cast(out, dtype=low)
    # (PyTorch's result follows a channels-last input's layout)
    return own(named(P.transpose(out, perm=(n + 1, 0) + tuple(range(1, n + 1))), "ConvolutionBackward0"), input,
               order=channels_last_order(input._data))


@lower_precision
def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
           padding: Union[IntOrTuple, str] = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """1-d convolution of ``input`` (N, C, L) with ``weight`` (O, C // groups, k)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@lower_precision
def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
           padding: Union[IntOrTuple, str] = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """2-d convolution of ``input`` (N, C, H, W) with ``weight`` (O, C // groups, kh, kw)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@lower_precision
def conv3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
           padding: Union[IntOrTuple, str] = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
    """3-d convolution of ``input`` (N, C, D, H, W) with ``weight`` (O, C // groups, kd, kh, kw)."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def dilate(x: Tensor, stride: tuple) -> Tensor:
    """``x`` with ``stride - 1`` zeros between neighbours along its trailing dims."""
    if all(s == 1 for s in stride):
        return x
    shp = x._data.shape
    lead = len(shp) - len(stride)
    big = shp[:lead] + tuple((s - 1) * st + 1 for s, st in zip(shp[lead:], stride))
    key = tuple((0, s, 1) for s in shp[:lead]) + tuple((0, b, st) for b, st in zip(big[lead:], stride))
    return P.embed(x, key=key, shape=big)


@lower_precision
def conv_transpose(input: Tensor, weight: Tensor, bias: Optional[Tensor], stride, padding, output_padding,
                   groups: int, dilation, n: int, name: str) -> Tensor:
    """The n-d transposed convolution: the gradient of ``convolution`` with respect to its
    input, computed as a stride-1 convolution of the zero-dilated input."""
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of "
                           f"size: {list(input.shape)}")
    if input.ndim == n + 1:
        return O.squeeze(conv_transpose(O.unsqueeze(input, 0), weight, bias, stride, padding, output_padding,
                                        groups, dilation, n, name), 0)
    if weight.ndim != n + 2:
        raise RuntimeError(f"weight should have {n + 2} dimensions for {name}, but got weight of size "
                           f"{list(weight.shape)}")
    C = input.shape[1]
    if groups <= 0 or weight.shape[0] != C or C % groups:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
                           f"{list(input.shape)} to have {weight.shape[0]} channels, but got {C} channels instead")
    stride, dilation = ntuple(stride, n, "stride"), ntuple(dilation, n, "dilation")
    padding, output_padding = ntuple(padding, n, "padding"), ntuple(output_padding, n, "output_padding")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding={list(output_padding)}, stride={list(stride)}, "
                           f"dilation={list(dilation)}")
    ks = tuple(weight.shape[2:])
    Cg, Og = C // groups, weight.shape[1]
    # (C, Og, *k) -> (groups * Og, Cg, *k), flipped in space
    w = P.reshape(weight, shape=(groups, Cg, Og) + ks)
    w = P.transpose(w, perm=(0, 2, 1) + tuple(range(3, n + 3)))
    w = P.flip(P.reshape(w, shape=(groups * Og, Cg) + ks), axes=tuple(range(2, n + 2)))
    x = dilate(input, stride)
    edge = [d * (k - 1) - p for k, d, p in zip(ks, dilation, padding)]
    # negative edges crop the dilated input; positive ones pad it with zeros
    if any(e < 0 for e in edge):
        shp = x._data.shape
        key = tuple((0, s, 1) for s in shp[:2]) + tuple(
            (max(-e, 0), s - max(-e - op, 0), 1) for s, e, op in zip(shp[2:], edge, output_padding))
        x = P.slice_(x, key=key)
    pads = [(max(e, 0), max(e + op, 0)) for e, op in zip(edge, output_padding)]
    out = convolution(_pad_input(x, pads, "zeros"), w, bias, 1, 0, dilation, groups, n, name)
    return own(named(out, "ConvolutionBackward0"), input, order=channels_last_order(input._data))


@lower_precision
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
                     padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> Tensor:
    """1-d transposed convolution; ``weight`` is (C, O // groups, k)."""
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                          "conv_transpose1d")


@lower_precision
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
                     padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> Tensor:
    """2-d transposed convolution; ``weight`` is (C, O // groups, kh, kw)."""
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                          "conv_transpose2d")


@lower_precision
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrTuple = 1,
                     padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> Tensor:
    """3-d transposed convolution; ``weight`` is (C, O // groups, kd, kh, kw)."""
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                          "conv_transpose3d")


def unfold(input: Tensor, kernel_size: IntOrTuple, dilation: IntOrTuple = 1, padding: IntOrTuple = 0,
           stride: IntOrTuple = 1) -> Tensor:
    """Sliding local blocks of a (N, C, H, W) or (C, H, W) input as columns:
    (N, C * kh * kw, L)."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    if input.ndim == 3:
        return O.squeeze(unfold(O.unsqueeze(input, 0), kernel_size, dilation, padding, stride), 0)
    ks, d = ntuple(kernel_size, 2, "kernel_size"), ntuple(dilation, 2, "dilation")
    p, s = ntuple(padding, 2, "padding"), ntuple(stride, 2, "stride")
    N, C, H, W = input.shape
    outs = tuple(out_size(sz, k, st, a, a, dd) for sz, k, st, a, dd in zip((H, W), ks, s, p, d))
    if any(o <= 0 for o in outs):
        raise RuntimeError(f"Given input with spatial size ({H}, {W}), kernel_size={list(ks)}, dilation={list(d)}, "
                           f"padding={list(p)}, calculated shape of the array of sliding blocks as "
                           f"({outs[0]}, {outs[1]}), but its components must be at least one.")
    x = _pad_input(input, [(a, a) for a in p], "zeros")
    cols = windows(x, 2, ks, s, d, outs, k_first=True)
    return named(P.reshape(cols, shape=(N, C * ks[0] * ks[1], outs[0] * outs[1])), "Im2ColBackward0")


def fold(input: Tensor, output_size: IntOrTuple, kernel_size: IntOrTuple, dilation: IntOrTuple = 1,
         padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> Tensor:
    """The adjoint of ``unfold``: sums the columns (N, C * kh * kw, L) back into an image
    (N, C, *output_size), overlapping blocks adding up."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                           f"(got {input.ndim}D)")
    if input.ndim == 2:
        return O.squeeze(fold(O.unsqueeze(input, 0), output_size, kernel_size, dilation, padding, stride), 0)
    size, ks = ntuple(output_size, 2, "output_size"), ntuple(kernel_size, 2, "kernel_size")
    d, p, s = ntuple(dilation, 2, "dilation"), ntuple(padding, 2, "padding"), ntuple(stride, 2, "stride")
    N, CK, L = input.shape
    K = ks[0] * ks[1]
    if CK % K:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={CK} and kernel_size={ks}")
    outs = tuple(out_size(sz, k, st, a, a, dd) for sz, k, st, a, dd in zip(size, ks, s, p, d))
    if outs[0] * outs[1] != L:
        raise RuntimeError(f"Given output_size={list(size)}, kernel_size={list(ks)}, dilation={list(d)}, "
                           f"padding={list(p)}, stride={list(s)}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {outs[0]} * {outs[1]} = {outs[0] * outs[1]}, but got "
                           f"input.size(2)={L}.")
    C = CK // K
    padded = tuple(sz + 2 * a for sz, a in zip(size, p))
    table = _tensor(window_table(padded, ks, s, d, outs, k_first=True))
    zeros = P.full(shape=(N, C, math.prod(padded)), value=0.0, dtype=input._data.dtype)
    total = P.index_put(zeros, P.reshape(input, shape=(N, C, K, L)), table, key=((0, N, 1), (0, C, 1), "T"),
                        accumulate=True)
    total = P.reshape(total, shape=(N, C) + padded)
    out = P.slice_(total, key=((0, N, 1), (0, C, 1)) + tuple((a, a + sz, 1) for a, sz in zip(p, size)))
    return own(named(out, "Col2ImBackward0"), input)
