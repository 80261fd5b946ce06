"""Elementwise primitives: unary math, binary arithmetic with broadcasting, comparisons,
logical ops, ``where`` and ``cast``.

Unary differentiable ops are defined by their derivative ``d(x, out)``: the VJP is
``g * d`` and the JVP ``t * d``. ``scalar`` names the per-element operation (fusegrad.ir.scalar_ops)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import scalar_ops
from ..dtypes import np_half
from ..primitive import Primitive, refuse_complex
from .creation import full
from .fma_loops import fused
from .shapes import broadcast_shapes, shape_of

__all__ = ["neg", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
           "abs_", "sign", "sqrt", "rsqrt", "erf", "floor", "ceil", "round_", "trunc",
           "add", "sub", "mul", "div", "pow_", "maximum", "minimum", "atan2", "floordiv", "mod", "fmod",
           "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
           "logical_not", "isnan", "stop_gradient", "straight_through", "where", "fma", "cast", "reduce_precision",
           "sum_to", "ELEMENTWISE_UNARY", "ELEMENTWISE_BINARY"]


def _same(avals, params):
    return avals[0]


# Every unary and binary math primitive, in definition order: each joins its list where
# it is defined (tests sweep them).
ELEMENTWISE_UNARY: list = []
ELEMENTWISE_BINARY: list = []


def _unary(name, impl, deriv, scalar, node_name=None, saves="in", wide_vjp=False):
    """``wide_vjp``: a float16 or bfloat16 gradient is computed in float32 and rounded once, as
    PyTorch's dedicated backward kernel (``tanh_backward``) does, not op by op."""
    def vjp(g, ins, out, needs):
        if g._data.dtype.kind == "c":
            ins, out = conj_operands(ins, out)
        if wide_vjp and np_half(g._data.dtype):
            f32 = np.dtype(np.float32)
            x, o = (None if v is None else cast(v, dtype=f32) for v in (ins[0], out))
            return (cast(mul(cast(g, dtype=f32), deriv(x, o)), dtype=g._data.dtype),)
        return (mul(g, deriv(ins[0], out)),)

    def jvp(ts, ins, out):
        return None if ts[0] is None else mul(ts[0], deriv(ins[0], out))
    p = Primitive(name, impl, abstract=_same, vjp=vjp if deriv else None, jvp=jvp if deriv else None,
                  saves=saves, kind="elementwise", scalar=scalar, node_name=node_name, nondiff=deriv is None)
    ELEMENTWISE_UNARY.append(p)
    return p


def _zeros_like(g):
    """Zeros of ``g``'s shape and dtype: PyTorch's zero gradients (``zeros_like(grad)``),
    where ``g * 0`` would turn an inf or NaN gradient into NaN."""
    return full(shape=shape_of(g), value=0, dtype=g.dtype.np)


def _zero_deriv(name, impl, scalar, node_name=None):
    """Piecewise-constant ops: zero gradient, as in PyTorch."""
    p = _unary(name, impl, None, scalar, node_name, saves="")
    p.nondiff = False
    p.vjp = lambda g, ins, out, needs: (_zeros_like(g),)
    p.jvp = lambda ts, ins, out: None if ts[0] is None else _zeros_like(ts[0])
    return p


def _wide(x: np.ndarray) -> np.ndarray:
    """A float16 or bfloat16 ``x`` in float32, for an impl of several NumPy steps: rounded
    once at the end, as PyTorch's kernel rounds."""
    return x.astype(np.float32) if x.dtype.itemsize == 2 else x


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-_wide(x)))).astype(x.dtype, copy=False)


def _relu(x):
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def _rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return (1 / np.sqrt(_wide(x))).astype(x.dtype, copy=False)


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
# (expm1's derivative is exp(x), not expm1(x) + 1, which rounds away e^x below -1: ELU's
# gradient at -10 was 4e-4 off in float32)
expm1 = _unary("expm1", _quiet(np.expm1), lambda x, o: exp(x), "expm1")
sin = _unary("sin", np.sin, lambda x, o: cos(x), "sin")
cos = _unary("cos", np.cos, lambda x, o: neg(sin(x)), "cos")
tan = _unary("tan", np.tan, lambda x, o: add(mul(o, o), 1.0), "tan", saves="out")
tanh = _unary("tanh", np.tanh, lambda x, o: sub(1.0, mul(o, o)), "tanh", saves="out", wide_vjp=True)
sigmoid = _unary("sigmoid", _sigmoid, lambda x, o: mul(o, sub(1.0, o)), "sigmoid", saves="out")


def _sigmoid_vjp(g, ins, out, needs):
    """PyTorch's sigmoid_backward, ``g * (1 - y) * y`` in that order: in float32 for a bfloat16
    gradient, rounded once (its float16 kernel rounds each product)."""
    if g._data.dtype.kind == "c":
        return (mul(g, conj(mul(out, sub(1.0, out)))),)
    if g._data.dtype == _BF16:
        f32 = np.dtype(np.float32)
        g32, y32 = cast(g, dtype=f32), cast(out, dtype=f32)
        return (cast(mul(mul(g32, sub(1.0, y32)), y32), dtype=g._data.dtype),)
    return (mul(mul(g, sub(1.0, out)), out),)


