"""Fake quantization (``torch.fake_quantize_per_tensor_affine``, ``..._per_channel_affine``):
values rounded to an affine integer grid and back, in the input's dtype, with the
straight-through gradient quantization-aware training uses (1 inside the grid's range, 0
where clamped). Composed of primitives, so compile and the transforms follow it."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from . import ops as O
from .autocast_state import float32_policy
from .exports import op
from .tensor import Tensor


def _fake_quantize(input: Tensor, scale, zero_point, quant_min: int, quant_max: int, name: str) -> Tensor:
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or equal to `quant_max`.")
    _check_zero_point(zero_point, quant_min, quant_max)
    x = O.as_t(input)
    # (PyTorch's kernels compute a half input in float32 and round the result once)
    work = D.float32 if x.dtype in (D.float16, D.bfloat16) else x.dtype
    xw = O.to(x, work)
    if isinstance(scale, Tensor):
        inv, scale = O.div(1.0, O.to(scale, work)), O.to(scale, work)
    else:  # (PyTorch's kernel multiplies by the reciprocal, computed in float32)
        inv, scale = float(np.float32(1.0) / np.float32(scale)), float(np.float32(scale))
    float_zp = isinstance(zero_point, Tensor) and zero_point.is_floating_point()
    zp = O.to(zero_point, work) if isinstance(zero_point, Tensor) else float(zero_point)
    # a float zero point (learnable quantization's) shifts before the rounding, an integer one after
    grid = O.round(O.add(O.mul(xw, inv), zp)) if float_zp else O.add(O.round(O.mul(xw, inv)), zp)
    inside = O.logical_and(O.ge(grid, quant_min), O.le(grid, quant_max))
    q = O.to(O.mul(O.sub(O.clamp(grid, quant_min, quant_max), zp), scale), x.dtype)
    # the value q, the gradient of x where it lies inside the grid's range
    passed = O.mul(x, O.to(inside, x.dtype))
    return O.named(P.straight_through(passed, q), name)


def _check_zero_point(zero_point, quant_min: int, quant_max: int) -> None:
    """An integer zero point outside ``[quant_min, quant_max]`` is refused, as by PyTorch."""
    if isinstance(zero_point, Tensor):
        if zero_point.is_floating_point() or zero_point.numel() == 0:
            return
        low, high = int(O.amin(zero_point).item()), int(O.amax(zero_point).item())
    else:
        low = high = zero_point
    if low < quant_min or high > quant_max:
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")


@op(method=False)
def fake_quantize_per_tensor_affine(input: Tensor, scale, zero_point, quant_min: int, quant_max: int) -> Tensor:
    """``input`` rounded to the grid ``scale * (k - zero_point)``, k in [quant_min, quant_max]."""
    fake_quantize = _fake_quantize if isinstance(scale, Tensor) else _fake_quantize_float32
    return fake_quantize(input, scale, zero_point, quant_min, quant_max,
                         "FakeQuantizePerTensorAffineCachemaskBackward0")


# the overload with numbers for scale and zero point is on autocast's float32 list, as PyTorch's
_fake_quantize_float32 = float32_policy(_fake_quantize)


@op(method=False)
def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor, axis: int, quant_min: int,
                                     quant_max: int) -> Tensor:
    """``fake_quantize_per_tensor_affine`` with one ``scale`` and ``zero_point`` per index
    along ``axis``."""
    x = O.as_t(input)
    ax = O._axes(x, axis)[0]
    if zero_point.dtype not in (D.int32, D.float32, D.float16):
        raise RuntimeError(f"Zero-point must be Int32, Float or Half, found {O.scalar_name(zero_point)}")
    if scale.shape[0] != x.shape[ax] or zero_point.shape[0] != x.shape[ax]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    shape = (-1,) + (1,) * (x.ndim - ax - 1)
    return _fake_quantize(x, O.reshape(scale, shape), O.reshape(zero_point, shape), quant_min, quant_max,
                          "FakeQuantizePerChannelAffineCachemaskBackward0")
