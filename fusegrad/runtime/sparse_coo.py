"""Sparse COO tensors, as graph neural network programs use them: ``sparse_coo_tensor``,
``Tensor.to_sparse``, ``to_dense``, ``coalesce``, ``indices``/``values``, ``t``, products
with numbers and sums of two sparse tensors (in place too: ``mul_``, ``div_``, ``add_``,
the operations on a sparse embedding gradient), ``pow``, ``norm``, ``Tensor.sparse_mask``
and torch's print. (The products with dense
tensors, ``sparse.sum`` and ``sparse.softmax`` are in ``runtime.sparse_ops``.)

Design: a ``SparseCOOTensor`` is not a ``Tensor`` subclass but a small object holding two
dense Tensors, ``indices`` (int64, sparse_dim x nnz) and ``values`` (nnz, then the dense
dimensions), with its size and whether it is coalesced. Everything that handles Tensors
(the dispatcher, every op, compile's signatures and capture, optimizers, nn.Module) reads
a Tensor's one payload array, which a sparse tensor does not have: a subclass would reach
all of them with a payload of another meaning, and any that missed the difference would
compute a wrong result. A separate object reaches none of them: a dense op given one fails
with torch's NotImplementedError ("Could not run 'aten::view' with arguments from the
'SparseCPU' backend"; a dense method names itself, a dense function is named by
``dense_op_error``, which the factories call on it), and ``fusegrad.compile``
treats one passed as an argument as a Python value, keyed by identity, whose indices and
values are captured tensors read at call time. The cost: ``isinstance(s, fusegrad.Tensor)``
is False, and ``nn.Module.register_buffer`` refuses one (keep it as a plain attribute).

Autograd: each op is composed from fusegrad's differentiable dense ops on the values
(``index_select``, ``mul``, ``index_add``, ...), so gradients flow to the values and to the
tensors they were made from, and ``create_graph``, vmap and compile work with no new
primitive. A sparse tensor's ``requires_grad``, ``grad_fn`` and ``is_leaf`` are its values';
a leaf made with ``requires_grad=True`` accumulates per-entry gradients in its values, and
its ``.grad`` is them as a coalesced sparse tensor, as torch's. The indices are integer
data: the ops that must look at them (``coalesce``, ``to_sparse``, checks of a given size)
read them concretely, a graph break when compile traces them and a guard on their value
when it captured them."""
from __future__ import annotations

import functools
import sys
from typing import Optional, Sequence

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .devices import CPU
from .factory import tensor, zeros
from .index_ops import index_add
from .keywords import _type_name
from .layouts import sparse_coo
from .printing import PRINT_OPTS, tensor_str
from .tensor import Size, Tensor



