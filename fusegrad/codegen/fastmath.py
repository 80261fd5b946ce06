"""Branch-free, vectorizable transcendental functions for generated Numba kernels.

PyPI's llvmlite ships without SVML, so ``math.exp`` / ``np.exp`` inside a Numba loop stay scalar
libm calls and block vectorization.  The functions here are plain arithmetic (polynomials, selects,
bit tricks through LLVM intrinsics), so after inlining LLVM vectorizes the calling loop::

    @numba.njit(fastmath=True)
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i])

Every function exists as ``<name>_f32`` and ``<name>_f64`` (same float type in and out) and is
listed in ``FUNCS[(name, "float32" | "float64")]``.  They are compiled with ``forceinline=True``
(LLVM ``alwaysinline``) and their own fast-math flags (``contract`` only): the caller's flags never
reach these instructions, so Cody-Waite splits, error-free transforms and NaN/inf handling survive a
``fastmath=True`` caller.

Accuracy (max ulp vs. a float64 / long double reference), valid ranges and special-value rules
are documented in ``docs/fastmath.md``; ``measure_ulp`` reproduces the numbers.
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Callable

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "CALLS", "FMA", "FUNCS", "NAMES", "TRIG_MAX", "VARIANTS", "arity", "evaluate", "function", "measure_ulp",
    "reference", "sample", "special_values", "ulp_error",
    "cos_f32", "cos_f64", "erf_f32", "erf_f64", "exp_f32", "exp_f64", "expm1_f32", "expm1_f64",
    "log1p_f32", "log1p_f64", "log_f32", "log_f64", "pow_f32", "pow_f64", "sigmoid_f32",
    "sigmoid_f64", "sin_f32", "sin_f64", "tanh_f32", "tanh_f64",
]

# Only the "contract" fast-math flag (a*b + c may become one fma): the caller's flags never reach
# these instructions (Numba sets them per instruction), so nnan/ninf/reassoc cannot fold away NaN
# checks, Cody-Waite splits or error-free transforms.  Products feeding an error-free transform are
# exact (fusing changes nothing) or used twice (LLVM does not fuse those on x86).
# error_model="numpy" removes the zero-division branches; forceinline=True marks the functions
# alwaysinline so the caller's loop sees straight-line code and vectorizes.
_jit = njit(fastmath={"contract"}, error_model="numpy", forceinline=True, cache=True)


# --------------------------------------------------------------------------- LLVM intrinsics

def _call_llvm(builder: ir.IRBuilder, name: str, args: list) -> ir.Value:
    """Call the overloaded LLVM intrinsic ``name`` on float arguments of one type."""
    ty = args[0].type
    suffix = "f32" if isinstance(ty, ir.FloatType) else "f64"
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty] * len(args)),
                                        f"{name}.{suffix}")
    return builder.call(fn, args)


def _layout(ty: ir.Type) -> tuple[ir.IntType, int, int]:
    """(same-width integer type, mantissa bits, exponent bias) of an LLVM float type."""
    return (ir.IntType(32), 23, 127) if isinstance(ty, ir.FloatType) else (ir.IntType(64), 52, 1023)


@intrinsic
def _rint(typingctx, x):
    """Round to nearest integer, ties to even (one vroundps/vrndscaleps)."""
    if isinstance(x, types.Float):
        return x(x), lambda context, builder, sig, args: _call_llvm(builder, "llvm.rint", args)


@intrinsic
def _floor(typingctx, x):
    """Floor as a float (``math.floor`` in Numba returns an int)."""
    if isinstance(x, types.Float):
        return x(x), lambda context, builder, sig, args: _call_llvm(builder, "llvm.floor", args)


@intrinsic
def _fma(typingctx, a, b, c):
    """a*b + c with one rounding (error-free products); a libm call on CPUs without FMA."""
    if isinstance(a, types.Float) and a == b == c:
        return a(a, a, a), lambda context, builder, sig, args: _call_llvm(builder, "llvm.fma", args)


FMA = _fma  # (kernels' prims.fma: a written a*b + c may be reassociated or folded by their flags)


@intrinsic
def _horner(typingctx, x, coeffs):
    """Evaluate the polynomial with ``coeffs`` (highest degree first) at x, unrolled, with fmuladd."""
    if isinstance(x, types.Float) and isinstance(coeffs, types.UniTuple) and coeffs.dtype == x:
        def codegen(context, builder, sig, args):
            x, c = args
            acc = builder.extract_value(c, 0)
            for i in range(1, coeffs.count):
                acc = _call_llvm(builder, "llvm.fmuladd", [acc, x, builder.extract_value(c, i)])
            return acc
        return x(x, coeffs), codegen


def _power_of_two(builder: ir.IRBuilder, t: ir.Value) -> ir.Value:
    """2.0**n from t = n + 1.5 * 2**mant, whose low mantissa bits hold n: adding the bias and
    shifting by the mantissa width builds the exponent field (no float->int conversion,
    whose result LLVM leaves undefined for NaN)."""
    ity, mant, bias = _layout(t.type)
    e = builder.shl(builder.add(builder.bitcast(t, ity), ir.Constant(ity, bias)), ir.Constant(ity, mant))
    return builder.bitcast(e, t.type)


@intrinsic
def _pow2(typingctx, n):
    """2.0**n for an integer-valued float n with a normal result (|n| <= bias)."""
    if isinstance(n, types.Float):
        def codegen(context, builder, sig, args):
            fty = args[0].type
            return _power_of_two(builder, builder.fadd(args[0], ir.Constant(fty, 1.5 * 2.0 ** _layout(fty)[1])))
        return n(n), codegen


@intrinsic
def _pow2_of(typingctx, t, shift):
    """2.0**(n + shift) from t = n + 1.5 * 2**mant (``k.magic``), as _exp_core returns it, and
    an integer-valued constant ``shift``: _pow2 without its add (LLVM folds the shift into
    the bias)."""
    if isinstance(t, types.Float) and shift == t:
        def codegen(context, builder, sig, args):
            ity = _layout(args[0].type)[0]
            bits = builder.add(builder.bitcast(args[0], ity), builder.fptosi(args[1], ity))
            return _power_of_two(builder, builder.bitcast(bits, args[0].type))
        return t(t, shift), codegen


@intrinsic
def _log_split(typingctx, x):
    """(m, k) with x = m * 2**k, m in [sqrt(1/2), sqrt(2)), k a float; x positive and normal.

    Integer trick from fdlibm/musl: offsetting the bits by bits(1) - bits(sqrt(1/2)) makes the
    exponent field roll over exactly at sqrt(2), so no compare is needed.
    """
    if isinstance(x, types.Float):
        np_ty = np.float32 if x == types.float32 else np.float64

        def codegen(context, builder, sig, args):
            fty = args[0].type
            ity, mant, bias = _layout(fty)
            sqrt_half = int(np.array(math.sqrt(0.5), np_ty).view(f"i{np.dtype(np_ty).itemsize}"))
            one = bias << mant
            ix = builder.add(builder.bitcast(args[0], ity), ir.Constant(ity, one - sqrt_half))
            k = builder.sub(builder.ashr(ix, ir.Constant(ity, mant)), ir.Constant(ity, bias))
            m = builder.add(builder.and_(ix, ir.Constant(ity, (1 << mant) - 1)), ir.Constant(ity, sqrt_half))
            return context.make_tuple(builder, sig.return_type,
                                      [builder.bitcast(m, fty), builder.sitofp(k, fty)])
        return types.UniTuple(x, 2)(x), codegen


@intrinsic
def _quadrant(typingctx, t, s, c, shift):
    """``s`` for even ``n + shift``, ``c`` for odd, negated when (n + shift) mod 4 >= 2; the
    float32 t = n + 1.5 * 2**23 holds n in its low mantissa bits (|n| < 2**22), shift is 0.0
    (sin) or 1.0 (cos).

    The shift is added to t's bits as an integer, so sin and cos of one argument share t.
    Bit 0 picks the value, bit 1 moved to the sign bit flips it, all in integer lanes. Past
    2**22 the bits are arbitrary but the result is still one of +-s, +-c; NaN stays NaN."""
    if t == s == c == shift == types.float32:
        def codegen(context, builder, sig, args):
            t, s, c, shift = args
            i32 = ir.IntType(32)
            t = builder.bitcast(t, i32)
            t = builder.add(t, builder.fptosi(shift, i32))
            odd = builder.icmp_unsigned("!=", builder.and_(t, ir.Constant(i32, 1)), ir.Constant(i32, 0))
            v = builder.select(odd, c, s)
            sign = builder.shl(builder.and_(t, ir.Constant(i32, 2)), ir.Constant(i32, 30))
            return builder.bitcast(builder.xor(builder.bitcast(v, i32), sign), s.type)
        return t(t, s, c, shift), codegen


# --------------------------------------------------------------------------- constants

_Consts = namedtuple("_Consts", [
    "zero", "one", "half", "two", "inf", "nan", "tiny", "min_normal", "denorm_scale", "denorm_k",
    "log2e", "ln2_hi", "ln2_lo", "exp_lo", "exp_hi", "expm1_lo", "expm1_nmax", "exp_poly",
    "log_poly", "neg_two", "tanh_lo", "nonpos_shift", "nonpos_scale", "magic",
])

_PER_DTYPE = {
    # f32: exp(r) = 1 + r + r^2 P(r) with P a cubic minimax fit (Lawson's weighted least
    # squares on 4000 Chebyshev nodes of [-ln2/2, ln2/2]; relative error 1.06e-7 with float32
    # coefficients, under one ulp: two degrees below cephes' expf, which the 4-ulp budget
    # allows for exp, tanh and erf; expm1 and sigmoid amplify it and use _F32_FINE's quartic);
    # cephes ln2 split (0.693359375 has 9 bits, so n*ln2_hi is exact); musl logf Lg1..Lg4.
    # f64: Taylor 1/k! up to 13 and fdlibm ln2 split / Lg1..Lg7.
    np.float32: dict(
        tiny=2.0 ** -25, min_normal=2.0 ** -126, denorm_scale=2.0 ** 25, denorm_k=25.0,
        ln2_hi=0.693359375, ln2_lo=-2.12194440e-4, exp_lo=-104.0, exp_hi=89.0, expm1_lo=-20.0,
        expm1_nmax=60.0, tanh_lo=-87.0, nonpos_shift=64.0, nonpos_scale=2.0 ** -64, magic=1.5 * 2.0 ** 23,
        exp_poly=(8.312525049508657e-3, 4.189011343158461e-2, 1.666711446423479e-1,
                  4.999923178892114e-1),
        log_poly=(0.24279078841, 0.28498786688, 0.40000972152, 0.66666662693),
    ),
    np.float64: dict(
        tiny=2.0 ** -54, min_normal=2.0 ** -1022, denorm_scale=2.0 ** 54, denorm_k=54.0,
        ln2_hi=6.93147180369123816490e-01, ln2_lo=1.90821492927058770002e-10, exp_lo=-746.0,
        exp_hi=710.0, expm1_lo=-40.0, expm1_nmax=600.0, tanh_lo=-708.0, nonpos_shift=512.0,
        nonpos_scale=2.0 ** -512, magic=1.5 * 2.0 ** 52,
        exp_poly=tuple(1.0 / math.factorial(i) for i in range(13, 1, -1)),
        log_poly=(1.479819860511658591e-01, 1.531383769920937332e-01, 1.818357216161805012e-01,
                  2.222219843214978396e-01, 2.857142874366239149e-01, 3.999999999940941908e-01,
                  6.666666666666735130e-01),
    ),
}


def _constants(ft: type) -> _Consts:
    """All constants of one float type, cast to it (Numba would promote float32 * literal to f64)."""
    values = dict(zero=0.0, one=1.0, half=0.5, two=2.0, neg_two=-2.0, inf=math.inf, nan=math.nan,
                  log2e=1.0 / math.log(2.0), **_PER_DTYPE[ft])
    return _Consts(**{k: tuple(map(ft, v)) if isinstance(v, tuple) else ft(v) for k, v in values.items()})


_F32 = _constants(np.float32)
_F64 = _constants(np.float64)
# float32 with a quartic exp polynomial (relative error 3.8e-9): expm1 (and tanh_f32, built
# on it) divides exp's absolute error by a smaller result and sigmoid adds a division, so the
# cubic would take them to 11.7, 13.1 and 3.4 ulp.
_F32_FINE = _F32._replace(exp_poly=tuple(map(np.float32, (
    1.3814613093539995e-3, 8.36870996135285e-3, 4.166838737389609e-2, 1.6666520688656733e-1,
    4.9999993451625907e-1))))
# pow_f32 works in float64 with shorter polynomials (~2**-34 relative; the exp argument
# |y log x| <= 104 then carries < 2**-27 absolute error) and float32's exp range.
_F64_LOW = _F64._replace(log_poly=tuple(map(np.float64, _F32.log_poly)),
                         exp_poly=tuple(1.0 / math.factorial(i) for i in range(9, 1, -1)),
                         exp_lo=np.float64(_F32.exp_lo), exp_hi=np.float64(_F32.exp_hi))

# sin/cos: x = n*pi/2 + r with pi/2 split into pieces so that n * piece is exact or fused.
# float32 reduces in float32 through fma with pi/2 as three float32 parts (see _trig_f32);
# float64 uses 26 + 26 + 26 + 26 + 53 bits (exact for |n| < 2**27, ~157 bits of pi/2).
# Split computed with mpmath.
_INV_PIO2 = 0.6366197723675814
# pi/2 = P0 + P1 + P2 + ~1e-22, P0 and P1 rounded down so that all three parts are positive
# (see _trig_f32 for why)
_PIO2_F32S = tuple(map(np.float32, (1.570796251296997, 7.549789415861596e-08, 5.390302953474238e-15)))
_INV_PIO2_F32 = np.float32(0.6366197723675814)
_PIO2_F64 = (1.5707963407039642, -1.3909067675399456e-08, 6.123233932053594e-17, 6.368317178484799e-25,
             -1.4973849048591698e-33)
# float32: below 2**17, n = rint(x * 2/pi) computed in float32 is off by at most one and the
# reduced |r| stays under 0.8 (the clamp); beyond it the fast kernel's guard reruns in libm.
TRIG_MAX = {"float32": 2.0 ** 17, "float64": 2.0 ** 27 * (math.pi / 2)}  # ulp bound holds below
# Clamp for the reduced argument, a little above pi/4: past TRIG_MAX it keeps sin/cos in [-1, 1].
# float32 leaves room for x * 2/pi rounding (in float32) to the neighbouring integer.
_R_MAX = 0.7854
_R_MAX_F32 = np.float32(0.8)
_SIN_F32 = tuple(map(np.float32, (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)))  # cephes
# cephes cosf, with the leading -1/2 and 1 in the same Horner chain (one fma fewer)
_COS_F32 = tuple(map(np.float32, (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2,
                                  -0.5, 1.0)))
_SIN_F64 = (1.58969099521155010221e-10, -2.50507602534068634195e-08, 2.75573137070700676789e-06,
            -1.98412698298579493134e-04, 8.33333333332248946124e-03)  # fdlibm S6..S2
_S1_F64 = -1.66666666666666324348e-01
_COS_F64 = (-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,
            2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02)
_TANH_F32 = tuple(map(np.float32, (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2,
                                    1.33314422036e-1, -3.33332819422e-1)))  # cephes, |x| < 0.625
_TANH_SPLIT_F32 = np.float32(0.625)
_SIN_TINY_F64 = 2.0 ** -26  # sin(x) == x to within half an ulp below this

# erf_f64: fdlibm s_erf.c rational approximations P/Q on [0, 0.84375), [0.84375, 1.25),
# [1.25, 1/0.35), [1/0.35, 6), coefficients highest degree first.
_ERX = 8.45062911510467529297e-01
_ERF_PP = (-2.37630166566501626084e-05, -5.77027029648944159157e-03, -2.84817495755985104766e-02,
           -3.25042107247001499370e-01, 1.28379167095512558561e-01)
_ERF_QQ = (-3.96022827877536812320e-06, 1.32494738004321644526e-04, 5.08130628187576562776e-03,
           6.50222499887672944485e-02, 3.97917223959155352819e-01, 1.0)
_ERF_PA = (-2.16637559486879084300e-03, 3.54783043256182359371e-02, -1.10894694282396677476e-01,
           3.18346619901161753674e-01, -3.72207876035701323847e-01, 4.14856118683748331666e-01,
           -2.36211856075265944077e-03)
_ERF_QA = (1.19844998467991074170e-02, 1.36370839120290507362e-02, 1.26171219808761642112e-01,
           7.18286544141962662868e-02, 5.40397917702171048937e-01, 1.06420880400844228286e-01, 1.0)
_ERF_RA = (-9.81432934416914548592e+00, -8.12874355063065934246e+01, -1.84605092906711035994e+02,
           -1.62396669462573470355e+02, -6.23753324503260060396e+01, -1.05586262253232909814e+01,
           -6.93858572707181764372e-01, -9.86494403484714822705e-03)
_ERF_SA = (-6.04244152148580987438e-02, 6.57024977031928170135e+00, 1.08635005541779435134e+02,
           4.29008140027567833386e+02, 6.45387271733267880336e+02, 4.34565877475229228821e+02,
           1.37657754143519042600e+02, 1.96512716674392571292e+01, 1.0)
_ERF_RB = (-4.83519191608651397019e+02, -1.02509513161107724954e+03, -6.37566443368389627722e+02,
           -1.60636384855821916062e+02, -1.77579549177547519889e+01, -7.99283237680523006574e-01,
           -9.86494292470009928597e-03)
_ERF_SB = (-2.24409524465858183362e+01, 4.74528541206955367215e+02, 2.55305040643316442583e+03,
           3.19985821950859553908e+03, 1.53672958608443695994e+03, 3.25792512996573918826e+02,
           3.03380607434824582924e+01, 1.0)
# erf_f32: two weighted least-squares Chebyshev fits (3000 nodes, mpmath reference) rounded to
# float32: erf(a) = a + a * P(a^2) on [0, 1.25) and erfc(a) = exp(Q((a - 2.625) / 1.375)) on
# [1.25, 4]; beyond 4, erf rounds to 1.
_ERF_P_F32 = tuple(map(np.float32, (
    -7.560554422525456e-06, 0.00010386997746536508, -0.0008338068146258593, 0.005208853166550398,
    -0.026860157027840614, 0.11283672600984573, -0.3761262893676758, 0.12837916612625122)))
_ERF_Q_F32 = tuple(map(np.float32, (
    2.020690772042144e-05, -0.00011461941176094115, 0.00043550095870159566, -0.0018094397382810712,
    0.006863700691610575, -0.025573663413524628, -1.7918782234191895, -7.685076713562012,
    -8.490669250488281)))
_ERF_SPLIT_F32, _ERF_MID_F32, _ERF_SCALE_F32, _ERF_MAX_F32 = map(np.float32, (1.25, 2.625, 1 / 1.375, 4.0))

# pow_f64: log(m) = 2*atanh(s), s = (m-1)/(m+1); 2/3 as a double-double and the rest of the
# series 2/5 + 2/7 s^2 + ... (Taylor; truncation < 2**-64 relative for |s| <= 0.1716).
_TWO_THIRDS = (0.6666666666666666, 3.700743415417188e-17)
_ATANH_TAIL = tuple(2.0 / (2 * i + 1) for i in range(12, 1, -1))


# --------------------------------------------------------------------------- shared kernels

@_jit
def _ldexp(y, n, k):
    """y * 2**n with one rounding, for integer-valued n with |n| up to about 2*bias."""
    h = _rint(n * k.half)
    return y * _pow2(h) * _pow2(n - h)


@_jit
def _exp_core(x, tail, k):
    """(t, e) with exp(x + tail) = 2**n * (1 + e), for x the caller has clamped, and
    t = n + k.magic: n = t - k.magic, 2**n = _pow2_of(t). Rounding by the magic-number add
    (in the fma that scales x) leaves n in t's low bits, which saves 2**n an add."""
    t = _fma(x, k.log2e, k.magic)
    n = t - k.magic
    r = (x - n * k.ln2_hi) - (n * k.ln2_lo - tail)  # first product exact: Cody-Waite split
    return t, r + r * r * _horner(r, k.exp_poly)


