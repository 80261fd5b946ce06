"""Randomized low-rank decompositions: ``torch.svd_lowrank`` and ``torch.pca_lowrank``, as
PyTorch's ``torch._lowrank`` computes them (Halko, Martinsson and Tropp 2009: a random
projection refined by ``niter`` subspace iterations, then the SVD of the projected matrix).
Composed from fusegrad's ops, so gradients flow; the random projection comes from
fusegrad's generator, so the results equal PyTorch's where the decomposition does not
depend on it (``q`` at least ``A``'s rank), up to the signs of singular vectors."""
from __future__ import annotations

from typing import Optional

from ..ir import dtypes as D
from . import linalg as L
from . import ops as O
from .exports import op
from .factory import randn
from .tensor import Tensor


def _dense(A) -> Tensor:
    """``A``, a sparse one made dense (the decomposition only multiplies by it)."""
    return A.to_dense() if getattr(A, "is_sparse", False) else O.as_t(A)


def _approximate_basis(a: Tensor, q: int, niter: int, m: Optional[Tensor]) -> Tensor:
    """``Q`` with ``q`` orthonormal columns such that ``Q Q^H (A - M)`` approximates ``A - M``."""
    dtype = a.dtype if a.dtype.is_floating_point or a.dtype.is_complex else D.float32
    r = randn(a.shape[-1], q, dtype=dtype, device=a.device)

    def times(x: Tensor, adjoint: bool = False) -> Tensor:
        y = O.matmul(a.mH if adjoint else a, x)
        return y if m is None else y - O.matmul(m.mH if adjoint else m, x)
    basis = L.linalg_qr(times(r)).Q
    for _ in range(niter):
        basis = L.linalg_qr(times(L.linalg_qr(times(basis, adjoint=True)).Q)).Q
    return basis


def _svd_lowrank(a: Tensor, q: int, niter: int, m: Optional[Tensor]) -> tuple:
    rows, cols = a.shape[-2:]
    if m is not None:
        m = O.broadcast_to(m, tuple(a.shape))
    if rows < cols:  # (the basis of the smaller side)
        a, m = a.mH, (None if m is None else m.mH)
    basis = _approximate_basis(a, q, niter, m)
    b = O.matmul(basis.mH, a)
    if m is not None:
        b = b - O.matmul(basis.mH, m)
    u, s, vh = L.linalg_svd(b, full_matrices=False)
    u, v = O.matmul(basis, u), vh.mH
    return (v, s, u) if rows < cols else (u, s, v)


@op(method=False)
def svd_lowrank(A: Tensor, q: Optional[int] = 6, niter: Optional[int] = 2,  # noqa: N803
                M: Optional[Tensor] = None) -> tuple:  # noqa: N803
    """``(U, S, V)`` with ``A - M ~ U diag(S) V^H`` of rank ``q`` (``M``: zero by default)."""
    return _svd_lowrank(_dense(A), 6 if q is None else q, 2 if niter is None else niter,
                        None if M is None else O.as_t(M))


@op(method=False)
def pca_lowrank(A: Tensor, q: Optional[int] = None, center: bool = True, niter: int = 2) -> tuple:  # noqa: N803
    """``(U, S, V)`` of ``A`` with its column means taken out (``center``): ``V``'s columns are
    the principal directions, ``S ** 2 / (m - 1)`` the variances along them."""
    a = _dense(A)
    rows, cols = a.shape[-2:]
    if q is None:
        q = min(6, rows, cols)
    elif not 0 <= q <= min(rows, cols):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(rows, cols)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        a = a - O.mean(a, -2, keepdim=True)
    return _svd_lowrank(a, q, niter, None)
