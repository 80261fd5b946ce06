"""Matrix ops: ``diagonal`` and ``diag_embed`` (compositions of indexing and products),
the ``fusegrad.linalg`` functions and their top-level aliases (``torch.det``,
``torch.inverse``, ...). Factorizations, solves, the inverse, ``slogdet``, QR's Q, the
matrix exponential, the SVD and singular values, the symmetric eigendecomposition and eigenvalues are primitives
with their own VJP/JVP rules (``ir/prims/linalg.py``);
norms, distances, determinants and the products are compositions of ops."""
from __future__ import annotations

import math
import warnings
from typing import Optional, Sequence

import numpy as np

from ..ir import prims as P
from ..ir.prims.linalg import NOT_POSITIVE_DEFINITE, LinAlgError
from .autocast_state import float32_policy, lower_precision
from .dispatch import op_error
from .exports import op
from ..ir.dtypes import from_numpy_dtype, promote_types
from ..ir.prims.shapes import broadcast_shapes
from .factory import eye, zeros
from .keywords import _type_name, write_out
from ..ir.prims.layout import encode_key
from ..tracer.trace import capture_trace, capturing, user_frame
from .ops import (_axes, _float, _red_axes, abs, grad_only, half_wide, amax, amin, as_t, cat, exp, expand, log, matmul,
                  meshgrid, movedim, named, own, pow, roll, scalar_name, sqrt, stack, storage_alias, sum, tril, triu,
                  where)
from .sorting import _return_type
from .tensor import Tensor, wrap

__all__ = ["diagonal", "diag_embed", "cholesky", "solve_triangular", "LinAlgError", "vector_norm", "matrix_norm",
           "norm", "dist", "cdist", "inv", "inverse", "det", "slogdet", "logdet", "solve", "matrix_exp",
           "matrix_power", "multi_dot", "cross", "linalg_cross", "vecdot", "tensordot", "kron", "block_diag",
           "cartesian_prod", "cov", "corrcoef", "qr", "linalg_qr", "linalg_svd", "svd", "svdvals", "pinv",
           "pinverse", "matrix_rank", "cond", "eigh", "eigvalsh"]


def _diag_positions(m: int, offset: int):
    """Row and column of the ``m`` elements of diagonal ``offset``."""
    i = np.arange(m)
    return i + max(-offset, 0), i + max(offset, 0)


@op
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of the matrices spanned by ``dim1`` and ``dim2``, as the last
    dimension: a view, as PyTorch's (``a.diagonal().add_(eps)`` updates ``a``), made of view
    primitives (the dims moved last, merged, every (m+1)-th element), whose eager memory is
    the diagonal of ``input``'s own (merging the dims may have copied)."""
    x = as_t(input)
    d1, d2 = _axes(x, dim1)[0], _axes(x, dim2)[0]
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    x = movedim(x, (d1, d2), (-2, -1)) if (d1, d2) != (x.ndim - 2, x.ndim - 1) else x
    n, m = x.shape[-2], x.shape[-1]
    length = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    start = offset if offset >= 0 else -offset * m
    steps = ((P.reshape, {"shape": (*x.shape[:-2], n * m)}),
             (P.slice_, {"key": encode_key((Ellipsis, slice(start, start + (length - 1) * (m + 1) + 1, m + 1)
                                            if length else slice(0, 0)), (*x.shape[:-2], n * m))}))
    r = P.slice_(P.reshape(x, **steps[0][1]), **steps[1][1])
    d = x._data
    if type(d) is np.ndarray and r._data.size and not np.shares_memory(r._data, d):
        if capturing():  # (its memory, an alias of input's, is eager's: the rest runs eagerly)
            capture_trace().graph_break(f"diagonal of a non-contiguous tensor inside a compiled function at "
                                        f"{user_frame()}")
        corner = d[..., max(-offset, 0):, max(offset, 0):]
        storage_alias(r, x, np.lib.stride_tricks.as_strided(corner, tuple(r.shape),
                                                            d.strides[:-2] + (d.strides[-2] + d.strides[-1],)), steps)
    return named(r, "DiagonalBackward0")


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
    if a.ndim < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{what}: A must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


# the LAPACK kernels whose dispatch refuses a half-precision input before the function's own check
_HALF_KERNELS = {"linalg.det": "lu_cpu", "torch.linalg.lu_factor_ex": "lu_cpu", "linalg.solve_ex": "lu_cpu",
                 "linalg.lu": "lu_cpu", "linalg.svd": "linalg_svd_cpu", "linalg.qr": "geqrf_cpu",
                 "linalg.cholesky": "cholesky_cpu"}


def _floating(a: Tensor, what: str) -> None:
    """PyTorch's dtype checks of its LAPACK-backed functions."""
    if not a.dtype.is_floating_point and not a.dtype.is_complex:
        raise RuntimeError(f"{what}: Expected a floating point or complex tensor as input. "
                           f"Got {_type_name(a._data.dtype)}")
    if a._data.dtype.itemsize < 4:
        if what in _HALF_KERNELS:
            raise NotImplementedError(f"\"{_HALF_KERNELS[what]}\" not implemented for '{_type_name(a._data.dtype)}'")
        raise RuntimeError(f"{what}: Low precision dtypes not supported. Got {_type_name(a._data.dtype)}")


