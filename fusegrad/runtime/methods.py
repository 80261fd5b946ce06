"""Tensor methods and operators: the ops declared in ``runtime.exports`` (methods and
in-place variants), plus the operators and the Tensor-only helpers bound here."""
from __future__ import annotations

from ..ir import dtypes as D
from . import ops as O
# (declaring their ops before _bind)
from . import index_ops as _index_ops, linalg as _linalg, numeric as _numeric, restride as _restride  # noqa: F401
from . import sorting as _sorting  # noqa: F401
from . import bitwise_ops as B
from . import tensor_queries as Q
from .linalg_extras import adjoint, matrix_h
from .devices import data_pointer
from .exports import EXPORTS
from .tensor import Tensor

def _r(fn):
    """Reflected operator: ``scalar op tensor``."""
    return lambda self, other: fn(other, self)


def _functional():
    """``nn.functional`` (imported on first use: it imports this package's ops)."""
    from ..nn import functional
    return functional


def _invert(self):
    """``~t``: bitwise NOT of a bool or integer tensor; Python's TypeError on others (as torch)."""
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return B.bitwise_not(self)


def _bind() -> None:
    T = Tensor
    for name, ex in EXPORTS.items():
        if ex.method:
            setattr(T, name, ex.fn)
        if ex.inplace:
            setattr(T, name + "_", O._inplace_of(ex.fn))
    T.where = lambda self, cond, other: O.where(cond, self, other)
    for name, d in [("float", D.float32), ("double", D.float64), ("half", D.float16), ("bfloat16", D.bfloat16),
                    ("long", D.int64), ("int", D.int32), ("short", D.int16), ("bool", D.bool_), ("byte", D.uint8),
                    ("char", D.int8), ("cfloat", D.complex64), ("cdouble", D.complex128)]:
        setattr(T, name, O._caster(d))
    T.is_floating_point = lambda self: self.dtype.is_floating_point
    T.is_contiguous = O.is_contiguous
    T.new_zeros = lambda self, *size, dtype=None, device=None, **k: __import__("fusegrad").zeros(
        *size, dtype=dtype or self.dtype, device=device or self.device, **k)
    T.new_ones = lambda self, *size, dtype=None, device=None, **k: __import__("fusegrad").ones(
        *size, dtype=dtype or self.dtype, device=device or self.device, **k)
    T.new_full = lambda self, size, v, dtype=None, device=None, **k: __import__("fusegrad").full(
        size, v, dtype=dtype or self.dtype, device=device or self.device, **k)
    T.new_empty = T.new_zeros
    T.new_tensor = lambda self, data, dtype=None, device=None, **k: __import__("fusegrad").tensor(
        data, dtype=dtype or self.dtype, device=device or self.device, **k)
    T.stride = lambda self, dim=None: (tuple(s // self._data.dtype.itemsize for s in self._data.strides)
                                       if dim is None else self._data.strides[dim] // self._data.dtype.itemsize)
    T.data_ptr = T.const_data_ptr = lambda self: data_pointer(self._data)
    # the dims from the outermost in memory to the innermost (ties in their order), as PyTorch's
    T.dim_order = lambda self: tuple(sorted(range(self.dim()), key=lambda d: -self.stride(d)))
    T.hardshrink = lambda self, lambd=0.5: _functional().hardshrink(self, lambd)
    T.prelu = lambda self, weight: _functional().prelu(self, weight)
    T.H = property(matrix_h)
    T.mH = property(adjoint)
    T.nbytes = property(Q.nbytes)
    T.itemsize = property(Q.itemsize)
    T.storage_offset = Q.storage_offset
    T.untyped_storage = Q.untyped_storage
    T.storage = Q.storage
    T.is_set_to = Q.is_set_to
    T.set_ = Q.set_

    # operators
    for name, fn in (("add", O.add), ("mul", O.mul), ("floordiv", O.floor_divide), ("mod", O.remainder),
                     ("pow", O.pow), ("matmul", O.matmul), ("and", B.bitwise_and), ("or", B.bitwise_or),
                     ("xor", B.bitwise_xor), ("lshift", B.bitwise_left_shift), ("rshift", B.bitwise_right_shift)):
        setattr(T, f"__{name}__", fn)
        setattr(T, f"__r{name}__", _r(fn))
    T.__sub__ = O.sub
    T.__rsub__ = lambda self, other: O.rsub(self, other)
    T.__truediv__ = O.div
    T.__rtruediv__ = lambda self, other: O.mul(O.reciprocal(self), other)  # (as torch computes it)
    T.__neg__ = O.neg
    T.__pos__ = lambda self: self
    T.__abs__ = O.abs
    T.__invert__ = _invert
    T.__eq__ = O.eq
    T.__ne__ = O.ne
    T.__lt__ = O.lt
    T.__le__ = O.le
    T.__gt__ = O.gt
    T.__ge__ = O.ge
    T.__getitem__ = O.getitem
    T.__setitem__ = O.setitem

    # in-place (the declared variants are bound above)
    T.__iadd__ = T.add_
    T.__isub__ = T.sub_
    T.__imul__ = T.mul_
    T.__itruediv__ = T.div_
    T.__imod__ = T.remainder_
    T.__ifloordiv__ = T.floor_divide_
    T.__iand__ = T.bitwise_and_
    T.__ior__ = T.bitwise_or_
    T.__ixor__ = T.bitwise_xor_
    T.__ilshift__ = T.bitwise_left_shift_
    T.__irshift__ = T.bitwise_right_shift_


_bind()

