"""More of ``torch.linalg``, composed from fusegrad's ops (their gradients are those ops'):
``matmul``, ``diagonal``, ``vander``, the ``*_ex`` variants that report failures in an
``info`` tensor (``solve_ex``, ``inv_ex``, ``cholesky_ex``, ``lu_factor_ex``), the LU
family (``lu_factor``, ``lu``, ``lu_solve``), ``lstsq``, ``tensorinv`` and ``tensorsolve``.
Real and complex dtypes.

The LU factorization picks its row pivots as LAPACK's ``getrf`` does (the largest magnitude
in the column, the first such row; for complex entries LAPACK's ``|Re| + |Im|``) in NumPy,
then factors the row-permuted matrix without pivoting in fusegrad's ops, so that the
factors carry gradients."""
from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from ..ir.prims.linalg import LinAlgError
from .autocast_state import float32_policy
from . import linalg as L
from . import ops as O
from .factory import ones_like
from .keywords import _type_name
from .sorting import _return_type
from .tensor import Tensor, wrap

__all__ = ["matmul", "diagonal", "vander", "solve_ex", "inv_ex", "cholesky_ex", "lu_factor", "lu_factor_ex", "lu",
           "lu_solve", "lstsq", "tensorinv", "tensorsolve"]

solve_ex_type = _return_type("linalg_solve_ex", ("result", "info"))
inv_ex_type = _return_type("linalg_inv_ex", ("inverse", "info"))
cholesky_ex_type = _return_type("linalg_cholesky_ex", ("L", "info"))
lu_factor_type = _return_type("linalg_lu_factor", ("LU", "pivots"))
lu_factor_ex_type = _return_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
lu_type = _return_type("linalg_lu", ("P", "L", "U"))
lstsq_type = _return_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))


def matmul(input, other) -> Tensor:  # noqa: A002
    """The matrix product (``torch.linalg.matmul``, an alias of ``torch.matmul``)."""
    return O.matmul(input, other)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: N803
    """The diagonal of each matrix (``torch.diagonal`` with the last two dims by default)."""
    return L.diagonal(A, offset, dim1, dim2)


