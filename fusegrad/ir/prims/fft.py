"""Discrete Fourier transforms over some axes, in NumPy's pocketfft, each times a constant
``scale`` (the normalization ``norm`` asks for):

- ``fft_c2c``: complex to complex, the forward transform (exponent -2 pi i) or the
  unnormalized inverse (+2 pi i);
- ``fft_r2c``: real to complex, the forward transform, ``onesided``: only the last axis's
  first n // 2 + 1 frequencies (the rest are their conjugates);
- ``fft_c2r``: a onesided Hermitian spectrum to a real signal of ``last_size`` samples on
  the last axis (the unnormalized inverse).

They are linear, so their JVPs are themselves; their VJPs (PyTorch's convention for complex
gradients, ``fusegrad.ir.prims.complex``) are the adjoint transforms, as PyTorch's
``fft_r2c_backward`` and ``fft_c2r_backward``. None has a kernel lowering."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive
from .batchdims import to_front
from .complex import NO_COMPLEX_LOWERING, complex_of, real, real_of
from .creation import iota
from .elementwise import cast, ge, le, logical_and, mul
from .layout import pad, reshape
from .shapes import shape_of

__all__ = ["fft_c2c", "fft_r2c", "fft_c2r"]


def _scaled(x, scale):
    return x if scale == 1.0 else x * np.asarray(scale, x.real.dtype)


def _c2c_impl(x, axes, forward, scale):
    f = np.fft.fftn if forward else np.fft.ifftn
    return _scaled(f(x, axes=axes, norm="backward" if forward else "forward"), scale)


def _c2c_vjp(g, ins, out, needs, axes, forward, scale):
    return (fft_c2c(g, axes=axes, forward=not forward, scale=scale),)


fft_c2c = Primitive("fft_c2c", _c2c_impl, abstract=lambda a, p: a[0], vjp=_c2c_vjp,
                    jvp=lambda ts, ins, out, **p: None if ts[0] is None else fft_c2c(ts[0], **p),
                    node_name="FftC2CBackward0", no_lowering=NO_COMPLEX_LOWERING)


def _r2c_impl(x, axes, onesided, scale):
    out = np.fft.rfftn(x, axes=axes) if onesided else np.fft.fftn(x, axes=axes)
    return _scaled(out.astype(complex_of(x.dtype), copy=False), scale)


def _r2c_abstract(avals, params):
    (shape, dt), = avals
    shape = list(shape)
    if params["onesided"]:
        shape[params["axes"][-1]] = shape[params["axes"][-1]] // 2 + 1
    return tuple(shape), complex_of(dt)


def _r2c_vjp(g, ins, out, needs, axes, onesided, scale):
    # the adjoint of keeping n // 2 + 1 frequencies is padding the rest with zeros
    if onesided:
        last = axes[-1]
        n, m = shape_of(ins[0])[last], shape_of(g)[last]
        widths = tuple((0, n - m) if d == last else (0, 0) for d in range(len(shape_of(g))))
        g = pad(g, widths=widths, value=0.0)
    return (real(fft_c2c(g, axes=axes, forward=False, scale=scale)),)


fft_r2c = Primitive("fft_r2c", _r2c_impl, abstract=_r2c_abstract, vjp=_r2c_vjp,
                    jvp=lambda ts, ins, out, **p: None if ts[0] is None else fft_r2c(ts[0], **p),
                    node_name="FftR2CBackward0", no_lowering=NO_COMPLEX_LOWERING)


def _c2r_impl(x, axes, last_size, scale):
    s = [x.shape[a] for a in axes[:-1]] + [last_size]
    out = np.fft.irfftn(x, s=s, axes=axes, norm="forward")
    return _scaled(out.astype(x.real.dtype, copy=False), scale)


def _c2r_abstract(avals, params):
    (shape, dt), = avals
    shape = list(shape)
    shape[params["axes"][-1]] = params["last_size"]
    return tuple(shape), real_of(dt)


def _c2r_vjp(g, ins, out, needs, axes, last_size, scale):
    # the forward transform of the gradient, its frequencies that stand for a conjugate pair
    # (all but 0 and, for an even size, n / 2) counted twice
    gi = fft_r2c(g, axes=axes, onesided=True, scale=scale)
    last = axes[-1]
    m = shape_of(gi)[last]
    twice = last_size - m
    if twice > 0:
        k = iota(n=m, dtype=np.dtype(np.int64))
        w = cast(logical_and(ge(k, 1), le(k, twice)), dtype=np.dtype(np.float64 if g.dtype.np == np.float64
                                                                          else np.float32)) + 1.0
        nd = len(shape_of(gi))
        w = reshape(w, shape=tuple(m if d == (last % nd) else 1 for d in range(nd)))
        gi = mul(gi, cast(w, dtype=gi.dtype.np))
    return (gi,)


fft_c2r = Primitive("fft_c2r", _c2r_impl, abstract=_c2r_abstract, vjp=_c2r_vjp,
                    jvp=lambda ts, ins, out, **p: None if ts[0] is None else fft_c2r(ts[0], **p),
                    node_name="FftC2RBackward0", no_lowering=NO_COMPLEX_LOWERING)


def _batch_rule(prim):
    """vmap's batch axis moves to the front, where no transform axis is (they shift by one)."""
    def rule(args, bdims, axes, **params):
        return prim(to_front(args[0], bdims[0]), axes=tuple(a + 1 for a in axes), **params), 0
    return rule


for _p in (fft_c2c, fft_r2c, fft_c2r):
    _p.batch = _batch_rule(_p)