def _matrices(A, what: str) -> Tensor:
    """``A`` as a tensor, checked to be a batch of square floating-point matrices."""
    a = as_t(A)
    _square(a, what)
    _floating(a, what)
    return a


def _out(name: str, result, out):
    return result if out is None else write_out(name, result, out)


@float32_policy
def cholesky(A, *, upper: bool = False, out=None) -> Tensor:
    """The Cholesky factor ``L`` (lower; ``upper``: ``L^H``) of symmetric (Hermitian) positive-definite ``A``
    (``torch.linalg.cholesky``); raises ``LinAlgError`` when ``A`` is not positive-definite."""
    a = _matrices(A, "linalg.cholesky")
    lower = P.cholesky(a)
    # the device kernel leaves NaN from a non-positive pivot on; PyTorch's CUDA cholesky
    # also waits for the factorization to report it
    if lower.is_cuda and bool(lower.isnan().any()):
        raise op_error(P.cholesky, (a,), LinAlgError(NOT_POSITIVE_DEFINITE))
    return _out("linalg.cholesky", lower.mH if upper else lower, out)


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``) for triangular ``A``, reading only
    its upper or lower triangle (``torch.linalg.solve_triangular``)."""
    a, b = as_t(A), as_t(B)
    _square(a, "linalg.solve_triangular")
    for t in (a, b):
        if t._data.dtype.itemsize == 2 and t.is_floating_point():  # (no half-precision solver, as PyTorch's)
            raise NotImplementedError(f"\"triangular_solve_cpu\" not implemented for '{scalar_name(t)}'")
    if unitriangular:
        n = a.shape[-1]
        eye = wrap(np.eye(n, dtype=a._data.dtype))
        a = a * (1 - eye) + eye
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return solve_triangular(a.mT, b.mT, upper=not upper).mT
    shape = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    a = expand(a, tuple(shape) + tuple(a.shape[-2:])) if tuple(a.shape[:-2]) != tuple(shape) else a
    b = expand(b, tuple(shape) + tuple(b.shape[-2:])) if tuple(b.shape[:-2]) != tuple(shape) else b
    return _out("linalg.solve_triangular", P.triangular_solve(a, b, upper=bool(upper)), out)


triangular_solve_type = _return_type("triangular_solve", ("solution", "cloned_coefficient"))


@op
@float32_policy
def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False):
    """The deprecated ``torch.triangular_solve``: ``X`` with ``A X = b`` (``op(A) = A^T``
    when ``transpose``) and a copy of ``A``, as PyTorch's."""
    a, b = as_t(A), as_t(b)
    x = solve_triangular(a.mT if transpose else a, b, upper=bool(upper) != bool(transpose),
                         unitriangular=unitriangular)
    batch = tuple(broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    return triangular_solve_type(x, expand(a, batch + tuple(a.shape[-2:])).clone())


# ---------------------------------------------------------------- norms and distances
def _root(s: Tensor, p: float) -> Tensor:
    """``s ** (1/p)`` with a zero gradient where ``s`` is 0: PyTorch's subgradient of a norm
    at the zero vector (the root's own derivative is infinite there, and times 0 NaN)."""
    zero = s == 0
    safe = where(zero, 1.0, s)
    return where(zero, 0.0, sqrt(safe) if p == 2 else pow(safe, 1.0 / p))


def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """The ``ord``-norm of ``x`` over ``dim`` (all dimensions when None), as a vector:
    ``sum(|x|^ord)^(1/ord)``, ``max|x|`` (inf), ``min|x|`` (-inf), the count of non-zeros
    (0) (``torch.linalg.vector_norm``)."""
    x = as_t(x)
    if isinstance(ord, str):
        raise TypeError("linalg_vector_norm(): argument 'ord' (position 2) must be Number, not str")
    if dtype is not None:
        if not dtype.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or complex, but got "
                               f"{_type_name(dtype.np)}")
        if x.dtype.is_floating_point and dtype.is_floating_point and promote_types(x.dtype, dtype) != dtype:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({_type_name(x._data.dtype)}) should be "
                               f"convertible without narrowing to the specified dtype ({_type_name(dtype.np)})")
        x = x.to(dtype)
    elif not x.dtype.is_floating_point and not x.dtype.is_complex:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_type_name(x._data.dtype)}")
    axes = _red_axes(x, dim, empty_all=False)  # (a 0-d x: none; an empty dim list: all, below)
    p = float(ord)
    if p < 0 or p == math.inf:  # a max or min: no value for an empty reduction
        if dim is None and x.numel() == 0:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on an empty tensor because "
                               "the operation does not have an identity")
        for d in axes:
            if x.shape[d] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {ord:g} norm on the dimension {d}"
                                   "because this dimension is empty and the operation does not have an identity")
    if p == math.inf:
        r = amax(abs(x), axes, keepdim)
    elif p == -math.inf:
        r = amin(abs(x), axes, keepdim)
    elif p == 0:  # the count of nonzeros, with PyTorch's zero gradient
        r = sum((x != 0).to(x.dtype), axes, keepdim)
        if x.requires_grad:
            r = r + sum(grad_only(x), axes, keepdim) * 0.0
    elif p == 1:
        r = sum(abs(x), axes, keepdim)
    elif p == 2:
        def root_of_squares(x):
            m = abs(x) if x.dtype.is_complex else x
            return _root(sum(m * m, axes, keepdim), 2)
        r = half_wide(x, root_of_squares)
    else:
        r = half_wide(x, lambda x: _root(sum(_abs_pow(x, p), axes, keepdim), p))
    return _out("linalg.vector_norm", named(r, "LinalgVectorNormBackward0"), out)