@_jit
def _exp_reduce(x, tail, lo, k):
    """(n, e) with exp(x + tail) = 2**n * (1 + e), |e| <~ 0.41, after clamping x to [lo, exp_hi].

    NaN maps to lo; callers restore it.  The clamp keeps n inside the range _ldexp handles while
    still overflowing to inf / underflowing to 0 like libm.
    """
    xc = x if x > lo else lo
    xc = xc if xc < k.exp_hi else k.exp_hi
    t, e = _exp_core(xc, tail if xc == x else k.zero, k)
    return t - k.magic, e


@_jit
def _exp(x, k):
    # Below exp_lo the result is 0: computed from x = 0 and then selected away, since scaling
    # down to it would take the CPU's slow path for results below the normal range.
    under = x < k.exp_lo
    n, e = _exp_reduce(k.zero if under else x, k.zero, k.exp_lo, k)
    y = _ldexp(k.one + e, n, k)
    return k.zero if under else (y if x == x else x)


@_jit
def _exp_nonpositive(x, k):
    """exp(x) for x <= 0 or NaN (the caller proves it): for x at or above exp_lo,
    2**(n + nonpos_shift) is normal and (1 + e) times it exact, so the one multiplication by
    nonpos_scale rounds subnormal results once: 4 operations for the scaling against _ldexp's
    11, and no upper clamp. Still right up to x < (nonpos_shift - 1) ln 2 (43 in float32, 354
    in float64), so rounding that leaves a proved value slightly positive (x - max x fused
    into one fma) does no harm; inf beyond."""
    # NaN passes the test and makes e, hence the result, NaN: no select to restore it. Below
    # exp_lo (a masked score's -inf) the result is 0, computed from x = 0 and selected away,
    # so that no product falls below the normal range (the CPU's slow path).
    under = x < k.exp_lo
    t, e = _exp_core(k.zero if under else x, k.zero, k)
    p = _pow2_of(t, k.nonpos_shift)
    y = _fma(e, p, p) * k.nonpos_scale  # fma(e, p, p) == (1 + e) * p: p is a normal power of 2
    return k.zero if under else y


