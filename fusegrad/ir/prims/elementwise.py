"""Elementwise primitives: unary math, binary arithmetic with broadcasting, comparisons,
logical ops, ``where`` and ``cast``.

Unary differentiable ops are defined by their derivative ``d(x, out)``: the VJP is
``g * d`` and the JVP ``t * d``. ``scalar`` names the per-element operation (fusegrad.ir.scalar_ops)."""
from __future__ import annotations

import math

import numpy as np

from ..primitive import Primitive
from .shapes import broadcast_shapes, shape_of

__all__ = ["neg", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
           "abs_", "sign", "sqrt", "rsqrt", "erf", "floor", "ceil", "round_", "trunc",
           "add", "sub", "mul", "div", "pow_", "maximum", "minimum", "atan2",
           "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
           "logical_not", "isnan", "stop_gradient", "where", "cast", "reduce_precision", "sum_to", "ELEMENTWISE_UNARY", "ELEMENTWISE_BINARY"]


def _same(avals, params):
    return avals[0]


# Every unary and binary math primitive, in definition order: each joins its list where
# it is defined (tests sweep them).
ELEMENTWISE_UNARY: list = []
ELEMENTWISE_BINARY: list = []


def _unary(name, impl, deriv, scalar, node_name=None, saves="in"):
    def vjp(g, ins, out, needs):
        return (mul(g, deriv(ins[0], out)),)

    def jvp(ts, ins, out):
        return None if ts[0] is None else mul(ts[0], deriv(ins[0], out))
    p = Primitive(name, impl, abstract=_same, vjp=vjp if deriv else None, jvp=jvp if deriv else None,
                  saves=saves, kind="elementwise", scalar=scalar, node_name=node_name, nondiff=deriv is None)
    ELEMENTWISE_UNARY.append(p)
    return p


def _zero_deriv(name, impl, scalar, node_name=None):
    """Piecewise-constant ops: zero gradient, as in PyTorch."""
    p = _unary(name, impl, None, scalar, node_name, saves="")
    p.nondiff = False
    p.vjp = lambda g, ins, out, needs: (g * 0,)
    p.jvp = lambda ts, ins, out: None
    return p


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x))).astype(x.dtype, copy=False)


def _relu(x):
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def _rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1 / np.sqrt(x)).astype(x.dtype, copy=False)


def _erf(x):
    import scipy.special  # imported on first use: it costs ~1 s at `import fusegrad`
    return scipy.special.erf(x).astype(x.dtype, copy=False)


def _quiet(f):
    def impl(*a):
        with np.errstate(all="ignore"):
            return f(*a)
    impl.__name__ = f.__name__
    return impl


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

neg = _unary("neg", np.negative, lambda x, o: -1.0, "neg", saves="")
neg.vjp = lambda g, ins, out, needs: (neg(g),)
neg.jvp = lambda ts, ins, out: None if ts[0] is None else neg(ts[0])
exp = _unary("exp", _quiet(np.exp), lambda x, o: o, "exp", saves="out")
log = _unary("log", _quiet(np.log), lambda x, o: div(1.0, x), "log")
log1p = _unary("log1p", _quiet(np.log1p), lambda x, o: div(1.0, add(x, 1.0)), "log1p")
expm1 = _unary("expm1", _quiet(np.expm1), lambda x, o: add(o, 1.0), "expm1", saves="out")
sin = _unary("sin", np.sin, lambda x, o: cos(x), "sin")
cos = _unary("cos", np.cos, lambda x, o: neg(sin(x)), "cos")
tan = _unary("tan", np.tan, lambda x, o: add(mul(o, o), 1.0), "tan", saves="out")
tanh = _unary("tanh", np.tanh, lambda x, o: sub(1.0, mul(o, o)), "tanh", saves="out")
sigmoid = _unary("sigmoid", _sigmoid, lambda x, o: mul(o, sub(1.0, o)), "sigmoid", saves="out")
relu = _unary("relu", _relu, lambda x, o: cast(gt(o, 0), dtype=o.dtype.np), "relu", saves="out")
abs_ = _unary("abs", np.abs, lambda x, o: sign(x), "abs")
sign = _zero_deriv("sign", np.sign, "sign")
sqrt = _unary("sqrt", _quiet(np.sqrt), lambda x, o: div(0.5, o), "sqrt", saves="out")
rsqrt = _unary("rsqrt", _rsqrt, lambda x, o: mul(mul(mul(o, o), o), -0.5), "rsqrt", saves="out")
erf = _unary("erf", _erf, lambda x, o: mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI), "erf")
floor = _zero_deriv("floor", np.floor, "floor")
ceil = _zero_deriv("ceil", np.ceil, "ceil")
round_ = _zero_deriv("round", np.round, "round")
trunc = _zero_deriv("trunc", np.trunc, "trunc")


