"""Batch, instance, group and RMS normalization as compositions of mean, var and rsqrt.

Running statistics are updated in place under ``no_grad`` (``copy_`` into the buffer), which
a compiled function records as a write-back of the buffer, as eager mode does."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from ..ir import dtypes as D
from ..runtime import ops as O
from ..runtime.autocast_state import float32_policy
from ..runtime.grad_mode import no_grad
from ..runtime.ops import named, own
from ..runtime.tensor import Tensor
from ..runtime.type_info import channels_last_order, finfo
from .opmath import _LOW, downcast, upcast

__all__ = ["batch_norm", "instance_norm", "group_norm", "rms_norm"]


def _channel_shape(input: Tensor) -> tuple:
    """Shape that broadcasts a per-channel (dim 1) vector against ``input``."""
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def _affine(out: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], shape: tuple) -> Tensor:
    if weight is not None:
        out = O.mul(out, O.reshape(weight, shape))
    if bias is not None:
        out = O.add(out, O.reshape(bias, shape))
    return out


def _update_running(running: Optional[Tensor], stat: Tensor, momentum: float) -> None:
    if running is not None:
        with no_grad():
            running.copy_(O.add(O.mul(running, 1.0 - momentum), O.mul(O.reshape(stat.detach(), running.shape),
                                                                       momentum)))


def _batch_stats(input: Tensor, axes: tuple, eps: float, running_mean, running_var, momentum: float) -> tuple:
    """The mean, the centered input and ``1 / sqrt(var + eps)`` over ``axes`` of the batch
    itself, updating the running mean and (unbiased) running variance."""
    n = math.prod(input.shape[a] for a in axes)
    mean = O.mean(input, axes, keepdim=True)
    centered = O.sub(input, mean)
    var = O.mean(O.mul(centered, centered), axes, keepdim=True)
    if running_mean is not None or running_var is not None:
        _update_running(running_mean, mean, momentum)
        _update_running(running_var, O.mul(var, n / max(n - 1, 1)), momentum)
    return mean, centered, O.rsqrt(O.add(var, eps))


def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dim 1) over the batch and spatial dims; in training with
    batch statistics (updating the running ones), otherwise with the running ones."""
    if input.ndim < 2:
        raise ValueError(f"expected 2D or higher input (got {input.ndim}D input)")
    C = input.shape[1]
    for what, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != C:
            raise RuntimeError(f"{what} should contain {C} elements not {t.numel()}")
    shape = _channel_shape(input)
    axes = (0,) + tuple(range(2, input.ndim))
    low, input = input, upcast(input)
    if training:
        if math.prod(input.shape[a] for a in axes) == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{input.shape}")
        mean, centered, invstd = _batch_stats(input, axes, eps, running_mean, running_var, momentum)
        if low.dtype in _LOW and all(t is None or t.dtype == low.dtype for t in (weight, bias, running_mean,
                                                                                 running_var)):
            # a half model: PyTorch keeps the batch statistics in its dtype, then computes
            # x * alpha + beta in float32 (alpha = weight / std, beta = bias - mean * alpha)
            mean, invstd = (O.to(O.to(t, low.dtype), D.float32) for t in (mean, invstd))
            alpha = invstd if weight is None else O.mul(invstd, O.reshape(upcast(weight), shape))
            beta = O.neg(O.mul(mean, alpha)) if bias is None else O.sub(O.reshape(upcast(bias), shape),
                                                                        O.mul(mean, alpha))
            return downcast(named(O.add(O.mul(input, alpha), beta), "NativeBatchNormBackward0"), low)
        out = O.mul(centered, invstd)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        # (half statistics in float32, as the input: eps is lost to float16's rounding of var + eps)
        scale = O.rsqrt(O.add(O.reshape(upcast(running_var), shape), eps))
        out = O.mul(O.sub(input, O.reshape(upcast(running_mean), shape)), scale)
    return downcast(named(_affine(out, weight, bias, shape), "NativeBatchNormBackward0"), low)


def instance_norm(input: Tensor, running_mean: Optional[Tensor] = None, running_var: Optional[Tensor] = None,
                  weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each (sample, channel) over the spatial dims; the running statistics are
    the batch means of the per-instance ones."""
    shape = _channel_shape(input)
    axes = tuple(range(2, input.ndim))
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    n = math.prod(input.shape[2:])
    if n == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    low, input = input, upcast(input)
    mean = O.mean(input, axes, keepdim=True)
    centered = O.sub(input, mean)
    var = O.mean(O.mul(centered, centered), axes, keepdim=True)
    if running_mean is not None:
        _update_running(running_mean, O.mean(mean, 0), momentum)
    if running_var is not None:
        _update_running(running_var, O.mean(O.mul(var, n / max(n - 1, 1)), 0), momentum)
    out = O.mul(centered, O.rsqrt(O.add(var, eps)))
    return downcast(named(_affine(out, weight, bias, shape), "NativeBatchNormBackward0"), low)


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize each sample over groups of ``C // num_groups`` channels (and the spatial
    dims), then scale and shift per channel."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    N, C = input.shape[:2]
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {input.shape} and num_groups={num_groups}")
    low, input = input, upcast(input)
    x = O.reshape(input, (N, num_groups, -1))
    mean = O.mean(x, (2,), keepdim=True)
    centered = O.sub(x, mean)
    var = O.mean(O.mul(centered, centered), (2,), keepdim=True)
    out = O.reshape(O.mul(centered, O.rsqrt(O.add(var, eps))), tuple(input.shape))
    out = own(named(_affine(out, weight, bias, _channel_shape(input)), "NativeGroupNormBackward0"), input,
              order=channels_last_order(input._data))  # (a channels-last input's layout, as PyTorch's)
    return downcast(out, low)


def rms_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
             eps: Optional[float] = None) -> Tensor:
    """``x / sqrt(mean(x^2) + eps)`` over the trailing ``normalized_shape`` dims, times
    ``weight``; ``eps`` defaults to the machine epsilon of the dtype it is computed in."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    n = len(shape)
    if input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    low, input = input, upcast(input)
    if eps is None:  # the machine epsilon of the dtype computed in (float32 for a bfloat16 input)
        eps = finfo(input.dtype).eps
    dims = tuple(range(input.ndim - n, input.ndim))
    out = O.mul(input, O.rsqrt(O.add(O.mean(O.mul(input, input), dims, keepdim=True), eps)))
    if weight is not None:
        out = O.mul(out, weight)
    return downcast(out, low)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """``x / (k + alpha * mean of x^2 over a window of size channels) ** beta``; the window (zero-padded,
    always divided by ``size``) spans channels ``c - size // 2`` to ``c + (size - 1) // 2``."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {input.ndim} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    sq = O.mul(input, input)
    mean = (_channel_window_mean_float32 if input.ndim > 3 else _channel_window_mean)(sq, size)
    return O.div(input, O.pow(O.add(O.mul(mean, alpha), k), beta))


def _channel_window_mean(sq: Tensor, size: int) -> Tensor:
    """The mean of ``sq`` over a zero-padded window of ``size`` channels at each channel."""
    channels = sq.shape[1]
    # (left, right) pairs from the last dim back to the channel dim
    padded = O.pad(sq, [0, 0] * (sq.ndim - 2) + [size // 2, (size - 1) // 2])
    window = O.narrow(padded, 1, 0, channels)
    for offset in range(1, size):
        window = O.add(window, O.narrow(padded, 1, offset, channels))
    return O.div(window, size)


# PyTorch averages an input of 4 or more dimensions with avg_pool3d, which autocast runs in float32
_channel_window_mean_float32 = float32_policy(_channel_window_mean)
