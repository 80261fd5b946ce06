"""Sparse CSR matrices (``layout=fusegrad.sparse_csr``): ``sparse_csr_tensor``,
``Tensor.to_sparse_csr``, ``crow_indices``/``col_indices``/``values``, conversions to and
from COO and dense, the products with dense matrices, and ``torch.sparse.sampled_addmm``.

Design: a CSR matrix is a coalesced 2-d COO matrix (``SparseCSRTensor`` subclasses
``SparseCOOTensor``: its row index per entry, expanded from the compressed row pointers,
sits beside the column indices) plus those pointers. So every product, sum and softmax of
``runtime.sparse_ops`` applies to it unchanged and differentiates through its values; the
value-wise operations (scaling, ``to``, ``detach``, ...) give CSR again, as torch's, and the
others (``t()``, sums with another sparse tensor) give their COO results."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .factory import tensor
from .layouts import sparse_csr
from .sparse_coo import SparseCOOTensor, to_sparse
from .tensor import Tensor


class SparseCSRTensor(SparseCOOTensor):
    """A sparse matrix in compressed sparse row format: row ``r``'s entries are
    ``col_indices[crow_indices[r]:crow_indices[r + 1]]`` with those ``values``."""
    __slots__ = ("_crow",)
    is_sparse = False
    is_sparse_csr = True
    layout = sparse_csr

    def __init__(self, crow: Tensor, indices: Tensor, values: Tensor, size: Sequence[int]) -> None:
        """(Internal: ``indices`` are the COO rows and columns of the entries, in order.)"""
        super().__init__(indices, values, size, True)
        self._crow = crow

    def crow_indices(self) -> Tensor:
        return self._crow

    def col_indices(self) -> Tensor:
        return self._idx[1]

    def indices(self) -> Tensor:
        raise RuntimeError("indices expected sparse coordinate tensor layout but got SparseCsr")

    def to_sparse(self, sparse_dim: Optional[int] = None, *, layout=None) -> SparseCOOTensor:
        if layout is sparse_csr:
            return self
        return SparseCOOTensor(self._idx, self._val, self._size, True)

    def to_sparse_coo(self) -> SparseCOOTensor:
        return self.to_sparse()

    def to_sparse_csr(self, dense_dim: Optional[int] = None) -> "SparseCSRTensor":
        return self

    def clone(self) -> "SparseCSRTensor":
        return SparseCSRTensor(O.clone(self._crow), O.clone(self._idx), O.clone(self._val), self._size)

    def _with_values(self, val: Tensor) -> "SparseCSRTensor":
        return SparseCSRTensor(self._crow, self._idx, val, self._size)

    def _printed(self) -> tuple:
        return ("crow_indices", self._crow), ("col_indices", self._idx[1]), ("values", self._val)

    def __reduce__(self):
        return (SparseCSRTensor, (self._crow, self._idx, self._val, self._size))


def _value_wise(name: str):
    """SparseCOOTensor's ``name``, its result CSR again (the same entries, new values)."""
    coo = getattr(SparseCOOTensor, name)

    def method(self, *args, **kwargs):
        out = coo(self, *args, **kwargs)
        if type(out) is SparseCOOTensor and out._idx is self._idx:
            return self._with_values(out._val)
        return out
    method.__name__ = name
    return method


for _name in ("mul", "div", "neg", "detach", "to", "type", "double", "float", "half", "cpu", "cuda"):
    setattr(SparseCSRTensor, _name, _value_wise(_name))
SparseCSRTensor.__mul__ = SparseCSRTensor.__rmul__ = SparseCSRTensor.multiply = SparseCSRTensor.mul
SparseCSRTensor.__truediv__ = SparseCSRTensor.divide = SparseCSRTensor.div
SparseCSRTensor.__neg__ = SparseCSRTensor.negative = SparseCSRTensor.neg


def _from_coo(s: SparseCOOTensor) -> SparseCSRTensor:
    """The CSR form of a 2-d COO matrix (coalesced first)."""
    if s.sparse_dim() != 2 or s.dense_dim():
        raise RuntimeError(f"to_sparse_csr: expected a 2-d sparse matrix, got {s.sparse_dim()} sparse and "
                           f"{s.dense_dim()} dense dimensions")
    s = s.coalesce()
    rows = s._idx._concrete("to_sparse_csr() (reads the row indices)", host=True)[0]
    crow = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=s._size[0]))]).astype(np.int64)
    return SparseCSRTensor(tensor(crow, device=s._idx.device), s._idx, s._val, s._size)