class SparseCOOTensor:
    """A sparse tensor in coordinate format (``layout=fusegrad.sparse_coo``): entry ``k`` has
    coordinates ``indices[:, k]`` in the sparse dimensions and value ``values[k]``;
    duplicate coordinates add up. Made by ``fusegrad.sparse_coo_tensor`` and
    ``Tensor.to_sparse``; see the module docstring for the design."""
    __slots__ = ("_idx", "_val", "_size", "_coalesced", "__weakref__")
    is_sparse = True
    is_sparse_csr = False
    layout = sparse_coo

    def __init__(self, indices: Tensor, values: Tensor, size: Sequence[int], coalesced: bool) -> None:
        """(Internal: the arguments are taken as they are; ``sparse_coo_tensor`` checks them.)"""
        self._idx = indices
        self._val = values
        self._size = tuple(int(s) for s in size)
        self._coalesced = bool(coalesced)

    # ------------------------------------------------------------ attributes
    @property
    def shape(self) -> Size:
        return Size(self._size)

    def size(self, dim: Optional[int] = None):
        return Size(self._size) if dim is None else self._size[_dim(dim, len(self._size))]

    def dim(self) -> int:
        return len(self._size)

    @property
    def ndim(self) -> int:
        return len(self._size)

    def __len__(self) -> int:
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    def numel(self) -> int:
        return Size(self._size).numel()

    @property
    def dtype(self) -> D.dtype:
        return self._val.dtype

    @property
    def device(self):
        return self._val.device

    @property
    def is_cuda(self) -> bool:
        return self._val.is_cuda

    @property
    def is_cpu(self) -> bool:
        return self._val.is_cpu

    def sparse_dim(self) -> int:
        return self._idx.shape[0]

    def dense_dim(self) -> int:
        return self._val.ndim - 1

    def _nnz(self) -> int:
        return self._idx.shape[1]

    nnz = _nnz

    def is_coalesced(self) -> bool:
        return self._coalesced

    def is_floating_point(self) -> bool:
        return self._val.is_floating_point()

    # ------------------------------------------------------------ indices and values
    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._idx

    def values(self) -> Tensor:
        """The values, in the autograd graph (ValuesBackward0 in torch)."""
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._val

    def _indices(self) -> Tensor:
        return self._idx

    def _values(self) -> Tensor:
        """The values, outside the autograd graph (as torch's ``_values()``)."""
        return self._val.detach()

    # ------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        return self._val.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self._val.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> "SparseCOOTensor":
        self._val.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._val.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._val.is_leaf

    @property
    def grad(self) -> Optional["SparseCOOTensor"]:
        """A leaf's gradient: the per-entry gradients of its values at its coalesced
        coordinates (duplicate entries have the same gradient: one of them is taken)."""
        g = self._val.grad
        if g is None:
            return None
        if self._coalesced:
            return SparseCOOTensor(self._idx, g, self._size, True)
        idx, first, _ = _unique_coordinates(self, "Tensor.grad")
        return SparseCOOTensor(idx, O.index_select(g, 0, tensor(first)), self._size, True)

    @grad.setter
    def grad(self, value: Optional["SparseCOOTensor"]) -> None:
        if value is not None:
            raise RuntimeError("fusegrad: only None can be assigned to a sparse tensor's .grad")
        self._val.grad = None

    def detach(self) -> "SparseCOOTensor":
        return SparseCOOTensor(self._idx, self._val.detach(), self._size, self._coalesced)

    @property
    def data(self) -> "SparseCOOTensor":
        return self.detach()

    def clone(self) -> "SparseCOOTensor":
        return SparseCOOTensor(O.clone(self._idx), O.clone(self._val), self._size, self._coalesced)

    # ------------------------------------------------------------ conversion
    def to(self, *args, **kwargs) -> "SparseCOOTensor":
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``: the values converted, the
        indices moved with them; ``self`` when nothing changes."""
        val = O.to(self._val, *args, **kwargs)
        if val is self._val:
            return self
        idx = self._idx if val.device == self._idx.device else O.to(self._idx, val.device)
        return SparseCOOTensor(idx, val, self._size, self._coalesced)

    def type(self, dtype) -> "SparseCOOTensor":
        return self.to(dtype)

    def double(self) -> "SparseCOOTensor":
        return self.to(D.float64)

    def float(self) -> "SparseCOOTensor":
        return self.to(D.float32)

    def half(self) -> "SparseCOOTensor":
        return self.to(D.float16)

    def long(self) -> "SparseCOOTensor":
        return self.to(D.int64)

    def cpu(self) -> "SparseCOOTensor":
        return self.to(CPU)

    def cuda(self, device=None, non_blocking: bool = False) -> "SparseCOOTensor":
        return self.to("cuda" if device is None else device)

    def to_sparse(self, sparse_dim: Optional[int] = None) -> "SparseCOOTensor":
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion from Sparse to Sparse with sparse_dim {sparse_dim} is not "
                               f"supported (the tensor has sparse_dim {self.sparse_dim()})")
        return self

    to_sparse_coo = to_sparse

    def to_dense(self, dtype=None, *, masked_grad: Optional[bool] = None) -> Tensor:
        """The dense tensor: each entry's value added at its coordinates (differentiable
        in the values)."""
        sd = self.sparse_dim()
        sparse_size = self._size[:sd]
        val = self._val if dtype is None else O.to(self._val, dtype)
        rows = zeros(int(np.prod(sparse_size, dtype=np.int64)), *val.shape[1:], dtype=val.dtype,
                     device=val.device)
        out = index_add(rows, 0, self._flat_index(), val)
        return O.named(O.reshape(out, self._size), "ToDenseBackward0")

    def _flat_index(self) -> Tensor:
        """Each entry's row-major position among the sparse dimensions (traceable)."""
        sd = self.sparse_dim()
        if sd == 1:
            return O.reshape(self._idx, (-1,))
        strides = _strides(self._size[:sd]).reshape(sd, 1)
        return O.sum(O.mul(self._idx, tensor(strides, device=self._idx.device)), 0)

    def coalesce(self) -> "SparseCOOTensor":
        """The same tensor with its coordinates sorted and duplicates summed (``self`` when
        already coalesced); differentiable in the values."""
        if self._coalesced:
            return self
        idx, _, inverse = _unique_coordinates(self, "coalesce()")
        val = zeros(idx.shape[1], *self._val.shape[1:], dtype=self._val.dtype, device=self._val.device)
        val = O.named(index_add(val, 0, tensor(inverse, device=self._val.device), self._val), "CoalesceBackward0")
        return SparseCOOTensor(idx, val, self._size, True)

    # ------------------------------------------------------------ layout
    def t(self) -> "SparseCOOTensor":
        if self.sparse_dim() > 2 or self.dense_dim():
            raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got "
                               f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions")
        return self if self.dim() < 2 else self.transpose(0, 1)

    @property
    def T(self) -> "SparseCOOTensor":
        return self.t()

    def transpose(self, dim0: int, dim1: int) -> "SparseCOOTensor":
        """Swap two sparse dimensions: their index rows trade places (not coalesced after,
        as torch)."""
        n, sd = self.dim(), self.sparse_dim()
        d0, d1 = _dim(dim0, n), _dim(dim1, n)
        if d0 >= sd or d1 >= sd:
            raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got sparse_dim: {sd}, "
                               f"d0: {d0}, d1: {d1}")
        if d0 == d1:
            return self
        perm = list(range(sd))
        perm[d0], perm[d1] = d1, d0
        size = list(self._size)
        size[d0], size[d1] = size[d1], size[d0]
        idx = O.index_select(self._idx, 0, tensor(np.array(perm, dtype=np.int64), device=self._idx.device))
        return SparseCOOTensor(idx, self._val, size, False)

    swapdims = swapaxes = transpose

    def zero_(self) -> "SparseCOOTensor":
        """Every entry removed, in place (``zero_grad(set_to_none=False)`` of a sparse gradient)."""
        self._idx = self._idx[:, :0]
        self._val = self._val[:0]
        self._coalesced = True
        return self

    def _values_at(self, k: np.ndarray) -> Tensor:
        """The values of entries ``k`` (positions in the entry list; differentiable)."""
        return O.index_select(self._val, 0, tensor(k.astype(np.int64), device=self._val.device))

    def index_select(self, dim: int, index: Tensor) -> "SparseCOOTensor":
        """The slices at ``index`` along sparse dimension ``dim`` (repeats repeat them), as
        torch's sparse index_select; differentiable in the values."""
        d = _dim(dim, self.dim())
        if d >= self.sparse_dim():
            raise NotImplementedError("index_select: fusegrad selects along sparse dimensions only")
        idx = self._idx._concrete("sparse index_select", host=True)
        want = np.asarray(O.as_t(index)._concrete("sparse index_select", host=True)).reshape(-1)
        j, k = np.nonzero(want[:, None] == idx[d][None, :])  # (new position, entry) pairs, by new position
        new_idx = idx[:, k].copy()
        new_idx[d] = j
        size = list(self._size)
        size[d] = len(want)
        val = self._values_at(k)
        return SparseCOOTensor(tensor(new_idx, device=self._idx.device), val, size, False)

    # ------------------------------------------------------------ arithmetic
    def _factor(self, other):
        """What ``mul`` multiplies the values by: a number or 0-d tensor as it is, a dense
        tensor of the same shape as its elements at the entries' coordinates."""
        if isinstance(other, Tensor) and other.ndim:
            if tuple(other.shape) != self._size:
                raise RuntimeError(f"mul: a sparse tensor of size {list(self._size)} times a dense tensor of size "
                                   f"{list(other.shape)}: fusegrad needs the same sizes")
            return _pick(other, self)
        return other

    def mul(self, other) -> "SparseCOOTensor":
        """Times a number or 0-d tensor (every value scaled), a dense tensor of the same
        shape (each value times the dense element at its coordinates), or a sparse tensor of
        the same size (the products at the coordinates both hold)."""
        if isinstance(other, SparseCOOTensor):
            return self._times_sparse(other)
        return SparseCOOTensor(self._idx, O.mul(self._val, self._factor(other)), self._size, self._coalesced)

    def _times_sparse(self, other: "SparseCOOTensor") -> "SparseCOOTensor":
        if other._size != self._size:
            raise RuntimeError(f"mul: expected 'self' and 'other' to have same size, but {list(self._size)} != "
                               f"{list(other._size)}")
        a, b = self.coalesce(), other.coalesce()
        _, ia, ib = np.intersect1d(a._flat_index()._concrete("sparse mul", host=True),
                                   b._flat_index()._concrete("sparse mul", host=True), return_indices=True)
        return SparseCOOTensor(tensor(a._idx._concrete("sparse mul", host=True)[:, ia], device=a._idx.device),
                               O.mul(a._values_at(ia), b._values_at(ib)), self._size, True)

    __mul__ = __rmul__ = multiply = mul

    def mul_(self, other) -> "SparseCOOTensor":
        """``mul`` in place: the values updated, ``self`` returned (gradient scaling)."""
        self._val.mul_(self._factor(other))
        return self

    __imul__ = mul_

    def _divisor(self, other):
        """``other``, checked to be a number or 0-d dense tensor (torch's only divisors)."""
        if isinstance(other, SparseCOOTensor) or (isinstance(other, Tensor) and other.ndim):
            raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor divisor (got shape "
                               f"{list(other.shape)} for divisor)")
        return other

    def div(self, other) -> "SparseCOOTensor":
        return SparseCOOTensor(self._idx, O.div(self._val, self._divisor(other)), self._size, self._coalesced)

    __truediv__ = divide = div

    def div_(self, other) -> "SparseCOOTensor":
        """``div`` in place: the values updated, ``self`` returned (gradient accumulation)."""
        self._val.div_(self._divisor(other))
        return self

    __itruediv__ = div_

    def neg(self) -> "SparseCOOTensor":
        return SparseCOOTensor(self._idx, O.neg(self._val), self._size, self._coalesced)

    __neg__ = negative = neg

    def pow(self, exponent) -> "SparseCOOTensor":
        """The coalesced values to a nonzero number's power (zero would fill the unspecified
        entries, as torch refuses)."""
        if isinstance(exponent, Tensor):
            raise _backend_error("'aten::pow.Tensor_Tensor'")
        if exponent == 0:
            raise RuntimeError("pow: cannot raise to zeroth power on sparse tensor; it would make the result "
                               "tensor dense")
        s = self.coalesce()  # (duplicates summed before the power)
        return SparseCOOTensor(s._idx, O.pow(s._val, exponent), self._size, True)

    __pow__ = pow

    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
        """The norm of all its entries (of the coalesced values: the unspecified ones are
        zeros), dense 0-d; torch's sparse norm reduces over every dimension only."""
        if dim is not None and sorted(_dim(d, self.dim()) for d in ((dim,) if isinstance(dim, int) else dim)) != \
                list(range(self.dim())):
            raise RuntimeError("norm_sparse currently only supports full reductions, so 'dim' must either be empty "
                               "or contain all dimensions of the input")
        if keepdim:
            raise RuntimeError("norm_sparse currently does not support keepdim=True")
        return O.norm(self.coalesce()._val, p, dtype=dtype)

    def add(self, other, *, alpha=1) -> "SparseCOOTensor":
        """The sum with another sparse tensor of the same size: both entry lists together
        (coalesced when both operands were, as torch)."""
        if not isinstance(other, SparseCOOTensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        if other._size != self._size:
            raise RuntimeError(f"add: expected sizes of 'self' and 'other' to match, but {list(self._size)} != "
                               f"{list(other._size)}")
        if other.sparse_dim() != self.sparse_dim():
            raise RuntimeError(f"add: expected 'self' and 'other' to have same sparse dimensions, but got "
                               f"{self.sparse_dim()} and {other.sparse_dim()}")
        dt = D.promote_types(self.dtype, other.dtype)
        ov = other._val if alpha == 1 else O.mul(other._val, alpha)
        val = O.cat([O.to(self._val, dt), O.to(ov, dt)], 0)
        out = SparseCOOTensor(O.cat([self._idx, other._idx], 1), val, self._size, False)
        return out.coalesce() if self._coalesced and other._coalesced else out

    __add__ = add

    def add_(self, other, *, alpha=1) -> "SparseCOOTensor":
        """``add`` in place: ``self`` holds the sum's entries, and is returned."""
        return self._assign(self.add(other, alpha=alpha), "add")

    __iadd__ = add_

    def narrow_copy(self, dim: int, start: int, length: int) -> "SparseCOOTensor":
        """The entries with coordinate ``start`` to ``start + length - 1`` along sparse
        dimension ``dim``, shifted to start at 0 (a copy, as torch's)."""
        d = _dim(dim, self.dim())
        if d >= self.sparse_dim():
            raise NotImplementedError("narrow_copy: fusegrad narrows sparse dimensions only")
        if start < 0 or length < 0 or start + length > self._size[d]:
            raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({self._size[d]}).")
        idx = self._idx._concrete("sparse narrow_copy", host=True)
        k = np.flatnonzero((idx[d] >= start) & (idx[d] < start + length))
        new_idx = idx[:, k].copy()
        new_idx[d] -= start
        val = self._values_at(k)
        size = self._size[:d] + (length,) + self._size[d + 1:]
        return SparseCOOTensor(tensor(new_idx, device=self._idx.device), val, size, self._coalesced)

    def copy_(self, src: "SparseCOOTensor", non_blocking: bool = False) -> "SparseCOOTensor":
        """``self`` made to hold ``src``'s entries in its own dtype and device (a sparse buffer
        loaded from a state dict), as torch's sparse copy_."""
        if not isinstance(src, SparseCOOTensor):
            raise NotImplementedError("copy_: fusegrad copies a sparse tensor into a sparse tensor only")
        if src._size != self._size:
            raise RuntimeError(f"copy_: a sparse tensor of size {list(src._size)} into one of size "
                               f"{list(self._size)}")
        src = src.to(self._val.device)
        self._idx, self._val, self._coalesced = src._idx.clone(), O.to(src._val, self.dtype).clone(), src._coalesced
        return self

    def _assign(self, out: "SparseCOOTensor", op: str) -> "SparseCOOTensor":
        """``self`` made to hold ``out``'s entries, in its own dtype (an in-place op's
        result: more entries, so new index and value tensors, as torch's reallocation)."""
        if out.dtype.category > self.dtype.category:
            raise RuntimeError(f"Can't convert result type {_type_name(out.dtype)} to output "
                               f"{_type_name(self.dtype)} in {op} operation")
        self._idx, self._val, self._coalesced = out._idx, O.to(out._val, self.dtype), out._coalesced
        return self

    def sub(self, other, *, alpha=1) -> "SparseCOOTensor":
        if not isinstance(other, SparseCOOTensor):
            raise RuntimeError("sub(sparse, dense) is not supported. Use sub(dense, sparse) instead.")
        return self.add(other, alpha=-alpha)

    __sub__ = subtract = sub

    def sub_(self, other, *, alpha=1) -> "SparseCOOTensor":
        return self._assign(self.sub(other, alpha=alpha), "sub")

    __isub__ = sub_

    # ------------------------------------------------------------ dense-only operations
    def __getattr__(self, name: str):
        """A dense Tensor attribute a sparse tensor lacks: torch's NotImplementedError,
        naming it, when called (a property: at once)."""
        if name.startswith("_") or not hasattr(Tensor, name):
            raise AttributeError(f"'SparseCOOTensor' object has no attribute '{name}'")
        if not callable(getattr(Tensor, name)):
            raise _backend_error(f"'aten::{name}'")
        return functools.partial(_unsupported, name)

    def __array__(self, dtype=None, copy=None):
        raise dense_op_error()

    def __getitem__(self, key):
        """Integers select along the leading sparse dimensions (``A[i]``: row i, sparse, as
        torch's; every sparse dimension selected: the dense value); other keys are refused."""
        keys = key if isinstance(key, tuple) else (key,)
        if not keys or not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys) or \
                len(keys) > self.sparse_dim():
            raise _backend_error("'aten::index'")
        out = self
        for k in keys:
            out = out.select(0, int(k))
        return out.to_dense() if out.sparse_dim() == 0 else out

    def select(self, dim: int, index: int) -> "SparseCOOTensor":
        """The slice at ``index`` along sparse dimension ``dim``, that dimension removed
        (differentiable in the values)."""
        d = _dim(dim, self.dim())
        if d >= self.sparse_dim():
            raise NotImplementedError("select: fusegrad selects along sparse dimensions only")
        n = self._size[d]
        if not -n <= index < n:
            raise IndexError(f"select(): index {index} out of range for tensor of size {list(self._size)} at "
                             f"dimension {d}")
        idx = self._idx._concrete("sparse select", host=True)
        k = np.flatnonzero(idx[d] == index % n)
        val = self._values_at(k)
        return SparseCOOTensor(tensor(np.delete(idx[:, k], d, axis=0), device=self._idx.device), val,
                               self._size[:d] + self._size[d + 1:], False)  # (uncoalesced, as torch marks it)

    def __iter__(self):
        raise _backend_error("'aten::unbind'")

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.to_dense().reshape(()))

    def __reduce__(self):
        return (_rebuild, (self._idx, self._val, self._size, self._coalesced))

    # ------------------------------------------------------------ printing
    def _printed(self) -> tuple:
        """(name, tensor) of the parts its print shows."""
        return ("indices", self._idx), ("values", self._val)

    def __repr__(self) -> str:
        return _repr(self)

    __str__ = __repr__