# ---------------------------------------------------------------- binary, broadcasting
def sum_to(g, shape):
    """Sum ``g`` down to ``shape``: the transpose of broadcasting."""
    gs = shape_of(g)
    shape = tuple(shape)
    if gs == shape:
        return g
    from .reduce import reduce_sum
    from .layout import reshape
    lead = len(gs) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and gs[i + lead] != 1)
    r = reduce_sum(g, axes=axes, keepdims=False) if axes else g
    return reshape(r, shape=shape) if shape_of(r) != shape else r


def _bin_abstract(avals, params):
    shapes = [a[0] for a in avals if isinstance(a, tuple)]
    dts = [a[1] for a in avals if isinstance(a, tuple)]
    return broadcast_shapes(*shapes), dts[0]


def _cmp_abstract(avals, params):
    return _bin_abstract(avals, params)[0], np.dtype(np.bool_)


def _grads(ins, needs, gx, gy):
    """Each needed cotangent summed back to its operand's (pre-broadcast) shape."""
    x, y = ins
    return (sum_to(gx, shape_of(x)) if needs[0] and gx is not None else None,
            sum_to(gy, shape_of(y)) if needs[1] and gy is not None else None)


def _add_vjp(g, ins, out, needs):
    return _grads(ins, needs, g, g)


def _sub_vjp(g, ins, out, needs):
    return _grads(ins, needs, g, neg(g) if needs[1] else None)


def _mul_vjp(g, ins, out, needs):
    x, y = ins
    return _grads(ins, needs, mul(g, y) if needs[0] else None, mul(g, x) if needs[1] else None)


def _div_vjp(g, ins, out, needs):
    x, y = ins
    gx = div(g, y)
    return _grads(ins, needs, gx, neg(div(mul(gx, x), y)) if needs[1] else None)


def _pow_vjp(g, ins, out, needs):
    x, y = ins
    gx = gy = None
    if needs[0]:
        # x**(y-1) * y, with 0 where y == 0 so that x == 0 gives no nan (PyTorch's rule)
        gx = g * where(eq(y, 0), 0.0, y * x ** (y - 1.0)) if hasattr(y, "shape") else (
            g * 0.0 if y == 0 else g * (y * x ** (y - 1.0)))
    if needs[1]:
        gy = g * where(logical_and(eq(x, 0), ge(y, 0)), 0.0, out * log(x))
    return _grads(ins, needs, gx, gy)


def _minmax_vjp(cmp):
    def vjp(g, ins, out, needs):
        x, y = ins
        win = cast(cmp(x, y), dtype=g.dtype.np) + cast(eq(x, y), dtype=g.dtype.np) * 0.5
        return _grads(ins, needs, g * win if needs[0] else None, g * (1.0 - win) if needs[1] else None)
    return vjp


def _atan2_vjp(g, ins, out, needs):
    y, x = ins
    r = g / (x * x + y * y)
    return _grads(ins, needs, r * x if needs[0] else None, -r * y if needs[1] else None)


def _lin_jvp(f):
    """JVP from the VJP for ops whose partial derivatives are elementwise: t·∂out/∂x."""
    def jvp(ts, ins, out):
        acc = None
        # Partials at the broadcast inputs, so the VJP rule's sum_to is the identity.
        bins = tuple(_bcast(x, out) if hasattr(x, "shape") else x for x in ins)
        for i, t in enumerate(ts):
            if t is None:
                continue
            needs = tuple(j == i for j in range(len(ins)))
            t = _bcast(t, out)
            ones = t * 0.0 + 1.0
            gi = f(ones, bins, out, needs)[i]
            term = t * gi
            acc = term if acc is None else acc + term
        return acc
    return jvp