def vander(x, *, N=None) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of ``x``'s last dim: columns ``x**0, x**1, ..., x**(N-1)`` (``N``
    defaults to that dim's size). Built by repeated products, as PyTorch's cumulative product,
    so that the gradient at ``x == 0`` is finite."""
    x = O.as_t(x)
    if x.ndim < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension")
    n = x.shape[-1] if N is None else N
    if n < 1:
        raise RuntimeError("N must be greater than 1.")
    if x.dtype == D.bool_:
        raise RuntimeError("linalg.vander supports floating point, complex, and integer tensors, but got Bool")
    cols = [ones_like(x)]
    for _ in range(n - 1):
        cols.append(cols[-1] * x)
    return O.stack(cols, -1)


# ---------------------------------------------------------------- LU
def _pivot_rows(a: np.ndarray) -> tuple:
    """LAPACK ``getrf``'s row interchanges of each matrix of ``a``: the 1-based pivots (int32),
    the resulting row order ``perm`` (row ``i`` of ``P^T A`` is row ``perm[i]`` of ``A``) and
    ``info`` (the 1-based index of the first exactly zero pivot, 0 if none)."""
    w = np.array(a, copy=True)
    m, n = w.shape[-2:]
    batch = w.shape[:-2]
    k = min(m, n)
    pivots = np.zeros(batch + (k,), dtype=np.int32)
    perm = np.broadcast_to(np.arange(m), batch + (m,)).copy()
    info = np.zeros(batch, dtype=np.int32)
    for j in range(k):
        p = j + np.argmax(_magnitude(w[..., j:, j]), axis=-1)
        pivots[..., j] = p + 1
        rows_j = np.take_along_axis(w, np.full(batch + (1, 1), j), -2)
        rows_p = np.take_along_axis(w, p[..., None, None], -2)
        np.put_along_axis(w, np.full(batch + (1, 1), j), rows_p, -2)
        np.put_along_axis(w, p[..., None, None], rows_j, -2)
        pj, pp = perm[..., j].copy(), np.take_along_axis(perm, p[..., None], -1)[..., 0]
        perm[..., j] = pp
        np.put_along_axis(perm, p[..., None], pj[..., None], -1)
        piv = w[..., j, j]
        info = np.where((piv == 0) & (info == 0), j + 1, info).astype(np.int32)
        col = w[..., j + 1:, j] / np.where(piv == 0, 1, piv)[..., None]
        w[..., j + 1:, j] = col
        w[..., j + 1:, j + 1:] -= col[..., :, None] * w[..., j, None, j + 1:]
    return pivots, perm, info


def _magnitude(v: np.ndarray) -> np.ndarray:
    """The magnitude LAPACK's pivot search (``i?amax``) compares: ``|v|``, or ``|Re v| + |Im v|``
    for complex ``v``."""
    return np.abs(v.real) + np.abs(v.imag) if np.iscomplexobj(v) else np.abs(v)


def _no_pivot_lu(w: Tensor) -> Tensor:
    """The packed LU factors (unit-lower ``L`` below the diagonal, ``U`` on and above it) of each
    matrix of ``w``, by elimination without row interchanges; a zero pivot leaves its column
    unscaled, as LAPACK."""
    m, n = w.shape[-2:]
    steps = []  # (row j of U, column j of L below the diagonal)
    for _ in range(min(m, n)):
        rows, cols = w.shape[-2:]
        top = O.narrow(w, -2, 0, 1)
        piv = O.narrow(top, -1, 0, 1)
        below = O.narrow(w, -2, 1, rows - 1)
        col = O.narrow(below, -1, 0, 1) / O.where(piv == 0, ones_like(piv), piv)
        steps.append((top, col))
        w = O.narrow(below, -1, 1, cols - 1) - O.matmul(col, O.narrow(top, -1, 1, cols - 1))
    for top, col in reversed(steps):  # (what is left of w: the rows or columns past min(m, n))
        w = O.cat([top, O.cat([col, w], -1)], -2)
    return w


def _permuted_rows(a: Tensor, perm: np.ndarray) -> Tensor:
    """``a`` with row ``i`` of each matrix taken from row ``perm[..., i]`` (differentiable)."""
    idx = np.broadcast_to(perm[..., :, None], tuple(perm.shape) + (a.shape[-1],))
    return O.gather(a, -2, wrap(np.ascontiguousarray(idx, dtype=np.int64)))


def _lu_parts(A, what: str) -> tuple:
    """``(LU, pivots, info, perm)`` of ``A`` (see ``_pivot_rows``)."""
    a = O.as_t(A)
    if a.ndim < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")
    L._floating(a, what)
    pivots, perm, info = _pivot_rows(a.detach().numpy())
    return _no_pivot_lu(_permuted_rows(a, perm)), wrap(pivots), wrap(info), perm


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False):  # noqa: N803
    """The packed LU factorization ``A = P L U`` with LAPACK's pivots (1-based, as successive row
    swaps) and ``info``, the first zero pivot's 1-based index (``torch.linalg.lu_factor_ex``)."""
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, pivots, info, _ = _lu_parts(A, "torch.linalg.lu_factor_ex")
    if check_errors:
        _check_pivots(info._data, "torch.linalg.lu_factor_ex")
    return lu_factor_ex_type(lu_, pivots, info)


def _check_pivots(info: np.ndarray, what: str) -> None:
    """PyTorch's error for the first matrix with a zero pivot (``info`` > 0)."""
    bad = np.argwhere(info > 0)
    if bad.size:
        at = tuple(int(i) for i in bad[0])
        batch = f"(Batch element {np.ravel_multi_index(at, info.shape)}): " if info.ndim else ""
        k = int(info[at])
        raise RuntimeError(f"{what}: {batch}U[{k},{k}] is zero and using it on lu_solve would result in a division "
                           f"by zero. If you still want to perform the factorization, consider calling "
                           f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A, *, pivot: bool = True):  # noqa: N803
    """``(LU, pivots)`` of ``lu_factor_ex``; raises where a pivot is zero, as PyTorch."""
    lu_, pivots, info = lu_factor_ex(A, pivot=pivot)
    _check_pivots(info._data, "torch.linalg.lu_factor")
    return lu_factor_type(lu_, pivots)


def unpack(lu_: Tensor) -> tuple:
    """The unit-lower ``L`` (m x k) and upper ``U`` (k x n) packed in ``lu_``, ``k = min(m, n)``."""
    m, n = lu_.shape[-2:]
    k = min(m, n)
    eye = wrap(np.eye(m, k, dtype=lu_._data.dtype))
    low = O.tril(O.narrow(lu_, -1, 0, k), -1) + eye
    return low, O.triu(O.narrow(lu_, -2, 0, k))


