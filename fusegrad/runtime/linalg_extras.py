"""Matrix-vector products and Cholesky solves of the ``torch`` namespace, composed from
fusegrad's (their gradients are those ops'): ``addr``, ``addmv``, ``chain_matmul``, ``vdot``,
``cholesky_solve``, ``cholesky_inverse`` and ``adjoint`` (with ``Tensor.H``/``mH``, bound in
``runtime.methods``), and the deprecated LU functions ``lu``, ``lu_unpack`` and ``lu_solve``."""
from __future__ import annotations

import warnings

import numpy as np

from ..ir.prims.shapes import broadcast_shapes
from .autocast_state import float32_policy
from .complex_ops import conj
from . import linalg as L
from . import linalg_more as LM
from . import ops as O
from .exports import op
from .sorting import _return_type
from .tensor import Tensor, wrap

lu_unpack_type = _return_type("lu_unpack", ("P", "L", "U"))


def _scaled_sum(input: Tensor, r: Tensor, beta, alpha) -> Tensor:
    """``beta * input + alpha * r`` (``beta == 0``: ``input`` ignored, NaN included, as PyTorch)."""
    if alpha != 1:
        r = O.mul(r, alpha)
    if beta == 0:
        return O.expand(r, tuple(broadcast_shapes(tuple(input.shape), tuple(r.shape))))
    return O.add(input if beta == 1 else O.mul(input, beta), r)


@op(inplace="method")
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D" if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return O.named(_scaled_sum(input, O.outer(vec1, vec2), beta, alpha), "AddrBackward0")


@op(inplace="both")
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    return O.named(_scaled_sum(input, O.mv(mat, vec), beta, alpha), "AddmvBackward0")


@op(method=False)
def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of the matrices, left to right (deprecated in PyTorch: ``linalg.multi_dot``)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                  "multiple parameters.", stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    if len(matrices) == 1:
        return O.clone(matrices[0])
    r = matrices[0]
    for m in matrices[1:]:
        r = O.mm(r, m)
    return r


@op
def vdot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The dot product of two 1-D tensors, the first conjugated."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return O.dot(conj(input), other)


@op
@float32_policy
def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:  # noqa: A002
    """``X`` with ``A X = input``, ``A = L L^H`` given its Cholesky factor ``input2`` (``L``, or ``L^H`` when
    ``upper``). Solved with ``A`` formed from the whole factor, as PyTorch's gradient is (dense: its entries
    outside the triangle get one too)."""
    if input.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {input.ndim} dimensions instead")
    t = conj(O.transpose(input2, -2, -1))
    a = O.matmul(t, input2) if upper else O.matmul(input2, t)
    # both broadcast to one batch shape: ``input`` is a batch of matrices, never of vectors
    batch = tuple(broadcast_shapes(tuple(input.shape[:-2]), tuple(a.shape[:-2])))
    b = O.expand(input, batch + tuple(input.shape[-2:]))
    return O.named(L.solve(O.expand(a, batch + tuple(a.shape[-2:])), b), "CholeskySolveBackward0")


@op
def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:  # noqa: A002
    """``A^-1`` of ``A = L L^H`` given its Cholesky factor ``input`` (``L``, or ``L^H`` when ``upper``)."""
    n = input.shape[-1]
    from .factory import eye
    return cholesky_solve(O.expand(eye(n, dtype=input.dtype, device=input.device), tuple(input.shape)), input, upper)


@op
def adjoint(input: Tensor) -> Tensor:  # noqa: A002
    """The (conjugate) transpose of the last two dims."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return conj(O.transpose(input, -2, -1))


def matrix_h(self: Tensor) -> Tensor:
    """``Tensor.H``: the (conjugate) transpose of a matrix."""
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return conj(O.transpose(self, 0, 1) if self.ndim == 2 else self)


@op
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):  # noqa: N803
    """The deprecated ``torch.lu``: ``(LU, pivots)`` of ``linalg.lu_factor_ex`` (and ``info`` with
    ``get_infos``), as a plain tuple."""
    warnings.warn("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be "
                  "removed in a future PyTorch release.", stacklevel=2)
    lu_, pivots, info = LM.lu_factor_ex(A, pivot=pivot)
    return (lu_, pivots, info) if get_infos else (lu_, pivots)


@op(method=False)
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True):  # noqa: N803
    """``P, L, U`` of a packed LU factorization and its pivots (``torch.lu_unpack``); a part not
    asked for is an empty tensor."""
    lu_ = O.as_t(LU_data)
    empty = wrap(np.zeros((0,), dtype=lu_._data.dtype))
    low, up = LM.unpack(lu_) if unpack_data else (empty, empty)
    m = lu_.shape[-2]
    p = LM.permutation_matrix(LM.perm_of(np.asarray(LU_pivots._data), m), lu_.dtype) if unpack_pivots else empty
    return lu_unpack_type(p, low, up)


@op
def lu_solve(input: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: A002,N803
    """The deprecated ``torch.lu_solve(B, LU, pivots)``: ``linalg.lu_solve(LU, pivots, B)``."""
    warnings.warn("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
                  "PyTorch release.", stacklevel=2)
    return LM.lu_solve(LU_data, LU_pivots, input)