def _abs_pow(x: Tensor, p: float) -> Tensor:
    """``|x| ** p``; below p = 1, where its derivative at 0 is infinite, with PyTorch's zero
    gradient for the zero elements (``|0| ** p``'s inf times abs's 0 was NaN)."""
    if p >= 1:
        return pow(abs(x), p)
    zero = x == 0
    return where(zero, 0.0 if p > 0 else math.inf, pow(abs(where(zero, 1.0, x)), p))


_SINGULAR_VALUE_ORDS = ("nuc", 2, -2)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """The ``ord``-norm of the matrices spanned by ``dim``: Frobenius ('fro'), max/min
    absolute column sum (1/-1) or row sum (inf/-inf), the sum ('nuc'), largest (2) or
    smallest (-2) singular value (``torch.linalg.matrix_norm``)."""
    a = as_t(A)
    if a.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = _axes(a, dim[0])[0], _axes(a, dim[1])[0]
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(a, 2, (d0, d1), keepdim, dtype=dtype, out=out)
    if isinstance(ord, str) and ord != "nuc":
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if ord in _SINGULAR_VALUE_ORDS:
        if dtype is not None:
            a = a.to(dtype)
        _floating(a, "linalg.matrix_norm")
        s = svdvals(movedim(a, (d0, d1), (-2, -1)))
        r = sum(s, -1) if ord == "nuc" else _largest(s, -1, False) if ord == 2 else amin(s, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return _out("linalg.matrix_norm", r, out)
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # 1/-1: the largest/smallest column sum (sum over rows); inf/-inf: row sums
    inner, outer = (d0, d1) if abs(ord) == 1 else (d1, d0)
    r = vector_norm(a, 1, inner, True, dtype=dtype)
    r = _largest(r, outer, True) if ord > 0 else amin(r, outer, True)
    if not keepdim:
        r = r.reshape(tuple(n for i, n in enumerate(r.shape) if i not in (d0, d1)))
    return _out("linalg.matrix_norm", r, out)


def _largest(t: Tensor, dim: int, keepdim: bool) -> Tensor:
    """``amax`` of ``t`` over ``dim``, 0 where ``dim`` is empty: the norm of an empty matrix
    (the smallest, amin's, raises as PyTorch's)."""
    if t.shape[dim] == 0:
        shape = list(t.shape)
        if keepdim:
            shape[dim] = 1
        else:
            del shape[dim]
        return zeros(tuple(shape), dtype=t.dtype)
    return amax(t, dim, keepdim)


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """A vector norm (``dim`` an int or 1-tuple, or a 1-D input) or a matrix norm (``dim``
    a 2-tuple, or a 2-D input) of ``A`` (``torch.linalg.norm``); with neither ``ord`` nor
    ``dim``, the 2-norm of ``A`` flattened."""
    a = as_t(A)
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    elif ord is None:
        return vector_norm(a, 2, None, keepdim, dtype=dtype, out=out)
    elif a.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                           f"Got {a.ndim}D.")
    else:
        dims = tuple(range(a.ndim))
    if len(dims) == 1:
        return vector_norm(a, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
    return matrix_norm(a, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)


@op
def dist(input, other, p=2) -> Tensor:  # noqa: A002 - PyTorch's names
    """The ``p``-norm of ``input - other`` (broadcast), flattened (``torch.dist``)."""
    return named(vector_norm(as_t(input) - other, p), "DistBackward0")


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@op(method=False)
@float32_policy
def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and each row of ``x2``
    (..., R, M), as (..., P, R), batch dimensions broadcast (``torch.cdist``). Computed from
    the differences for every ``compute_mode`` (accepted for compatibility): exact, and with
    a zero gradient at zero distance, as PyTorch's."""
    a, b = as_t(x1), as_t(x2)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, t in (("X1", a), ("X2", b)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_type_name(t._data.dtype)}")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} X2: {b.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    return named(vector_norm(a.unsqueeze(-2) - b.unsqueeze(-3), p, -1), "CdistBackward0")


# ---------------------------------------------------------------- inverse, determinants, solve
@float32_policy
def inv(A, *, out=None) -> Tensor:
    """The inverse of each square matrix of ``A`` (``torch.linalg.inv``); raises
    ``LinAlgError`` for a singular one."""
    return _out("linalg.inv", P.inv(_matrices(A, "linalg.inv")), out)


inverse = op(inv, name="inverse")

slogdet_type = _return_type("slogdet", ("sign", "logabsdet"))


@op
def slogdet(A, *, out=None):
    """The sign and the log of the absolute value of each matrix's determinant
    (``torch.linalg.slogdet``); a singular matrix has sign 0 and log-magnitude -inf."""
    both = P.slogdet(_matrices(A, "linalg.slogdet"))
    logabs = both[..., 1]
    return _out("linalg.slogdet", slogdet_type(both[..., 0], logabs.real if logabs.is_complex() else logabs), out)


@op
def det(A, *, out=None) -> Tensor:
    """The determinant of each square matrix of ``A`` (``torch.linalg.det``), from its
    sign and log-magnitude (its gradient at a singular matrix is not defined here)."""
    s = slogdet(_matrices(A, "linalg.det"))
    return _out("linalg.det", named(s.sign * exp(s.logabsdet), "LinalgDetBackward0"), out)


@op
def logdet(input) -> Tensor:  # noqa: A002
    """The log of each matrix's determinant: NaN where it is negative, -inf where 0 (``torch.logdet``)."""
    s = slogdet(_matrices(input, "logdet"))
    return named(log(s.sign) + s.logabsdet, "LogdetBackward0")


@float32_policy
def solve(A, B, *, left: bool = True, out=None) -> Tensor:
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``), batch dimensions broadcast; ``B``
    is a batch of vectors when it is 1-D or has ``A``'s shape less its last dimension
    (``torch.linalg.solve``). Raises ``LinAlgError`` for a singular ``A``."""
    a, b = _matrices(A, "linalg.solve"), as_t(B)
    if a.dtype != b.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{_type_name(a._data.dtype)} and B of type {_type_name(b._data.dtype)} instead")
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if not left:  # X A = B  <=>  A^T X^T = B^T (a batch of vectors is its own transpose)
        x = solve(a.mT, b if vector else b.mT)
        return _out("linalg.solve", x if vector else x.mT, out)
    bm = b.unsqueeze(-1) if vector else b
    if bm.ndim < 2 or bm.shape[-2] != a.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({a.shape[-2]}x{a.shape[-1]} and {'x'.join(map(str, bm.shape[-2:]))})")
    x = P.solve(a, bm)
    return _out("linalg.solve", x.squeeze(-1) if vector else x, out)


# ---------------------------------------------------------------- matrix functions and products
@op
def matrix_exp(A) -> Tensor:
    """The exponential of each square matrix of ``A`` (``torch.linalg.matrix_exp``)."""
    return P.matrix_exp(_matrices(A, "linalg.matrix_exp"))


@op
def matrix_power(A, n: int, *, out=None) -> Tensor:
    """``A`` to the integer power ``n`` by repeated squaring (``n < 0``: of its inverse)
    (``torch.linalg.matrix_power``)."""
    a = as_t(A)
    _square(a, "linalg.matrix_power")
    if n < 0:
        a, n = inv(a), -n
    if n == 0:
        return _out("linalg.matrix_power", expand(eye(a.shape[-1], dtype=a.dtype), tuple(a.shape)).clone(), out)
    result = None
    while n:  # binary powers of a, multiplied in where n has a 1 bit
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return _out("linalg.matrix_power", result, out)


def multi_dot(tensors: Sequence, *, out=None) -> Tensor:
    """The product of a chain of matrices, the first and last of which may be vectors
    (``torch.linalg.multi_dot``); multiplied left to right."""
    ts = [as_t(t) for t in tensors]
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, len(ts) - 1)):
            where_ = "the first" if i == 0 else "the last" if i == len(ts) - 1 else None
            raise RuntimeError(f"multi_dot(): {where_} tensor must be 1D or 2D but got {t.ndim}D" if where_
                               else f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    r = ts[0].unsqueeze(0) if first else ts[0]
    for t in ts[1:]:
        r = matmul(r, t.unsqueeze(-1) if t.ndim == 1 else t)
    if last:
        r = r.squeeze(-1)
    return _out("linalg.multi_dot", r.squeeze(0) if first else r, out)


def linalg_cross(input, other, *, dim: int = -1, out=None) -> Tensor:  # noqa: A002
    """The cross product of the 3-vectors along ``dim`` of ``input`` and ``other``
    (broadcast) (``torch.linalg.cross``)."""
    a, b = as_t(input), as_t(other)
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape))
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. "
                           f"Got {a.shape[dim]} and {b.shape[dim]}")
    a, b = expand(a, shape), expand(b, shape)
    # c_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1}
    r = roll(a, -1, dim) * roll(b, -2, dim) - roll(a, -2, dim) * roll(b, -1, dim)
    return _out("linalg.cross", named(r, "LinalgCrossBackward0"), out)


@op
def cross(input, other, dim: Optional[int] = None, *, out=None) -> Tensor:  # noqa: A002
    """``linalg.cross`` along ``dim``; without it, along the first dimension of length 3,
    with PyTorch's deprecation warning (``torch.cross``)."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        a = as_t(input)
        dim = next((i for i, n in enumerate(a.shape) if n == 3), -1)
    return linalg_cross(input, other, dim=dim, out=out)