def lu(A, *, pivot: bool = True):  # noqa: N803
    """``P, L, U`` with ``A = P L U``: a permutation matrix, unit-lower ``L`` and upper ``U``
    (``torch.linalg.lu``)."""
    if not pivot:
        raise RuntimeError("linalg.lu: LU without pivoting is not implemented on the CPU")
    lu_, _, _, perm = _lu_parts(A, "linalg.lu")
    return lu_type(permutation_matrix(perm, lu_.dtype), *unpack(lu_))


def permutation_matrix(perm: np.ndarray, dtype: D.dtype) -> Tensor:
    """``P`` with ``P^T A`` = the rows ``perm`` of ``A`` (``perm`` from ``_pivot_rows`` or ``perm_of``)."""
    m = perm.shape[-1]
    # P[perm[i], i] = 1: column i of P picks the row of A that row i of L U came from
    p = np.zeros(tuple(perm.shape) + (m,), dtype=dtype.np)
    np.put_along_axis(p, perm[..., :, None], 1, -1)
    return wrap(np.ascontiguousarray(np.swapaxes(p, -1, -2)))


def perm_of(pivots: np.ndarray, m: int) -> np.ndarray:
    """The row order ``perm`` that LAPACK's successive 1-based row swaps ``pivots`` make."""
    perm = np.broadcast_to(np.arange(m), pivots.shape[:-1] + (m,)).copy()
    flat, piv = perm.reshape(-1, m), pivots.reshape(-1, pivots.shape[-1]) - 1
    for b in range(flat.shape[0]):
        for i, p in enumerate(piv[b]):
            flat[b, i], flat[b, p] = flat[b, p], flat[b, i]
    return flat.reshape(perm.shape)


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False) -> Tensor:  # noqa: N803
    """``X`` with ``A X = B`` (``adjoint``: ``A^T X = B``; ``left=False``: ``X A = B``) from
    ``A``'s LU factorization (``torch.linalg.lu_solve``): two triangular solves. (``adjoint`` is
    the conjugate transpose, for complex ``A``.)"""
    lu_, b = O.as_t(LU), O.as_t(B)
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return lu_solve(lu_, pivots, b.mH, adjoint=not adjoint).mH
    n = lu_.shape[-1]
    if lu_.shape[-2] != n:
        raise RuntimeError("linalg.lu_solve: Expected LU to be a square matrix")
    if b.shape[-2] != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B ({n}x{n} and "
                           f"{b.shape[-2]}x{b.shape[-1]})")
    batch = tuple(np.broadcast_shapes(tuple(lu_.shape[:-2]), tuple(b.shape[:-2]), tuple(pivots.shape[:-1])))
    lu_ = O.expand(lu_, batch + (n, n))
    b = O.expand(b, batch + tuple(b.shape[-2:]))
    perm = np.broadcast_to(perm_of(np.asarray(pivots._data), n), batch + (n,))
    low, up = unpack(lu_)
    if adjoint:  # A^H = U^H L^H P^T: X = P L^-H U^-H B
        y = L.solve_triangular(low.mH, L.solve_triangular(up.mH, b, upper=False), upper=True, unitriangular=True)
        return _permuted_rows(y, np.argsort(perm, axis=-1))
    y = L.solve_triangular(low, _permuted_rows(b, perm), upper=False, unitriangular=True)
    return L.solve_triangular(up, y, upper=True)


# ---------------------------------------------------------------- the *_ex variants
def _singular_info(a: Tensor) -> tuple:
    """``info`` of each matrix of ``a`` (as ``_pivot_rows``'), and ``a`` with its singular matrices
    replaced by the identity (so that a solve of the batch goes through)."""
    info = _pivot_rows(a.detach().numpy())[2]
    bad = wrap((info > 0)[..., None, None])
    return wrap(info), O.where(bad, wrap(np.eye(a.shape[-1], dtype=a._data.dtype)), a), bad


