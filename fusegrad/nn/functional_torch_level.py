"""The ``torch.X`` spellings of ``nn.functional``'s ops (``torch.conv2d``, ``torch.layer_norm``,
``torch.dropout``, ...), with the ATen signatures PyTorch gives them: losses take an integer
``reduction`` (0 none, 1 mean, 2 sum), ``torch.batch_norm`` takes its weight before the running
statistics, ``torch.embedding`` its weight first. ``fusegrad/__init__.py`` exports ``FUNCTIONS``."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..runtime.factory import tensor
from ..runtime.tensor import Tensor
from . import functional as F

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(reduction: int) -> str:
    if reduction not in (0, 1, 2):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


def layer_norm(input: Tensor, normalized_shape, weight: Optional[Tensor] = None,  # noqa: A002
               bias: Optional[Tensor] = None, eps: float = 1e-5, cudnn_enable: bool = True) -> Tensor:
    """``F.layer_norm`` (``cudnn_enable`` has no effect)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def batch_norm(input: Tensor, weight: Optional[Tensor], bias: Optional[Tensor],  # noqa: A002
               running_mean: Optional[Tensor], running_var: Optional[Tensor], training: bool, momentum: float,
               eps: float, cudnn_enabled: bool) -> Tensor:
    """``F.batch_norm`` with ATen's argument order."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight: Optional[Tensor], bias: Optional[Tensor],  # noqa: A002
                  running_mean: Optional[Tensor], running_var: Optional[Tensor], use_input_stats: bool,
                  momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    """``F.instance_norm`` with ATen's argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None,  # noqa: A002
               bias: Optional[Tensor] = None, eps: float = 1e-5, cudnn_enabled: bool = True) -> Tensor:
    """``F.group_norm``."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """``F.embedding(indices, weight)`` (a ``padding_idx`` of -1 is none, as in ATen)."""
    return F.embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def embedding_renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """Scale, in place, the rows of ``weight`` that ``indices`` use whose ``norm_type``-norm
    exceeds ``max_norm`` down to it; ``weight`` returned."""
    F._embedding_renorm_(weight, indices, max_norm, norm_type)
    return weight


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor, scale_grad_by_freq: bool = False, mode: int = 0,
                  sparse: bool = False, per_sample_weights: Optional[Tensor] = None, include_last_offset: bool = False,
                  padding_idx: Optional[int] = None) -> tuple:
    """``F.embedding_bag`` with ATen's signature (weight first, ``mode`` 0 sum, 1 mean, 2 max)
    and ATen's four results: the bags, each index's bag (``offset2bag``), each bag's size
    and ``max_indices`` (max: the rows of each bag's maxima; mean: the sizes; sum: zeros;
    the sizes are zeros in sum mode too, as PyTorch's CPU kernel. Unlike its float32 sum fast
    path, ``offset2bag`` is always given)."""
    out = F.embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, _BAG_MODES[mode], sparse,
                          per_sample_weights, include_last_offset, padding_idx)
    ids = indices._concrete("torch.embedding_bag's offset2bag", host=True)
    off = np.asarray(offsets._concrete("torch.embedding_bag's offset2bag", host=True), np.int64)
    num_bags = out.shape[0]
    bag = np.searchsorted(off[:num_bags], np.arange(ids.size), side="right") - 1
    keep = np.ones(ids.shape, bool) if padding_idx is None else ids != padding_idx % weight.shape[0]
    size = np.bincount(bag[keep], minlength=num_bags) if mode else np.zeros(num_bags, np.int64)
    most = _bag_max_rows(weight, out, ids, bag, keep) if mode == 2 else size
    return out, *(tensor(a.astype(ids.dtype)) for a in (bag, size, most))


def _bag_max_rows(weight: Tensor, out: Tensor, ids: np.ndarray, bag: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """(bags, D): the row of ``weight`` whose element is each bag's maximum (the first such
    index in the bag; 0 for an empty bag)."""
    n = ids.size
    if not n:
        return np.zeros(out.shape, np.int64)
    rows = weight.detach().numpy()[ids]
    hit = (rows == out.detach().numpy()[bag]) & keep[:, None]
    first = np.full(out.shape, n)
    np.minimum.at(first, bag, np.where(hit, np.arange(n)[:, None], n))
    return np.where(first < n, ids[np.minimum(first, n - 1)], 0)


def _dropouts(fn):
    """``torch.X(input, p, train)`` and ``torch.X_`` of a functional dropout ``fn``."""
    def out_of_place(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
        return fn(input, p, train)

    def in_place(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
        return fn(input, p, train, inplace=True)
    return out_of_place, in_place


dropout, dropout_ = _dropouts(F.dropout)
alpha_dropout, alpha_dropout_ = _dropouts(F.alpha_dropout)
feature_alpha_dropout, feature_alpha_dropout_ = _dropouts(F.feature_alpha_dropout)
feature_dropout, feature_dropout_ = _dropouts(
    lambda input, p, train, inplace=False: F.dropout2d(input, p, train, inplace) if input.ndim == 4 else
    F.dropout1d(input, p, train, inplace) if input.ndim in (2, 3) else F.dropout3d(input, p, train, inplace))


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple[Tensor, Tensor]:  # noqa: A002
    """The pooled values and their indices (``torch.adaptive_max_pool1d`` returns both)."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:  # noqa: A002
    """``F.pad(input, pad, value=value)``."""
    return F.pad(input, pad, "constant", value)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 1) -> Tensor:
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 1) -> Tensor:
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, reduction: int = 1) -> Tensor:
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,  # noqa: A002
                         reduction: int = 1) -> Tensor:
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,  # noqa: A002
                     reduction: int) -> Tensor:
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def kl_div(input: Tensor, target: Tensor, reduction: int = 1, *, log_target: bool = False) -> Tensor:  # noqa: A002
    """Note ATen's mean (reduction 1) is the elementwise mean, not ``F.kl_div``'s warned-about default."""
    return F.kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Optional[Tensor] = None,  # noqa: A002
                                     pos_weight: Optional[Tensor] = None, reduction: int = 1) -> Tensor:
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                              pos_weight=pos_weight)


# nn.functional's own signatures match ATen's for these
_SAME = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "max_pool1d",
         "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "pixel_shuffle", "pixel_unshuffle", "prelu",
         "selu", "selu_", "celu", "celu_", "rrelu", "rrelu_", "threshold", "threshold_", "hardshrink",
         "cosine_similarity", "pairwise_distance", "pdist", "bilinear", "rms_norm", "channel_shuffle")

FUNCTIONS: dict = {n: getattr(F, n) for n in _SAME}
FUNCTIONS.update({n: globals()[n] for n in (
    "layer_norm", "batch_norm", "instance_norm", "group_norm", "embedding", "embedding_bag", "embedding_renorm_",
    "dropout", "dropout_", "alpha_dropout",
    "alpha_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "feature_dropout", "feature_dropout_",
    "adaptive_max_pool1d", "constant_pad_nd", "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
    "hinge_embedding_loss", "poisson_nll_loss", "kl_div", "binary_cross_entropy_with_logits")})
FUNCTIONS["native_channel_shuffle"] = F.channel_shuffle