_F32 = np.dtype(np.float32)
from ..dtypes import _BF16  # noqa: E402  (ml_dtypes' bfloat16)


def _bf16_scalars(ufunc, scalar_first: bool):
    """``ufunc`` with PyTorch's result for a bfloat16 array and a Python scalar, where NumPy
    computes in float32 and returns that (ml_dtypes' bfloat16 has no weak scalars there):
    rounded once to bfloat16 (PyTorch's mul, div and the rest), or, ``scalar_first`` (add
    and sub), the scalar rounded to bfloat16 first, as PyTorch does for those."""
    def impl(a, b, _f32=_F32, _bf16=_BF16):  # (defaults: local lookups on this per-op path)
        r = ufunc(a, b)
        if r.dtype is not _f32:
            return r
        if getattr(a, "dtype", None) is _bf16:
            return ufunc(a, np.asarray(b, _bf16)) if scalar_first and not hasattr(b, "dtype") else r.astype(_bf16)
        if getattr(b, "dtype", None) is _bf16:
            return ufunc(np.asarray(a, _bf16), b) if scalar_first and not hasattr(a, "dtype") else r.astype(_bf16)
        return r
    impl.__name__ = getattr(ufunc, "__name__", "impl")
    return impl


def _binary(name, impl, vjp, scalar, node_name=None, saves="in", reads=None, scalar_first=False):
    p = Primitive(name, _bf16_scalars(impl, scalar_first), abstract=_bin_abstract, vjp=vjp,
                  jvp=_lin_jvp(vjp) if vjp else None, saves=saves, kind="elementwise", scalar=scalar,
                  node_name=node_name, reads=reads)
    ELEMENTWISE_BINARY.append(p)
    return p


def _jvp_sum(*pairs):
    acc = None
    for t, f in pairs:
        if t is not None:
            term = f(t)
            acc = term if acc is None else acc + term
    return acc


add = _binary("add", np.add, _add_vjp, "add", saves="", scalar_first=True)
add.jvp = lambda ts, ins, out: _jvp_sum((ts[0], lambda t: _bcast(t, out)), (ts[1], lambda t: _bcast(t, out)))
sub = _binary("sub", np.subtract, _sub_vjp, "sub", saves="", scalar_first=True)
sub.jvp = lambda ts, ins, out: _jvp_sum((ts[0], lambda t: _bcast(t, out)), (ts[1], lambda t: _bcast(-t, out)))
mul = _binary("mul", np.multiply, _mul_vjp, "mul", reads=lambda needs: ((needs[1], needs[0]), False))
mul.jvp = lambda ts, ins, out: _jvp_sum((ts[0], lambda t: _bcast(t * ins[1], out)), (ts[1], lambda t: _bcast(ins[0] * t, out)))
div = _binary("div", _quiet(np.divide), _div_vjp, "div", reads=lambda needs: ((needs[1], True), False))
pow_ = _binary("pow", _quiet(np.power), _pow_vjp, "pow", saves="in,out", reads=lambda needs: ((True, True), needs[1]))
atan2 = _binary("atan2", np.arctan2, _atan2_vjp, "atan2")


def _bcast(t, out):
    from .layout import broadcast_to
    return t if shape_of(t) == shape_of(out) else broadcast_to(t, shape=shape_of(out))


def _cmp(name, impl, scalar):
    return Primitive(name, impl, abstract=_cmp_abstract, kind="elementwise", scalar=scalar, nondiff=True)


eq = _cmp("eq", np.equal, "eq")
ne = _cmp("ne", np.not_equal, "ne")
lt = _cmp("lt", np.less, "lt")
le = _cmp("le", np.less_equal, "le")
gt = _cmp("gt", np.greater, "gt")
ge = _cmp("ge", np.greater_equal, "ge")
logical_and = _cmp("logical_and", np.logical_and, "and")
logical_or = _cmp("logical_or", np.logical_or, "or")
logical_xor = _cmp("logical_xor", np.logical_xor, "xor")
logical_not = Primitive("logical_not", np.logical_not, abstract=lambda a, p: (a[0][0], np.dtype(np.bool_)),
                        kind="elementwise", scalar="not", nondiff=True)