def _nan(like: Tensor):
    """The NaN a singular matrix's result is filled with: ``nan+nanj`` for complex, as PyTorch's."""
    return complex(math.nan, math.nan) if like.dtype.is_complex else math.nan


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False):  # noqa: N803
    """``(result, info)`` of ``linalg.solve``; ``info`` is the first zero pivot's 1-based index
    for a singular matrix, whose result is NaN (PyTorch leaves LAPACK's unspecified values)."""
    a = L._matrices(A, "linalg.solve_ex")
    info, safe, bad = _singular_info(a)
    if check_errors and bool((info._data > 0).any()):
        raise LinAlgError("torch.linalg.solve_ex: The solver failed because the input matrix is singular.")
    x = L.solve(safe, B, left=left)
    b = O.as_t(B)
    if b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1])):
        bad = bad.squeeze(-1)  # (a batch of vectors)
    return solve_ex_type(O.where(bad, _nan(x), x), info)


@float32_policy
def inv_ex(A, *, check_errors: bool = False):  # noqa: N803
    """``(inverse, info)`` of ``linalg.inv`` (``info`` and a singular matrix's NaN as ``solve_ex``'s)."""
    a = L._matrices(A, "linalg.inv_ex")
    info, safe, bad = _singular_info(a)
    if check_errors and bool((info._data > 0).any()):
        raise LinAlgError(f"linalg.inv_ex: The diagonal element {int(info._data[info._data > 0].reshape(-1)[0])} is "
                          "zero, the inversion could not be completed because the input matrix is singular.")
    return inv_ex_type(O.where(bad, _nan(a), L.inv(safe)), info)


def _cholesky_info(a: np.ndarray) -> tuple:
    """LAPACK ``potf2``'s lower factor of each (symmetric or Hermitian) matrix, stopped at the
    first non-positive pivot (left there, unrooted), and ``info``, that pivot's 1-based index (0 if none)."""
    w = np.tril(np.array(a, copy=True))
    n = w.shape[-1]
    info = np.zeros(w.shape[:-2], dtype=np.int32)
    for j in range(n):
        live = info == 0
        row = w[..., j, :j].conj()  # (a Hermitian matrix's factor: A = L L^H)
        d = (w[..., j, j] - np.einsum("...k,...k->...", w[..., j, :j], row)).real
        bad = live & ~(d > 0)
        info = np.where(bad, j + 1, info).astype(np.int32)
        root = np.sqrt(np.where(d > 0, d, 1))
        col = (w[..., j + 1:, j] - np.einsum("...ik,...k->...i", w[..., j + 1:, :j], row)) / root[..., None]
        good = live & ~bad
        w[..., j, j] = np.where(good, root, np.where(bad, d, w[..., j, j]))
        w[..., j + 1:, j] = np.where(good[..., None], col, w[..., j + 1:, j])
    return w, info


@float32_policy
def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False):  # noqa: N803
    """``(L, info)`` of ``linalg.cholesky``; ``info`` is the 1-based order of the first leading minor
    that is not positive-definite (then ``L`` is LAPACK's partial factor: only its columns before
    that one are meaningful)."""
    a = L._matrices(A, "linalg.cholesky_ex")
    partial, info = _cholesky_info(a.detach().numpy())
    if not bool((info > 0).any()):
        return cholesky_ex_type(L.cholesky(a, upper=upper), wrap(info))
    if check_errors:
        first = int(info[info > 0].reshape(-1)[0])
        raise LinAlgError(f"linalg.cholesky_ex: The factorization could not be completed because the input is not "
                          f"positive-definite (the leading minor of order {first} is not positive-definite).")
    factor = wrap(np.ascontiguousarray(np.swapaxes(partial, -1, -2).conj() if upper else partial))
    return cholesky_ex_type(factor, wrap(info))


