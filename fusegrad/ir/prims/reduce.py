"""Reductions (sum, max, min, prod, argmax, argmin) and cumsum."""
from __future__ import annotations

import math

import numpy as np

from ..dtypes import np_half
from ..primitive import Primitive, refuse_complex
from .batchdims import example_axis, to_front
from .elementwise import cast, div, eq, mul, where
from .shapes import reduced_shape, shape_of

__all__ = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum",
           "expand_reduced"]


def _red_abstract(avals, params):
    shape, dt = avals[0]
    return reduced_shape(shape, params["axes"], params["keepdims"]), dt


def _accumulating_abstract(avals, params):
    """sum and prod: NumPy's result type, which widens bool and integers to 64 bits."""
    shape, dt = avals[0]
    dt = np.dtype(dt)
    if dt.kind in "biu":
        dt = np.dtype(np.uint64 if dt.kind == "u" else np.int64)
    return reduced_shape(shape, params["axes"], params["keepdims"]), dt


def expand_reduced(g, in_shape, axes, keepdims):
    """Broadcast a reduction's cotangent back over the reduced axes."""
    from .layout import broadcast_to, reshape
    if not keepdims:
        g = reshape(g, shape=reduced_shape(in_shape, axes, True))
    return broadcast_to(g, shape=tuple(in_shape))


def _sum_impl(x, axes, keepdims):
    dt = x.dtype
    if dt.itemsize < 16 and dt.kind in "fcV" and _running(x, axes):
        # NumPy sums pairwise only along the innermost axis it loops over; over outer axes each
        # output is a running sum (a million float32 0.1s summed down a column came to 100958):
        # those accumulate in double precision, rounded once
        with np.errstate(over="ignore", invalid="ignore"):
            return np.sum(x, axis=axes, keepdims=keepdims, dtype=np.complex128 if dt.kind == "c" else np.float64
                          ).astype(dt)
    if np_half(dt):
        # float16/bfloat16: accumulate in float32 and round once, as PyTorch (NumPy's pairwise sum
        # in float16 overflows on partial sums of a total that fits)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.sum(x, axis=axes, keepdims=keepdims, dtype=np.float32).astype(dt)
    if dt.kind in "fc":
        with np.errstate(over="ignore", invalid="ignore"):  # (inf - inf, overflow: as PyTorch, silently)
            return np.sum(x, axis=axes, keepdims=keepdims, dtype=dt)
    return np.sum(x, axis=axes, keepdims=keepdims)


def _running(x, axes) -> bool:
    """Whether NumPy's sum of ``x`` over ``axes`` adds long runs of terms one by one: more
    than ``_RUN`` terms per output, reduced over other than the innermost axis of a
    C-contiguous array."""
    if x.ndim == 0:
        return False
    axes = range(x.ndim) if axes is None else [a % x.ndim for a in axes]
    terms = math.prod(x.shape[a] for a in axes)
    return terms > _RUN and not (x.ndim - 1 in axes and x.flags.c_contiguous)


_RUN = 256


def _sum_vjp(g, ins, out, needs, axes, keepdims):
    return (expand_reduced(g, shape_of(ins[0]), axes, keepdims),)


def _sum_jvp(ts, ins, out, axes, keepdims):
    return None if ts[0] is None else reduce_sum(ts[0], axes=axes, keepdims=keepdims)


reduce_sum = Primitive("reduce_sum", _sum_impl, abstract=_accumulating_abstract, vjp=_sum_vjp, jvp=_sum_jvp,
                       saves="", kind="reduce", scalar="+", node_name="SumBackward1")


def _extreme_vjp(g, ins, out, needs, axes, keepdims):
    """Ties share the gradient evenly, as PyTorch's amax/amin and full max/min do."""
    x = ins[0]
    mask = cast(eq(x, expand_reduced(out, shape_of(x), axes, keepdims)), dtype=g.dtype.np)
    count = reduce_sum(mask, axes=axes, keepdims=keepdims)
    return (mask * expand_reduced(g / count, shape_of(x), axes, keepdims),)


def _extreme_jvp(ts, ins, out, axes, keepdims):
    if ts[0] is None:
        return None
    x = ins[0]
    mask = cast(eq(x, expand_reduced(out, shape_of(x), axes, keepdims)), dtype=ts[0].dtype.np)
    return reduce_sum(ts[0] * mask, axes=axes, keepdims=keepdims) / reduce_sum(mask, axes=axes, keepdims=keepdims)