@_jit
def _expm1(x, k):
    # expm1(x) = 2**n * (e + (1 - 2**-n)); 1 - 2**-n is exact for small n and rounds to 1 for
    # large n (clamped so 2**-n stays representable).
    n, e = _exp_reduce(x, k.zero, k.expm1_lo, k)
    m = n if n < k.expm1_nmax else k.expm1_nmax
    y = _ldexp(e + (k.one - _pow2(-m)), n, k)
    y = x if abs(x) < k.tiny else y  # also keeps -0.0 and subnormals exact
    return y if x == x else x


@_jit
def _log_reduced(m, e, c, k):
    """log(m * 2**e) + c for m in [sqrt(1/2), sqrt(2)): fdlibm log1p core, s = f/(2+f)."""
    f = m - k.one
    s = f / (k.two + f)
    z = s * s
    r = z * _horner(z, k.log_poly)
    hfsq = k.half * f * f
    return e * k.ln2_hi - ((hfsq - (s * (hfsq + r) + (e * k.ln2_lo + c))) - f)


@_jit
def _log(x, k):
    sub = x < k.min_normal  # subnormals: scale up first so the bit split sees a normal number
    m, e = _log_split(x * k.denorm_scale if sub else x)
    e = e - k.denorm_k if sub else e
    y = _log_reduced(m, e, k.zero, k)
    y = y if x < k.inf else x  # +inf and nan pass through
    y = -k.inf if x == k.zero else y
    return k.nan if x < k.zero else y