def _rebuild(idx: Tensor, val: Tensor, size: tuple, coalesced: bool) -> SparseCOOTensor:
    """A pickled sparse tensor (``__reduce__``), rebuilt through ``sparse_coo_tensor``'s
    checks: ``weights_only`` loads allow it (as torch's ``_rebuild_sparse_tensor``), so a
    file's indices must stay within its size."""
    return sparse_coo_tensor(idx, val, size, requires_grad=val.requires_grad, is_coalesced=coalesced)


def _pick(dense: Tensor, s: SparseCOOTensor) -> Tensor:
    """The elements (slices, for a hybrid ``s``) of ``dense`` at ``s``'s entries'
    coordinates (differentiable in ``dense``)."""
    return O.getitem(dense, tuple(s._idx[d] for d in range(s.sparse_dim())))


def _unsupported(name: str, *args, **kwargs):
    raise _backend_error(f"'aten::{name}'")


def _backend_error(op: str) -> NotImplementedError:
    """torch's error for the dense-only ``op`` (quoted ``'aten::name'``) on a sparse tensor."""
    return NotImplementedError(f"Could not run {op} with arguments from the 'SparseCPU' backend: fusegrad's sparse "
                               "COO tensors support to_dense, coalesce, indices/values, t, sums and products with "
                               "dense matrices (convert with .to_dense() first)")


