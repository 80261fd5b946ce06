"""torch.sparse: the products, sums and softmax of sparse COO and CSR tensors
(``runtime/sparse_ops.py``; the tensors themselves: ``runtime/sparse_coo.py``,
``runtime/sparse_csr.py``; ``sampled_addmm``), and the
legacy constructors ``FloatTensor``/``DoubleTensor``. Importing it binds the sparse names in
``fusegrad`` and on Tensor (``runtime/sparse_bindings.py``)."""
from __future__ import annotations

import sys
import warnings
from typing import Optional, Sequence

from ..ir import dtypes as _D
from ..runtime import sparse_bindings as _bindings
from ..runtime.sparse_coo import SparseCOOTensor, sparse_coo_tensor as _sparse_coo_tensor
from ..runtime.sparse_csr import SparseCSRTensor, sampled_addmm
from ..runtime.sparse_ops import addmm, log_softmax, mm, softmax, sum  # noqa: A004  (torch.sparse.sum)
from ..runtime.tensor import Tensor as _Tensor

__all__ = ["DoubleTensor", "FloatTensor", "SparseCOOTensor", "SparseCSRTensor", "addmm", "log_softmax", "mm",
           "sampled_addmm", "softmax", "sum"]


def _legacy(indices, values, size, dtype) -> SparseCOOTensor:
    warnings.warn("fusegrad.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated.  Please use "
                  "fusegrad.sparse_coo_tensor(indices, values, shape, dtype=, device=).", UserWarning, stacklevel=3)
    return _sparse_coo_tensor(indices, values, size, dtype=dtype)


def FloatTensor(indices, values, size: Optional[Sequence[int]] = None) -> SparseCOOTensor:
    """The legacy ``torch.sparse.FloatTensor(indices, values, size)`` (deprecated, as in
    torch): float32 values."""
    return _legacy(indices, values, size, _D.float32)


def DoubleTensor(indices, values, size: Optional[Sequence[int]] = None) -> SparseCOOTensor:
    """The legacy ``torch.sparse.DoubleTensor(indices, values, size)`` (deprecated): float64 values."""
    return _legacy(indices, values, size, _D.float64)


_bindings.install(vars(sys.modules[__name__.rpartition(".")[0]]), _Tensor)