@_jit
def _log1p(x, k):
    u = k.one + x
    m, e = _log_split(u)
    # (1 + x) - u exactly, divided by u: restores what rounding 1 + x lost (musl log1p).
    c = (k.one - (u - x)) if u >= k.two else (x - (u - k.one))
    y = _log_reduced(m, e, c / u, k)
    y = y if x < k.inf else x
    y = -k.inf if x == -k.one else y
    y = k.nan if x < -k.one else y
    return x if abs(x) < k.tiny else y


@_jit
def _sigmoid(x, k):
    # e = exp(-|x|) <= 1 never overflows; e / (1 + e) keeps subnormal results for x << 0.
    e = _exp(-abs(x), k)
    return (k.one if x >= k.zero else e) / (k.one + e)


@_jit
def _pow_special(x, y, r, k):
    """NumPy/C99 pow special cases on top of r = |x|**y computed for finite nonzero x, finite y."""
    a = abs(x)
    # Bitwise & / | on the booleans: no short-circuit branches, so everything stays selects.
    y_int = _rint(y) == y
    y_odd = y_int & (_rint(y * k.half) != y * k.half)
    # zero or infinite base, or infinite exponent: the result is 0 or inf
    edge = (a == k.zero) | (a == k.inf) | (abs(y) == k.inf)
    r = (k.inf if (a > k.one) == (y > k.zero) else k.zero) if edge else r
    r = -r if y_odd & (math.copysign(k.one, x) < k.zero) else r
    r = k.nan if ((x < k.zero) & (x > -k.inf) & (not y_int)) | (x != x) | (y != y) else r
    return k.one if (y == k.zero) | (x == k.one) | ((x == -k.one) & (abs(y) == k.inf)) else r