def dense_op_error() -> NotImplementedError:
    """The error for a sparse tensor met where a dense one is needed, naming the fusegrad
    op the user called (the outermost declared op on the stack whose code is its alone:
    the unary ops share one closure's code) and the user's line."""
    import inspect
    from ..tracer.trace import user_frame
    from .exports import EXPORTS
    fns: dict = {}  # code -> the distinct functions with it, each with its first declared name
    for n, e in EXPORTS.items():
        fns.setdefault(inspect.unwrap(e.fn).__code__, {}).setdefault(e.fn, n)
    name = None
    f = sys._getframe(1)
    while f is not None:
        found = fns.get(f.f_code)
        if found is not None and len(found) == 1:
            name = next(iter(found.values()))
        f = f.f_back
    op = f"'aten::{name}'" if name else "a dense op"
    return NotImplementedError(f"{_backend_error(op)} at {user_frame()}")


def _dim(d: int, n: int) -> int:
    if not -max(n, 1) <= d < max(n, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(n, 1)}, {max(n, 1) - 1}], "
                         f"but got {d})")
    return d % max(n, 1)


def _unique_coordinates(s: SparseCOOTensor, what: str):
    """(coalesced indices tensor, first entry of each, each entry's place among them) of
    ``s``'s coordinates, read concretely (for ``what``)."""
    idx = s._idx._concrete(f"{what} (reads a sparse tensor's indices)", host=True)
    sd = idx.shape[0]
    strides = _strides(s._size[:sd])[:, None]
    uniq, first, inverse = np.unique((idx * strides).sum(0), return_index=True, return_inverse=True)
    coords = (uniq[None, :] // strides) % np.maximum(np.array(s._size[:sd], np.int64), 1)[:, None]
    return (tensor(coords.astype(np.int64).reshape(sd, -1), device=s._idx.device), first.astype(np.int64),
            inverse.reshape(-1).astype(np.int64))


def _strides(size: tuple) -> np.ndarray:
    """Row-major strides (in elements) of a tensor of ``size``."""
    return np.array([int(np.prod(size[d + 1:], dtype=np.int64)) for d in range(len(size))], dtype=np.int64)


# ---------------------------------------------------------------- construction
def sparse_coo_tensor(indices, values, size: Optional[Sequence[int]] = None, *, dtype=None, device=None,
                      pin_memory: bool = False, requires_grad: bool = False, check_invariants: Optional[bool] = None,
                      is_coalesced: Optional[bool] = None) -> SparseCOOTensor:
    """torch.sparse_coo_tensor: entries at ``indices`` (sparse_dim x nnz, converted to
    int64) with ``values`` (nnz, then the dense dimensions); ``size`` defaults to the
    smallest that holds every index. Values that require grad keep their autograd graph;
    ``requires_grad=True`` makes a leaf. ``is_coalesced=True`` promises no duplicates in
    sorted order (as torch, it is not checked); else only nnz <= 1 counts as coalesced.
    Indices outside ``size`` raise (torch's invariant check), when they are concrete."""
    idx = O.to(indices.detach() if isinstance(indices, Tensor) else tensor(indices), D.int64)
    val = values if isinstance(values, Tensor) else tensor(values, dtype=dtype)
    if dtype is not None:
        val = O.to(val, dtype)
    if device is not None:
        idx, val = O.to(idx, device), O.to(val, device)
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if val.ndim == 0:
        raise RuntimeError("values must have at least one dimension (nnz, then the dense dimensions)")
    sd, nnz = idx.shape
    if val.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from "
                           f"values: {val.shape[0]}")
    dense = tuple(val.shape[1:])
    concrete = type(idx._data) is np.ndarray
    if size is None:
        a = idx._concrete("sparse_coo_tensor() without a size (reads the indices)", host=True)
        size = tuple(int(m) + 1 for m in a.max(1)) if nnz else (0,) * sd
        size += dense
    else:
        size = tuple(int(s) for s in size)
        if len(size) != sd + len(dense):
            raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim ({len(dense)}), but got "
                               f"{len(size)}")
        if size[sd:] != dense:
            raise RuntimeError(f"values has incorrect size, expected {[nnz, *size[sd:]]}, got {list(val.shape)}")
        if concrete and nnz:
            _check_bounds(idx._data, size[:sd])
    if requires_grad:
        val = val.detach().requires_grad_(True)
    elif val.requires_grad:  # a node of its own, as torch's, so that the sparse tensor is not a leaf
        val = O.named(O.view(val, tuple(val.shape)), "SparseCooTensorWithDimsAndTensorsBackward0")
    coalesced = nnz <= 1 if is_coalesced is None else bool(is_coalesced)
    return SparseCOOTensor(idx, val, size, coalesced)


