"""PyTorch's legacy tensor types: ``torch.FloatTensor``, ``torch.LongTensor``, ... (one per
name ``Tensor.type()`` gives) as constructors (``torch.LongTensor([1, 2])``,
``torch.FloatTensor(2, 3)``), for ``isinstance`` checks and for ``x.type(torch.DoubleTensor)``;
the legacy storages (``torch.ByteStorage``, ...: ``torch.ByteTensor(torch.ByteStorage.from_buffer(b))``
reads an image's bytes, as older torchvision does); and ``torch.autograd.Variable``, which makes
a tensor that shares its argument's memory."""
from __future__ import annotations

import sys

import numpy as np

from ..ir import dtypes as D
from .ops import _TYPE_NAMES
from .tensor import Tensor
from .tensor_queries import TypedStorage


class LegacyType(type):
    """A legacy tensor type: its instances are the CPU tensors of its ``dtype``."""

    dtype: D.dtype

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and not obj.is_cuda

    def __call__(cls, *args) -> Tensor:
        """A tensor of ``cls.dtype``: uninitialized of the sizes given, a copy of a sequence,
        or an alias of a tensor of that dtype (another dtype is PyTorch's TypeError)."""
        if len(args) == 1 and isinstance(args[0], Tensor) and args[0].dtype != cls.dtype:
            raise TypeError(f"expected {cls.dtype} (got {args[0].dtype})")
        return Tensor(*args, dtype=cls.dtype)

    def __repr__(cls) -> str:
        return f"<class 'torch.{cls.__name__}'>"


TYPES = {name: LegacyType(name, (), {"dtype": d, "__module__": "fusegrad"}) for d, name in _TYPE_NAMES.items()
         if not d.is_complex}  # (torch has no torch.ComplexFloatTensor, though x.type() names it)


class LegacyStorage(TypedStorage):
    """PyTorch's ``torch.FloatStorage``, ``torch.ByteStorage``, ...: ``Storage(n)`` (zeros),
    ``Storage(sequence)``, ``Storage.from_buffer(bytes)`` (a copy), memory a legacy tensor
    type takes (``torch.ByteTensor(storage)`` views it)."""
    dtype = None  # each class's (see LEGACY_STORAGES)

    def __init__(self, *args):
        np_dt = self.dtype.np
        if not args:
            data = np.zeros(0, np_dt)
        elif len(args) == 1 and isinstance(args[0], (int, np.integer)):
            data = np.zeros(int(args[0]), np_dt)
        elif len(args) == 1:
            data = np.array(list(args[0]), dtype=np_dt).reshape(-1)
        else:
            raise TypeError(f"{type(self).__name__}(): expected a size or a sequence")
        super().__init__(data, self.dtype)

    @classmethod
    def from_buffer(cls, buffer, byte_order: str = "native", count: int = -1, offset: int = 0):
        """A storage of a copy of ``buffer``'s bytes read as the class's dtype."""
        data = np.frombuffer(buffer, dtype=cls.dtype.np, count=count, offset=offset)
        if byte_order in ("big", "little") and byte_order != sys.byteorder:
            data = data.byteswap()
        out = cls()
        out._root = data.copy()
        return out

    def __getitem__(self, i):
        return self._root.reshape(-1)[i].item()

    def __setitem__(self, i, value) -> None:
        self._root.reshape(-1)[i] = value


#: torch.ByteStorage and the rest, by name
STORAGES = {name.replace("Tensor", "Storage"): type(name.replace("Tensor", "Storage"), (LegacyStorage,),
                                                   {"dtype": d, "__module__": "fusegrad"})
            for d, name in _TYPE_NAMES.items() if not d.is_complex or name == "ComplexFloatTensor"}



class _AnyTensor(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_AnyTensor):
    """``Variable(tensor, requires_grad=False)``, PyTorch's deprecated wrapper: a leaf that
    shares ``tensor``'s memory and requires grad as asked; every tensor is a Variable."""

    def __new__(cls, data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)
