"""More elementwise ops, composed from fusegrad's (their gradients are those ops'):
``heaviside``, ``copysign``, ``fmax``/``fmin`` (NaN-ignoring), ``signbit``, ``isposinf``,
``isneginf``, ``deg2rad``/``rad2deg``, ``ldexp``, ``frexp`` and ``nextafter``
(NumPy, eagerly), and the row-wise ``logcumsumexp`` and ``renorm``."""
from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .exports import op
from .extra_ops import _zero_grad_link
from .keywords import _type_name
from .tensor import Tensor

_FREXP = O._return_type("frexp", ("mantissa", "exponent"))


def _ft(x) -> Tensor:
    return O._float(O.as_t(x))


@op(inplace="method")
def heaviside(input: Tensor, values: Tensor) -> Tensor:  # noqa: A002
    """0 where ``input < 0``, ``values`` where it is 0, 1 where it is positive (not differentiable)."""
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    x, v = input.detach(), values.detach()
    return O.where(O.eq(x, 0), v, O.to(O.gt(x, 0), x.dtype))


@op
def signbit(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element's sign bit is set (true for -0.0)."""
    x = input.detach()
    if x._data.dtype.kind == "b":
        return O.ne(x, x)
    if not x.dtype.is_floating_point:
        return O.lt(x, 0)
    # (-0.0 < 0 is false: its reciprocal, -inf, tells it from +0.0)
    return O.logical_or(O.lt(x, 0), O.logical_and(O.eq(x, 0), O.lt(O.reciprocal(x), 0)))


@op(inplace="method")
def copysign(input, other) -> Tensor:  # noqa: A002
    """``|input|`` with the sign of ``other`` (its sign bit: -0.0 is negative); a floating result."""
    o = O.as_t(other) if not isinstance(other, Tensor) else other
    negative = signbit(o)
    x, _ = O.float_pair(input, o)
    r = O.where(negative, O.neg(O.abs(x)), O.abs(x))
    return O.named(_zero_grad_link(r, o, "CopysignBackward0"), "CopysignBackward0")  # (the sign's: zero)


def _nan_ignoring(name: str, pick_first):
    def fn(input, other):  # noqa: A002
        a, b = O._promote2(O.as_t(input), other if isinstance(other, Tensor) else O.as_t(other))
        first = O.logical_or(pick_first(a, b), O.isnan(b))  # (where both are NaN: b, a NaN)
        return O.named(O.where(first, a, b), name[0].upper() + name[1:] + "Backward0")
    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name[1:]}imum where a NaN loses to a number (NumPy's ``{name}``)."
    return fn


fmax = op(_nan_ignoring("fmax", O.ge))
fmin = op(_nan_ignoring("fmin", O.le))


@op
def isposinf(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element is +inf."""
    return O.logical_and(O.isinf(input), O.gt(input, 0))


@op
def isneginf(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element is -inf."""
    return O.logical_and(O.isinf(input), O.lt(input, 0))


@op(inplace="both")
def deg2rad(input) -> Tensor:  # noqa: A002
    """Degrees to radians."""
    return O.named(O.mul(_ft(input), math.pi / 180.0), "Deg2RadBackward0")


@op(inplace="both")
def rad2deg(input) -> Tensor:  # noqa: A002
    """Radians to degrees."""
    return O.named(O.mul(_ft(input), 180.0 / math.pi), "Rad2DegBackward0")


@op(inplace="both")
def ldexp(input, other) -> Tensor:  # noqa: A002
    """``input * 2 ** other`` in their floating result dtype, the power computed in
    ``other``'s own floating dtype (as PyTorch's: rounded there first) or exactly."""
    x, _ = O.float_pair(input, other)
    e = O.as_t(other)
    p = O.pow(2.0, e if e.dtype.is_floating_point else O.to(e, x.dtype))
    return O.mul(x, O.to(p, x.dtype))


@op
def frexp(input: Tensor):  # noqa: A002
    """The mantissa (in ``[0.5, 1)`` in magnitude) and integer exponent of each element
    (NumPy, eagerly); the mantissa's gradient is ``2 ** -exponent``, as PyTorch's."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    from .factory import tensor
    m, e = np.frexp(input._concrete("frexp"))
    mant = tensor(m, dtype=input.dtype, device=input.device)
    if input.requires_grad:  # (subtracted: a zero keeps its sign)
        scale = tensor(-np.ldexp(1.0, -e), dtype=input.dtype, device=input.device)
        mant = O.named(O.sub(mant, O.grad_only(O.mul(input, scale))), "FrexpBackward0")
    return _FREXP(mant, tensor(e.astype(np.int32), dtype=D.int32, device=input.device))


@op(inplace="method")
def nextafter(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The next floating-point value after ``input`` towards ``other`` (NumPy, eagerly)."""
    rt = D.result_type(input, other)
    if not rt.is_floating_point:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{_type_name(rt)}'")
    from .factory import tensor
    a, b = O.to(O.as_t(input), rt), O.to(O.as_t(other), rt)
    return tensor(np.nextafter(a._concrete("nextafter"), b._concrete("nextafter")), dtype=rt, device=a.device)


@op
def logcumsumexp(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """``log(cumsum(exp(input), dim))``, shifted by the (detached, finite) max along ``dim``
    so that it neither overflows nor underflows near the max."""
    x = _ft(input)
    O._axes(x, dim)  # (a dim out of range raises)
    if x.ndim == 0 or x.numel() == 0:  # one element, or none (an empty scan: no max to shift by)
        return O.named(O.mul(x, 1.0), "LogcumsumexpBackward0")
    d = x.detach()
    m = O.amax(d.real if d.is_complex() else d, dim, keepdim=True)  # (complex values: by the real part)
    m = O.where(O.isfinite(m), m, 0.0)
    return O.named(O.add(O.log(O.cumsum(O.exp(O.sub(x, m)), dim)), m), "LogcumsumexpBackward0")


@op(inplace="method")
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:  # noqa: A002
    """Each slice of ``input`` along ``dim`` whose ``p``-norm exceeds ``maxnorm``, scaled to
    norm ``maxnorm`` (as PyTorch: by ``maxnorm / (norm + 1e-7)``)."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    d = dim % input.ndim
    others = tuple(a for a in range(input.ndim) if a != d)
    norm = O.norm(input, p, others, keepdim=True)
    factor = O.where(O.gt(norm, maxnorm), O.div(maxnorm, O.add(norm, 1e-7)), 1.0)
    return O.named(O.mul(input, factor), "RenormBackward0")
