"""``nn.utils.parametrizations``: weight normalization and spectral normalization as
and orthogonal matrices as parametrizations (``torch.nn.utils.parametrizations``),
registered through ``parametrize.register_parametrization``."""
from __future__ import annotations

from typing import Optional, Tuple

from ...runtime import linalg
from ...runtime.factory import eye, zeros_like
from ...runtime.ops import cat

from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor
from ..functional import normalize
from ..module import Module
from . import parametrize
from .spectral_norm import default_dim, random_unit, weight_to_matrix
from .weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """``weight = g * v / ||v||``; the originals are ``original0 = g``, ``original1 = v``."""

    def __init__(self, dim: Optional[int] = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> Tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: Optional[int] = 0) -> Module:
    """Parametrize ``module.<name>`` as ``g * v / ||v||`` (norm over all dims but ``dim``;
    ``None``: the whole tensor), stored as ``parametrizations.<name>.original0/1``."""
    return parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` estimated by power iteration on buffers ``_u``/``_v``,
    which advance ``n_power_iterations`` steps at every evaluation in training mode."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] "
                             f"but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            self.register_buffer("_u", random_unit(weight_mat, h, eps))
            self.register_buffer("_v", random_unit(weight_mat, w, eps))
            self._power_method(weight_mat, 15)  # a good estimate from the start

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        assert weight.dim() > 1
        return weight_to_matrix(weight, self.dim)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(weight_mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.dim() == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # clones, so that later in-place updates do not touch what autograd saved
        sigma = self._u.clone().dot(weight_mat.mv(self._v.clone()))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: Optional[int] = None) -> Module:
    """Parametrize ``module.<name>`` as itself divided by its spectral norm (``dim``: the
    output dimension, 1 for transposed convolutions by default)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    dim = default_dim(module) if dim is None else dim
    return parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H_1 ... H_k``, ``H_i = I - tau_i v_i v_i^T`` with ``v_i``
    column ``i`` of the strictly lower triangular ``a`` plus 1 on the diagonal
    (``linalg.householder_product`` for such an ``a``)."""
    n, k = a.shape[-2], a.shape[-1]
    q = eye(n, k, dtype=a.dtype).expand(*a.shape[:-2], n, k)
    units = eye(n, dtype=a.dtype)
    for i in reversed(range(k)):  # apply H_k first: Q = H_1 (H_2 (... H_k I))
        v = (a[..., :, i] + units[i]).unsqueeze(-1)
        q = q - tau[..., i, None, None] * v * (v.mT @ q)
    return q


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of ``a``'s QR decomposition, signed so that R has a positive diagonal (R's
    diagonal is real, for complex matrices too)."""
    q, r = linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    """An orthogonal matrix (columns or rows orthonormal) from an unconstrained one, by
    ``matrix_exp`` or ``cayley`` of its skew-symmetric part or as a product of Householder
    reflections; with trivialization the result multiplies the buffer ``base``, which
    assigning a matrix sets (the original then restarts from the identity)."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:  # work on the tall form
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:  # embed into a square matrix
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH  # (skew-Hermitian for complex matrices: a unitary result)
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^-1
                Id = eye(n, dtype=A.dtype)
                Q = linalg.solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            # the diagonal of X holds the reflections' signs (+-1), not differentiated
            Q = _householder_product(A, tau) * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        if not hasattr(self, "base"):
            raise NotImplementedError("It is not possible to assign to the parametrization when "
                                      "use_trivialization=False.")
        with no_grad():
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            if n < k:
                Q = Q.mT
                n, k = k, n
            if n != k:  # complete Q into a square matrix
                Q = cat([Q, Q.new_empty(*Q.shape[:-2], n, n - k).normal_(0, 1)], dim=-1)
            self.base = _make_orthogonal(Q)
            # -I: the Householder map sends it (and the other maps send its tril part) to I
            neg_id = zeros_like(Q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: Optional[str] = None, *,
               use_trivialization: bool = True) -> Module:
    """Parametrize ``module.<name>`` (a matrix or batch) as an orthogonal matrix, keeping
    its initial value (orthogonalized); ``orthogonal_map``: "matrix_exp" (default for
    square), "cayley" or "householder" (default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.dim()} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    if orthogonal_map == "householder" and weight.is_complex():
        raise ValueError("The householder parametrization does not support complex tensors.")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    return parametrize.register_parametrization(module, name, orth, unsafe=True)
