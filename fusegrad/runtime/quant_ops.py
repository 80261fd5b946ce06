"""Fake quantization (``torch.fake_quantize_per_tensor_affine``, ``..._per_channel_affine``):
values rounded to an affine integer grid and back, in the input's dtype, with the
straight-through gradient quantization-aware training uses (1 inside the grid's range, 0
where clamped). Composed of primitives, so compile and the transforms follow it."""
from __future__ import annotations

import numpy as np

from ..ir import prims as P
from . import ops as O
from .exports import op
from .tensor import Tensor


def _fake_quantize(input: Tensor, scale, zero_point, quant_min: int, quant_max: int, name: str) -> Tensor:
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or equal to `quant_max`.")
    x = O.as_t(input)
    if isinstance(scale, Tensor):
        inv, scale = O.div(1.0, O.to(scale, x.dtype)), O.to(scale, x.dtype)
    else:  # (PyTorch's kernel multiplies by the reciprocal, computed in float32)
        inv, scale = float(np.float32(1.0) / np.float32(scale)), float(np.float32(scale))
    zp = O.to(zero_point, x.dtype) if isinstance(zero_point, Tensor) else float(zero_point)
    grid = O.add(O.round(O.mul(x, inv)), zp)
    inside = O.logical_and(O.ge(grid, quant_min), O.le(grid, quant_max))
    q = O.mul(O.sub(O.clamp(grid, quant_min, quant_max), zp), scale)
    # the value q, the gradient of x where it lies inside the grid's range
    passed = O.mul(x, O.to(inside, x.dtype))
    return O.named(P.straight_through(passed, q), name)


@op(method=False)
def fake_quantize_per_tensor_affine(input: Tensor, scale, zero_point, quant_min: int, quant_max: int) -> Tensor:
    """``input`` rounded to the grid ``scale * (k - zero_point)``, k in [quant_min, quant_max]."""
    return _fake_quantize(input, scale, zero_point, quant_min, quant_max,
                          "FakeQuantizePerTensorAffineCachemaskBackward0")


@op(method=False)
def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor, axis: int, quant_min: int,
                                     quant_max: int) -> Tensor:
    """``fake_quantize_per_tensor_affine`` with one ``scale`` and ``zero_point`` per index
    along ``axis``."""
    x = O.as_t(input)
    ax = O._axes(x, axis)[0]
    if scale.shape[0] != x.shape[ax] or zero_point.shape[0] != x.shape[ax]:
        raise RuntimeError("dimensions of scale and zero-point are not consistent with input tensor")
    shape = (-1,) + (1,) * (x.ndim - ax - 1)
    return _fake_quantize(x, O.reshape(scale, shape), O.reshape(zero_point, shape), quant_min, quant_max,
                          "FakeQuantizePerChannelAffineCachemaskBackward0")
