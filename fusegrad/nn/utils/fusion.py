"""Folding an eval-mode BatchNorm into the convolution or linear layer before it."""
from __future__ import annotations

import copy
from typing import Optional, Tuple

from ...runtime import ops as O
from ...runtime.factory import ones_like, zeros_like
from ...runtime.tensor import Tensor
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Optional[Tensor], bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                         bn_w: Optional[Tensor], bn_b: Optional[Tensor],
                         transpose: bool = False) -> Tuple[Parameter, Parameter]:
    """Weight and bias of a convolution equal to ``conv`` followed by the eval-mode batch norm."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    rsqrt = O.rsqrt(O.add(bn_rv, bn_eps))
    # output channels are dim 1 of a transposed convolution's weight, dim 0 otherwise
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    fused_w = O.to(O.mul(conv_w, O.reshape(O.mul(bn_w, rsqrt), shape)), w_dtype)
    fused_b = O.to(O.add(O.mul(O.mul(O.sub(conv_b, bn_rm), rsqrt), bn_w), bn_b), b_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` with the eval-mode ``bn`` after it folded into its weight and bias."""
    assert not (conv.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(conv)
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Optional[Tensor], bn_rm: Tensor, bn_rv: Tensor,
                           bn_eps: float, bn_w: Tensor, bn_b: Tensor) -> Tuple[Parameter, Parameter]:
    """Weight and bias of a linear layer equal to ``linear`` followed by the eval-mode batch norm."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = O.mul(bn_w, O.rsqrt(O.add(bn_rv, bn_eps)))
    fused_w = O.mul(linear_w, O.to(O.unsqueeze(scale, -1), w_dtype))
    fused_b = O.to(O.add(O.mul(O.sub(linear_b, bn_rm), scale), bn_b), b_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` with the eval-mode ``bn`` after it folded into its weight and bias."""
    assert not (linear.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(linear)
    assert linear.out_features == bn.num_features or bn.num_features == 1, \
        "To fuse, linear.out_features must equal bn.num_features or bn.num_features must equal 1"
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