sigmoid.vjp = _sigmoid_vjp
relu = _unary("relu", _relu, lambda x, o: cast(gt(o, 0), dtype=o.dtype.np), "relu", saves="out")
# (selected by where, as PyTorch's threshold_backward: 0 below the threshold even of a NaN g)
relu.vjp = lambda g, ins, out, needs: (where(le(out, 0), 0.0, g),)
relu.jvp = lambda ts, ins, out: None if ts[0] is None else where(le(out, 0), 0.0, ts[0])
refuse_complex(relu, lambda t: NotImplementedError("clamp is not supported for complex types"))
abs_ = _unary("abs", np.abs, lambda x, o: sign(x), "abs")
sign = _zero_deriv("sign", scalar_ops.sign, "sign")
sqrt = _unary("sqrt", _quiet(np.sqrt), lambda x, o: div(0.5, o), "sqrt", saves="out")
rsqrt = _unary("rsqrt", _rsqrt, lambda x, o: mul(mul(mul(o, o), o), -0.5), "rsqrt", saves="out")
erf = _unary("erf", _erf, lambda x, o: mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI), "erf")
floor = _zero_deriv("floor", np.floor, "floor")
ceil = _zero_deriv("ceil", np.ceil, "ceil")
round_ = _zero_deriv("round", np.round, "round")
trunc = _zero_deriv("trunc", np.trunc, "trunc")
for _p, _kernel in ((erf, "erf_vml_cpu"), (floor, "floor"), (ceil, "ceil"), (round_, "round_vml_cpu"),
                   (trunc, "trunc")):
    refuse_complex(_p, lambda t, k=_kernel: NotImplementedError(f"\"{k}\" not implemented for '{t}'"))


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
    if g._data.dtype.kind == "c":
        ins, out = conj_operands(ins, out)
    x, y = ins
    return _grads(ins, needs, mul(g, y) if needs[0] else None, mul(g, x) if needs[1] else None)


def _div_vjp(g, ins, out, needs):
    if g._data.dtype.kind == "c":
        ins, out = conj_operands(ins, out)
    x, y = ins
    gx = div(g, y)
    return _grads(ins, needs, gx, neg(div(mul(gx, x), y)) if needs[1] else None)


def _pow_vjp(g, ins, out, needs):
    if g._data.dtype.kind == "c":
        ins, out = conj_operands(ins, out)
    x, y = ins
    gx = gy = None
    if needs[0]:
        # x**(y-1) * y, with 0 where y == 0 so that x == 0 gives no nan (PyTorch's rule)
        gx = g * where(eq(y, 0), 0.0, y * x ** (y - 1.0)) if hasattr(y, "shape") else (
            _zeros_like(g) if y == 0 else g * (y * x ** (y - 1.0)))
    if needs[1]:  # (a complex exponent: its real part's sign, as PyTorch's rule reads it)
        yr = real(y) if hasattr(y, "shape") and y.dtype.np.kind == "c" else y
        gy = g * where(logical_and(eq(x, 0), ge(yr, 0)), 0.0, out * log(x))
    return _grads(ins, needs, gx, gy)


def _minmax_vjp(cmp):
    def vjp(g, ins, out, needs):  # (as PyTorch's: the loser gets 0 even of a NaN g; beside a NaN both get g)
        x, y = ins
        kept = where(eq(x, y), g * 0.5, g)
        return _grads(ins, needs, where(cmp(y, x), 0.0, kept) if needs[0] else None,
                      where(cmp(x, y), 0.0, kept) if needs[1] else None)
    return vjp


def _atan2_vjp(g, ins, out, needs):
    y, x = ins
    d = x * x + y * y
    zero = eq(d, 0.0)  # at the origin the gradient is 0, as PyTorch's (not 0 * inf)
    r = where(zero, 0.0, g / where(zero, 1.0, d))
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
            if gi._data.dtype.kind == "c":  # (the VJP's partial is conjugated: PyTorch's convention)
                gi = conj(gi)
            term = t * gi
            acc = term if acc is None else acc + term
        return acc
    return jvp


_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
from ..dtypes import _BF16  # noqa: E402  (ml_dtypes' bfloat16)


def _bf16_scalars(ufunc, scalar_first: bool):
    """``ufunc`` with PyTorch's result for a bfloat16 or float16 array and a Python scalar:
    computed in float32 and rounded once (PyTorch's mul, div and the rest; NumPy computes
    bfloat16 in float32 and returns that, float16 with the scalar rounded to float16 first),
    or, ``scalar_first`` (add and sub), the scalar rounded to the array's dtype first, as
    PyTorch does for those."""
    def impl(a, b, _f32=_F32, _bf16=_BF16, _f16=_F16):  # (defaults: local lookups on this per-op path)
        r = ufunc(a, b)
        if r.dtype is not _f32:
            if r.dtype is _f16 and not scalar_first and not (hasattr(a, "dtype") and hasattr(b, "dtype")):
                return (ufunc(a.astype(_f32), b) if hasattr(a, "dtype") else ufunc(a, b.astype(_f32))).astype(_f16)
            return r
        if getattr(a, "dtype", None) is _bf16:
            return ufunc(a, np.asarray(b, _bf16)) if scalar_first and not hasattr(b, "dtype") else r.astype(_bf16)
        if getattr(b, "dtype", None) is _bf16:
            return ufunc(np.asarray(a, _bf16), b) if scalar_first and not hasattr(a, "dtype") else r.astype(_bf16)
        return r
    impl.__name__ = getattr(ufunc, "__name__", "impl")
    return impl


def _half_powered(power):
    """``power`` (``a ** b``) with a float16 or bfloat16 array to a Python number's power as
    PyTorch's CPU kernel computes it: the exponent rounded to the array's dtype, the power in
    float32, rounded once; bfloat16 cubes and inverse squares as products rounded at each step
    (its vectorized path). (The VJP's ``b * a ** (b - 1)`` reads the exponent unrounded, as
    PyTorch's pow_backward does.)"""
    others = _bf16_scalars(power, False)

    def impl(a, b):
        dt = getattr(a, "dtype", None)
        if (dt is _F16 or dt is _BF16) and isinstance(b, (int, float)) and not isinstance(b, bool):
            b = float(np.asarray(b, dt))
            a32 = a.astype(_F32)
            if dt is _BF16 and b in (3.0, -2.0):
                square = (a32 * a32).astype(dt).astype(_F32)
                return (square * a32 if b == 3.0 else np.float32(1.0) / square).astype(dt)
            with np.errstate(all="ignore"):
                return np.power(a32, np.float32(b)).astype(dt)
        return others(a, b)
    impl.__name__ = "power"
    return impl


