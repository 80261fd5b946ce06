"""Complex-number primitives: ``conj``, the parts ``real``/``imag``, ``make_complex`` (a
complex tensor from its parts), ``cabs`` (the modulus), ``view_as_real``/``view_as_complex``.

Gradients follow PyTorch's convention for complex values: the gradient of a real loss L
with respect to z = x + iy is dL/dx + i dL/dy, so a holomorphic op's VJP is
``g * conj(f'(z))`` (the real rules with conjugated operands, see ``conj_operands``) and a
real input whose value flowed into a complex result gets the real part of its gradient.
None has a kernel lowering: a compiled graph breaks at complex values and runs them eagerly."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive
from .batchdims import to_front
from .elementwise import cast, div, eq, mul, sum_to, where
from .shapes import broadcast_shapes, shape_of

__all__ = ["conj", "real", "imag", "make_complex", "cabs", "view_as_real", "view_as_complex", "conj_operands"]

NO_COMPLEX_LOWERING = "complex numbers have no scalar operations in the kernel IR"


def _is_complex_value(x) -> bool:
    """Whether ``x`` (a tensor or a Python number) is complex."""
    d = getattr(x, "_data", None)
    return isinstance(x, complex) if d is None else d.dtype.kind == "c"


def _conj_value(x):
    if isinstance(x, complex):
        return x.conjugate()
    return conj(x) if _is_complex_value(x) else x


def conj_operands(ins, out):
    """The operands and result of a holomorphic op, conjugated: its real VJP rule applied
    to them gives PyTorch's complex gradient ``g * conj(f'(z))``."""
    return tuple(_conj_value(x) for x in ins), (None if out is None else _conj_value(out))


def complex_of(npdt: np.dtype) -> np.dtype:
    """The complex NumPy dtype with parts of float dtype ``npdt``."""
    return np.dtype(np.complex128 if npdt == np.float64 else np.complex64)


def real_of(npdt: np.dtype) -> np.dtype:
    """The NumPy dtype of the parts of complex dtype ``npdt``."""
    return np.dtype(np.float64 if npdt == np.complex128 else np.float32)


def _as_complex(g, like):
    """A real gradient ``g`` as one for the complex tensor ``like``."""
    return cast(g, dtype=like.dtype.np)


conj = Primitive("conj", np.conjugate, abstract=lambda a, p: a[0],
                 vjp=lambda g, ins, out, needs: (conj(g),), jvp=lambda ts, ins, out: None if ts[0] is None else conj(ts[0]),
                 kind="elementwise", node_name="ConjBackward0", no_lowering=NO_COMPLEX_LOWERING)

real = Primitive("real", np.real, abstract=lambda a, p: (a[0][0], real_of(a[0][1])),
                 vjp=lambda g, ins, out, needs: (_as_complex(g, ins[0]),),
                 jvp=lambda ts, ins, out: None if ts[0] is None else real(ts[0]),
                 kind="elementwise", node_name="SelectBackward0", no_lowering=NO_COMPLEX_LOWERING)


def _imag_vjp(g, ins, out, needs):
    return (make_complex(mul(g, 0.0), g),)


imag = Primitive("imag", np.imag, abstract=lambda a, p: (a[0][0], real_of(a[0][1])),
                 vjp=_imag_vjp, jvp=lambda ts, ins, out: None if ts[0] is None else imag(ts[0]),
                 kind="elementwise", node_name="SelectBackward0", no_lowering=NO_COMPLEX_LOWERING)


def _make_complex_impl(re, im):
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), complex_of(re.dtype))
    out.real, out.imag = re, im
    return out


def _make_complex_vjp(g, ins, out, needs):
    re, im = ins
    return (sum_to(real(g), shape_of(re)) if needs[0] else None,
            sum_to(imag(g), shape_of(im)) if needs[1] else None)


def _make_complex_jvp(ts, ins, out):
    re, im = ins
    if ts[0] is None and ts[1] is None:
        return None
    t_re = ts[0] if ts[0] is not None else mul(re, 0.0)
    t_im = ts[1] if ts[1] is not None else mul(im, 0.0)
    return make_complex(t_re, t_im)


make_complex = Primitive("make_complex", _make_complex_impl,
                         abstract=lambda a, p: (broadcast_shapes(a[0][0], a[1][0]), complex_of(a[0][1])),
                         vjp=_make_complex_vjp, jvp=_make_complex_jvp, kind="elementwise",
                         node_name="ComplexBackward0", no_lowering=NO_COMPLEX_LOWERING)


def _sgn(z, r):
    """``z / |z|``, 0 where ``z`` is 0 (PyTorch's ``sgn``)."""
    zero = eq(r, 0.0)
    return div(z, _as_complex(where(zero, 1.0, r), z)) * _as_complex(where(zero, 0.0, 1.0), z)


def _cabs_vjp(g, ins, out, needs):
    z = ins[0]
    return (mul(_as_complex(g, z), _sgn(z, out)),)


def _cabs_jvp(ts, ins, out):
    if ts[0] is None:
        return None
    z = ins[0]
    zero = eq(out, 0.0)
    return where(zero, 0.0, div(real(mul(conj(z), ts[0])), where(zero, 1.0, out)))


cabs = Primitive("cabs", np.abs, abstract=lambda a, p: (a[0][0], real_of(a[0][1])), vjp=_cabs_vjp,
                 jvp=_cabs_jvp, saves="in,out", kind="elementwise", node_name="AbsBackward0",
                 no_lowering=NO_COMPLEX_LOWERING)


def _view_as_real_impl(z):
    """The parts over ``z``'s own memory (PyTorch's view), where its last axis lets them."""
    if z.ndim == 0 or z.strides[-1] == z.itemsize:
        return z.reshape(z.shape or (1,)).view(real_of(z.dtype)).reshape(z.shape + (2,))
    return np.stack([z.real, z.imag], axis=-1)


def _view_as_complex_impl(x):
    """The pairs as complex numbers over ``x``'s own memory (PyTorch's view), where its
    layout lets them (last axis contiguous, the others in whole pairs)."""
    it = x.itemsize
    if x.strides[-1] == it and all(s % (2 * it) == 0 for s in x.strides[:-1]) and x.ctypes.data % (2 * it) == 0:
        return x.view(complex_of(x.dtype))[..., 0]
    return _make_complex_impl(x[..., 0], x[..., 1])


view_as_real = Primitive("view_as_real", _view_as_real_impl,
                         abstract=lambda a, p: (tuple(a[0][0]) + (2,), real_of(a[0][1])),
                         vjp=lambda g, ins, out, needs: (view_as_complex(g),),
                         jvp=lambda ts, ins, out: None if ts[0] is None else view_as_real(ts[0]),
                         node_name="ViewAsRealBackward0", no_lowering=NO_COMPLEX_LOWERING)
view_as_complex = Primitive("view_as_complex", _view_as_complex_impl,
                            abstract=lambda a, p: (tuple(a[0][0])[:-1], complex_of(a[0][1])),
                            vjp=lambda g, ins, out, needs: (view_as_real(g),),
                            jvp=lambda ts, ins, out: None if ts[0] is None else view_as_complex(ts[0]),
                            node_name="ViewAsComplexBackward0", no_lowering=NO_COMPLEX_LOWERING)
view_as_real.aliases = view_as_complex.aliases = "maybe"
real.aliases = imag.aliases = True  # (views of the parts: writes through z.real reach z, as PyTorch's)
# (both work on the last axis: vmap's batch axis goes to the front)
view_as_real.batch = lambda args, bdims: (view_as_real(to_front(args[0], bdims[0])), 0)
view_as_complex.batch = lambda args, bdims: (view_as_complex(to_front(args[0], bdims[0])), 0)  # (optimizers update complex parameters through it, as PyTorch's)