@lower_precision
def vecdot(x, y, *, dim: int = -1, out=None) -> Tensor:
    """The dot product of the vectors along ``dim`` of ``x`` and ``y`` (broadcast) (``torch.linalg.vecdot``)."""
    x = as_t(x)
    return _out("linalg.vecdot", sum((x.conj() if x.dtype.is_complex else x) * y, dim), out)


@op(method=False)
def tensordot(a, b, dims=2, out=None) -> Tensor:
    """The contraction of ``a``'s and ``b``'s dimensions ``dims`` (a count: ``a``'s last and
    ``b``'s first; or two lists), as one matrix product (``torch.tensordot``)."""
    a, b = as_t(a), as_t(b)
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        da, db = [d % a.ndim for d in da], [d % b.ndim for d in db]
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    for i, j in zip(da, db):  # (a size-1 contracted dimension broadcasts against the other's, as PyTorch's)
        if a.shape[i] == 1 and b.shape[j] != 1:
            a = a.expand(*(b.shape[j] if d == i else n for d, n in enumerate(a.shape)))
        elif b.shape[j] == 1 and a.shape[i] != 1:
            b = b.expand(*(a.shape[i] if d == j else n for d, n in enumerate(b.shape)))
        elif a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                               f"and second has size {b.shape[j]} in dim {j}")
    fa, fb = [d for d in range(a.ndim) if d not in da], [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    am = a.permute(*(fa + da)).reshape(-1 if k else math.prod(a.shape[d] for d in fa), k)
    bm = b.permute(*(db + fb)).reshape(k, math.prod(b.shape[d] for d in fb))
    r = matmul(am, bm).reshape(tuple(a.shape[d] for d in fa) + tuple(b.shape[d] for d in fb))
    return _out("tensordot", r, out)


@op
def kron(input, other, *, out=None) -> Tensor:  # noqa: A002
    """The Kronecker product of ``input`` and ``other`` (the shorter shape padded with
    leading ones) (``torch.kron``)."""
    a, b = as_t(input), as_t(other)
    nd = max(a.ndim, b.ndim)
    sa, sb = (1,) * (nd - a.ndim) + tuple(a.shape), (1,) * (nd - b.ndim) + tuple(b.shape)
    r = a.reshape(tuple(x for n in sa for x in (n, 1))) * b.reshape(tuple(x for n in sb for x in (1, n)))
    return _out("kron", r.reshape(tuple(m * n for m, n in zip(sa, sb))), out)


@op(method=False)
def block_diag(*tensors) -> Tensor:
    """A block-diagonal matrix of ``tensors`` (0-D: 1x1, 1-D: a row) (``torch.block_diag``)."""
    ts = []
    for i, t in enumerate(tensors):
        t = as_t(t)
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.ndim} dimensions")
        ts.append(t.reshape(1, -1) if t.ndim == 1 else t.reshape(1, 1) if t.ndim == 0 else t)
    if not ts:
        return zeros(1, 0)
    dtype = from_numpy_dtype(np.result_type(*(t._data.dtype for t in ts)))
    ts = [t.to(dtype) for t in ts]
    width = int(np.sum([t.shape[1] for t in ts]))
    rows, col = [], 0
    for t in ts:
        n = t.shape[1]
        rows.append(cat([zeros(t.shape[0], col, dtype=t.dtype), t, zeros(t.shape[0], width - col - n, dtype=t.dtype)],
                        1))
        col += n
    return cat(rows, 0)


