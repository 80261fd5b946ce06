"""Complex tensors in the ``torch`` namespace: ``real``/``imag`` (also the Tensor's
properties), ``conj`` and its aliases, ``complex``, ``polar``, ``view_as_real``,
``view_as_complex``, ``angle``, ``sgn``, ``isreal`` and ``is_complex``; on real tensors the
conjugation ops are identities and ``angle`` is 0 or pi, as in PyTorch. The primitives and
their gradient convention are in ``fusegrad.ir.prims.complex``."""
from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from . import ops as O
from .autocast_state import float32_policy
from .dispatch import bind
from .exports import alias, op
from .keywords import _type_name
from .factory import zeros_like
from .tensor import Tensor


def _is_complex(x: Tensor) -> bool:
    return x._data.dtype.kind == "c"


@op
def is_complex(input: Tensor) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is complex."""
    return _is_complex(input)


@op(method=False)
def real(input: Tensor) -> Tensor:  # noqa: A002
    """The real parts of a complex tensor; a real tensor itself."""
    return bind(P.real, (input,), {}) if _is_complex(input) else input


@op(method=False)
def imag(input: Tensor) -> Tensor:  # noqa: A002
    """The imaginary parts of a complex tensor."""
    if not _is_complex(input):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return bind(P.imag, (input,), {})


@op
def conj(input: Tensor) -> Tensor:  # noqa: A002
    """The complex conjugate; a real tensor itself."""
    return bind(P.conj, (input,), {}) if _is_complex(input) else input


alias(conj, "conj_physical", inplace="both")


@op
def resolve_conj(input: Tensor) -> Tensor:  # noqa: A002
    """``input`` itself: conjugation here always computes its result, so none is pending."""
    return input


alias(resolve_conj, "resolve_neg")


@op
def is_conj(input: Tensor) -> bool:  # noqa: A002
    """Whether ``input`` is a lazily conjugated view: never (conj computes its result)."""
    return False


alias(is_conj, "is_neg")


def _float_pair(a: Tensor, b: Tensor) -> None:
    if a.dtype not in (D.float32, D.float64) or b.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{_type_name(a.dtype)} and {_type_name(b.dtype)}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Expected object of scalar type {_type_name(a.dtype)} but got scalar type "
                           f"{_type_name(b.dtype)} for second argument")


@op(method=False)
def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A002
    """The complex tensor ``real + i imag`` (float operands of one dtype, broadcast)."""
    _float_pair(real, imag)
    return bind(P.make_complex, (real, imag), {})


@op(method=False)
@float32_policy
def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002
    """The complex tensor of moduli ``abs`` and arguments ``angle``."""
    _float_pair(abs, angle)
    # PyTorch's gradient of abs is Re(conj(grad) sgn(result)), 0 where abs is 0: the unit
    # vector is masked there (times 0, so the result's zeros keep their signs)
    live = O.ne(abs, 0)
    return O.named(bind(P.make_complex, (O.mul(abs, O.mul(O.cos(angle), live)),
                                         O.mul(abs, O.mul(O.sin(angle), live))), {}), "PolarBackward0")


@op(method=False)
def view_as_real(input: Tensor) -> Tensor:  # noqa: A002
    """A complex tensor's elements as pairs (real, imaginary) along a new last dimension."""
    if not _is_complex(input):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return bind(P.view_as_real, (input,), {})


@op(method=False)
def view_as_complex(input: Tensor) -> Tensor:  # noqa: A002
    """Pairs along the last dimension (of size 2, stride 1) as complex elements."""
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"view_as_complex is only supported for half, float and double tensors, but got a tensor "
                           f"of scalar type: {_type_name(input.dtype)}")
    if input.dim() == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if type(input._data) is np.ndarray and input.stride(-1) != 1:  # (traced values are laid out by the compiler)
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    return bind(P.view_as_complex, (input,), {})


@op
def angle(input: Tensor) -> Tensor:  # noqa: A002
    """The argument of each element: ``atan2(imag, real)`` for complex values; for real
    ones pi where negative, else 0 (NaN stays NaN), integers giving floats, with a zero gradient."""
    x = O.as_t(input)
    if _is_complex(x):
        return O.named(O.atan2(imag(x), real(x)), "AngleBackward0")
    if not x.dtype.is_floating_point:
        x = O.to(x, D.get_default_dtype())
    d = x.detach()
    value = O.where(O.isnan(d), d, O.where(O.lt(d, 0), math.pi, zeros_like(d)))
    return O.named(O.add(value, O.mul(O.grad_only(x), 0.0)), "AngleBackward0")


@op(inplace="method")
def sgn(input: Tensor) -> Tensor:  # noqa: A002
    """``z / |z|`` (0 where z is 0) for complex values, ``sign`` for real ones."""
    if not _is_complex(input):
        return O.sign(input)
    r = O.abs(input)
    zero = O.eq(r, 0.0)
    q = O.div(input, O.to(O.where(zero, 1.0, r), input.dtype))
    return O.named(O.where(zero, O.mul(input, 0.0), q), "SgnBackward0")


@op
def isreal(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element is real: its imaginary part is 0 (every element of a real tensor)."""
    if _is_complex(input):
        return O.eq(imag(input.detach()), 0.0)
    from .factory import ones
    return ones(tuple(input.shape), dtype=D.bool_, device=input.device)


Tensor.real = property(real, doc="The real parts (a real tensor itself).")
Tensor.imag = property(imag, doc="The imaginary parts of a complex tensor.")
