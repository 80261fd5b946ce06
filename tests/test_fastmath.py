"""Accuracy, special values and vectorization of fusegrad.codegen.fastmath.

Every function is compiled once, inside one ``fastmath=True`` loop per (name, dtype) that
``fm.evaluate`` caches, so the checks also prove the caller's fast-math flags do not leak in.
"""
import math
import platform
import re

import numba
import numpy as np
import pytest

from fusegrad.codegen import fastmath as fm

DTYPES = ("float32", "float64")
CASES = [(name, dtype) for name in fm.NAMES for dtype in DTYPES]
UNARY = [(name, dtype) for name, dtype in CASES if fm.arity(name) == 1]
MAX_ULP = 4.0  # measured maxima (docs/fastmath.md) are <= 2.5


def _worst(err, args, got, ref):
    i = int(np.argmax(err))
    return f"{err[i]:.3g} ulp at {tuple(a[i] for a in args)}: got {got[i]!r}, want {ref[i]!r}"


@pytest.mark.parametrize("name,dtype", CASES)
def test_ulp_error_over_whole_range(name, dtype):
    args = fm.sample(name, dtype, n=4000, seed=1)
    got = fm.evaluate(name, dtype, *args)
    ref = fm.reference(name, dtype, *args)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    err = fm.ulp_error(got, ref, dtype)
    assert err.max() <= MAX_ULP, _worst(err, args, got, ref)


@pytest.mark.parametrize("name,dtype,kind", sorted(fm.VARIANTS))
def test_variant_ulp_error_and_special_values(name, dtype, kind):
    """Each variant within the ulp bound on its domain (sample(kind=...)), and bit-exact on the
    special values there: NaN, infinities and signed zeros as NumPy has them."""
    args = fm.sample(name, dtype, n=4000, seed=2, kind=kind)
    got = fm.evaluate(name, dtype, *args, kind=kind)
    ref = fm.reference(name, dtype, *args)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    err = fm.ulp_error(got, ref, dtype)
    assert err.max() <= MAX_ULP, _worst(err, args, got, ref)
    x = fm.special_values(dtype)
    x = x[~(np.isfinite(x) & (np.abs(x) > fm.TRIG_MAX[dtype]))] if name in ("sin", "cos") else x
    x = x[~(x > 0)] if kind == "nonpositive" else x
    got = fm.evaluate(name, dtype, x, kind=kind)
    want = fm.reference(name, dtype, x).astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonpositive_exp_rounds_subnormal_results_once(dtype):
    """exp's "nonpositive" variant scales once into the subnormals: every result there within
    the bound, down to the last one before 0 (and 0 after it)."""
    fi = np.finfo(dtype)
    lo = math.log(float(fi.smallest_subnormal))
    x = np.linspace(math.log(float(fi.smallest_normal)), lo - 1.0, 5001).astype(dtype)
    got = fm.evaluate("exp", dtype, x, kind="nonpositive")
    ref = fm.reference("exp", dtype, x)
    assert fm.ulp_error(got, ref, dtype).max() <= MAX_ULP
    assert np.all(got[x > lo + 0.1] > 0) and np.all(got[x < lo - 0.9] == 0)
    # slightly positive arguments (rounding of a value proved <= 0) are still exact enough
    up = np.array([1e-6, 0.3, 5.0, 40.0], dtype=dtype)
    got = fm.evaluate("exp", dtype, up, kind="nonpositive")
    assert fm.ulp_error(got, fm.reference("exp", dtype, up), dtype).max() <= MAX_ULP


def test_calls_are_the_scalar_variants_outlined():
    """CALLS (outlined, for scalar loop bodies) use the "scalar" variant where there is one."""
    for key, call in fm.CALLS.items():
        want = fm.VARIANTS.get((*key, "scalar"), fm.FUNCS[key])
        assert call.py_func is want.py_func, key
    assert ("tanh", "float32", "scalar") in fm.VARIANTS


@pytest.mark.parametrize("name,dtype", CASES)
def test_returns_its_own_float_type(name, dtype):
    fm.evaluate(name, dtype, *fm.sample(name, dtype, n=8))  # compiles the function for dtype
    fn = fm.FUNCS[(name, dtype)]
    assert {str(fn.overloads[sig].signature.return_type) for sig in fn.signatures} == {dtype}