def _binary(name, impl, vjp, scalar, node_name=None, saves="in", reads=None, scalar_first=False, half=None):
    """An elementwise binary primitive; ``half`` wraps ``impl`` for half-precision operands
    (default: ``_bf16_scalars``)."""
    half = half or (lambda f: _bf16_scalars(f, scalar_first))
    p = Primitive(name, half(impl), abstract=_bin_abstract, vjp=vjp,
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
pow_ = _binary("pow", scalar_ops.power, _pow_vjp, "pow", saves="in,out", reads=lambda needs: ((True, True), needs[1]),
               half=_half_powered)
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
relu.mask_vjp = maximum.mask_vjp = minimum.mask_vjp = True  # (see Primitive.mask_vjp)
for _p in (maximum, minimum):
    refuse_complex(_p, lambda t, n=_p.name: RuntimeError(f"{n} not implemented for complex tensors."))

# Floor division, Python's remainder (the divisor's sign) and C's (the dividend's), exact:
# integers over all of int64, where a float64 division is exact only below 2**53; floats as
# PyTorch's kernels (3.0 // 0.3 is 9, the exact quotient's floor, where floor(3.0 / 0.3) is
# 10). An integer zero divisor gives 0 (the ops raise for it first, as PyTorch, where its
# value is known). The remainders' derivatives are those of a - rounded(a / b) * b. A Python
# scalar beside bfloat16 is rounded to bfloat16 first, as PyTorch's kernels take it.
def _floordiv_vjp(g, ins, out, needs):
    return _grads(ins, needs, _zeros_like(g), _zeros_like(g))


def _remainder_vjp(rounding):
    def vjp(g, ins, out, needs):
        a, b = ins
        return _grads(ins, needs, g, neg(g * rounding(a / b)) if needs[1] else None)
    return vjp


floordiv = Primitive("floordiv", _bf16_scalars(_quiet(np.floor_divide), True), abstract=_bin_abstract,
                     kind="elementwise", scalar="floordiv", vjp=_floordiv_vjp, jvp=lambda ts, ins, out: None)
mod = Primitive("mod", _bf16_scalars(_quiet(np.remainder), True), abstract=_bin_abstract, kind="elementwise",
                scalar="mod", vjp=_remainder_vjp(floor), jvp=_lin_jvp(_remainder_vjp(floor)), saves="in")
# (fmod of floats: the runtime computes integers' from mod, as Numba's np.fmod of integers is wrong)
fmod = Primitive("fmod", _bf16_scalars(_quiet(np.fmod), True), abstract=_bin_abstract, kind="elementwise",
                 scalar="fmod", vjp=_remainder_vjp(trunc), jvp=_lin_jvp(_remainder_vjp(trunc)), saves="in")
for _p in (lt, le, gt, ge, atan2, floordiv, mod, fmod):  # (complex numbers have no order)
    refuse_complex(_p, lambda t, n=_p.name: NotImplementedError(f"\"{n}_cpu\" not implemented for '{t}'"))


# ---------------------------------------------------------------- stop_gradient
# The identity whose derivative is zero: what detach() and no_grad() regions become in a
# traced graph, so that the IR's VJP/JVP passes do not differentiate through them.
stop_gradient = Primitive("stop_gradient", lambda x: x, abstract=_same, kind="elementwise", scalar="copy",
                          nondiff=True, node_name="StopGradient")


# The value of its second operand with the derivative of its first: what an in-place
# update made under no_grad becomes in a traced graph when its tensor requires grad. PyTorch
# keeps that tensor's history, so gradients pass through the update as if it were not there.
straight_through = Primitive("straight_through", lambda a, b: b, abstract=lambda avals, params: avals[1], kind="elementwise",
                             scalar="second", vjp=lambda g, ins, out, needs: (g if needs[0] else None, None),
                             jvp=lambda ts, ins, out: ts[0], node_name="StraightThrough")


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
                  saves="in", kind="elementwise", scalar="where", checked=slice(0, 1), mask_vjp=True)


# ---------------------------------------------------------------- fma
def _fma_impl(x, y, z):
    """``x * y + z`` rounded once (fma_loops: the host's fused multiply-add; float16 and
    bfloat16 in float32, as PyTorch). Real operands only."""
    dt = next(a.dtype for a in (x, y, z) if hasattr(a, "dtype"))
    out = fused(x, y, z, dt)
    if out is None:  # integers
        out = np.asarray(np.add(np.multiply(x, y), z), dt)
    return out


def _fma_vjp(g, ins, out, needs):
    x, y, z = ins
    return tuple(sum_to(gi, shape_of(v)) if need and gi is not None else None
                 for v, need, gi in zip(ins, needs, (mul(g, y) if needs[0] else None, mul(g, x) if needs[1] else None,
                                                     g)))


def _fma_jvp(ts, ins, out):
    x, y, _ = ins
    return _jvp_sum((ts[0], lambda t: _bcast(t * y, out)), (ts[1], lambda t: _bcast(x * t, out)),
                    (ts[2], lambda t: _bcast(t, out)))


# A fused multiply-add: what PyTorch's CPU kernels compute for add/sub with alpha, addcmul and
# lerp (one rounding), so that the runtime's versions of those round as PyTorch's do.
fma = Primitive("fma", _fma_impl, abstract=_bin_abstract, vjp=_fma_vjp, jvp=_fma_jvp, saves="in",
                kind="elementwise", scalar="fma",
                # (z's value is never read: an update of it after the call is no error, as PyTorch's)
                reads=lambda needs: ((needs[1], needs[0], False), False))
refuse_complex(fma, lambda t: NotImplementedError(f"fma of {t}: real operands only"))


