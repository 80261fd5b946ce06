"""Operations between sparse COO tensors and dense ones (``runtime.sparse_coo``): the
sparse-dense matrix product (``torch.sparse.mm``, ``addmm``, ``torch.spmm``, ``torch.mm``/``matmul``/``@``
with a sparse operand), ``torch.sparse.sum`` and ``torch.sparse.softmax``/``log_softmax``.

Each is composed from differentiable dense ops on the values, so autograd, ``create_graph``,
vmap and compile need nothing new: the product gathers the dense rows at the column
indices (``index_select``), scales them by the values and adds them into the result rows
(``index_add``). Binds these as methods of ``SparseCOOTensor`` (``mm``, ``matmul``, ``@``,
``sum``)."""
from __future__ import annotations

import numpy as np

from . import ops as O
from .factory import full, tensor, zeros
from .index_ops import index_add
from .keywords import _type_name
from .sparse_coo import SparseCOOTensor, _dim
from .tensor import Tensor


# ---------------------------------------------------------------- products
def _product(s: SparseCOOTensor, d: Tensor, name: str) -> Tensor:
    """``s @ d`` for a sparse matrix ``s`` and a dense matrix or vector ``d``; the result's
    grad_fn is called ``name``."""
    if d.dtype != s.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(s.dtype)} but found {_type_name(d.dtype)}")
    if d.shape[0] != s._size[1]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s._size[1]}, got {d.shape[0]}")
    picked = O.index_select(d, 0, s._idx[1])
    scaled = O.mul(picked, s._val if d.ndim == 1 else O.unsqueeze(s._val, 1))
    out = zeros(s._size[0], *d.shape[1:], dtype=d.dtype, device=d.device)
    return O.named(index_add(out, 0, s._idx[0], scaled), name)


def _dense_sparse(d: Tensor, s: SparseCOOTensor, name: str) -> Tensor:
    """``d @ s`` for a dense matrix or vector ``d``: ``(s.t() @ d.t()).t()``."""
    if d.shape[-1] != s._size[0]:
        raise RuntimeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, d.shape))} and "
                           f"{'x'.join(map(str, s._size))})")
    out = _product(s.t(), d if d.ndim == 1 else O.t(d), name)
    return out if d.ndim == 1 else O.t(out)


def _operands(a, b, what: str, dense_dims: tuple):
    """(sparse, dense, sparse first) of a product's operands: one must be sparse, the
    other dense with a number of dimensions in ``dense_dims``."""
    first = isinstance(a, SparseCOOTensor)
    s, d = (a, O.as_t(b)) if first else (b, O.as_t(a))
    if s.sparse_dim() != 2 or s.dense_dim():
        raise RuntimeError(f"{what}: expected a sparse matrix (2 sparse and 0 dense dimensions), got "
                           f"{s.sparse_dim()} sparse and {s.dense_dim()} dense dimensions")
    if d.ndim not in dense_dims:
        if d.ndim > 2:
            raise RuntimeError("expand is unsupported for Sparse tensors")
        raise RuntimeError(f"{what}: expected a {' or '.join(f'{n}-D' for n in dense_dims)} dense tensor, got "
                           f"{d.ndim}-D")
    return s, d, first


def _sparse_sparse(a: SparseCOOTensor, b: SparseCOOTensor, name: str) -> SparseCOOTensor:
    """The product of two sparse matrices, sparse (its nonzero entries, coalesced), as torch's;
    differentiable in both operands' values (through the sparse-dense product)."""
    return _product(a, b.to_dense(), name).to_sparse().coalesce()