@op(method=False)
def cartesian_prod(*tensors) -> Tensor:
    """The Cartesian product of 1-D ``tensors``, one row per combination (``torch.cartesian_prod``)."""
    ts = [as_t(t) for t in tensors]
    if len(ts) == 1:
        return ts[0]
    return stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)


@op
def cov(input, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:  # noqa: A002
    """The covariance matrix of the variables in the rows of ``input`` (a 1-D input: one
    variable), observations in the columns, weighted by ``fweights`` (integer frequencies)
    and ``aweights`` (importance), less ``correction`` degrees of freedom (``torch.cov``)."""
    x = _float(as_t(input))
    if x.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{x.ndim} dimensions")
    x = x.reshape(1, -1) if x.ndim < 2 else x
    if not isinstance(correction, int) or isinstance(correction, bool):
        raise TypeError(f"cov(): argument 'correction' must be int, not {type(correction).__name__}")
    w = None
    for ws, name, kinds, kind_name in ((fweights, "fweights", "iu", "integral"),
                                       (aweights, "aweights", "f", "floating point")):
        if ws is not None:
            ws = _cov_weights(as_t(ws), name, kinds, kind_name, x.shape[1])
            w = ws if w is None else w * ws
    if w is None:
        avg, w_sum = x.mean(1), x.shape[1]
        factor = w_sum - correction
    else:
        w = w.to(x.dtype)
        w_sum = w.sum()
        if type(w_sum._data) is np.ndarray and w_sum.item() == 0:  # (a traced sum: not checked)
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(1) / w_sum
        factor = (w_sum if correction == 0 else w_sum - correction if aweights is None
                  else w_sum - correction * (w * as_t(aweights)).sum() / w_sum)
    xm = x - avg.unsqueeze(1)
    factor = (factor.clamp(min=0) if isinstance(factor, Tensor) else max(factor, 0))
    c = matmul(xm if w is None else xm * w, xm.mH) / factor  # (complex variables: conjugated, as PyTorch's)
    return c.squeeze()


def _cov_weights(w: Tensor, name: str, kinds: str, kind_name: str, n: int) -> Tensor:
    """``w`` checked as PyTorch's cov checks its ``name`` weights for ``n`` observations."""
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with {w.ndim} "
                           "dimensions")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input "
                           f"but got {w.numel()} != {n}")
    if w._data.dtype.kind not in kinds:
        raise RuntimeError(f"cov(): expected {name} to have {kind_name} dtype but got {name} with "
                           f"{_type_name(w._data.dtype)} dtype")
    if type(w._data) is np.ndarray and w.numel() and (w._data < 0).any():  # (traced weights: not checked)
        raise RuntimeError(f"cov(): {name} cannot be negative")
    return w