@_jit
def _two_sum(a, b):
    """s + err == a + b exactly (Knuth; no magnitude condition)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_jit
def _log_dd(a):
    """log(a) as a double-double (~2**-64 relative) for positive finite float64 a."""
    sub = a < 2.0 ** -1022
    m, e = _log_split(a * 2.0 ** 54 if sub else a)
    e = e - 54.0 if sub else e
    # s = (m - 1) / (m + 1) as sh + sl; m - 1 and the two-sum for m + 1 are exact.
    f = m - 1.0
    dh = m + 1.0
    dl = (1.0 - dh) + m
    sh = f / dh
    sl = (_fma(-sh, dh, f) - sh * dl) / dh
    # (2/3) s^3 to double-double accuracy, the rest of the series in plain double.
    z = sh * sh
    p3 = z * sh
    p3_lo = _fma(z, sh, -p3) + _fma(sh, sh, -z) * sh + 3.0 * z * sl  # s^3 = p3 + p3_lo
    m3 = _TWO_THIRDS[0] * p3
    m3_lo = _fma(_TWO_THIRDS[0], p3, -m3) + (_TWO_THIRDS[0] * p3_lo + _TWO_THIRDS[1] * p3)
    rest = p3 * z * _horner(z, _ATANH_TAIL)
    h, lo = _two_sum(e * _F64.ln2_hi, 2.0 * sh)  # e * ln2_hi is exact
    h, lo2 = _two_sum(h, m3)
    lo = lo + lo2 + (2.0 * sl + e * _F64.ln2_lo + m3_lo + rest)
    hi = h + lo
    return hi, lo - (hi - h)


@_jit
def _trig_f32(x, shift, r_max):
    """sin(x + shift*pi/2) for float32 x, all in float32: Cody-Waite reduction through fma with
    pi/2 in three float32 parts, cephes kernels.  With fma the first step x - n*P1 is exact
    (|n| < 2**24) and the second is one rounding of the exact r1 - n*P2, so r keeps ~2**-23
    relative accuracy down to the smallest |r| of float32 arguments below TRIG_MAX.

    No branch for tiny x (sin x = x): there n = +0.0 (the magic-number rounding, unlike rint,
    never gives -0.0), the parts of pi/2 are all positive, so every -n*P is -0.0 and x = -0.0
    comes through as r = -0.0; r + r*z*p rounds to r for |r| < 2**-12, and copysign keeps the
    sign where r*z*p is a +0.0 (sin r has the sign of r on [-r_max, r_max])."""
    t = _fma(x, _INV_PIO2_F32, _F32.magic)  # n + 1.5 * 2**23, n = rint(2x/pi)
    n = t - _F32.magic
    r = _fma(-n, _PIO2_F32S[2], _fma(-n, _PIO2_F32S[1], _fma(-n, _PIO2_F32S[0], x)))
    # Clamps that keep NaN (inf - inf for x = +-inf): they only bite past TRIG_MAX, keeping
    # the result in [-1, 1]; a NaN r makes both kernels NaN, so no separate inf check.
    # r_max = inf (constant after inlining) folds them away, for callers that guard TRIG_MAX.
    r = -r_max if r < -r_max else r
    r = r_max if r > r_max else r
    z = r * r
    s = math.copysign(r + r * z * _horner(z, _SIN_F32), r)
    c = _horner(z, _COS_F32)
    return _quadrant(t, s, c, shift)


@_jit
def _trig_f64(x, shift):
    """sin(x + shift*pi/2) for float64 x: 4-part Cody-Waite reduction kept as a double-double,
    then fdlibm's kernels with tail."""
    n = _rint(x * _INV_PIO2)
    r = x - n * _PIO2_F64[0]  # exact for |n| < 2**27 (product exact, then Sterbenz)
    r, e = _two_sum(r, -n * _PIO2_F64[1])
    r, e2 = _two_sum(r, -n * _PIO2_F64[2])
    r, e3 = _two_sum(r, -n * _PIO2_F64[3])
    e = ((e + e2) + e3) - n * _PIO2_F64[4]
    y0 = r + e
    y1 = (r - y0) + e  # y0 + y1 = x - n*pi/2 to ~2**-100
    ok = abs(y0) < _R_MAX  # false only past TRIG_MAX (or nan): clamp, drop the tail
    y0 = y0 if ok else math.copysign(_R_MAX, y0)
    y1 = y1 if ok else 0.0
    q = n + shift
    q = q - 4.0 * _floor(q * 0.25)
    neg = q >= 2.0
    q = q - 2.0 if neg else q
    z = y0 * y0
    v = z * y0
    s = y0 - ((z * (0.5 * y1 - v * _horner(z, _SIN_F64)) - y1) - v * _S1_F64)
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + (z * (z * _horner(z, _COS_F64)) - y0 * y1))
    v = c if q == 1.0 else s
    v = -v if neg else v
    return v if abs(x) < math.inf else math.nan


# --------------------------------------------------------------------------- public functions

@_jit
def exp_f32(x: np.float32) -> np.float32:
    """exp(x); float32."""
    return _exp(np.float32(x), _F32)


@_jit
def exp_f64(x: np.float64) -> np.float64:
    """exp(x); float64."""
    return _exp(np.float64(x), _F64)


@_jit
def _exp_nonpositive_f32(x: np.float32) -> np.float32:
    """exp(x) for x <= 0 or NaN; float32."""
    return _exp_nonpositive(np.float32(x), _F32)


@_jit
def _exp_nonpositive_f64(x: np.float64) -> np.float64:
    """exp(x) for x <= 0 or NaN; float64."""
    return _exp_nonpositive(np.float64(x), _F64)