def mm(mat1, mat2) -> Tensor:
    """torch.sparse.mm: the matrix product of a sparse and a dense matrix (either order),
    dense, or of two sparse matrices, sparse; differentiable (a sparse operand through its values)."""
    if isinstance(mat1, SparseCOOTensor) and isinstance(mat2, SparseCOOTensor):
        return _sparse_sparse(mat1, mat2, "SparseAddmmBackward0")
    if not isinstance(mat1, SparseCOOTensor) and not isinstance(mat2, SparseCOOTensor):
        return O.mm(mat1, mat2)  # (two dense matrices: code that takes either kind of adjacency)
    s, d, first = _operands(mat1, mat2, "sparse.mm", (2,))
    return _product(s, d, "SparseAddmmBackward0") if first else _dense_sparse(d, s, "SparseAddmmBackward0")


def spmm(input, mat2) -> Tensor:
    """torch.spmm / torch.mm / Tensor.mm with a sparse operand: the dense matrix product (of
    two sparse ones, sparse)."""
    if isinstance(input, SparseCOOTensor) and isinstance(mat2, SparseCOOTensor):
        return _sparse_sparse(input, mat2, "MmBackward0")
    s, d, first = _operands(input, mat2, "mm", (2,))
    return _product(s, d, "MmBackward0") if first else _dense_sparse(d, s, "MmBackward0")


def hspmm(mat1, mat2) -> SparseCOOTensor:
    """torch.hspmm: the product of a sparse and a dense matrix as a hybrid sparse tensor, one
    entry (a dense row) per row of ``mat1`` holding entries."""
    if not isinstance(mat1, SparseCOOTensor):
        raise RuntimeError("hspmm: Argument #2: Expected sparse tensor, got dense tensor")
    s, d, _ = _operands(mat1, mat2, "hspmm", (2,))
    rows = np.unique(s._idx._concrete("hspmm", host=True)[0])
    full = _product(s, d, "HspmmBackward0")
    kept = O.index_select(full, 0, tensor(rows, device=d.device))
    return SparseCOOTensor(tensor(rows[None], device=d.device), kept, tuple(full.shape), False)


def smm(input, mat) -> SparseCOOTensor:  # noqa: A002
    """torch.smm: ``hspmm``'s product with every element of its rows an entry of its own."""
    h = hspmm(input, mat)
    rows, n = h._idx._concrete("smm", host=True)[0], h._size[1]
    idx = np.stack([np.repeat(rows, n), np.tile(np.arange(n), len(rows))]).astype(np.int64)
    return SparseCOOTensor(tensor(idx, device=h._val.device), O.reshape(h._val, (-1,)), h._size, False)


def addmm(mat: Tensor, mat1, mat2, *, beta=1, alpha=1) -> Tensor:
    """torch.sparse.addmm: ``beta * mat + alpha * (mat1 @ mat2)`` for a sparse ``mat1`` and a
    dense ``mat2``."""
    if not isinstance(mat1, SparseCOOTensor):
        raise RuntimeError("sparse.addmm: expected mat1 to be a sparse tensor")
    prod = mm(mat1, mat2)
    prod = O.mul(prod, alpha) if alpha != 1 else prod
    if beta == 0:  # (mat ignored, its NaNs too, as PyTorch's)
        return prod
    return O.add(O.mul(mat, beta) if beta != 1 else mat, prod)


def matmul(input, other) -> Tensor:
    """torch.matmul / ``@`` with a sparse matrix operand and a dense matrix or vector (two
    sparse matrices: sparse)."""
    if isinstance(input, SparseCOOTensor) and isinstance(other, SparseCOOTensor):
        return _sparse_sparse(input, other, "MmBackward0")
    s, d, first = _operands(input, other, "matmul", (1, 2))
    name = "MmBackward0" if d.ndim == 2 else "MvBackward0"
    return _product(s, d, name) if first else _dense_sparse(d, s, name)


