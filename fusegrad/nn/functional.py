"""``nn.functional``: layers and losses as functions, composed from fusegrad ops.

Everything here is built from ``runtime.ops`` so that it runs eagerly and traces into
the compiler's IR alike; the final result carries PyTorch's grad_fn name. Argument
checks that need tensor values run only on concrete (untraced) tensors."""
from __future__ import annotations

import math
import warnings
from typing import Optional, Sequence, Union

from ..ir import dtypes as D
from ..ir.graph import Var
from ..runtime import ops as O
from ..runtime.composite import one_node
from ..runtime.factory import arange, rand, tensor as _tensor
from ..runtime.autocast_state import float32_policy, lower_precision
from ..runtime.grad_mode import STATE as GRAD, no_grad
from ..runtime.ops import named
from ..runtime.tensor import Tensor
from ..runtime.type_info import channels_last_order
from ..tracer.trace import user_stacklevel
from .functional_conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d, fold, unfold  # noqa: F401
from .functional_norm import batch_norm, group_norm, instance_norm, rms_norm  # noqa: F401
from .opmath import downcast, upcast
from .functional_pool import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,  # noqa: F401
                              adaptive_max_pool2d, avg_pool1d, avg_pool2d, interpolate, max_pool1d, max_pool2d,
                              pixel_shuffle, pixel_unshuffle, upsample)

__all__ = ["linear", "relu", "gelu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout", "layer_norm",
           "embedding", "mse_loss", "l1_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "one_hot", "pad", "leaky_relu", "elu", "silu", "softplus",
           "normalize", "smooth_l1_loss", "huber_loss", "logsigmoid",
           "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "fold", "unfold",
           "batch_norm", "group_norm", "instance_norm", "rms_norm",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "avg_pool1d",
           "avg_pool2d", "interpolate", "max_pool1d", "max_pool2d", "pixel_shuffle", "pixel_unshuffle", "upsample"]


# ---------------------------------------------------------------- helpers
def _concrete(*ts: Tensor) -> bool:
    """Whether the tensors hold values (not traced IR values) that checks may read."""
    return all(type(t._data) is not Var for t in ts)


def _reduction(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    """The reduction, honouring the deprecated ``size_average``/``reduce`` flags."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else ("sum" if reduce else "none")
        warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' "
                      "instead.", stacklevel=user_stacklevel())
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _softmax_dim(name: str, ndim: int) -> int:
    """PyTorch's implicit dim (with its deprecation warning, at the user's line whatever
    ``_stacklevel`` the caller passed, which counts PyTorch's own frames)."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=user_stacklevel())
    return 0 if ndim in (0, 1, 3) else 1


def _check_same_size(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=user_stacklevel())


def _in_place(input: Tensor, fn) -> Tensor:
    """Apply the out-of-place ``fn`` and write the result into ``input``."""
    return O.inplace(input, fn)


# ---------------------------------------------------------------- linear
@lower_precision
def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``input @ weight.T + bias``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"linear(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    k = input.shape[-1] if input.ndim else 1
    if weight.ndim == 2 and k != weight.shape[1]:
        rows = input.numel() // k if k else math.prod(input.shape[:-1])
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k} and "
                           f"{weight.shape[1]}x{weight.shape[0]})")
    if input.ndim == 2:
        return O.addmm(bias, input, weight.t()) if bias is not None else O.matmul(input, weight.t())
    lead = tuple(input.shape[:-1])
    out = linear(O.reshape(input, -1, k), weight, bias)
    out = O.own(O.reshape(out, *lead, weight.shape[0]), input)
    return out if bias is not None or input.ndim < 2 else named(out, "UnsafeViewBackward0")



