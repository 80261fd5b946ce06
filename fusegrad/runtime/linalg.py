"""Matrix ops: ``diagonal`` and ``diag_embed`` (compositions of indexing and products),
and the ``fusegrad.linalg`` functions ``cholesky`` and ``solve_triangular`` (primitives
with their own VJP/JVP rules, ``ir/prims/linalg.py``)."""
from __future__ import annotations

import numpy as np

from ..ir import prims as P
from ..ir.prims.linalg import NOT_POSITIVE_DEFINITE, LinAlgError
from .dispatch import op_error
from .exports import op
from ..ir.prims.shapes import broadcast_shapes
from .ops import _axes, as_t, expand, movedim, named, sum
from .tensor import Tensor, wrap

__all__ = ["diagonal", "diag_embed", "cholesky", "solve_triangular", "LinAlgError"]


def _diag_positions(m: int, offset: int):
    """Row and column of the ``m`` elements of diagonal ``offset``."""
    i = np.arange(m)
    return i + max(-offset, 0), i + max(offset, 0)


@op
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of the matrices spanned by ``dim1`` and ``dim2``, as the last
    dimension. Of the last two dimensions of a contiguous tensor it is a view, as PyTorch's
    (``a.diagonal().add_(eps)`` updates ``a``): every (m+1)-th element of the flattened
    matrices; otherwise a copy, whose writes do not reach ``input``."""
    x = as_t(input)
    d1, d2 = _axes(x, dim1)[0], _axes(x, dim2)[0]
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    nd = x.ndim
    n, m = x.shape[d1], x.shape[d2]
    length = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    if (d1, d2) == (nd - 2, nd - 1) and x.is_contiguous() and length:
        start = offset if offset >= 0 else -offset * m
        flat = x.view(*x.shape[:-2], n * m)
        return named(flat[..., start:start + (length - 1) * (m + 1) + 1:m + 1], "DiagonalBackward0")
    x = movedim(x, (d1, d2), (-2, -1))
    rows, cols = _diag_positions(length, offset)
    return named(x[(Ellipsis, wrap(rows), wrap(cols))], "DiagonalBackward0")


@op
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dimension of ``input`` on their diagonal ``offset``, in
    dimensions ``dim1`` and ``dim2`` of the result."""
    x = as_t(input)
    m = x.shape[-1]
    n = m + abs(offset)
    e = np.zeros((m, n, n), x._data.dtype)
    rows, cols = _diag_positions(m, offset)
    e[np.arange(m), rows, cols] = 1
    out = sum(x.reshape(tuple(x.shape) + (1, 1)) * wrap(e), -3)
    nd = out.ndim
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return movedim(out, (-2, -1), (d1, d2)) if (d1, d2) != (nd - 2, nd - 1) else out


def _square(a: Tensor, what: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{what}: A must be batches of square matrices, but they are "
                           f"{'x'.join(map(str, a.shape[-2:]))} matrices")


def cholesky(A, *, upper: bool = False, out=None) -> Tensor:
    """The Cholesky factor ``L`` (lower; ``upper``: ``L^T``) of symmetric positive-definite ``A``
    (``torch.linalg.cholesky``); raises ``LinAlgError`` when ``A`` is not positive-definite."""
    a = as_t(A)
    _square(a, "linalg.cholesky")
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"linalg.cholesky: Expected a floating point tensor as input. Got {a.dtype}")
    lower = P.cholesky(a)
    # the device kernel leaves NaN from a non-positive pivot on; PyTorch's CUDA cholesky
    # also waits for the factorization to report it
    if lower.is_cuda and bool(lower.isnan().any()):
        raise op_error(P.cholesky, (a,), LinAlgError(NOT_POSITIVE_DEFINITE))
    return lower.mT if upper else lower


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``) for triangular ``A``, reading only
    its upper or lower triangle (``torch.linalg.solve_triangular``)."""
    a, b = as_t(A), as_t(B)
    _square(a, "linalg.solve_triangular")
    if unitriangular:
        n = a.shape[-1]
        eye = wrap(np.eye(n, dtype=a._data.dtype))
        a = a * (1 - eye) + eye
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return solve_triangular(a.mT, b.mT, upper=not upper).mT
    shape = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    a = expand(a, tuple(shape) + tuple(a.shape[-2:])) if tuple(a.shape[:-2]) != tuple(shape) else a
    b = expand(b, tuple(shape) + tuple(b.shape[-2:])) if tuple(b.shape[:-2]) != tuple(shape) else b
    return P.triangular_solve(a, b, upper=bool(upper))