isnan = Primitive("isnan", np.isnan, abstract=lambda a, p: (a[0][0], np.dtype(np.bool_)),
                  kind="elementwise", scalar="isnan", nondiff=True)
maximum = _binary("maximum", np.maximum, _minmax_vjp(gt), "max")
minimum = _binary("minimum", np.minimum, _minmax_vjp(lt), "min")


# ---------------------------------------------------------------- stop_gradient
# The identity whose derivative is zero: what detach() and no_grad() regions become in a
# traced graph, so that the IR's VJP/JVP passes do not differentiate through them.
stop_gradient = Primitive("stop_gradient", lambda x: x, abstract=_same, kind="elementwise", scalar="copy",
                          nondiff=True, node_name="StopGradient")


# ---------------------------------------------------------------- where and cast
def _where_abstract(avals, params):
    shapes = [a[0] for a in avals if isinstance(a, tuple)]
    dts = [a[1] for a in avals[1:] if isinstance(a, tuple)]
    return broadcast_shapes(*shapes), (dts[0] if dts else np.dtype(np.float32))


def _where_impl(c, x, y):
    out = np.where(c, x, y)
    dt = x.dtype if hasattr(x, "dtype") else (y.dtype if hasattr(y, "dtype") else out.dtype)
    return out.astype(dt, copy=False)


def _where_vjp(g, ins, out, needs):
    c, x, y = ins
    gx = sum_to(where(c, g, 0.0), shape_of(x)) if needs[1] else None
    gy = sum_to(where(c, 0.0, g), shape_of(y)) if needs[2] else None
    return None, gx, gy


def _where_jvp(ts, ins, out):
    c = ins[0]
    if ts[1] is None and ts[2] is None:
        return None
    tx = ts[1] if ts[1] is not None else 0.0
    ty = ts[2] if ts[2] is not None else 0.0
    return _bcast(where(c, tx, ty), out)


where = Primitive("where", _where_impl, abstract=_where_abstract, vjp=_where_vjp, jvp=_where_jvp,
                  saves="in", kind="elementwise", scalar="where", checked=slice(0, 1))


def _cast_impl(x, dtype):
    if dtype.itemsize == 2:  # to float16/bfloat16: overflowing to inf is expected (mixed precision)
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(dtype, copy=False)
    return x.astype(dtype, copy=False)


def _cast_vjp(g, ins, out, needs, dtype=None):
    x = ins[0]
    if x.dtype.np.kind != "f" and x.dtype.name != "bfloat16":
        return (None,)
    return (cast(g, dtype=x.dtype.np),)


cast = Primitive("cast", lambda x, dtype: _cast_impl(x, np.dtype(dtype)),
                 abstract=lambda a, p: (a[0][0], np.dtype(p["dtype"])), vjp=_cast_vjp,
                 jvp=lambda ts, ins, out, dtype=None: None if ts[0] is None else cast(ts[0], dtype=out.dtype.np),
                 saves="", kind="elementwise", scalar="cast", node_name="ToCopyBackward0")


# ---------------------------------------------------------------- reduce_precision
# ``x`` rounded to the nearest value of the narrower float ``dtype`` (round to nearest
# even, overflow to inf, NaN kept) but kept in x's dtype: what a cast to bfloat16/float16
# becomes when a backend computes half-precision graphs in float32 (passes.upcast), as
# XLA's reduce-precision op. Its derivative is the identity, rounded as the value is.
def _reduce_precision_impl(x, dtype):
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.dtype(dtype)).astype(x.dtype)


reduce_precision = Primitive(
    "reduce_precision", _reduce_precision_impl, abstract=_same,
    vjp=lambda g, ins, out, needs, dtype=None: (reduce_precision(g, dtype=dtype),),
    jvp=lambda ts, ins, out, dtype=None: None if ts[0] is None else reduce_precision(ts[0], dtype=dtype),
    kind="elementwise", scalar="reduce_precision", node_name="ReducePrecisionBackward")
