"""CosineSimilarity and PairwiseDistance."""
from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from ..module import Module


class CosineSimilarity(Module):
    """Cosine similarity of ``x1`` and ``x2`` along ``dim``, norms clamped below at ``eps``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``||x1 - x2 + eps||_p`` over the last dim (PyTorch keeps ``p`` as ``norm``)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