@op
def corrcoef(input) -> Tensor:  # noqa: A002
    """Pearson's correlation coefficients of the variables in the rows of ``input``, clipped
    to [-1, 1] (``torch.corrcoef``)."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    sd = sqrt(diagonal(c))
    r = c / sd.unsqueeze(1) / sd.unsqueeze(0)
    if r.dtype.is_complex:  # (each part clipped, as PyTorch's)
        from .complex_ops import complex as make_complex
        return make_complex(r.real.clamp(-1, 1), r.imag.clamp(-1, 1))
    return r.clamp(-1, 1)


# ---------------------------------------------------------------- QR
qr_type = _return_type("qr", ("Q", "R"))
_QR_MODES = ("reduced", "complete", "r")


@float32_policy
def linalg_qr(A, mode: str = "reduced", *, out=None):
    """``Q`` with orthonormal columns and upper-triangular ``R`` with ``A = Q R``
    (``torch.linalg.qr``); ``mode="complete"``: square ``Q``; ``"r"``: ``R`` only (``Q``
    empty). ``R`` is ``triu(Q^H A)``, so its gradient flows through ``Q``'s rule."""
    if mode not in _QR_MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    a = as_t(A)
    if a.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    _floating(a, "linalg.qr")
    q = P.qr_q(a, complete=mode == "complete")
    r = triu(matmul(q.mH, a))
    return _out("linalg.qr", qr_type(zeros(0, dtype=a.dtype) if mode == "r" else q, r), out)


@op
def qr(input, some: bool = True, *, out=None):  # noqa: A002
    """``linalg.qr`` with ``some=False`` for the complete mode (``torch.qr``)."""
    return linalg_qr(input, "reduced" if some else "complete", out=out)


# ---------------------------------------------------------------- SVD and what is built on it
linalg_svd_type = _return_type("linalg_svd", ("U", "S", "Vh"))
svd_type = _return_type("svd", ("U", "S", "V"))


def _svd_input(A, what: str, few_dims: Optional[str] = None) -> Tensor:
    """``A`` as a tensor, checked to be a batch of floating-point matrices (``few_dims``:
    PyTorch's message where it has fewer than 2 dimensions, when it is not the usual one)."""
    a = as_t(A)
    if a.ndim < 2:
        raise RuntimeError(few_dims.format(a) if few_dims else
                           f"{what}: The input tensor A must have at least 2 dimensions.")
    _floating(a, what)
    return a


def _driver(driver) -> None:
    if driver is not None:  # PyTorch: only CUDA (cuSOLVER) has drivers
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")


@float32_policy
def linalg_svd(A, full_matrices: bool = True, *, driver=None, out=None):
    """``U``, ``S`` (descending) and ``Vh`` with ``A = U diag(S) Vh`` for each matrix of ``A``
    (``torch.linalg.svd``); ``full_matrices``: square ``U`` (m x m) and ``Vh`` (n x n), else
    k = min(m, n) columns and rows. Singular vectors are unique only up to sign; gradients
    assume distinct singular values, and ignore those of the extra columns of a full ``U``
    and rows of a full ``Vh``, as PyTorch's."""
    a = _svd_input(A, "linalg.svd")
    _driver(driver)
    full = bool(full_matrices)
    m, n = a.shape[-2:]
    packed = P.svd(a, full_matrices=full)
    k, cu, cv = min(m, n), (m if full else min(m, n)), (n if full else min(m, n))
    batch = tuple(a.shape[:-2])
    # three tensors of their own (not views of the packed result), each LinalgSvdBackward0 as PyTorch's
    u, s, vh = (own(named(t, "LinalgSvdBackward0"), a) for t in (packed[..., :m * cu].reshape(batch + (m, cu)),
                                                                  packed[..., m * cu:m * cu + k],
                                                                  packed[..., m * cu + k:].reshape(batch + (cv, n))))
    return _out("linalg.svd", linalg_svd_type(u, own(s.real, a) if s.is_complex() else s, vh), out)