def preserved_order(a: np.ndarray) -> str:
    """NumPy's copy order for PyTorch's ``preserve_format`` of ``a``: its strides' order
    ("K"), but C order for an expanded array (a stride 0), which PyTorch lays out densely
    (NumPy's "K" would put the expanded dims innermost: YOLO's ``grid.expand(...).float()``
    then refused ``.view``)."""
    return "C" if 0 in a.strides and a.size > 1 else "K"


def _cast_impl(x, dtype):
    if x.dtype.kind == "c" and dtype.kind != "c":
        from ...tracer.trace import user_stacklevel  # (at the user's line, as PyTorch's; only when it warns)
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning,
                      stacklevel=user_stacklevel())
        x = x.real
    if dtype.itemsize == 2 or x.dtype.kind == "f" and dtype.itemsize < x.dtype.itemsize:
        # (to a half type or a narrower float: overflowing to inf is expected; PyTorch says nothing)
        with np.errstate(over="ignore", invalid="ignore"):
            if np_half(dtype) and x.dtype.kind in "fiu" and x.dtype.itemsize > 4:
                # PyTorch converts float64 and int64 to float16/bfloat16 through float32: rounded twice
                # (1 + 2**-11 + 2**-40 becomes 1.0, a tie in float32), as a compiled graph's cast is too
                x = x.astype(np.float32)
            return x.astype(dtype, order=preserved_order(x), copy=False)
    return x.astype(dtype, order=preserved_order(x), copy=False)


def _cast_vjp(g, ins, out, needs, dtype=None):
    x = ins[0]
    kind = x.dtype.np.kind
    if kind != "f" and kind != "c" and x.dtype.name != "bfloat16":
        return (None,)
    if kind != "c" and g._data.dtype.kind == "c":  # a real tensor made complex: its gradient's real part
        g = real(g)
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


# ---------------------------------------------------------------- special functions
# The primitives behind torch.special (fusegrad/special.py): lgamma, digamma, the Hurwitz
# zeta (polygamma(n >= 1) is a multiple of zeta(n + 1, x)), erfinv, erfcx, ndtri and the
# modified Bessel functions i0, i0e, i1, i1e, in NumPy (and the math module's
# lgamma/erf/erfc); then the incomplete gamma functions, the Bessel functions of the
# first and second kinds, K0/K1 and Airy Ai, in SciPy (imported on first use), and the
# orthogonal polynomials (PyTorch's recurrences, in NumPy). Each is computed in float64
# and rounded to the input's dtype, but the polynomials (see _in_dtype). None is a scalar
# operation of fusegrad.ir.scalar_ops, so each declares ``no_lowering``: a compiled graph
# holding one breaks there and runs it eagerly. They are not in ELEMENTWISE_UNARY/BINARY
# (those lists are the ops every kernel renderer lowers).
__all__ += ["lgamma", "digamma", "zeta", "erfinv", "erfcx", "ndtri", "i0", "i0e", "i1", "i1e", "gammainc",
            "gammaincc", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
            "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
            "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai", "chebyshev_polynomial_t",
            "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
            "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
            "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
            "laguerre_polynomial_l", "legendre_polynomial_p"]

_NO_SPECIAL_LOWERING = ("a special function computed in NumPy or SciPy: no scalar operation for it in "
                        "fusegrad.ir.scalar_ops")
_MACHEP = 1.11022302462515654042e-16  # Cephes' MACHEP (zeta's stopping test, as PyTorch's)
_SQRT_PI = math.sqrt(math.pi)


def _special_impl(f):
    """``f`` on float64 copies of the array operands (Python scalars as they are), its
    result rounded to the first array operand's dtype."""
    def impl(*args):
        dt = next((a.dtype for a in args if isinstance(a, np.ndarray)), np.dtype(np.float64))
        with np.errstate(all="ignore"):
            r = f(*[np.asarray(a, np.float64) for a in args])
            return np.asarray(r, np.float64).astype(dt, copy=False)
    impl.__name__ = f.__name__
    return impl


def _scalar_lgamma(v):
    try:
        return math.lgamma(v)
    except (ValueError, OverflowError):  # the poles 0, -1, -2, ...
        return math.inf


_vlgamma = np.frompyfunc(_scalar_lgamma, 1, 1)
_verf = np.frompyfunc(math.erf, 1, 1)
_verfc = np.frompyfunc(math.erfc, 1, 1)


_EULER_GAMMA = 0.57721566490153286061


def _lgamma64(x):
    """math.lgamma, but near its zeros 1 and 2 (where its error is absolute, not relative)
    the series lgamma(1 + e) = -gamma e + sum_k (-1)^k zeta(k) e^k / k, and
    lgamma(2 + e) = log1p(e) + lgamma(1 + e)."""
    out = np.asarray(_vlgamma(x), np.float64)
    near2 = np.abs(x - 2.0) < 0.2
    near = (np.abs(x - 1.0) < 0.2) | near2
    if near.any():
        e = np.where(near2, x - 2.0, x - 1.0)[near]
        s = np.zeros_like(e)
        for k in range(30, 1, -1):  # Horner, highest power first
            s = (s + (-1) ** k * _ZETA_INT[k] / k) * e
        out[near] = (s - _EULER_GAMMA) * e + np.where(near2[near], np.log1p(e), 0.0)
    return out


def _erf64(x):
    return np.asarray(_verf(x), np.float64)


def _erfc64(x):
    return np.asarray(_verfc(x), np.float64)


# digamma: PyTorch's calc_digamma (Cephes psi): reflection below 0, the recurrence up to
# 10, then the asymptotic series in 1/x^2 (Bernoulli numbers B_2k / 2k)
_PSI_10 = 2.25175258906672110764
_PSI_A = (8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
          -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
          8.33333333333333333333e-2)


def _polevl(z, coefs):
    r = np.zeros_like(z) + coefs[0]
    for c in coefs[1:]:
        r = r * z + c
    return r