@pytest.mark.parametrize("name,dtype", UNARY)
def test_special_values_match_numpy_exactly(name, dtype):
    x = fm.special_values(dtype)
    if name in ("sin", "cos"):
        x = x[~(np.isfinite(x) & (np.abs(x) > fm.TRIG_MAX[dtype]))]
    got = fm.evaluate(name, dtype, x)
    want = fm.reference(name, dtype, x).astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(want) | (want == 0)  # infinities and zeros must match, sign included
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))


@pytest.mark.parametrize("name,x,want", [
    ("exp", -math.inf, 0.0), ("exp", math.inf, math.inf), ("exp", -1000.0, 0.0),
    ("log", 0.0, -math.inf), ("log", -0.0, -math.inf), ("log", -1.0, math.nan), ("log", math.inf, math.inf),
    ("log1p", -1.0, -math.inf), ("log1p", -2.0, math.nan), ("log1p", -0.0, -0.0),
    ("expm1", -0.0, -0.0), ("expm1", -math.inf, -1.0), ("expm1", math.inf, math.inf),
    ("sin", -0.0, -0.0), ("sin", math.inf, math.nan), ("cos", -math.inf, math.nan), ("cos", -0.0, 1.0),
    ("tanh", -0.0, -0.0), ("tanh", math.inf, 1.0), ("tanh", -math.inf, -1.0),
    ("sigmoid", -math.inf, 0.0), ("sigmoid", math.inf, 1.0), ("sigmoid", -0.0, 0.5),
    ("erf", -0.0, -0.0), ("erf", math.inf, 1.0), ("erf", -math.inf, -1.0),
])
@pytest.mark.parametrize("dtype", DTYPES)
def test_documented_special_values(name, x, want, dtype):
    for v in (x, math.nan):  # NaN always propagates
        got = fm.evaluate(name, dtype, np.array([v]))[0]
        expected = want if v == x else math.nan
        if math.isnan(expected):
            assert math.isnan(got)
        else:
            assert got == expected and math.copysign(1, got) == math.copysign(1, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_subnormals(dtype):
    fi = np.finfo(dtype)
    tiny = np.array([fi.smallest_subnormal, fi.smallest_normal / 3], dtype=dtype)
    # log of subnormals is exact to the ulp bound; exp underflows gradually through them
    for name, x in (("log", tiny), ("exp", np.log(tiny.astype(np.float64)).astype(dtype) + 0.25),
                    ("sin", tiny), ("expm1", -tiny), ("log1p", -tiny), ("tanh", tiny), ("erf", tiny)):
        got = fm.evaluate(name, dtype, x)
        ref = fm.reference(name, dtype, x)
        assert fm.ulp_error(got, ref, dtype).max() <= MAX_ULP, (name, x, got, ref)
    assert fm.evaluate("exp", dtype, np.array([np.log(float(fi.smallest_subnormal)) + 0.1]))[0] > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_special_value_grid_matches_numpy(dtype):
    sp = np.concatenate([fm.special_values(dtype), [-0.25, 0.25, 7.5]]).astype(dtype)
    x, y = (a.ravel() for a in np.meshgrid(sp, sp))
    got = fm.evaluate("pow", dtype, x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(want) | (want == 0) | (want == 1)
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_trig_beyond_range_is_finite_and_bounded(dtype):
    x = np.array([fm.TRIG_MAX[dtype] * 3, 1e20, -1e30, np.finfo(dtype).max, -np.finfo(dtype).max], dtype=dtype)
    for name in ("sin", "cos"):
        got = fm.evaluate(name, dtype, x)
        assert np.all(np.isfinite(got)) and np.all(np.abs(got) <= 1), (name, got)


def test_measure_ulp_reports_the_max_error():
    assert 0 < fm.measure_ulp("exp", "float32", n=2000) <= MAX_ULP


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="checks x86 assembly")
def test_loop_vectorizes():
    exp_f32 = fm.exp_f32

    @numba.njit(fastmath=True)
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = exp_f32(x[i])

    x = np.linspace(-5, 5, 64, dtype=np.float32)
    out = np.empty_like(x)
    loop(x, out)
    asm = loop.inspect_asm(loop.signatures[0])
    assert re.search(r"\bv?mulps\b", asm), "no packed float32 multiply: the loop did not vectorize"
    assert not re.search(r"call\w*\s+\w*exp", asm)