def to_sparse_csr(x, dense_dim: Optional[int] = None) -> SparseCSRTensor:
    """``Tensor.to_sparse_csr`` / ``SparseCOOTensor.to_sparse_csr``: a 2-d matrix in CSR form
    (its values read from ``x``, so gradients flow back)."""
    if dense_dim:
        raise NotImplementedError("to_sparse_csr: fusegrad converts matrices without dense dimensions only")
    if isinstance(x, Tensor) and x.ndim != 2:
        raise RuntimeError(f"to_sparse_csr: expected a 2-d tensor, got {x.ndim}-d")
    return _from_coo(x if isinstance(x, SparseCOOTensor) else to_sparse(x))


def sparse_csr_tensor(crow_indices, col_indices, values, size: Optional[Sequence[int]] = None, *, dtype=None,
                      device=None, pin_memory: bool = False, requires_grad: bool = False,
                      check_invariants: Optional[bool] = None) -> SparseCSRTensor:
    """torch.sparse_csr_tensor: row ``r``'s entries are ``col_indices[crow_indices[r]:
    crow_indices[r + 1]]`` with those ``values``; ``size`` defaults to (rows, largest column
    + 1). Values that require grad keep their autograd graph; ``requires_grad=True`` makes
    a leaf. The pointers are read concretely (to expand each entry's row)."""
    crow = O.to(crow_indices.detach() if isinstance(crow_indices, Tensor) else tensor(crow_indices), D.int64)
    col = O.to(col_indices.detach() if isinstance(col_indices, Tensor) else tensor(col_indices), D.int64)
    val = values if isinstance(values, Tensor) else tensor(values, dtype=dtype)
    if dtype is not None:
        val = O.to(val, dtype)
    if device is not None:
        crow, col, val = O.to(crow, device), O.to(col, device), O.to(val, device)
    if crow.ndim != 1 or col.ndim != 1 or val.ndim != 1:
        raise RuntimeError("sparse_csr_tensor: fusegrad takes 1-d crow_indices, col_indices and values (a matrix "
                           f"without batch or dense dimensions), got {crow.ndim}-d, {col.ndim}-d and {val.ndim}-d")
    if col.shape[0] != val.shape[0]:
        raise RuntimeError(f"col_indices and values must have the same number of elements, but got "
                           f"{col.shape[0]} and {val.shape[0]}")
    c = crow._concrete("sparse_csr_tensor() (reads crow_indices)", host=True)
    if len(c) == 0 or c[0] != 0 or c[-1] != col.shape[0] or (np.diff(c) < 0).any():
        raise RuntimeError("`crow_indices[0] == 0` and `crow_indices[-1] == nnz` and `crow_indices[..., 1:] >= "
                           "crow_indices[..., :-1]` are not satisfied.")
    rows = np.repeat(np.arange(len(c) - 1, dtype=np.int64), np.diff(c))
    if size is None:
        cols = col._concrete("sparse_csr_tensor() without a size (reads col_indices)", host=True)
        size = (len(c) - 1, int(cols.max()) + 1 if len(cols) else 0)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or size[0] != len(c) - 1:
        raise RuntimeError(f"sparse_csr_tensor: size {list(size)} does not fit crow_indices of {len(c)} elements")
    if requires_grad:
        val = val.detach().requires_grad_(True)
    elif val.requires_grad:
        val = O.named(O.view(val, tuple(val.shape)), "SparseCompressedTensorBackward0")
    idx = O.stack([tensor(rows, device=col.device), col])
    return SparseCSRTensor(crow, idx, val, size)


def sampled_addmm(input: SparseCSRTensor, mat1: Tensor, mat2: Tensor, *, beta=1.0, alpha=1.0,  # noqa: A002
                  out=None) -> SparseCSRTensor:
    """torch.sparse.sampled_addmm: ``beta * input + alpha * (mat1 @ mat2)`` computed only at
    ``input``'s entries, a CSR matrix of its sparsity (differentiable in all three)."""
    if not isinstance(input, SparseCSRTensor):
        raise RuntimeError("sampled_addmm: Expected input to be a sparse CSR tensor")
    if out is not None:
        raise NotImplementedError("sampled_addmm: fusegrad does not write into out=")
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0] or \
            (mat1.shape[0], mat2.shape[1]) != tuple(input.shape):
        raise RuntimeError(f"sampled_addmm: shapes {list(mat1.shape)} and {list(mat2.shape)} do not give the "
                           f"input's {list(input.shape)}")
    picked = O.sum(O.mul(O.index_select(mat1, 0, input._idx[0]), O.t(O.index_select(mat2, 1, input._idx[1]))), 1)
    val = O.mul(picked, alpha) if alpha != 1 else picked
    if beta != 0:
        val = O.add(val, O.mul(input._val, beta) if beta != 1 else input._val)
    return input._with_values(O.named(val, "SparseSampledAddmmBackward0"))