def _digamma64(x):
    neg = x < 0
    refl = np.where(neg, -np.pi / np.tan(np.pi * np.fmod(x, 1.0)), 0.0)
    y = np.where(neg, 1.0 - x, x)
    res = np.zeros_like(y)
    for _ in range(10):
        m = y < 10
        if not m.any():
            break
        res = np.where(m, res - 1.0 / y, res)
        y = np.where(m, y + 1.0, y)
    z = 1.0 / (y * y)
    tail = np.where(y < 1e17, z * _polevl(z, _PSI_A), 0.0)
    out = np.where(y == 10, res + _PSI_10, res + np.log(y) - 0.5 / y - tail) + refl
    out = np.where(x == 0, np.copysign(np.inf, -x), out)
    return np.where(neg & (x == np.trunc(x)), np.nan, out)


# Hurwitz zeta(x, q) = sum_k (q + k)^-x: Cephes' zeta (as PyTorch's): direct terms until
# q + i > 9, then Euler-Maclaurin with (2k)! / B_2k
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta64(x, q):
    x, q = np.broadcast_arrays(x, q)
    shape = x.shape
    x, q = x.ravel(), q.ravel()
    out = np.full(x.shape, np.nan)
    qint = (q <= 0) & (q == np.floor(q))
    pole = (x == 1) | (~(x < 1) & qint)
    out[pole] = np.inf
    ok = ~pole & ~((x < 1) | ((q <= 0) & (x != np.floor(x))))  # (NaN propagates through the sums)
    xs, qs = x[ok], q[ok]
    if xs.size:
        s = qs ** -xs
        n = np.where(np.isfinite(qs), np.maximum(9.0, np.floor(9.0 - np.nan_to_num(qs)) + 1.0), 9.0)
        done = np.zeros(xs.shape, bool)
        b = np.zeros_like(s)
        for i in range(1, int(n.max()) + 1):
            act = (i <= n) & ~done
            bi = (qs + i) ** -xs
            s = np.where(act, s + bi, s)
            b = np.where(act, bi, b)
            done |= act & (np.abs(bi / s) < _MACHEP)
        w = qs + n
        s = np.where(done, s, s + b * w / (xs - 1.0) - 0.5 * b)
        a, k = np.ones_like(s), 0.0
        for c in _ZETA_A:
            a = a * (xs + k)
            b = b / w
            t = a * b / c
            s = np.where(done, s, s + t)
            done |= np.abs(t / s) < _MACHEP
            k += 1.0
            a = a * (xs + k)
            b = b / w
            k += 1.0
        out[ok] = s
    return out.reshape(shape)


_ZETA_INT = {k: float(_zeta64(np.float64(k), np.float64(1.0))) for k in range(2, 31)}  # zeta(k)


def _exp_sq(x):
    """exp(x * x) without the error of rounding x * x (for |x| up to ~27)."""
    xh = np.round(x * 4096.0) / 4096.0
    xl = x - xh
    return np.exp(xh * xh) * np.exp(xl * (2.0 * xh + xl))


def _erfcx64(x):
    """exp(x^2) erfc(x)."""
    big = x >= 26.0
    out = np.empty_like(x)
    xm = x[~big]
    out[~big] = _erfc64(xm) * _exp_sq(np.where(np.isfinite(xm), xm, 0.0)) if xm.size else xm
    out[~big & (x == -np.inf)] = np.inf
    xb = x[big]
    if xb.size:  # the asymptotic series: 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k
        r = 1.0 / (2.0 * xb * xb)
        t, s = np.ones_like(xb), np.ones_like(xb)
        for k in range(1, 13):
            t = t * -(2 * k - 1) * r
            s = s + t
        out[big] = s / (xb * _SQRT_PI)
    return out


def _giles(y, w):
    """Giles' single-precision erfinv(y), w = -log((1 - y)(1 + y)): the starting point of
    the Newton steps below."""
    lo = w < 5.0
    wl = w - 2.5
    p = _polevl(wl, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941))
    wh = np.sqrt(np.where(lo, 5.0, w)) - 3.0
    q = _polevl(wh, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))
    return np.where(lo, p, q) * y


def _erfcinv64(z):
    """The t >= 0 with erfc(t) = z, for z in (0, 0.5]: Newton's method on log erfc(t)."""
    w = -np.log(z * (2.0 - z))
    t = _giles(1.0 - z, np.minimum(w, 25.0))
    lz = np.log(z)
    far = w > 25.0  # beyond Giles' range: t = sqrt(-log(z) - log(t sqrt(pi))), iterated
    if far.any():
        tf = np.sqrt(-lz[far])
        for _ in range(4):
            tf = np.sqrt(-lz[far] - np.log(tf * _SQRT_PI))
        t[far] = tf
    for _ in range(4):
        e = _erfcx64(t)
        t = t + (np.log(e) - t * t - lz) * e * (_SQRT_PI / 2)
    return t


def _erfinv64(y):
    ay = np.abs(y)
    out = np.full(y.shape, np.nan)
    c = ay <= 0.5
    if c.any():
        yc = y[c]
        t = _giles(yc, -np.log((1.0 - yc) * (1.0 + yc)))
        for _ in range(3):
            t = t - (_erf64(t) - yc) * (_SQRT_PI / 2) * np.exp(t * t)
        out[c] = t
    tl = (ay > 0.5) & (ay < 1.0)
    if tl.any():
        out[tl] = np.sign(y[tl]) * _erfcinv64(1.0 - ay[tl])
    out[ay == 1.0] = np.sign(y[ay == 1.0]) * np.inf
    return out


def _ndtri64(p):
    """The inverse of the standard normal CDF: sqrt(2) erfinv(2p - 1), through erfcinv in
    the tails (where 2p - 1 would round to -1 or 1)."""
    out = np.full(p.shape, np.nan)
    lo = (p > 0) & (p < 0.25)
    hi = (p > 0.75) & (p < 1)
    mid = (p >= 0.25) & (p <= 0.75)
    out[lo] = -math.sqrt(2.0) * _erfcinv64(2.0 * p[lo])
    out[hi] = math.sqrt(2.0) * _erfcinv64(2.0 * (1.0 - p[hi]))
    out[mid] = math.sqrt(2.0) * _erfinv64(2.0 * p[mid] - 1.0)
    out[p == 0] = -np.inf
    out[p == 1] = np.inf
    return out


