"""``torch.nn.grad``: a convolution's gradients with respect to its input and to its weight,
given its output's gradient (custom autograd Functions that run a convolution's backward
themselves call these). Each is that convolution differentiated by autograd: it is linear
in the operand it is differentiated for, so that operand's value (zeros here) is immaterial."""
from __future__ import annotations

from typing import Callable

from ..autograd.functions import grad as _grad
from ..runtime.factory import zeros
from ..runtime.grad_mode import enable_grad
from ..runtime.tensor import Tensor
from . import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _wrt(conv: Callable, input_size, weight, input, weight_size, grad_output: Tensor, stride, padding, dilation,
         groups) -> Tensor:
    """The gradient of ``conv`` for its input (``input_size`` given) or its weight
    (``weight_size`` given), the other operand being ``weight`` or ``input``."""
    like = grad_output
    with enable_grad():
        if input_size is not None:
            x = zeros(tuple(input_size), dtype=like.dtype, device=like.device, requires_grad=True)
            y = conv(x, weight, None, stride, padding, dilation, groups)
        else:
            x = zeros(tuple(weight_size), dtype=like.dtype, device=like.device, requires_grad=True)
            y = conv(input, x, None, stride, padding, dilation, groups)
        if tuple(y.shape) != tuple(grad_output.shape):
            raise ValueError(f"grad_output has shape {list(grad_output.shape)}, but the convolution's output has "
                             f"shape {list(y.shape)}")
        other = weight if input_size is not None else input
        return _grad(y, x, grad_output, create_graph=bool(grad_output.requires_grad or other.requires_grad))[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The gradient of ``conv1d`` with respect to an input of ``input_size``."""
    return _wrt(F.conv1d, input_size, weight, None, None, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:  # noqa: A002
    """The gradient of ``conv1d`` with respect to a weight of ``weight_size``."""
    return _wrt(F.conv1d, None, None, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The gradient of ``conv2d`` with respect to an input of ``input_size``."""
    return _wrt(F.conv2d, input_size, weight, None, None, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:  # noqa: A002
    """The gradient of ``conv2d`` with respect to a weight of ``weight_size``."""
    return _wrt(F.conv2d, None, None, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """The gradient of ``conv3d`` with respect to an input of ``input_size``."""
    return _wrt(F.conv3d, input_size, weight, None, None, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1) -> Tensor:  # noqa: A002
    """The gradient of ``conv3d`` with respect to a weight of ``weight_size``."""
    return _wrt(F.conv3d, None, None, input, weight_size, grad_output, stride, padding, dilation, groups)