@float32_policy
def svdvals(A, *, driver=None, out=None) -> Tensor:
    """The singular values of each matrix of ``A``, descending (``torch.linalg.svdvals``); their
    gradient is ``U diag(gS) Vh``, defined at repeated singular values too."""
    a = _svd_input(A, "linalg.svd")
    _driver(driver)
    return _out("linalg.svdvals", P.svdvals(a), out)


@op
@float32_policy
def svd(input, some: bool = True, compute_uv: bool = True, *, out=None):  # noqa: A002
    """``U``, ``S`` and ``V`` (not ``Vh``) with ``input = U diag(S) V^T`` (``torch.svd``);
    ``some=False``: square ``U`` and ``V``; ``compute_uv=False``: ``U`` (m x m) and ``V``
    (n x n) zero-filled, ``S`` alone computed."""
    a = _svd_input(input, "linalg.svd",
                   "linalg.svd: input should have at least 2 dimensions, but has {0.ndim} dimensions instead")
    if not compute_uv:
        m, n = a.shape[-2:]
        batch = tuple(a.shape[:-2])
        r = svd_type(zeros(batch + (m, m), dtype=a.dtype), svdvals(a), zeros(batch + (n, n), dtype=a.dtype))
    else:
        u, s, vh = linalg_svd(a, full_matrices=not some)
        r = svd_type(u, s, vh.mH)
    return _out("svd", r, out)


def _tolerance(s: Tensor, m: int, n: int, atol, rtol) -> Tensor:
    """PyTorch's cutoff max(atol, rtol * s_max) on singular values ``s`` (..., k), as (..., 1);
    rtol defaults to eps * max(m, n) when no atol is given (a positive atol alone: rtol 0)."""
    if rtol is None:
        default = float(np.finfo(s._data.dtype).eps) * max(m, n)
        if isinstance(atol, Tensor):  # per matrix: 0 where its atol is positive
            rtol = where(atol > 0, 0.0, default).to(s.dtype)
        else:
            rtol = 0.0 if atol is not None and atol > 0 else default
    smax = amax(s, -1, True) if s.shape[-1] else zeros(tuple(s.shape[:-1]) + (1,), dtype=s.dtype)
    tol = smax * (rtol.unsqueeze(-1) if isinstance(rtol, Tensor) else rtol)
    if atol is not None:
        at = atol.unsqueeze(-1) if isinstance(atol, Tensor) else atol
        tol = where(tol > at, tol, at * 1.0) if isinstance(at, Tensor) else tol.clamp(min=float(at))
    return tol


def _hermitian_full(a: Tensor) -> Tensor:
    """The Hermitian matrix that ``a``'s lower triangle defines (what ``hermitian=True`` reads)."""
    low = tril(a)
    return low + tril(a, -1).mH


def _pinv_svd(a: Tensor, atol, rtol) -> Tensor:
    m, n = a.shape[-2:]
    u, s, vh = linalg_svd(a, full_matrices=False)
    keep = s > _tolerance(s.detach(), m, n, atol, rtol)
    sinv = where(keep, 1.0 / where(keep, s, 1.0), 0.0)
    return matmul(vh.mH * sinv.unsqueeze(-2), u.mH)


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False, out=None) -> Tensor:
    """The Moore-Penrose pseudoinverse of each matrix of ``A``, ``V diag(1/s) U^T`` over the
    singular values ``s`` above ``max(atol, rtol * s_max)`` (``torch.linalg.pinv``); its
    gradient flows through the SVD. ``hermitian``: the value is that of the symmetric matrix
    ``A``'s lower triangle defines, the gradient that of the pseudoinverse at ``A`` itself
    (as PyTorch's, whose pinv_backward reads ``A``; they agree for a symmetric ``A``)."""
    a = as_t(A)
    if a.ndim < 2 or not (a.dtype.is_floating_point or a.dtype.is_complex) or a._data.dtype.itemsize < 4:
        raise RuntimeError(f"linalg.pinv({_type_name(a._data.dtype)}{{{list(a.shape)}}}): expected a tensor with 2 or "
                           "more dimensions of float, double, cfloat or cdouble types")
    r = _pinv_svd(a, atol, rtol) if not hermitian or a.requires_grad else None
    if hermitian:
        _square(a, "linalg.eigh")
        sym = _pinv_svd(_hermitian_full(a.detach()), atol, rtol)
        r = sym if r is None else r + (sym - r.detach())
    return _out("linalg.pinv", named(r, "LinalgPinvBackward0"), out)