def _bessel_ie(x, nu):
    """exp(-|x|) I_nu(|x|) and I_nu(|x|) (nu = 0 or 1): the power series (all terms
    positive) up to |x| = 30, the asymptotic expansion beyond."""
    ax = np.abs(x)
    scaled, plain = np.empty_like(ax), np.empty_like(ax)
    sm = ax <= 30.0
    xs = ax[sm]
    q = xs * xs / 4.0
    t = xs / 2.0 if nu else np.ones_like(xs)
    s = t.copy()
    for k in range(1, 64):
        t = t * q / (k * (k + nu))
        s = s + t
    plain[sm], scaled[sm] = s, s * np.exp(-xs)
    xb = ax[~sm]
    t, s = np.ones_like(xb), np.ones_like(xb)
    for k in range(1, 31):
        t = t * -(4.0 * nu * nu - (2 * k - 1) ** 2) / (8.0 * k * xb)
        s = s + t
    s = s / np.sqrt(2.0 * np.pi * xb)
    s[xb == np.inf] = 0.0
    scaled[~sm] = s
    with np.errstate(over="ignore", invalid="ignore"):
        plain[~sm] = np.where(xb == np.inf, np.inf, s * np.exp(xb))
    return scaled, plain


def _i0_64(x):
    return _bessel_ie(x, 0)[1]


def _i0e_64(x):
    return _bessel_ie(x, 0)[0]


def _i1_64(x):
    return np.sign(x) * _bessel_ie(x, 1)[1]


def _i1e_64(x):
    return np.sign(x) * _bessel_ie(x, 1)[0]


def _special_unary(name, f, deriv, node_name, saves="in"):
    """An elementwise special-function primitive with no kernel lowering; its VJP is
    ``g * deriv(x, out)``, written in primitives (double backward works)."""
    def vjp(g, ins, out, needs):
        return (mul(g, deriv(ins[0], out)),)

    def jvp(ts, ins, out):
        return None if ts[0] is None else mul(ts[0], deriv(ins[0], out))
    return Primitive(name, _special_impl(f), abstract=_same, vjp=vjp, jvp=jvp, saves=saves, kind="elementwise",
                     node_name=node_name, no_lowering=_NO_SPECIAL_LOWERING)


def _trigamma(x):
    """polygamma(1, x) = zeta(2, x), reflected below 1/2: pi^2 / sin^2(pi x) - zeta(2, 1 - x)."""
    refl = lt(x, 0.5)
    z = zeta(2.0, where(refl, sub(1.0, x), x))
    s = sin(mul(x, math.pi))
    r = where(refl, sub(div(math.pi ** 2, mul(s, s)), z), z)
    return where(eq(x, math.inf), 0.0, r)


def _zeta_vjp(g, ins, out, needs):
    x, q = ins
    if needs[0]:
        raise RuntimeError("the derivative for 'zeta' with respect to its first argument (self) is not implemented.")
    if not needs[1]:
        return _grads(ins, needs, None, None)
    if hasattr(x, "shape"):
        return _grads(ins, needs, None, mul(g, mul(neg(x), zeta(add(x, 1.0), q))))
    return _grads(ins, needs, None, mul(g, mul(-x, zeta(x + 1.0, q))))  # (polygamma's n + 1: a number)


def _safe_nonzero(x):
    """(|x| > eps, x with eps where it is not): PyTorch's i1/i1e backward at 0."""
    tiny = gt(abs_(x), float(np.finfo(x.dtype.np).eps))
    return tiny, where(tiny, x, float(np.finfo(x.dtype.np).eps))


def _i1_deriv(x, out):
    tiny, sx = _safe_nonzero(x)
    return where(tiny, sub(i0(sx), div(out, sx)), 0.5)


def _i1e_deriv(x, out):
    tiny, sx = _safe_nonzero(x)
    return where(tiny, sub(i0e(sx), mul(out, add(sign(sx), div(1.0, sx)))), 0.5)


lgamma = _special_unary("lgamma", _lgamma64, lambda x, o: digamma(x), "LgammaBackward0")
digamma = _special_unary("digamma", _digamma64, lambda x, o: _trigamma(x), "DigammaBackward0")
zeta = Primitive("zeta", _special_impl(_zeta64), abstract=_bin_abstract, vjp=_zeta_vjp,
                 jvp=_lin_jvp(_zeta_vjp), saves="in", kind="elementwise", node_name="SpecialZetaBackward0",
                 no_lowering=_NO_SPECIAL_LOWERING)
erfinv = _special_unary("erfinv", _erfinv64, lambda x, o: mul(exp(mul(o, o)), _SQRT_PI / 2), "ErfinvBackward0",
                        saves="out")
erfcx = _special_unary("erfcx", _erfcx64, lambda x, o: sub(mul(mul(x, o), 2.0), 2.0 / _SQRT_PI),
                       "SpecialErfcxBackward0", saves="in,out")
ndtri = _special_unary("ndtri", _ndtri64, lambda x, o: mul(exp(mul(mul(o, o), 0.5)), math.sqrt(2 * math.pi)),
                       "SpecialNdtriBackward0", saves="out")
i0 = _special_unary("i0", _i0_64, lambda x, o: i1(x), "I0Backward0")
i0e = _special_unary("i0e", _i0e_64, lambda x, o: sub(i1e(x), mul(sign(x), o)), "SpecialI0EBackward0",
                     saves="in,out")
i1 = _special_unary("i1", _i1_64, _i1_deriv, "SpecialI1Backward0", saves="in,out")
i1e = _special_unary("i1e", _i1e_64, _i1e_deriv, "SpecialI1EBackward0", saves="in,out")