@_jit
def expm1_f32(x: np.float32) -> np.float32:
    """exp(x) - 1, accurate near 0; float32."""
    return _expm1(np.float32(x), _F32_FINE)


@_jit
def expm1_f64(x: np.float64) -> np.float64:
    """exp(x) - 1, accurate near 0; float64."""
    return _expm1(np.float64(x), _F64)


@_jit
def log_f32(x: np.float32) -> np.float32:
    """Natural log; float32."""
    return _log(np.float32(x), _F32)


@_jit
def log_f64(x: np.float64) -> np.float64:
    """Natural log; float64."""
    return _log(np.float64(x), _F64)


@_jit
def log1p_f32(x: np.float32) -> np.float32:
    """log(1 + x), accurate near 0; float32."""
    return _log1p(np.float32(x), _F32)


@_jit
def log1p_f64(x: np.float64) -> np.float64:
    """log(1 + x), accurate near 0; float64."""
    return _log1p(np.float64(x), _F64)


@_jit
def _sin_f32(x, r_max):
    return _trig_f32(np.float32(x), _F32.zero, r_max)


@_jit
def sin_f32(x: np.float32) -> np.float32:
    """sin(x); float32, ulp bound for |x| <= TRIG_MAX['float32'], in [-1, 1] beyond."""
    return _sin_f32(x, _R_MAX_F32)


@_jit
def sin_f64(x: np.float64) -> np.float64:
    """sin(x); float64, ulp bound for |x| <= TRIG_MAX['float64'], in [-1, 1] beyond."""
    x = np.float64(x)
    return x if abs(x) < _SIN_TINY_F64 else _trig_f64(x, 0.0)


@_jit
def cos_f32(x: np.float32) -> np.float32:
    """cos(x); float32, ulp bound for |x| <= TRIG_MAX['float32'], in [-1, 1] beyond."""
    return _trig_f32(np.float32(x), _F32.one, _R_MAX_F32)


@_jit
def cos_f64(x: np.float64) -> np.float64:
    """cos(x); float64, ulp bound for |x| <= TRIG_MAX['float64'], in [-1, 1] beyond."""
    return _trig_f64(np.float64(x), 1.0)


@_jit
def _sin_guarded_f32(x: np.float32) -> np.float32:
    """sin_f32 without the clamps that bound it past TRIG_MAX: for kernels that guard that range."""
    return _sin_f32(x, _F32.inf)


@_jit
def _cos_guarded_f32(x: np.float32) -> np.float32:
    """cos_f32 without the clamps that bound it past TRIG_MAX: for kernels that guard that range."""
    return _trig_f32(np.float32(x), _F32.one, _F32.inf)


@_jit
def tanh_f32(x: np.float32) -> np.float32:
    """tanh(x); float32: -m / (m + 2) with m = expm1(-2|x|), one formula for the whole range.

    For loops the vectorizer widens; code that stays scalar gets ``VARIANTS[("tanh",
    "float32", "scalar")]``, whose branch skips the division for small |x|."""
    x = np.float32(x)
    # t = -2|x| <= 0, clamped at -87 so that p = 2**n stays normal (m == -1 long before):
    # then m = 2**n (1 + e) - 1 = fma(e, p, p - 1) with p - 1 exact, no expm1 special cases.
    # expm1 keeps full relative accuracy near 0, so there is no separate small-|x| polynomial
    # and no select between two branches (but it needs the quartic polynomial: 13 ulp with
    # the cubic, 2.5 with the quartic). NaN stays NaN through the clamp.
    na = -abs(x)  # one instruction: sets the sign bit
    t = na + na  # -2|x|
    tn, e = _exp_core(_F32.tanh_lo if t < _F32.tanh_lo else t, _F32.zero, _F32_FINE)
    p = _pow2_of(tn, _F32.zero)
    m = _fma(e, p, p - _F32.one)
    return math.copysign(m / (m + _F32.two), x)  # copysign drops the sign of m / (m + 2) <= 0


@_jit
def _tanh_scalar_f32(x: np.float32) -> np.float32:
    """tanh(x); float32: cephes polynomial below 0.625, (1 - u) / (1 + u) with u = exp(-2|x|) above.

    Vectorized, both sides are computed and selected (tanh_f32 is cheaper there), but in scalar
    code LLVM branches around the division and the polynomial is the common case: W3's
    16-lane chain, which stays scalar, ran 2.2x slower with tanh_f32."""
    x = np.float32(x)
    a = abs(x)
    z = a * a
    # u = exp(t), t = -2|x| <= 0, clamped as in tanh_f32, hence one 2**n factor.
    # NaN stays NaN through the clamp and u, and takes the large branch.
    t = _F32.neg_two * a
    tn, e = _exp_core(_F32.tanh_lo if t < _F32.tanh_lo else t, _F32.zero, _F32)
    u = (_F32.one + e) * _pow2_of(tn, _F32.zero)
    y = (a + a * z * _horner(z, _TANH_F32)) if a < _TANH_SPLIT_F32 else (_F32.one - u) / (_F32.one + u)
    return math.copysign(y, x)


@_jit
def tanh_f64(x: np.float64) -> np.float64:
    """tanh(x); float64."""
    # With u = exp(-2|x|) = 2**n * (1 + e): tanh|x| = (1 - u) / (1 + u) above |x| = 1/2, where u
    # keeps full relative accuracy, and -t / (t + 2) with t = expm1(-2|x|) below, where 1 - u
    # would cancel.  One reduction serves both; one division.
    x = np.float64(x)
    a = abs(x)
    n, e = _exp_reduce(-2.0 * a, 0.0, _F64.expm1_lo, _F64)
    u = _ldexp(1.0 + e, n, _F64)
    t = _ldexp(e + (1.0 - _pow2(-n)), n, _F64)
    big = a > 0.5
    y = math.copysign(((1.0 - u) if big else -t) / ((1.0 + u) if big else (t + 2.0)), x)
    return y if x == x else x


@_jit
def sigmoid_f32(x: np.float32) -> np.float32:
    """1 / (1 + exp(-x)); float32."""
    return _sigmoid(np.float32(x), _F32_FINE)


@_jit
def sigmoid_f64(x: np.float64) -> np.float64:
    """1 / (1 + exp(-x)); float64."""
    return _sigmoid(np.float64(x), _F64)