@op
@float32_policy
def pinverse(input, rcond: float = 1e-15) -> Tensor:  # noqa: A002
    """``linalg.pinv`` with ``rtol=rcond`` (``torch.pinverse``)."""
    return pinv(input, rtol=rcond)


@float32_policy
def matrix_rank(A, tol=None, hermitian: bool = False, *, atol=None, rtol=None, out=None) -> Tensor:
    """The count of singular values of each matrix of ``A`` above ``max(atol, rtol * s_max)``
    (``torch.linalg.matrix_rank``; ``tol``: PyTorch's older name of ``atol``), as int64."""
    a = _svd_input(A, "linalg.matrix_rank",
                   "torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if tol is not None:
        if atol is not None or rtol is not None:
            raise RuntimeError("linalg.matrix_rank: tol and atol/rtol cannot both be given")
        atol = tol
    m, n = a.shape[-2:]
    # hermitian: the magnitudes of the eigenvalues of the matrix A's lower triangle defines, as PyTorch's
    s = abs(eigvalsh(a.detach())) if hermitian else svdvals(a.detach())
    r = sum((s > _tolerance(s, m, n, atol, rtol)).to(s.dtype), -1)
    from ..ir.dtypes import int64
    return _out("linalg.matrix_rank", r.to(int64), out)


@float32_policy
def cond(A, p=None, *, out=None) -> Tensor:
    """The condition number of each matrix of ``A`` in the ``p``-norm (``torch.linalg.cond``):
    for ``p`` None or 2 (-2) the largest over the smallest (smallest over largest) singular
    value; for 'fro', 'nuc', 1, -1, inf, -inf, ``norm(A) * norm(inv(A))`` of square matrices."""
    a = _svd_input(A, "linalg.cond")
    if p is None or p in (2, -2):
        s = svdvals(a)
        if s.shape[-1] == 0:
            return _out("linalg.cond", zeros(tuple(s.shape[:-1]), dtype=s.dtype), out)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
        return _out("linalg.cond", r, out)
    if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    _square(a, f"linalg.cond(ord={p})")
    return _out("linalg.cond", matrix_norm(a, p) * matrix_norm(inv(a), p), out)


# ---------------------------------------------------------------- symmetric eigendecomposition
linalg_eigh_type = _return_type("linalg_eigh", ("eigenvalues", "eigenvectors"))


def _uplo(UPLO, what: str) -> bool:  # noqa: N803 - PyTorch's name
    """Whether ``UPLO`` ('L' or 'U', either case, as PyTorch) names the upper triangle."""
    if not isinstance(UPLO, str):
        raise TypeError(f"{what}(): argument 'UPLO' must be str, not {type(UPLO).__name__}")
    if UPLO.upper() not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper() == "U"


def _eigh_input(A) -> Tensor:  # noqa: N803
    """``A`` as a tensor, checked as PyTorch's eigh checks it: a batch of square matrices of
    float32 or float64 (its kernel is not implemented for other dtypes)."""
    a = as_t(A)
    _square(a, "linalg.eigh")
    if not (a.dtype.is_floating_point or a.dtype.is_complex) or a._data.dtype.itemsize < 4:
        raise NotImplementedError(f'"linalg_eigh_{"cuda" if a.is_cuda else "cpu"}" not implemented for '
                                  f"'{_type_name(a._data.dtype)}'")
    return a


@float32_policy
def eigh(A, UPLO: str = "L", *, out=None):  # noqa: N803
    """The eigenvalues (ascending) and eigenvectors (as columns, orthonormal) of each symmetric
    matrix of ``A``, reading only its lower (``UPLO='U'``: upper) triangle
    (``torch.linalg.eigh``). Eigenvectors are unique only up to sign; gradients assume
    distinct eigenvalues (where only the eigenvalues are used, they need not be), and are
    symmetric, as PyTorch's (not restricted to the triangle read)."""
    upper = _uplo(UPLO, "linalg_eigh")
    a = _eigh_input(A)
    n = a.shape[-1]
    packed = P.eigh(a, upper=upper)
    batch = tuple(a.shape[:-2])
    # two tensors of their own (not views of the packed result), each LinalgEighBackward0 as PyTorch's
    w = packed[..., :n]
    w, v = (own(named(t, "LinalgEighBackward0"), a) for t in (w.real if w.is_complex() else w,
                                                               packed[..., n:].reshape(batch + (n, n))))
    return _out("_linalg_eigh", linalg_eigh_type(w, v), out)


@float32_policy
def eigvalsh(A, UPLO: str = "L", *, out=None) -> Tensor:  # noqa: N803
    """The eigenvalues (ascending) of each symmetric matrix of ``A``, reading only its lower
    (``UPLO='U'``: upper) triangle (``torch.linalg.eigvalsh``); their gradient is
    ``V diag(gL) V^T``, defined at repeated eigenvalues too."""
    upper = _uplo(UPLO, "linalg_eigvalsh")
    a = _eigh_input(A)
    return _out("_linalg_eigh", P.eigvalsh(a, upper=upper), out)