def _scipy_special(name):
    """scipy.special's ``name``, imported on first use: SciPy costs ~1 s at `import fusegrad`."""
    def f(*args):
        import scipy.special
        return getattr(scipy.special, name)(*args)
    f.__name__ = name
    return f


# ---- the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P(a, x)
def _igamma_vjp(name, sign):
    """PyTorch's derivative in x, sign * exp(-x) x^(a-1) / Gamma(a), written as it does:
    exp((a - 1) log(x) - x - lgamma(a)) (NaN at x = 0 for a = 1, as there)."""
    def vjp(g, ins, out, needs):
        a, x = ins
        if needs[0]:
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
        d = exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a)))
        return _grads(ins, needs, None, mul(g, d) if sign > 0 else neg(mul(g, d)))
    return vjp


def _igamma64(scipy_name, lower):
    """SciPy's P(a, x) (``lower``) or Q(a, x), with PyTorch's boundary values tested in its
    order, where SciPy gives NaN for some: x = 0 decides before a NaN a, an infinite a
    before a NaN x, an infinite x before a NaN a."""
    one, zero = (1.0, 0.0) if lower else (0.0, 1.0)  # P's values, or Q's (1 - P)

    def f(a, x):
        return np.select([(x < 0) | (a < 0), a == 0, x == 0, np.isinf(a), np.isinf(x)],
                         [np.nan, np.where(x > 0, one, np.nan), zero, np.where(np.isinf(x), np.nan, zero), one],
                         _scipy_special(scipy_name)(a, x))
    f.__name__ = scipy_name
    return f


def _igamma(name, scipy_name, node_name, sign):
    vjp = _igamma_vjp(name, sign)
    return Primitive(scipy_name, _special_impl(_igamma64(scipy_name, sign > 0)), abstract=_bin_abstract, vjp=vjp,
                     jvp=_lin_jvp(vjp), saves="in", kind="elementwise", node_name=node_name,
                     no_lowering=_NO_SPECIAL_LOWERING)


gammainc = _igamma("igamma", "gammainc", "IgammaBackward0", 1)
gammaincc = _igamma("igammac", "gammaincc", "IgammacBackward0", -1)


# ---- functions PyTorch gives no derivative: their results have no grad_fn (nondiff)
def _special_nondiff(name, impl, abstract=_same):
    """An elementwise special-function primitive with no derivative and no kernel lowering."""
    return Primitive(name, impl, abstract=abstract, kind="elementwise", nondiff=True,
                     no_lowering=_NO_SPECIAL_LOWERING)


def _airy_ai64(x):
    """SciPy's Ai(x), with PyTorch's values where SciPy has none (NaN): NaN at +-inf, 0 above
    103.892 and, below -1e6, the leading term of the asymptotic expansion
    sin(2/3 (-x)^(3/2) + pi/4) / (sqrt(pi) (-x)^(1/4)) (the next is ~1e-10 relative there)."""
    ai = np.asarray(_scipy_special("airy")(x)[0], np.float64)
    far = x < -1e6
    xf = x[far]
    ai[far] = np.sin(-2.0 * xf * np.sqrt(-xf) / 3.0 + 0.25 * np.pi) / (_SQRT_PI * np.sqrt(np.sqrt(-xf)))
    ai[x > 103.892] = 0.0
    ai[np.isinf(x)] = np.nan
    return ai


# sin(x) / x's Taylor series (PyTorch's, below |x| = 0.5), highest power of x^2 first
_SPHERICAL_J0 = (1 / 6227020800, -1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6, 1.0)


def _spherical_bessel_j0_64(x):
    """sin(x) / x, its Taylor series below |x| = 0.5, 0 at +-inf."""
    return np.where(np.abs(x) < 0.5, _polevl(x * x, _SPHERICAL_J0), np.where(np.isinf(x), 0.0, np.sin(x) / x))


bessel_j0 = _special_nondiff("bessel_j0", _special_impl(_scipy_special("j0")))
bessel_j1 = _special_nondiff("bessel_j1", _special_impl(_scipy_special("j1")))
bessel_y0 = _special_nondiff("bessel_y0", _special_impl(_scipy_special("y0")))
bessel_y1 = _special_nondiff("bessel_y1", _special_impl(_scipy_special("y1")))
modified_bessel_i0 = _special_nondiff("modified_bessel_i0", _special_impl(_scipy_special("i0")))
modified_bessel_i1 = _special_nondiff("modified_bessel_i1", _special_impl(_scipy_special("i1")))
modified_bessel_k0 = _special_nondiff("modified_bessel_k0", _special_impl(_scipy_special("k0")))
modified_bessel_k1 = _special_nondiff("modified_bessel_k1", _special_impl(_scipy_special("k1")))
scaled_modified_bessel_k0 = _special_nondiff("scaled_modified_bessel_k0", _special_impl(_scipy_special("k0e")))
scaled_modified_bessel_k1 = _special_nondiff("scaled_modified_bessel_k1", _special_impl(_scipy_special("k1e")))
spherical_bessel_j0 = _special_nondiff("spherical_bessel_j0", _special_impl(_spherical_bessel_j0_64))
airy_ai = _special_nondiff("airy_ai", _special_impl(_airy_ai64))


# ---- the orthogonal polynomials p_n(x), n an operand of x's dtype (PyTorch's kernels)
def _in_dtype(f):
    """``f(x, n)`` in x's dtype with n truncated to an integer degree: PyTorch runs these
    recurrences in the operands' dtype, so a float32 one overflows to inf, and then to NaN
    (inf - inf), at the degree where float32 does; float64 and rounding would give inf or a
    finite value there. n as PyTorch's static_cast<int64_t>: toward zero, and NaN, +-inf and
    values beyond int64 to INT64_MIN on x86 (a negative degree: the result is 0)."""
    def impl(x, n):
        x, n = np.broadcast_arrays(np.asarray(x), np.asarray(n))
        deg = np.where(np.isfinite(n) & (np.abs(n) < 2.0 ** 63), n, -1.0).astype(np.int64)
        with np.errstate(all="ignore"):
            return np.asarray(f(x, deg), x.dtype)
    impl.__name__ = f.__name__
    return impl