# ---------------------------------------------------------------- reductions
def sum(input: SparseCOOTensor, dim=None, dtype=None):
    """torch.sparse.sum: over every dimension a dense 0-d tensor; over ``dim`` (an int or
    a tuple) a coalesced sparse tensor of the rest, or dense when every sparse dimension
    is summed."""
    val = input._val if dtype is None else O.to(input._val, dtype)
    if dim is None:
        return O.sum(val)
    n, sd = input.dim(), input.sparse_dim()
    dims = sorted({_dim(d, n) for d in ((dim,) if isinstance(dim, int) else dim)})
    dense_dims = tuple(d - sd + 1 for d in dims if d >= sd)
    if dense_dims:
        val = O.sum(val, dense_dims)
    summed = [d for d in dims if d < sd]
    if len(summed) == sd:
        return O.sum(val, 0)
    keep = np.array([d for d in range(sd) if d not in summed], dtype=np.int64)
    idx = O.index_select(input._idx, 0, tensor(keep, device=input._idx.device))
    size = [input._size[d] for d in range(n) if d not in dims]
    return SparseCOOTensor(idx, val, size, False).coalesce()


def softmax(input: SparseCOOTensor, dim: int, dtype=None) -> SparseCOOTensor:
    """torch.sparse.softmax: softmax along ``dim`` over the specified entries only (the
    others count as -inf); the result has the input's coalesced pattern."""
    return _softmax(input, dim, dtype, log=False)


def log_softmax(input: SparseCOOTensor, dim: int, dtype=None) -> SparseCOOTensor:
    """torch.sparse.log_softmax, on the specified entries as ``softmax``."""
    return _softmax(input, dim, dtype, log=True)


def _softmax(input: SparseCOOTensor, dim: int, dtype, log: bool) -> SparseCOOTensor:
    s = (input if dtype is None else input.to(dtype)).coalesce()
    n, sd = s.dim(), s.sparse_dim()
    d = _dim(dim, n)
    v = s._val
    if d >= sd:  # along a dense dimension: within each entry's values
        out = (O.log_softmax if log else O.softmax)(v, d - sd + 1)
        return SparseCOOTensor(s._idx, out, s._size, True)
    group, pos, counts = _groups(s, d)
    if not counts.size:
        return s
    g = tensor(group, device=v.device)
    # each group's maximum, a constant shift (softmax does not depend on it): the values
    # padded to one row per group, the rest -inf
    padded = full((counts.size, int(counts.max()), *v.shape[1:]), -np.inf, dtype=v.dtype, device=v.device)
    padded = O.index_put(padded, (g, tensor(pos, device=v.device)), v.detach())
    shifted = O.sub(v, O.index_select(O.amax(padded, 1), 0, g))
    e = O.exp(shifted)
    total = index_add(zeros(counts.size, *v.shape[1:], dtype=v.dtype, device=v.device), 0, g, e)
    picked = O.index_select(total, 0, g)
    out = O.sub(shifted, O.log(picked)) if log else O.div(e, picked)
    return SparseCOOTensor(s._idx, out, s._size, True)


def _groups(s: SparseCOOTensor, dim: int):
    """(group of each entry, its place in the group, entries per group): entries in one
    group share every sparse coordinate but ``dim``'s."""
    idx = s._idx._concrete("sparse softmax (reads a sparse tensor's indices)", host=True)
    others = np.delete(idx, dim, axis=0)
    if others.shape[0]:
        _, group = np.unique(others, axis=1, return_inverse=True)
    else:
        group = np.zeros(idx.shape[1], np.int64)
    group = group.reshape(-1).astype(np.int64)
    counts = np.bincount(group) if group.size else np.zeros(0, np.int64)
    order = np.argsort(group, kind="stable")
    pos = np.empty_like(group)
    pos[order] = np.arange(group.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return group, pos, counts


def _sum_method(self: SparseCOOTensor, dim=None, keepdim: bool = False, dtype=None):
    if keepdim:
        raise NotImplementedError("sum: keepdim=True is not supported for sparse tensors")
    return sum(self, dim, dtype)


def _bind() -> None:
    S = SparseCOOTensor
    S.mm = spmm
    S.matmul = S.__matmul__ = matmul
    S.__rmatmul__ = lambda self, other: matmul(other, self)
    S.sum = _sum_method


_bind()
