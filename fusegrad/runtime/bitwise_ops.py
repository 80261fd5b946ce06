"""Bitwise and integer ops: ``bitwise_and``/``or``/``xor``/``not``, ``bitwise_left_shift``
/``right_shift`` (the ``& | ^ ~ << >>`` operators, bound in ``runtime.methods``), ``gcd``
and ``lcm``. On bool tensors the bitwise ops are the logical ones (traceable); on integer
tensors they run in NumPy, eagerly (a graph break while tracing: Numba kernels are not
generated for them); floating tensors are an error, as in PyTorch."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .exports import op
from .keywords import _type_name
from .tensor import Tensor


def _wrap_int(v, rt):
    """A Python int operand wrapped into an integer result dtype (``uint8 & -3``), as PyTorch."""
    return O._wrapped(v, rt.np) if type(v) is int and rt.np.kind in "iu" else v


def _operands(name: str, a, b):
    """``a`` and ``b`` as tensors of their result dtype, which must be bool or integer."""
    if not isinstance(a, Tensor):
        a = O.as_t(_wrap_int(a, D.result_type(b, a)), dtype=D.result_type(b, a))
    rt = D.result_type(a, b)
    if rt.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_type_name(rt)}'")
    b = O.as_t(_wrap_int(b, rt), dtype=rt) if not isinstance(b, Tensor) else b
    return O.to(a, rt), O.to(b, rt), rt


def _eager_binary(name: str, fn: Callable, a, b) -> Tensor:
    a, b, rt = _operands(name, a, b)
    from .factory import tensor
    r = fn(a._concrete(name), b._concrete(name))
    return tensor(np.asarray(r, dtype=rt.np), dtype=rt, device=a.device)


def _bitwise(name: str, logical: Callable, np_fn: Callable) -> Callable:
    def fn(input, other):  # noqa: A002
        if D.result_type(input, other) == D.bool_:
            return logical(input, other)
        return _eager_binary(name, np_fn, input, other)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{np_fn.__name__}`` of bool or integer tensors (a tensor and a scalar)."
    return fn


bitwise_and = op(_bitwise("bitwise_and", O.logical_and, np.bitwise_and), inplace="method")
bitwise_or = op(_bitwise("bitwise_or", O.logical_or, np.bitwise_or), inplace="method")
bitwise_xor = op(_bitwise("bitwise_xor", O.logical_xor, np.bitwise_xor), inplace="method")


def _shift(name: str, np_fn: Callable) -> Callable:
    def fn(input, other):  # noqa: A002
        # (PyTorch shifts bools as integers of their result dtype: True << 1 is 2 for an int operand)
        return _eager_binary(name, lambda x, y: np_fn(x, y.astype(x.dtype)), input, other)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{np_fn.__name__}`` of integer tensors."
    return fn


bitwise_left_shift = op(_shift("bitwise_left_shift", np.left_shift), inplace="method")
bitwise_right_shift = op(_shift("bitwise_right_shift", np.right_shift), inplace="method")


@op(inplace="method")
def bitwise_not(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise NOT of a bool or integer tensor (``~``)."""
    if input.dtype == D.bool_:
        return O.logical_not(input)
    if input.dtype.is_floating_point:
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for '{_type_name(input.dtype)}'")
    from .factory import tensor
    return tensor(np.invert(input._concrete("bitwise_not")), dtype=input.dtype, device=input.device)


def _integer_only(name: str, np_fn: Callable) -> Callable:
    def fn(input, other):  # noqa: A002
        rt = D.result_type(input, other)
        if rt == D.bool_:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for 'Bool'")
        return _eager_binary(name, np_fn, input, other)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{np_fn.__name__}`` of integer tensors."
    return fn


gcd = op(_integer_only("gcd", np.gcd), inplace="both")
lcm = op(_integer_only("lcm", np.lcm), inplace="both")
