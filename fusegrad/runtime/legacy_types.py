"""PyTorch's legacy tensor types: ``torch.FloatTensor``, ``torch.LongTensor``, ... (one per
name ``Tensor.type()`` gives) as constructors (``torch.LongTensor([1, 2])``,
``torch.FloatTensor(2, 3)``), for ``isinstance`` checks and for ``x.type(torch.DoubleTensor)``;
and ``torch.autograd.Variable``, which makes a tensor that shares its argument's memory."""
from __future__ import annotations

from ..ir import dtypes as D
from .ops import _TYPE_NAMES
from .tensor import Tensor


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
