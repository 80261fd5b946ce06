"""Where sparse COO and CSR tensors meet the rest of fusegrad: the top-level names
(``sparse_coo_tensor``, ``sparse_csr_tensor``, ``spmm``, ``layout``, ``strided``, ``sparse_coo``,
``sparse_csr``, ``is_tensor``) and the Tensor members ``to_sparse``, ``to_sparse_coo``, ``to_sparse_csr``,
``to_dense``, ``sparse_mask``, ``is_sparse``, ``is_sparse_csr`` and ``layout``. (The
dense products route a sparse operand to ``runtime.sparse_ops`` themselves: ``ops.mm`` and
``ops.matmul``.)"""
from __future__ import annotations

from . import sparse_ops
from .layouts import layout, sparse_coo, sparse_csr, strided
from .sparse_coo import SparseCOOTensor, sparse_coo_tensor, sparse_mask, to_sparse, to_sparse_coo
from .sparse_csr import sparse_csr_tensor, to_sparse_csr
from .tensor import Tensor


def _dense_to_dense(self, dtype=None, *, masked_grad=None):
    """Tensor.to_dense of a dense tensor: itself (converted to ``dtype``)."""
    return self if dtype is None else self.to(dtype)


def is_tensor(obj) -> bool:
    """torch.is_tensor: a Tensor, or a sparse COO or CSR tensor (which are not Tensor
    subclasses here)."""
    return isinstance(obj, (Tensor, SparseCOOTensor))  # (CSR tensors are COO's subclass)


def install(namespace: dict, tensor_cls: type) -> None:
    """Bind the names above in ``namespace`` (the ``fusegrad`` module's) and on
    ``tensor_cls``."""
    namespace.update(sparse_coo_tensor=sparse_coo_tensor, sparse_csr_tensor=sparse_csr_tensor, spmm=sparse_ops.spmm,
                     layout=layout, strided=strided, sparse_coo=sparse_coo, sparse_csr=sparse_csr, is_tensor=is_tensor,
                     hspmm=sparse_ops.hspmm, smm=sparse_ops.smm)
    SparseCOOTensor.to_sparse_csr = to_sparse_csr
    SparseCOOTensor.smm = tensor_cls.smm = sparse_ops.smm  # (Tensor.smm too, as torch's: a dense self raises)
    T = tensor_cls
    T.is_sparse = T.is_sparse_csr = False
    T.to_sparse_csr = to_sparse_csr
    T.layout = strided
    T.to_sparse = to_sparse
    T.to_sparse_coo = to_sparse_coo
    T.to_dense = _dense_to_dense
    T.sparse_mask = sparse_mask