@_jit
def erf_f32(x: np.float32) -> np.float32:
    """Error function; float32 (polynomial below 1.25, 1 - exp(polynomial) above)."""
    x = np.float32(x)
    a = abs(x)
    ac = a if a < _ERF_MAX_F32 else _ERF_MAX_F32
    small = a + a * _horner(a * a, _ERF_P_F32)
    large = _F32.one - _exp(_horner((ac - _ERF_MID_F32) * _ERF_SCALE_F32, _ERF_Q_F32), _F32)
    y = math.copysign(small if a < _ERF_SPLIT_F32 else large, x)
    return y if x == x else x


@_jit
def erf_f64(x: np.float64) -> np.float64:
    """Error function; float64 (fdlibm's four intervals all evaluated, then selected)."""
    x = np.float64(x)
    a = abs(x)
    ac = a if a < 6.0 else 6.0  # erf(6) rounds to 1
    z = a * a
    s = a - 1.0
    t = 1.0 / (ac * ac)
    small = a < 0.84375
    mid = a < 1.25
    near = ac < 1 / 0.35
    n_a, d_a = _horner(z, _ERF_PP), _horner(z, _ERF_QQ)
    n_b, d_b = _horner(s, _ERF_PA), _horner(s, _ERF_QA)
    n_c, d_c = _horner(t, _ERF_RA), _horner(t, _ERF_SA)
    n_d, d_d = _horner(t, _ERF_RB), _horner(t, _ERF_SB)
    q = ((n_a if small else (n_b if mid else (n_c if near else n_d)))
         / (d_a if small else (d_b if mid else (d_c if near else d_d))))  # one shared division
    # erfc(a) = exp(-a^2 - 0.5625 + R/S) / a, with -a^2 split exactly into -p - (a^2 - p)
    p = ac * ac
    tail = _exp((-p - 0.5625) + (q - _fma(ac, ac, -p)), _F64) * (ac * t)
    y = (a + a * q) if small else ((_ERX + q) if mid else (1.0 - tail))
    y = math.copysign(y, x)
    return y if x == x else x


@_jit
def pow_f32(x: np.float32, y: np.float32) -> np.float32:
    """x ** y with NumPy's special cases; float32, as exp(y * log|x|) in float64."""
    xd, yd = np.float64(x), np.float64(y)
    m, e = _log_split(abs(xd))  # float32 values are normal in float64; 0, inf, nan fixed below
    n, p = _exp_reduce(yd * _log_reduced(m, e, 0.0, _F64_LOW), 0.0, _F64_LOW.exp_lo, _F64_LOW)
    r = np.float32((1.0 + p) * _pow2(n))  # exp clamped to float32's range: one scaling step
    return _pow_special(np.float32(x), np.float32(y), r, _F32)


@_jit
def pow_f64(x: np.float64, y: np.float64) -> np.float64:
    """x ** y with NumPy's special cases; float64, double-double log, exp of a double-double."""
    x, y = np.float64(x), np.float64(y)
    lh, ll = _log_dd(abs(x))
    th = y * lh
    tl = _fma(y, lh, -th) + y * ll
    n, e = _exp_reduce(th, tl, _F64.exp_lo, _F64)
    return _pow_special(x, y, _ldexp(1.0 + e, n, _F64), _F64)


NAMES = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sigmoid", "erf", "pow")
FUNCS: dict[tuple[str, str], Callable] = {
    (name, dtype): globals()[f"{name}_{suffix}"]
    for name in NAMES for dtype, suffix in (("float32", "f32"), ("float64", "f64"))
}


# Variants the code generator picks by context, where one form does not suit every use:
#   "scalar": for loops that stay scalar (short trip counts), where LLVM branches around the
#             expensive side instead of computing both and selecting;
#   "guarded": valid only for |x| <= TRIG_MAX, with no clamps beyond, for kernels that count
#              larger arguments and rerun them exactly (kir_fastmath.trig_guard);
#   "nonpositive": for arguments the compiler has proved <= 0 (or NaN), such as exp(-x*x) and
#                  softmax's exp(x - max x): one scaling step instead of two.
# A (name, dtype) without an entry of some kind uses FUNCS.
VARIANTS: dict[tuple[str, str, str], Callable] = {
    ("tanh", "float32", "scalar"): _tanh_scalar_f32,
    ("sin", "float32", "guarded"): _sin_guarded_f32,
    ("cos", "float32", "guarded"): _cos_guarded_f32,
    ("exp", "float32", "nonpositive"): _exp_nonpositive_f32,
    ("exp", "float64", "nonpositive"): _exp_nonpositive_f64,
}


# The functions (their scalar variants where those differ) as ordinary, not force-inlined,
# calls, for loop bodies with so many transcendentals that inlining every copy makes LLVM's
# compile time and memory explode (W3: 200 tanh in one body). A call keeps the loop scalar,
# which such bodies are anyway (a long serial chain, or too many live values to vectorize well).
_jit_call = njit(fastmath={"contract"}, error_model="numpy", cache=True)
CALLS: dict[tuple[str, str], Callable] = {
    k: _jit_call(VARIANTS.get((*k, "scalar"), f).py_func) for k, f in FUNCS.items()}


def arity(name: str) -> int:
    """Number of arguments of function ``name``."""
    return 2 if name == "pow" else 1


# --------------------------------------------------------------------------- accuracy measurement

_KERNELS: dict[tuple, Callable] = {}


def function(name: str, dtype: str, kind: str | None = None) -> Callable:
    """FUNCS[(name, dtype)], or its variant of ``kind`` (VARIANTS) where there is one."""
    return VARIANTS.get((name, dtype, kind), FUNCS[(name, dtype)])


def _kernel(name: str, dtype: str, kind: str | None) -> Callable:
    """Vectorized loop over arrays calling function(name, dtype, kind), compiled once per process."""
    if (name, dtype, kind) not in _KERNELS:
        fn = function(name, dtype, kind)
        if arity(name) == 1:
            def loop(x, out):
                for i in range(x.shape[0]):
                    out[i] = fn(x[i])
        else:
            def loop(x, y, out):
                for i in range(x.shape[0]):
                    out[i] = fn(x[i], y[i])
        # fastmath=True on purpose: the functions must not be affected by the caller's flags.
        _KERNELS[(name, dtype, kind)] = njit(fastmath=True)(loop)
    return _KERNELS[(name, dtype, kind)]