# ---------------------------------------------------------------- least squares and tensor equations
_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@float32_policy
def lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803
    """The least-squares (minimum-norm, for a rank-deficient ``A``) solution of ``A X = B``
    (``torch.linalg.lstsq``), as ``pinv(A) @ B`` with singular values below ``rcond * s_max``
    dropped (default: machine epsilon times ``max(m, n)``), so its gradient is PyTorch's (which
    also differentiates the pseudoinverse). The other fields follow the CPU ``driver`` (default
    ``'gelsy'``): ``residuals`` (squared magnitudes, per column, real for complex ``A``; for
    ``m > n`` and full rank, not for ``gelsy``), ``rank`` (not for ``gels``) and
    ``singular_values`` (``gelsd``/``gelss`` only); a field a driver does not compute is empty."""
    a, b = O.as_t(A), O.as_t(B)
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of ('gels', 'gelsy', 'gelsd', "
                           "'gelss')")
    if a.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    L._floating(a, "torch.linalg.lstsq")
    if a.dtype != b.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {_type_name(a._data.dtype)} and other's dtype {_type_name(b._data.dtype)}")
    vector = b.ndim == a.ndim - 1
    bm = b.unsqueeze(-1) if vector else b
    m, n = a.shape[-2:]
    if bm.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    rtol = np.finfo(a._data.dtype).eps * max(m, n) if rcond is None or rcond < 0 else rcond
    x = O.matmul(L.pinv(a, rtol=rtol), bm)
    s = L.svdvals(a.detach())
    rank = (O.sum(s > s.amax(-1, keepdim=True) * rtol, -1) if min(m, n) else
            wrap(np.zeros(tuple(s.shape[:-1]), dtype=np.int64)))
    empty = wrap(np.zeros((0,), dtype=a.dtype.to_real().np))
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank._data == n).all()):
        residuals = O.sum(O.abs(O.matmul(a, x) - bm) ** 2, -2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return lstsq_type(O.named(x.squeeze(-1) if vector else x, "LinalgLstsqBackward0"), residuals,
                      rank if driver != "gels" else wrap(np.zeros((0,), dtype=np.int64)),
                      s if driver in ("gelsd", "gelss") else empty)


def tensorinv(A, ind: int = 2) -> Tensor:  # noqa: N803
    """The tensor ``X`` with ``tensordot(X, A, ind) = I`` (``torch.linalg.tensorinv``): the inverse of
    ``A`` read as a matrix of its first ``ind`` dims by the rest."""
    a = O.as_t(A)
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(a.shape[:ind]), tuple(a.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    return O.reshape(L.inv(O.reshape(a, (math.prod(rows), math.prod(cols)))), cols + rows)


def tensorsolve(A, B, dims=None) -> Tensor:  # noqa: N803
    """The tensor ``X`` with ``tensordot(A, X, X.ndim) = B`` (``torch.linalg.tensorsolve``); ``dims``:
    dims of ``A`` moved to the end first."""
    a, b = O.as_t(A), O.as_t(B)
    if dims is not None:
        dims = [d % a.ndim for d in dims]
        a = O.movedim(a, dims, list(range(a.ndim - len(dims), a.ndim)))
    rest = tuple(a.shape[b.ndim:])
    if math.prod(b.shape) != math.prod(rest):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(rest)} != {math.prod(b.shape)}")
    x = L.solve(O.reshape(a, (math.prod(b.shape), math.prod(rest))), O.reshape(b, (math.prod(b.shape),)))
    return O.reshape(x, rest)


linalg_eig_type = _return_type("linalg_eig", ("eigenvalues", "eigenvectors"))


def _general_eig(A: Tensor, what: str):
    """LAPACK's general eigendecomposition (NumPy's geev, as PyTorch's): complex results, in
    LAPACK's order, eigenvectors of unit norm (the ``eig`` primitive: its gradient is PyTorch's,
    defined for losses that do not depend on the eigenvectors' phases)."""
    a = O.as_t(A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        rows, cols = a.shape[-2] if a.ndim > 1 else 1, a.shape[-1] if a.ndim else 1
        raise RuntimeError(f"{what}: A must be batches of square matrices, but they are {rows} by {cols} matrices")
    if not (a.dtype.is_floating_point or a.dtype.is_complex) or a._data.dtype.itemsize < 4:
        raise RuntimeError(f"{what}: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(a._data.dtype)}")
    if type(a._data) is np.ndarray and not np.isfinite(a._data).all():
        raise LinAlgError(f"{what}: The algorithm failed to converge because the input matrix contained "
                          "non-finite values.")
    n, batch = a.shape[-1], tuple(a.shape[:-2])
    packed = P.eig(a)
    return tuple(O.own(O.named(t, "LinalgEigBackward0"), a)
                 for t in (packed[..., :n], packed[..., n:].reshape(batch + (n, n))))


def eig(A: Tensor, *, out=None):
    """``torch.linalg.eig``: the eigenvalues and eigenvectors (columns) of each square real matrix,
    complex (see ``_general_eig``)."""
    w, v = _general_eig(A, "linalg.eig")
    return linalg_eig_type(w, v)


def eigvals(A: Tensor, *, out=None) -> Tensor:
    """``torch.linalg.eigvals``: the eigenvalues of each square real matrix, complex."""
    return _general_eig(A, "linalg.eigvals")[0]