def _recurrence(x, n, q1, step):
    """Degree ``n`` of the polynomials whose degree 0 is 1, degree 1 ``q1`` and degree j + 1
    ``step(j, x, p, q)`` from p and q, degrees j - 1 and j (elements of degree < 0 are
    the caller's). Elements of degree >= 2 are iterated, each until its degree or until its
    value is NaN, where PyTorch's loops stop too."""
    out = np.where(n == 0, np.ones_like(x), q1)
    live = np.flatnonzero(n >= 2)
    xs, ns, qs = x.ravel()[live], n.ravel()[live], q1.ravel()[live]
    ps = np.ones_like(qs)
    j = 1
    while live.size:
        ps, qs = qs, step(j, xs, ps, qs)
        j += 1
        done = (ns == j) | np.isnan(qs)
        if done.any():
            out.flat[live[done]] = qs[done]
            keep = ~done
            live, xs, ns, ps, qs = live[keep], xs[keep], ns[keep], ps[keep], qs[keep]
    return out


def _chebyshev(y, n, kind, trig_above, shifted):
    """The Chebyshev polynomial of the first to fourth ``kind`` ("t", "u", "v", "w") at y
    (2x - 1 for the shifted ones), as PyTorch computes it: exact values at y = +-1, the
    trigonometric form (t = acos y) where |y| < 1 and n > ``trig_above``, else the
    recurrence r = 2y q - p."""
    nf = n.astype(y.dtype)
    sign = np.where(n % 2 == 0, 1, -1)
    t = np.arccos(y)
    if kind == "t":
        q1, hi, lo = y, 1, sign
        trig = np.cos(nf * t)
    elif kind == "u":
        q1, hi, lo = y + y, nf + 1, sign * (nf + 1)
        s = np.sin(t)
        trig = np.where(s != 0, np.sin((nf + 1) * t) / s, (nf + 1) * np.cos((nf + 1) * t) / y)
    elif kind == "v":
        q1, hi, lo = y + y - 1, 1, sign * (nf + nf + 1)
        trig = np.where(np.sin(t / 2) != 1, np.cos((nf + 0.5) * t) / np.cos(t / 2), lo)
    else:
        q1, hi, lo = y + y + 1, nf + nf + 1, sign
        # where cos(t / 2) rounds to 1 (y just below 1) PyTorch's shifted kernel gives +-1,
        # its unshifted one 2n + 1
        trig = np.where(np.cos(t / 2) != 1, np.sin((nf + 0.5) * t) / np.sin(t / 2),
                        sign if shifted else np.where(y > 0, nf + nf + 1, sign))
    use_trig = (n > trig_above) & (np.abs(y) < 1)
    edge = (y == 1) | (y == -1)
    r = _recurrence(y, np.where(use_trig | edge, 0, n), q1, lambda j, y, p, q: (y + y) * q - p)
    return np.where(n < 0, 0, np.where(y == 1, hi, np.where(y == -1, lo, np.where(use_trig, trig, r))))


def _chebyshev_impl(kind, trig_above, shifted=False):
    def f(x, n):
        return _chebyshev(x + x - 1 if shifted else x, n, kind, trig_above, shifted)
    f.__name__ = ("shifted_" if shifted else "") + "chebyshev_polynomial_" + kind
    return _in_dtype(f)


def _hermite_limit(x):
    """PyTorch's largest degree of the Hermite polynomials (beyond it: NaN)."""
    return 128 if x.dtype == np.float32 else 512


def _hermite_h(x, n):
    lim = _hermite_limit(x)
    r = _recurrence(x, np.where(n > lim, 0, n), x + x, lambda j, x, p, q: (x + x) * q - (2 * j) * p)
    return np.where(n < 0, 0, np.where(n > lim, np.nan, r))


def _hermite_he(x, n):
    lim = _hermite_limit(x)
    r = _recurrence(x, np.where(n > lim, 0, n), x, lambda j, x, p, q: x * q - j * p)
    return np.where(n < 0, 0, np.where(n > lim, np.nan, r))


def _laguerre_l(x, n):
    r = _recurrence(x, np.where(x == 0, 0, n), 1 - x, lambda j, x, p, q: ((2 * j + (1 - x)) * q - j * p) / (j + 1))
    return np.where(n < 0, 0, r)


def _legendre_p(x, n):
    edge = np.abs(x) == 1
    r = _recurrence(x, np.where(edge, 0, n), x, lambda j, x, p, q: ((2 * j + 1) * x * q - j * p) / (j + 1))
    return np.where(n < 0, 0, np.where(edge, np.where((x > 0) | (n % 2 == 0), 1, -1), r))


def _polynomial(name, f):
    return _special_nondiff(name, f, abstract=_bin_abstract)


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", _chebyshev_impl("t", 6))
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", _chebyshev_impl("u", 8))
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", _chebyshev_impl("v", 8))
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", _chebyshev_impl("w", 8))
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", _chebyshev_impl("t", 6, True))
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", _chebyshev_impl("u", 6, True))
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", _chebyshev_impl("v", 6, True))
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", _chebyshev_impl("w", 4, True))
hermite_polynomial_h = _polynomial("hermite_polynomial_h", _in_dtype(_hermite_h))
hermite_polynomial_he = _polynomial("hermite_polynomial_he", _in_dtype(_hermite_he))
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", _in_dtype(_laguerre_l))
legendre_polynomial_p = _polynomial("legendre_polynomial_p", _in_dtype(_legendre_p))


from .complex import conj, conj_operands, real  # noqa: E402  (the complex rules build on the ones above)