def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o]``."""
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: got "
                               f"{input1.shape[d]} and {input2.shape[d]}")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional, got {weight.ndim} dimensions")
    out_f, in1, in2 = weight.shape
    for which, x, n in (("input1", input1, in1), ("input2", input2, in2)):
        if x.shape[-1] != n:
            raise RuntimeError(f"bilinear(): {which} size does not match weight size: got {x.shape[-1]} but "
                               f"expected {n}")
    if bias is not None and tuple(bias.shape) != (out_f,):
        got = bias.shape[-1] if bias.ndim else 0
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {got} but expected {out_f}")
    lead = tuple(input1.shape[:-1])
    x1, x2 = O.reshape(input1, -1, in1), O.reshape(input2, -1, in2)
    # one GEMM: (B, in1) @ (in1, out * in2), then the in2 contraction as a product and a sum
    w = O.reshape(O.permute(weight, 1, 0, 2), in1, out_f * in2)
    t = O.reshape(O.matmul(x1, w), -1, out_f, in2)
    out = O.sum(O.mul(t, O.unsqueeze(x2, 1)), 2)
    if bias is not None:
        out = O.add(out, bias)
    return O.reshape(out, *lead, out_f)


# ---------------------------------------------------------------- activations
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``."""
    if inplace:
        return input.relu_()
    return named(O.relu(input), "ReluBackward0")


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, ``negative_slope * x`` elsewhere."""
    if inplace:
        return _in_place(input, lambda x: leaky_relu(x, negative_slope))
    return named(O.where(O.gt(input, 0), input, O.mul(input, negative_slope)), "LeakyReluBackward0")


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""
    if inplace:
        return _in_place(input, lambda x: elu(x, alpha))
    x = upcast(input)
    # expm1 of the clamped input: the unused branch must not overflow (0 * inf in backward)
    neg = O.mul(O.expm1(O.clamp(x, max=0.0)), alpha)
    # (a NaN takes the positive branch's gradient, as PyTorch's elu_backward)
    return downcast(named(O.where(O.le(x, 0), neg, x), "EluBackward0"), input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit, exact (erf) or with the tanh approximation."""
    x = upcast(input)
    if approximate == "none":
        cdf = O.add(O.erf(O.mul(x, 1.0 / math.sqrt(2.0))), 1.0)
    elif approximate == "tanh":
        inner = O.mul(O.add(x, O.mul(O.mul(O.mul(x, x), x), 0.044715)), math.sqrt(2.0 / math.pi))
        cdf = O.add(O.tanh(inner), 1.0)
    else:
        raise RuntimeError("approximate argument must be either none or tanh.")
    return downcast(named(O.mul(O.mul(x, 0.5), cdf), "GeluBackward0"), input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    if inplace:
        return _in_place(input, silu)
    x = upcast(input)
    return downcast(named(O.mul(x, O.sigmoid(x)), "SiluBackward0"), input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    x = upcast(input)
    bx = O.mul(x, beta)
    soft = O.div(_softplus(bx), beta)
    return downcast(named(O.where(O.gt(bx, threshold), x, soft), "SoftplusBackward0"), input)


def _softplus(z: Tensor) -> Tensor:
    """``log(1 + exp(z))`` without overflow: ``z + log1p(exp(-z))`` for positive z, else
    ``log1p(exp(z))``, each branch fed only its own side's values. At exactly 0 the second
    is analytic, so the first and second derivatives there are PyTorch's (1/2 and 1/4; a
    zero-initialized head's logits are exactly 0, and Newton's method from w = 0 reads the
    second)."""
    pos = O.gt(z, 0)
    zp, zn = O.where(pos, z, 0.0), O.where(pos, 0.0, z)
    return O.where(pos, O.add(zp, O.log1p(O.exp(O.neg(zp)))), O.log1p(O.exp(zn)))


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed without overflow."""
    x = upcast(input)
    return downcast(named(O.neg(_softplus(O.neg(x))), "LogSigmoidBackward0"), input)


def tanh(input: Tensor) -> Tensor:
    return O.tanh(input)


def sigmoid(input: Tensor) -> Tensor:
    return O.sigmoid(input)


def softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``exp(x) / exp(x).sum(dim)``."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    return O.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``log(softmax(x, dim))``, computed stably."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    return named(O.log_softmax(input, dim, dtype=dtype), "LogSoftmaxBackward0")


# ---------------------------------------------------------------- dropout and normalization
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        scale = O.mul(O.ones_of(input), 0.0)
    else:
        keep = O.lt(rand(input.shape, dtype=input.dtype, device=input.device), 1.0 - p)
        scale = O.mul(O.to(keep, input.dtype), 1.0 / (1.0 - p))
    if inplace:
        return input.mul_(scale)
    return O.mul(input, scale)


def layer_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    n = len(shape)
    if input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}")
    dims = tuple(range(input.ndim - n, input.ndim))

    def normalized(x, weight, bias):
        low, x = x, upcast(x)
        centered = O.sub(x, O.mean(x, dims, keepdim=True))
        var = O.mean(O.mul(centered, centered), dims, keepdim=True)
        out = O.mul(centered, O.rsqrt(O.add(var, eps)))
        if weight is not None:
            out = O.mul(out, weight)
        if bias is not None:
            out = O.add(out, bias)
        return downcast(named(out, "NativeLayerNormBackward0"), low)
    if input.dtype not in (D.float16, D.bfloat16) or any(t is not None and t.dtype != input.dtype
                                                          for t in (weight, bias)):
        return normalized(input, weight, bias)

    def backward(g, _):
        # PyTorch's half layer_norm backward: its formula in float32 from the mean and 1 / std it
        # saved in the input's dtype, rounded once
        x, dy = O.to(input.detach(), D.float32), O.to(g, D.float32)
        mean = O.mean(x, dims, keepdim=True)
        rstd = O.rsqrt(O.add(O.var(x, dims, correction=0, keepdim=True), eps))
        mean, rstd = (O.to(O.to(t, input.dtype), D.float32) for t in (mean, rstd))
        centered = O.sub(x, mean)
        gamma = None if weight is None else O.to(weight.detach(), D.float32)
        dyg = dy if gamma is None else O.mul(dy, gamma)
        scale = 1.0 / math.prod(shape)
        ds, db = O.sum(O.mul(dyg, x), dims, keepdim=True), O.sum(dyg, dims, keepdim=True)
        b = O.mul(O.mul(O.mul(O.mul(O.sub(O.mul(db, mean), ds), rstd), rstd), rstd), scale)
        c = O.sub(O.neg(O.mul(b, mean)), O.mul(O.mul(db, rstd), scale))
        dx = O.add(O.add(O.mul(rstd, dyg), O.mul(b, x)), c)
        lead = tuple(range(input.ndim - n))
        dgamma = None if weight is None else O.to(O.sum(O.mul(dy, O.mul(centered, rstd)), lead), weight.dtype)
        dbeta = None if bias is None else O.to(O.sum(dy, lead), bias.dtype)
        return O.to(dx, input.dtype), dgamma, dbeta
    return one_node("NativeLayerNormBackward0", normalized, input, weight, bias, half_backward=backward)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``."""
    denom = O.clamp_min(O.norm(input, p, dim, keepdim=True), eps)
    return O.div(input, O.expand_as(denom, input))


# ---------------------------------------------------------------- embedding and one-hot
def _check_indices(input: Tensor, what: str) -> None:
    if input.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input.dtype} instead (while checking arguments for {what})")


def embedding(input: Tensor, weight: Tensor, padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` selected by the integer tensor ``input``; the ``padding_idx``
    row gets no gradient."""
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    _check_indices(input, "embedding")
    num = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num, "Padding_idx must be within num_embeddings"
            padding_idx += num
    if _concrete(input) and input.numel():  # (read on the host: a traced constant index stays one)
        a = input._concrete("embedding's index check", host=True)
        if a.min() < 0 or a.max() >= num:
            raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if sparse and weight.requires_grad and GRAD.enabled:  # (compiled: a custom Function, run eagerly)
        if scale_grad_by_freq:  # (PyTorch raises it at backward)
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        from .sparse_grad import SparseEmbedding
        return named(SparseEmbedding.apply(weight, input, padding_idx), "EmbeddingBackward0")
    out = weight[input]
    if scale_grad_by_freq:
        counts = O.sum(one_hot(O.reshape(input, -1).long(), num), 0)
        freq = O.unsqueeze(O.to(counts[input], out.dtype), -1)
        frozen = out.detach()
        out = O.add(frozen, O.div(O.sub(out, frozen), freq))
    if padding_idx is not None:
        keep = O.unsqueeze(O.ne(input, padding_idx), -1)
        out = O.where(keep, out, out.detach())
    return named(out, "EmbeddingBackward0")


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Scale, in place, the rows used by ``input`` whose norm exceeds ``max_norm``."""
    with no_grad():
        used = O.gt(O.sum(one_hot(O.reshape(input, -1).long(), weight.shape[0]), 0), 0)
        norms = O.norm(weight, norm_type, 1, keepdim=True)
        over = O.logical_and(O.unsqueeze(used, 1), O.gt(norms, max_norm))
        weight.mul_(O.where(over, O.div(max_norm, O.add(norms, 1e-7)), 1.0))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor with a trailing dim of size ``num_classes``, 1 at each index."""
    if tensor.dtype != D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if _concrete(tensor) or num_classes < 0:
        if tensor.numel() == 0:
            if num_classes < 0:
                raise RuntimeError("Can not infer total number of classes from empty tensor.")
        else:
            a = tensor._concrete("one_hot's class check", host=True)
            if a.min() < 0:
                raise RuntimeError("Class values must be non-negative.")
            top = int(a.max())
            if num_classes < 0:
                num_classes = top + 1
            elif top >= num_classes:
                raise RuntimeError("Class values must be smaller than num_classes.")
    return O.to(O.eq(O.unsqueeze(tensor, -1), arange(num_classes)), D.int64)


# ---------------------------------------------------------------- padding
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None) -> Tensor:
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dims; ``pad`` lists
    (left, right) amounts starting from the last dim. Modes: constant, reflect,
    replicate, circular. A channels-last input gives a channels-last result, as PyTorch's
    (but for circular padding)."""
    order = channels_last_order(input._data) if mode != "circular" else None
    return O.own(_pad(input, pad, mode, value), input, order=order)


def _pad(input: Tensor, pad: Sequence[int], mode: str, value: Optional[float]) -> Tensor:
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but "
                           f"got padding length {len(pad)} and input of dimension {input.ndim}")
    pairs = [(input.ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]
    if mode == "constant":
        out = input
        for dim, lo, hi in pairs:  # negative amounts crop first
            if lo < 0 or hi < 0:
                n = out.shape[dim]
                out = O.narrow(out, dim, max(-lo, 0), n - max(-lo, 0) - max(-hi, 0))
        widths = [max(a, 0) for _, lo, hi in pairs for a in (lo, hi)]
        if not any(widths):  # (a new tensor even so, as PyTorch's: not the input nor a view of it)
            return named(O.clone(out), "ConstantPadNdBackward0")
        return O.pad(out, widths, value=0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unsupported padding mode: {mode}")
    if input.ndim not in (len(pairs) + 1, len(pairs) + 2):  # (a batch, then a channel dim before the padded ones)
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
                                  "Supported combinations for non-constant padding:\n"
                                  "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                                  "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                                  "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    if mode == "replicate" or (mode == "reflect" and len(pairs) < 3):  # (PyTorch's autocast fp32 list)
        return _copying_pad_fp32(input, pairs, mode)
    return _copying_pad(input, pairs, mode)


def _copying_pad(input: Tensor, pairs: list, mode: str) -> Tensor:
    """``pad``'s reflect, replicate and circular modes: per (dim, lo, hi) an index selection."""
    out = input
    for dim, lo, hi in pairs:
        if mode == "circular" and (lo < 0 or hi < 0):  # (it wraps around what the crop leaves, as PyTorch's)
            out = O.narrow(out, dim, max(-lo, 0), out.shape[dim] - max(-lo, 0) - max(-hi, 0))
            lo, hi = max(lo, 0), max(hi, 0)
        n = out.shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {dim} of input {list(input.shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out = O.index_select(out, dim, _tensor([_pad_source(i, n, mode) for i in range(-lo, n + hi)]))
    return out


_copying_pad_fp32 = float32_policy(_copying_pad)


def _pad_source(i: int, n: int, mode: str) -> int:
    """Which input position the output position ``i`` (input coordinates) copies."""
    if mode == "circular":
        return i % n
    if mode == "replicate":
        return min(max(i, 0), n - 1)
    return -i if i < 0 else (2 * (n - 1) - i if i >= n else i)


# ---------------------------------------------------------------- regression losses
def _weighted(loss: Tensor, weight: Optional[Tensor], input: Tensor, reduction: str) -> Tensor:
    """PyTorch's weighted regression losses: the mean divides by the sum of weights."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = O.mul(loss, weight)
    if reduction == "mean":
        return O.div(loss.sum(), weight.sum())
    return _reduce(loss, reduction)


def _refuse_integers(input: Tensor, target: Tensor, kernel: str) -> None:
    """PyTorch's refusal of a loss kernel's integer (or complex) operands: the promoted
    dtype decides (an integer input beside a float target is fine)."""
    O.refuse_kinds(input if not target.dtype.is_floating_point else target, kernel, "iubc")


@float32_policy
def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
             weight: Optional[Tensor] = None) -> Tensor:
    """Mean squared error."""
    _check_same_size(input, target)
    _refuse_integers(input, target, "mse_cpu")
    reduction = _reduction(size_average, reduce, reduction)
    if weight is not None:
        diff = O.sub(input, target)
        return _weighted(O.mul(diff, diff), weight, input, reduction)

    def squared_error(input, target):
        diff = O.sub(input, target)
        return _reduce(O.mul(diff, diff), reduction)
    return one_node("MseLossBackward0", squared_error, input, target)


@float32_policy
def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
            weight: Optional[Tensor] = None) -> Tensor:
    """Mean absolute error."""
    _check_same_size(input, target)
    reduction = _reduction(size_average, reduce, reduction)
    err = O.abs(O.sub(input, target))
    if weight is not None:
        return _weighted(err, weight, input, reduction)
    return _reduce(err, reduction)


@float32_policy
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Squared error below ``beta`` (divided by ``2 beta``), absolute error above."""
    _check_same_size(input, target)
    _refuse_integers(input, target, "smooth_l1_cpu")
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    def smooth_l1(input, target):
        r = O.sub(input, target)
        d = O.abs(r)  # (the square of r, not of |r|: its second derivative at 0 is 1 / beta, as torch's)
        return _reduce(O.where(O.lt(d, beta), O.mul(O.mul(r, r), 0.5 / beta), O.sub(d, 0.5 * beta)), reduction)
    return one_node("SmoothL1LossBackward0", smooth_l1, input, target)


@float32_policy
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Optional[Tensor] = None) -> Tensor:
    """Squared error below ``delta`` (halved), ``delta``-scaled absolute error above."""
    _check_same_size(input, target)
    _refuse_integers(input, target, "huber_cpu")
    if not input.dtype.is_floating_point and target.dtype.is_floating_point:  # (its output takes input's dtype)
        raise RuntimeError(f"result type {O.scalar_name(target)} can't be cast to the desired output type "
                           f"{O.scalar_name(input)}")
    reduction = _reduction(None, None, reduction)
    def huber(input, target):
        r = O.sub(input, target)
        d = O.abs(r)
        loss = O.where(O.lt(d, delta), O.mul(O.mul(r, r), 0.5), O.mul(O.sub(d, 0.5 * delta), delta))
        return _reduce(loss if weight is None else O.mul(loss, weight), reduction)
    return one_node("HuberLossBackward0", huber, input, target)


# ---------------------------------------------------------------- classification losses
def _same_dtype_weight(input: Tensor, weight: Optional[Tensor]) -> None:
    """Class weights in the input's dtype, as PyTorch's kernels take them (numpy's float64
    weights beside float32 logits raise there)."""
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {O.scalar_name(input)} but found {O.scalar_name(weight)}")


@float32_policy
def nll_loss(input: Tensor, target: Tensor, weight: Optional[Tensor] = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices ``target`` under log-probabilities
    ``input`` of shape (N, C, ...) or (C,); the mean is weighted by the targets' weights."""
    reduction = _reduction(size_average, reduce, reduction)
    _same_dtype_weight(input, weight)
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim == 1:
        if target.ndim > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        if target.ndim == 1 and target.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {target.shape[0]}")
        target = O.reshape(target, (1,))
        out = nll_loss(O.unsqueeze(input, 0), target, weight, None, ignore_index, None, reduction)
        return named(O.reshape(out, ()), "NllLossBackward0") if reduction == "none" else out
    if target.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.name.capitalize()}")
    if target.dtype not in (D.int64, D.uint8):
        from ..runtime.ops import scalar_name
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {scalar_name(target)}")
    if target.ndim == 0 or input.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0] if target.ndim else 0}).")
    if tuple(target.shape[1:]) != tuple(input.shape[2:]):
        raise RuntimeError(f"Expected target size {[input.shape[0]] + list(input.shape[2:])}, "
                           f"got {list(target.shape)}")
    n_classes = input.shape[1]
    if weight is not None and weight.numel() != n_classes:
        raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes or no classes but "
                           f"got weight tensor of shape: {list(weight.shape)}")
    ignored = O.eq(target, ignore_index)
    if _concrete(target) and target.numel():  # (read on the host: a segmented trace records no op for it)
        t = target._concrete("nll_loss's target check", host=True)
        bad = (t != ignore_index) & ((t < 0) | (t >= n_classes))
        if bad.any():
            raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    safe = O.where(ignored, 0, target)
    w = O.to(O.logical_not(ignored), input.dtype)
    if weight is not None:
        w = O.mul(weight[safe], w)

    def nll(input):
        loss = O.neg(O.mul(O.squeeze(O.gather(input, 1, O.unsqueeze(safe, 1)), 1), w))
        return _weighted_mean(loss.sum(), w.sum()) if reduction == "mean" else _reduce(loss, reduction)
    return one_node("NllLossBackward0", nll, input)


def _weighted_mean(total: Tensor, weight_sum: Tensor) -> Tensor:
    """``total / weight_sum``, NaN when every target is ignored (the sum is 0), as PyTorch's;
    its gradient is then 0, not 0/0: a summed loss with such a term still trains."""
    empty = O.eq(weight_sum, 0)
    return O.add(O.div(total, O.where(empty, 1.0, weight_sum)), O.to(O.where(empty, math.nan, 0.0), total.dtype))


@float32_policy
def cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross entropy of logits ``input`` (N, C, ...) or (C,) against class indices
    or class probabilities (``target`` shaped like ``input``)."""
    reduction = _reduction(size_average, reduce, reduction)
    _same_dtype_weight(input, weight)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = log_softmax(input, class_dim)
    wshape = [1] * input.ndim
    wshape[class_dim] = n_classes
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs(logp, target, weight, wshape, class_dim, ignore_index, reduction,
                                    label_smoothing)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing == 0.0:
        return nll
    ignored = O.eq(target, ignore_index)
    scaled = logp if weight is None else O.mul(logp, O.reshape(weight, wshape))
    smooth = O.masked_fill(O.neg(O.sum(scaled, class_dim)), ignored, 0.0)
    if reduction == "mean":
        if weight is None:
            denom = O.sum(O.logical_not(ignored))
        else:
            denom = O.sum(O.where(ignored, 0.0, weight[O.where(ignored, 0, target)]))
        smooth = _weighted_mean(smooth.sum(), denom)
    else:
        smooth = _reduce(smooth, reduction)
    out = O.add(O.mul(nll, 1.0 - label_smoothing), O.mul(smooth, label_smoothing / n_classes))
    return out if out.dtype == logp.dtype else O.to(out, logp.dtype)  # (a count divides smooth: float32)


def _cross_entropy_probs(logp: Tensor, target: Tensor, weight: Optional[Tensor], wshape: list, class_dim: int,
                         ignore_index: int, reduction: str, label_smoothing: float) -> Tensor:
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                           f"{target.dtype.name.capitalize()}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    n_classes = logp.shape[class_dim]
    if label_smoothing > 0.0:
        target = O.add(O.mul(target, 1.0 - label_smoothing), label_smoothing / n_classes)
    prod = O.mul(logp, target)
    if weight is not None:
        prod = O.mul(prod, O.reshape(weight, wshape))
    if reduction == "none":
        return O.neg(O.sum(prod, class_dim))
    if reduction == "sum":
        return O.neg(prod.sum())
    return named(O.div(O.neg(prod.sum()), logp.numel() / n_classes), "DivBackward1")


_BCE_EPS = 1e-12


def _clamped_log(x: Tensor) -> Tensor:
    """``max(log(x), -100)``, with a finite gradient at ``x == 0`` (as PyTorch's BCE)."""
    pos = O.gt(x, 0)
    return O.where(pos, O.clamp(O.log(O.where(pos, x, 1.0)), min=-100.0), -100.0)


@float32_policy
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """Binary cross entropy between probabilities ``input`` and ``target``."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if target.dtype != input.dtype:
        from ..runtime.ops import scalar_name
        raise RuntimeError(f"Found dtype {scalar_name(target)} but expected {scalar_name(input)}")
    if _concrete(input) and input.numel():
        a = input._concrete("binary_cross_entropy's input check", host=True)
        if not ((a >= 0) & (a <= 1)).all():  # (NaN too, as PyTorch's)
            raise RuntimeError("all elements of input should be between 0 and 1")
    def terms(x, target):
        return O.neg(O.add(O.mul(target, _clamped_log(x)), O.mul(O.rsub(target, 1.0), _clamped_log(O.rsub(x, 1.0)))))

    def bce(input, target):
        # PyTorch's gradient is (x - y) / max(x (1 - x), 1e-12): the derivative of these terms
        # where x (1 - x) >= 1e-12, and at a saturated x (exactly 0 or 1, as a float32
        # sigmoid gives) (x - y) / 1e-12, which is 0 where x == y
        x = input.detach()
        edge = O.lt(O.mul(x, O.rsub(x, 1.0)), _BCE_EPS)
        at_edge = O.add(terms(x, target), O.grad_only(O.mul(input, O.div(O.sub(x, target.detach()), _BCE_EPS))))
        loss = O.where(edge, at_edge, terms(input, target))
        return _reduce(loss if weight is None else O.mul(loss, weight), reduction)
    return one_node("BinaryCrossEntropyBackward0", bce, input, target)


@float32_policy
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Optional[Tensor] = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(input), target)`` computed stably from logits;
    ``pos_weight`` weighs the positive term per class."""
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if not target.dtype.is_floating_point:  # (its loss cannot be written in the target's dtype)
        raise RuntimeError(f"result type {O.scalar_name(input)} can't be cast to the desired output type "
                           f"{O.scalar_name(target)}")

    def bce_logits(input, target):
        log_sig = logsigmoid(input)
        if pos_weight is not None:
            log_sig = O.mul(O.add(O.mul(O.sub(pos_weight, 1.0), target), 1.0), log_sig)
        loss = O.sub(O.mul(O.rsub(target, 1.0), input), log_sig)
        return _reduce(loss if weight is None else O.mul(loss, weight), reduction)
    return one_node("BinaryCrossEntropyWithLogitsBackward0", bce_logits, input, target)


# ---------------------------------------------------------------- attention (its own module; re-exported here)
from .attention import multi_head_attention_forward, scaled_dot_product_attention  # noqa: E402

__all__ += ["multi_head_attention_forward", "scaled_dot_product_attention"]

# ---------------------------------------------------------------- more activations, losses and dropouts
from .functional_activations import (celu, glu, hardsigmoid, hardswish, hardtanh, mish, prelu,  # noqa: E402
                                     relu6, selu, softmin, softsign, tanhshrink)
from .functional_dropout import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout  # noqa: E402
from .functional_losses import (cosine_embedding_loss, cosine_similarity, hinge_embedding_loss,  # noqa: E402
                                kl_div, margin_ranking_loss, pairwise_distance, soft_margin_loss,
                                triplet_margin_loss, triplet_margin_with_distance_loss)

__all__ += ["celu", "glu", "hardsigmoid", "hardswish", "hardtanh", "mish", "prelu", "relu6", "selu", "softmin",
            "softsign", "tanhshrink", "alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",
            "cosine_embedding_loss", "cosine_similarity", "hinge_embedding_loss", "kl_div", "margin_ranking_loss",
            "pairwise_distance", "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]

from .functional_grid import affine_grid, grid_sample  # noqa: E402

__all__ += ["affine_grid", "grid_sample"]

from .functional_activations import (celu_, elu_, gumbel_softmax, hardshrink, hardtanh_,  # noqa: E402
                                     leaky_relu_, relu_, rrelu, rrelu_, selu_, softshrink, threshold, threshold_)
from .functional_norm import local_response_norm  # noqa: E402
from .functional_pool import (adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices,  # noqa: E402
                              channel_shuffle, max_pool1d_with_indices, max_pool2d_with_indices, upsample_bilinear,
                              upsample_nearest)
from .functional_losses import (gaussian_nll_loss, multi_margin_loss, multilabel_margin_loss,  # noqa: E402
                                multilabel_soft_margin_loss, pdist, poisson_nll_loss)

__all__ += ["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "bilinear", "celu_",
            "channel_shuffle", "elu_", "gumbel_softmax", "hardshrink", "hardtanh_", "leaky_relu_",
            "local_response_norm", "max_pool1d_with_indices", "max_pool2d_with_indices", "relu_", "rrelu", "rrelu_",
            "selu_", "softshrink", "threshold", "threshold_", "upsample_bilinear", "upsample_nearest",
            "gaussian_nll_loss", "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
            "pdist", "poisson_nll_loss"]

from .functional_conv import conv3d, conv_transpose3d  # noqa: E402
from .functional_pool import (adaptive_avg_pool3d, adaptive_max_pool3d, adaptive_max_pool3d_with_indices,  # noqa: E402
                              avg_pool3d, embedding_bag, lp_pool1d, lp_pool2d, lp_pool3d, max_pool3d,
                              max_pool3d_with_indices, max_unpool1d, max_unpool2d, max_unpool3d)

__all__ += ["conv3d", "conv_transpose3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
            "adaptive_max_pool3d_with_indices", "avg_pool3d", "embedding_bag", "lp_pool1d", "lp_pool2d", "lp_pool3d",
            "max_pool3d", "max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d"]

from .functional_ctc import ctc_loss  # noqa: E402

__all__ += ["ctc_loss"]

from .functional_pool import (fractional_max_pool2d, fractional_max_pool2d_with_indices,  # noqa: E402
                              fractional_max_pool3d, fractional_max_pool3d_with_indices)

__all__ += ["fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
            "fractional_max_pool3d_with_indices"]