def _check_bounds(idx: np.ndarray, sparse_size: tuple) -> None:
    lo, hi = idx.min(1), idx.max(1)
    for d, (l, h, n) in enumerate(zip(lo.tolist(), hi.tolist(), sparse_size)):
        if l < 0:
            raise RuntimeError(f"found negative index {l} for dim {d}")
        if h >= n:
            raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is {n} but found index {h}")


def to_sparse(x: Tensor, sparse_dim: Optional[int] = None, *, layout=None, blocksize=None,
              dense_dim: Optional[int] = None) -> SparseCOOTensor:
    """Tensor.to_sparse: the nonzero entries of ``x`` (of slices along its last
    ``ndim - sparse_dim`` dimensions, for a hybrid tensor), coalesced; the values are read
    from ``x`` by indexing, so gradients flow back to it. The nonzero pattern is read
    concretely (a graph break when compile traces ``x``)."""
    if layout is not None and layout is not sparse_coo:
        raise NotImplementedError(f"to_sparse: fusegrad converts to layout=fusegrad.sparse_coo only, not {layout}")
    n = x.ndim
    sd = n if sparse_dim is None else (n - dense_dim if dense_dim is not None else sparse_dim)
    if not 0 <= sd <= n:
        raise RuntimeError(f"sparse_dim ({sd}) must be between 0 and the number of dimensions ({n})")
    a = x._concrete("Tensor.to_sparse() (its nonzero pattern)", host=True)
    mask = a != 0
    if sd < n:
        mask = mask.any(axis=tuple(range(sd, n)))
    if sd == 0:  # one entry: the whole tensor
        idx, val = tensor(np.zeros((0, 1), np.int64), device=x.device), O.unsqueeze(x, 0)
    else:
        idx = tensor(np.stack(np.nonzero(mask)).astype(np.int64).reshape(sd, -1), device=x.device)
        val = O.getitem(x, tuple(idx[d] for d in range(sd)))
    return SparseCOOTensor(idx, O.named(val, "ToSparseBackward1"), tuple(x.shape), True)


