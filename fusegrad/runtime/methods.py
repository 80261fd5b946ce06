"""Tensor methods and operators, bound to the functions of ``runtime.ops``."""
from __future__ import annotations

from ..ir import dtypes as D
from . import ops as O
from .tensor import Tensor


def _r(fn):
    """Reflected operator: ``scalar op tensor``."""
    return lambda self, other: fn(other, self)


def _bind() -> None:
    T = Tensor
    plain = ["exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "abs", "sign",
             "sqrt", "rsqrt", "erf", "floor", "ceil", "round", "trunc", "neg", "negative", "reciprocal",
             "square", "exp2", "log2", "log10", "sinh", "cosh", "atan", "atan2", "logit", "erfc",
             "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "maximum",
             "minimum", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "greater_equal", "less_equal",
             "not_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite",
             "equal", "clamp", "clip", "clamp_min", "clamp_max", "masked_fill", "lerp", "isclose", "allclose",
             "nan_to_num", "to", "type_as", "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax",
             "argmin", "var", "std", "norm", "logsumexp", "cumsum", "all", "any", "count_nonzero", "softmax",
             "log_softmax", "reshape", "view", "view_as", "reshape_as", "flatten", "unflatten", "squeeze",
             "unsqueeze", "permute", "transpose", "swapaxes", "swapdims", "t", "expand", "expand_as",
             "contiguous", "clone", "flip", "roll", "narrow", "select", "split", "chunk", "unbind", "movedim",
             "repeat", "tile", "tril", "triu", "diag", "trace", "matmul", "mm", "bmm", "mv", "dot", "inner",
             "outer", "ger", "gather", "scatter_add", "index_select", "take_along_dim", "nonzero",
             "masked_select", "index_put", "broadcast_to", "where"]
    for name in plain:
        setattr(T, name, getattr(O, name))
    T.where = lambda self, cond, other: O.where(cond, self, other)
    T.addmm = lambda self, a, b, *, beta=1, alpha=1: O.addmm(self, a, b, beta=beta, alpha=alpha)
    for name, d in [("float", D.float32), ("double", D.float64), ("half", D.float16), ("bfloat16", D.bfloat16),
                    ("long", D.int64), ("int", D.int32), ("short", D.int16), ("bool", D.bool_), ("byte", D.uint8)]:
        setattr(T, name, O._caster(d))
    T.cpu = lambda self, *a, **k: self
    T.cuda = lambda self, *a, **k: self
    T.is_floating_point = lambda self: self.dtype.is_floating_point
    T.is_contiguous = lambda self, memory_format=None: bool(getattr(self._data, "flags", None) is None or
                                                            self._data.flags.c_contiguous)
    T.new_zeros = lambda self, *size, dtype=None, **k: __import__("fusegrad").zeros(*size, dtype=dtype or self.dtype)
    T.new_ones = lambda self, *size, dtype=None, **k: __import__("fusegrad").ones(*size, dtype=dtype or self.dtype)
    T.new_full = lambda self, size, v, dtype=None, **k: __import__("fusegrad").full(size, v, dtype=dtype or self.dtype)
    T.new_empty = T.new_zeros
    T.new_tensor = lambda self, data, dtype=None, **k: __import__("fusegrad").tensor(data, dtype=dtype or self.dtype)
    T.stride = lambda self, dim=None: (tuple(s // self._data.itemsize for s in self._data.strides) if dim is None
                                       else self._data.strides[dim] // self._data.itemsize)
    T.data_ptr = lambda self: self._data.__array_interface__["data"][0]
    T.untyped_storage = lambda self: self._data.base if self._data.base is not None else self._data

    # operators
    T.__add__ = O.add
    T.__radd__ = _r(O.add)
    T.__sub__ = O.sub
    T.__rsub__ = lambda self, other: O.rsub(self, other)
    T.__mul__ = O.mul
    T.__rmul__ = _r(O.mul)
    T.__truediv__ = O.div
    T.__rtruediv__ = _r(O.div)
    T.__floordiv__ = O.floor_divide
    T.__rfloordiv__ = _r(O.floor_divide)
    T.__mod__ = O.remainder
    T.__rmod__ = _r(O.remainder)
    T.__pow__ = O.pow
    T.__rpow__ = _r(O.pow)
    T.__matmul__ = O.matmul
    T.__rmatmul__ = _r(O.matmul)
    T.__neg__ = O.neg
    T.__pos__ = lambda self: self
    T.__abs__ = O.abs
    T.__invert__ = O.logical_not
    T.__and__ = O.logical_and
    T.__or__ = O.logical_or
    T.__xor__ = O.logical_xor
    T.__eq__ = O.eq
    T.__ne__ = O.ne
    T.__lt__ = O.lt
    T.__le__ = O.le
    T.__gt__ = O.gt
    T.__ge__ = O.ge
    T.__getitem__ = O.getitem
    T.__setitem__ = O.setitem

    # in-place
    for name, fn in [("add_", O.add), ("sub_", O.sub), ("mul_", O.mul), ("div_", O.div), ("pow_", O.pow),
                     ("clamp_", O.clamp), ("clip_", O.clamp), ("relu_", O.relu), ("neg_", O.neg),
                     ("exp_", O.exp), ("log_", O.log), ("sigmoid_", O.sigmoid), ("tanh_", O.tanh),
                     ("sqrt_", O.sqrt), ("abs_", O.abs), ("masked_fill_", O.masked_fill), ("floor_", O.floor),
                     ("clamp_min_", O.clamp_min), ("clamp_max_", O.clamp_max), ("lerp_", O.lerp),
                     ("sin_", O.sin), ("cos_", O.cos), ("round_", O.round), ("sign_", O.sign),
                     ("reciprocal_", O.reciprocal), ("square_", O.square)]:
        setattr(T, name, O._inplace_of(fn))
    T.addcmul_ = lambda self, a, b, value=1: O.inplace(self, lambda old: O.add(old, O.mul(O.mul(a, b), value)), a, b)
    T.addcdiv_ = lambda self, a, b, value=1: O.inplace(self, lambda old: O.add(old, O.mul(O.div(a, b), value)), a, b)
    T.__iadd__ = T.add_
    T.__isub__ = T.sub_
    T.__imul__ = T.mul_
    T.__itruediv__ = T.div_
    T.zero_ = O.zero_
    T.fill_ = O.fill_
    T.copy_ = O.copy_
    T.uniform_ = O.uniform_
    T.normal_ = O.normal_
    T.index_put_ = lambda self, indices, values, accumulate=False: O.inplace(
        self, lambda old: O.index_put(old, indices, values, accumulate), values)
    T.scatter_add_ = lambda self, dim, index, src: O.inplace(self, lambda old: O.scatter_add(old, dim, index, src), src)


_bind()