def evaluate(name: str, dtype: str, *args: np.ndarray, kind: str | None = None) -> np.ndarray:
    """Apply function(name, dtype, kind) elementwise to 1-d arrays (cast to dtype) with a Numba loop."""
    arrays = [np.ascontiguousarray(a, dtype=dtype).ravel() for a in args]
    out = np.empty_like(arrays[0])
    _kernel(name, dtype, kind)(*arrays, out)
    return out


def reference(name: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    """Reference values in higher precision: float64 for float32, long double for float64.

    ``erf`` has no long double version in NumPy; float64 uses libm's erf (< 1 ulp) instead.
    """
    wide = np.float64 if dtype == "float32" else np.longdouble
    x = np.asarray(args[0], dtype=dtype).astype(wide)
    with np.errstate(all="ignore"):
        if name == "pow":
            return np.power(x, np.asarray(args[1], dtype=dtype).astype(wide))
        if name == "sigmoid":
            e = np.exp(-np.abs(x))
            return np.where(x >= 0, 1 / (1 + e), e / (1 + e))
        if name == "erf":
            return np.array([math.erf(v) for v in x.astype(np.float64)], dtype=wide)
        return getattr(np, name)(x)


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype: str) -> np.ndarray:
    """|got - ref| in units of the last place of ``dtype`` at ref (subnormal spacing below).

    0 where both are the same NaN / infinity / overflow, inf where NaN-ness or infinities differ.
    """
    fi = np.finfo(dtype)
    got = np.asarray(got).astype(ref.dtype)
    with np.errstate(over="ignore"):
        rounded = ref.astype(dtype).astype(ref.dtype)  # inf where the correctly rounded value is
    nan_got, nan_ref = np.isnan(got), np.isnan(ref)
    inf = np.isinf(got) | np.isinf(rounded)
    exponent = np.frexp(np.where(ref == 0, fi.smallest_normal, ref))[1]
    ulp = np.ldexp(np.ones_like(ref), np.maximum(exponent - (fi.nmant + 1), int(fi.minexp) - fi.nmant))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - ref) / ulp
    err = np.where(inf, np.where(got == rounded, 0.0, np.inf), err)
    return np.where(nan_got | nan_ref, np.where(nan_got == nan_ref, 0.0, np.inf), err).astype(np.float64)


def special_values(dtype: str) -> np.ndarray:
    """Zeros, infinities, NaN, subnormal / normal limits and a few exact points, both signs."""
    fi = np.finfo(dtype)
    v = [0.0, math.inf, math.nan, fi.smallest_subnormal, fi.smallest_normal - fi.smallest_subnormal,
         fi.smallest_normal, fi.tiny * 3, fi.eps, 0.5, 1.0, 2.0, 3.0, 10.0, fi.max]
    return np.array(v + [-t for t in v], dtype=dtype)


# Interval where each function is neither constant nor overflowed (uniformly sampled).
_ACTIVE = {
    "float32": dict(exp=110.0, expm1=110.0, log=4.0, log1p=2.0, tanh=12.0, sigmoid=110.0, erf=7.0),
    "float64": dict(exp=750.0, expm1=750.0, log=4.0, log1p=2.0, tanh=22.0, sigmoid=750.0, erf=7.0),
}


def sample(name: str, dtype: str, n: int = 100_000, seed: int = 0,
           kind: str | None = None) -> tuple[np.ndarray, ...]:
    """Test points for ``name``: half log-uniform magnitudes over the whole finite range (both signs),
    half uniform over the active interval, plus special values; sin/cos stay within TRIG_MAX, and
    the "nonpositive" variants get the points' negative magnitudes (NaN kept).
    pow gets x log-uniform over the whole range or close to 1, with y spread so that x**y covers
    underflow .. overflow, negative x with integer y, and all pairs of special values.
    """
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    lo, hi = math.log(float(fi.smallest_subnormal)), math.log(float(fi.max))
    if name == "pow":
        near_one = 1 + np.exp(rng.uniform(math.log(float(fi.eps)), 0, n // 2)) * rng.choice([-0.5, 1.0], n // 2)
        x = np.concatenate([np.exp(rng.uniform(lo, hi, n - n // 2)), near_one]).astype(dtype).astype(np.float64)
        limit = 110.0 if dtype == "float32" else 750.0
        with np.errstate(divide="ignore"):
            y = rng.uniform(-limit, limit, n) / np.log(x)  # |x|**y from underflow to overflow
        xi = -np.exp(rng.uniform(-8, 8, n // 4))
        yi = rng.integers(-60, 61, n // 4).astype(np.float64)
        sp = np.concatenate([special_values(dtype), [-0.25, 0.25, 7.5]])
        gx, gy = np.meshgrid(sp, sp)
        xs = np.concatenate([x, xi, gx.ravel()]).astype(dtype)
        ys = np.concatenate([y, yi, gy.ravel()]).astype(dtype)
        return xs, ys
    if name in ("sin", "cos"):
        hi, width = math.log(TRIG_MAX[dtype]), TRIG_MAX[dtype]
        special = special_values(dtype)
        special = special[~(np.isfinite(special) & (np.abs(special) > width))]
    else:
        width, special = _ACTIVE[dtype][name], special_values(dtype)
    mags = np.exp(rng.uniform(lo, hi, n // 2)) * rng.choice([-1.0, 1.0], n // 2)
    x = np.concatenate([mags, rng.uniform(-width, width, n - n // 2), special])
    if name == "log1p":
        x = np.concatenate([x, -1.0 + np.exp(rng.uniform(lo, 0.0, n // 10)), [-1.0]])
    if kind == "nonpositive":
        x = -np.abs(x)
    return (x.astype(dtype),)


def measure_ulp(name: str, dtype: str, n: int = 100_000, seed: int = 0, kind: str | None = None) -> float:
    """Max ulp error of function(name, dtype, kind) over ``sample(name, dtype, n, seed, kind)``.

    inf means a NaN or infinity appeared where the reference has none (or vice versa).
    """
    args = sample(name, dtype, n, seed, kind)
    got = evaluate(name, dtype, *args, kind=kind)
    return float(np.max(ulp_error(got, reference(name, dtype, *args), dtype)))