def _nonempty(f, what):
    def impl(x, axes, keepdims):
        if x.size == 0 and (not axes or len(axes) == x.ndim):  # (a reduction of everything: PyTorch's text and type)
            raise RuntimeError(f"{what}(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                               "the reduction dim with the 'dim' argument.")
        if x.size == 0 and any(x.shape[a] == 0 for a in axes):
            raise IndexError(f"{what}(): Expected reduction dim {axes[0] if len(axes) == 1 else list(axes)} to have "
                             "non-zero size.")
        return f(x, axis=axes, keepdims=keepdims)
    return impl


reduce_max = Primitive("reduce_max", _nonempty(np.max, "max"), abstract=_red_abstract, vjp=_extreme_vjp,
                       jvp=_extreme_jvp, saves="in,out", kind="reduce", scalar="max", node_name="AmaxBackward0",
                       mask_vjp=True)
reduce_min = Primitive("reduce_min", _nonempty(np.min, "min"), abstract=_red_abstract, vjp=_extreme_vjp,
                       jvp=_extreme_jvp, saves="in,out", kind="reduce", scalar="min", node_name="AminBackward0",
                       mask_vjp=True)
for _p, _kernel in ((reduce_max, "max_values_cpu"), (reduce_min, "min_values_cpu")):
    refuse_complex(_p, lambda t, k=_kernel: NotImplementedError(f"\"{k}\" not implemented for '{t}'"))


def _others(x, out, axes, keepdims, dtype):
    """Each element's partial derivative of the product: the product of the other elements,
    exact with zeros (out/x where x != 0, else the product of the non-zero others when x is
    the only zero)."""
    shp = shape_of(x)
    is0 = eq(x, 0)
    nz = where(is0, 1.0, x)
    prod_nz = expand_reduced(reduce_prod(nz, axes=axes, keepdims=keepdims), shp, axes, keepdims)
    zeros = expand_reduced(reduce_sum(cast(is0, dtype=dtype), axes=axes, keepdims=keepdims), shp, axes, keepdims)
    return where(is0, where(eq(zeros, 1.0), prod_nz, 0.0), div(expand_reduced(out, shp, axes, keepdims), nz))


def _prod_vjp(g, ins, out, needs, axes, keepdims):
    if g._data.dtype.kind == "c":  # (PyTorch's convention: the conjugated partials)
        ins, out = conj_operands(ins, out)
    others = _others(ins[0], out, axes, keepdims, g.dtype.np)
    return (mul(others, expand_reduced(g, shape_of(ins[0]), axes, keepdims)),)


def _prod_jvp(ts, ins, out, axes, keepdims):
    if ts[0] is None:
        return None
    others = _others(ins[0], out, axes, keepdims, ts[0].dtype.np)
    return reduce_sum(others * ts[0], axes=axes, keepdims=keepdims)


def _prod_impl(x, axes, keepdims):
    with np.errstate(over="ignore", invalid="ignore"):  # (overflow, 0 * inf: as PyTorch, silently)
        return np.prod(x, axis=axes, keepdims=keepdims)


reduce_prod = Primitive("reduce_prod", _prod_impl,
                        abstract=_accumulating_abstract, vjp=_prod_vjp, jvp=_prod_jvp, saves="in,out", kind="reduce",
                        scalar="*", node_name="ProdBackward1")


def _arg_abstract(avals, params):
    shape, _ = avals[0]
    return reduced_shape(shape, (params["axis"],), params["keepdims"]), np.dtype(np.int64)


def _arg(f, what):
    def impl(x, axis, keepdims):
        if x.shape[axis] == 0:
            raise IndexError(f"{what}(): Expected reduction dim {axis} to have non-zero size.")
        r = f(x, axis=axis)
        return (np.expand_dims(r, axis) if keepdims else r).astype(np.int64, copy=False)
    return impl


argmax = Primitive("argmax", _arg(np.argmax, "argmax"), abstract=_arg_abstract, kind="reduce", nondiff=True)
argmin = Primitive("argmin", _arg(np.argmin, "argmin"), abstract=_arg_abstract, kind="reduce", nondiff=True)
for _p in (argmax, argmin):
    refuse_complex(_p, lambda t, n=_p.name: RuntimeError(f"{n}(): does not support complex input"))


def _cumsum_vjp(g, ins, out, needs, axis):
    from .layout import flip
    return (flip(cumsum(flip(g, axes=(axis,)), axis=axis), axes=(axis,)),)


def _cumsum_impl(x, axis):
    """np.cumsum accumulating as PyTorch's CPU kernel: float16/bfloat16 in float32,
    float32 in float64."""
    dt = x.dtype
    acc = np.float64 if dt == np.float32 else np.float32 if np_half(dt) else dt
    with np.errstate(over="ignore", invalid="ignore"):  # (inf - inf, overflow: as PyTorch, silently)
        return np.cumsum(x, axis=axis, dtype=acc).astype(dt, copy=False)


cumsum = Primitive("cumsum", _cumsum_impl,
                   abstract=lambda a, p: a[0], vjp=_cumsum_vjp,
                   jvp=lambda ts, ins, out, axis: None if ts[0] is None else cumsum(ts[0], axis=axis),
                   saves="", kind="scan", node_name="CumsumBackward0")


# ---------------------------------------------------------------- batching rules (vmap)
def _reduce_batch(prim):
    def rule(args, bdims, axes, keepdims):
        x = to_front(args[0], bdims[0])
        return prim(x, axes=tuple(a + 1 for a in axes), keepdims=keepdims), 0
    return rule


def _arg_batch(prim):
    def rule(args, bdims, axis, keepdims):
        x = to_front(args[0], bdims[0])
        return prim(x, axis=example_axis(axis, x), keepdims=keepdims), 0
    return rule


def _cumsum_batch(args, bdims, axis):
    x = to_front(args[0], bdims[0])
    return cumsum(x, axis=example_axis(axis, x)), 0


for _p in (reduce_sum, reduce_max, reduce_min, reduce_prod):
    _p.batch = _reduce_batch(_p)
for _p in (argmax, argmin):
    _p.batch = _arg_batch(_p)
cumsum.batch = _cumsum_batch

from .complex import conj_operands  # noqa: E402  (defined after the elementwise rules it builds on)