def to_sparse_coo(x: Tensor) -> SparseCOOTensor:
    return to_sparse(x)


def sparse_mask(x: Tensor, mask: SparseCOOTensor) -> SparseCOOTensor:
    """Tensor.sparse_mask: ``x``'s elements at ``mask``'s entries, with ``mask``'s indices
    (and coalesced flag); differentiable in ``x``."""
    if not isinstance(mask, SparseCOOTensor):
        raise NotImplementedError("Could not run 'aten::sparse_mask' with arguments from the 'CPU' backend: the "
                                  "mask must be a sparse COO tensor")
    if tuple(x.shape) != mask._size:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(x.shape)} but mask "
                           f"has size {list(mask._size)}")
    return SparseCOOTensor(mask._idx, O.named(_pick(x, mask), "SparseMaskBackward0"), mask._size, mask._coalesced)


# ---------------------------------------------------------------- printing
def _repr(s: SparseCOOTensor) -> str:
    """torch's print of a sparse tensor: the indices and values tensors, then size, nnz,
    dtype, layout and autograd suffixes, the first on a line of its own."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = [] if s.device.type == "cpu" else [f"device='{s.device}'"]
    suffixes += ["size=" + str(s._size), f"nnz={s._nnz()}"]
    if s.dtype not in (D.get_default_dtype(), D.int64, D.bool_):
        suffixes.append(f"dtype={s.dtype}")
    suffixes.append(f"layout={s.layout}")
    if s.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(s.grad_fn).__name__}>")
    elif s.requires_grad:
        suffixes.append("requires_grad=True")
    parts = []
    for name, t in s._printed():
        a = t._concrete("printing", host=True)
        body = tensor_str(a, indent + len(name) + len("=tensor("))
        if a.size == 0:
            body += ", size=" + str(tuple(a.shape))
        parts.append(f"{name}=tensor({body})")
    out = prefix + (",\n" + " " * indent).join(parts)
    # torch's _add_suffixes, with force_newline for COO: its first suffix starts a line
    last, force = len(out) - out.rfind("\n") + 1, s.layout is sparse_coo
    for suffix in suffixes:
        if force or last + len(suffix) + 2 > PRINT_OPTS.linewidth:
            out += ",\n" + " " * indent + suffix
            last, force = indent + len(suffix), False
        else:
            out += ", " + suffix
            last += len(suffix) + 2
    return out + ")"
