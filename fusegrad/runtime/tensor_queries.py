"""Questions about tensors and small factories of the ``torch`` namespace: ``is_nonzero``,
``is_same_size``, ``is_signed``, ``typename``, ``scalar_tensor`` and ``randint_like``; the Tensor's ``nbytes``, ``itemsize`` and
``storage_offset`` (bound in ``runtime.methods``)."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes as D
from .exports import op
from .tensor import Tensor


@op
def is_nonzero(input: Tensor) -> bool:  # noqa: A002
    """Whether the one-element ``input`` is not zero."""
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item() != 0)


@op
def is_same_size(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """Whether the two tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


@op
def is_signed(input: Tensor) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is signed (floats and signed integers)."""
    return input.dtype.np.kind in "if" or input.dtype == D.bfloat16


@op(method=False)
def typename(obj) -> str:
    """The type name PyTorch gives ``obj``: a tensor's legacy type (``torch.FloatTensor``), else its class's."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__builtin__", None) else f"{module}.{cls.__qualname__}"


@op(method=False)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory: bool = False,
                  requires_grad: bool = False) -> Tensor:
    """A 0-d tensor of the number ``s`` (the default float dtype unless ``dtype``)."""
    from .factory import tensor
    return tensor(float(s) if dtype is None else s, dtype=dtype or D.get_default_dtype(), device=device,
                  requires_grad=requires_grad)


@op(method=False)
def randint_like(input: Tensor, low: int = 0, high=None, *, dtype=None, layout=None, device=None,  # noqa: A002
                 requires_grad: bool = False, memory_format=None, generator=None) -> Tensor:
    """Random integers in ``[low, high)`` (``randint_like(input, high)``: from 0) of ``input``'s shape and dtype."""
    if high is None:
        low, high = 0, low
    from .factory import randint
    r = randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, generator=generator,
                device=device or input.device)
    return r.requires_grad_(requires_grad) if requires_grad else r


def nbytes(self: Tensor) -> int:
    """The bytes the tensor's elements take."""
    return self.numel() * self.element_size()


def itemsize(self: Tensor) -> int:
    """The bytes one element takes."""
    return self.element_size()


def _root(d: np.ndarray) -> np.ndarray:
    """The array that owns ``d``'s memory (its storage)."""
    while d.base is not None and isinstance(d.base, np.ndarray):
        d = d.base
    return d


def storage_view(d: np.ndarray, offset: int, size: tuple, stride: tuple) -> np.ndarray:
    """The array of ``size`` and ``stride`` (in elements) at element ``offset`` of ``d``'s
    storage, sharing its memory (elements may overlap, as in PyTorch's strided views).
    Raises where it would reach past the storage."""
    root = _root(d)
    itemsize = d.dtype.itemsize
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if offset < 0 or (extent and offset + extent > root.nbytes // itemsize):
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
                           f"and itemsize {itemsize} requiring a storage size of {(offset + extent) * itemsize} "
                           f"are out of bounds for storage of size {root.nbytes}")
    strides = tuple(s * itemsize for s in stride)
    if root.flags.c_contiguous:  # (its base chain then leads to the storage, as a view's)
        out = np.ndarray(size, d.dtype, buffer=root, offset=offset * itemsize, strides=strides)
        out.flags.writeable = d.flags.writeable and root.flags.writeable
        return out
    # (a strided root, as empty_strided makes: its memory read as the flat storage from its start)
    flat = np.lib.stride_tricks.as_strided(root, (offset + extent,), (itemsize,))
    return np.lib.stride_tricks.as_strided(flat[offset:], size, strides, writeable=bool(d.flags.writeable))


def storage_offset(self: Tensor) -> int:
    """The offset, in elements, of the first element in its storage (its base array's memory)."""
    d = self._data
    if type(d) is not np.ndarray:
        return 0
    return (d.__array_interface__["data"][0] - _root(d).__array_interface__["data"][0]) // d.dtype.itemsize


class UntypedStorage:
    """A tensor's memory as ``Tensor.untyped_storage()`` shows it: the bytes of the array
    that owns it (views of one tensor share it, as PyTorch's do)."""

    def __init__(self, root: np.ndarray):
        self._root = root

    def data_ptr(self) -> int:
        return self._root.__array_interface__["data"][0]

    def nbytes(self) -> int:
        return self._root.nbytes

    def size(self) -> int:
        return self._root.nbytes

    def __len__(self) -> int:
        return self._root.nbytes

    def element_size(self) -> int:
        return 1

    def tolist(self) -> list:
        return np.ascontiguousarray(self._root).view(np.uint8).reshape(-1).tolist()


class TypedStorage(UntypedStorage):
    """``Tensor.storage()``: the same memory counted in elements of the tensor's dtype."""

    def __init__(self, root: np.ndarray, dtype):
        super().__init__(root)
        self.dtype = dtype

    def size(self) -> int:
        return self._root.size

    def __len__(self) -> int:
        return self._root.size

    def element_size(self) -> int:
        return self._root.dtype.itemsize

    def tolist(self) -> list:
        return self._root.reshape(-1).tolist()


def untyped_storage(self: Tensor) -> UntypedStorage:
    """The tensor's memory, shared by its views."""
    return UntypedStorage(_root(self._concrete("untyped_storage()", host=True)))


def storage(self: Tensor) -> TypedStorage:
    """The tensor's memory in elements of its dtype (PyTorch's deprecated typed storage)."""
    return TypedStorage(_root(self._concrete("storage()", host=True)), self.dtype)


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """Whether both tensors view the same memory with the same offset, sizes and strides."""
    a, b = self._data, tensor._data
    return (type(a) is np.ndarray and type(b) is np.ndarray and _root(a) is _root(b)
            and storage_offset(self) == storage_offset(tensor) and a.shape == b.shape and a.strides == b.strides)


def set_(self: Tensor, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
    """Make this tensor use ``source``'s memory, sizes and strides (a tensor: it then views
    the same storage, as PyTorch's), or a storage's memory at ``storage_offset`` with
    ``size`` and ``stride`` (all of it, 1-d, without); no source: an empty tensor. A leaf
    that requires grad takes it under ``no_grad`` only, as in PyTorch."""
    from .grad_mode import STATE
    from .tensor import wrap
    if STATE.enabled and self._rg and self._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if source is None:
        self.data = self.new_empty((0,))
    elif isinstance(source, Tensor) and size is None:
        self.data = source
    else:
        root = source._root if hasattr(source, "_root") else _root(source._concrete("set_", host=True))
        flat = root.reshape(-1).view(np.uint8).view(self._data.dtype)
        if size is None:
            self.data = wrap(flat)
        else:
            size = tuple(int(n) for n in size)
            self.data = wrap(storage_view(flat, int(storage_offset), size,
                                          tuple(stride) if stride is not None else _contiguous(size)))
    self._bump()
    return self


def _contiguous(size: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(size):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
