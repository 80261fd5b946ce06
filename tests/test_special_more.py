"""The rest of torch.special against PyTorch: the Bessel functions (J0, J1, Y0, Y1, I0, I1,
K0, K1, scaled K0/K1, spherical j0), Airy Ai and the orthogonal polynomials (Chebyshev
T/U/V/W and their shifted forms, Hermite H/He, Laguerre, Legendre), none differentiable
(no grad_fn), and the incomplete gamma functions gammainc/gammaincc (torch.igamma,
torch.igammac, Tensor.igamma(_), Tensor.igammac(_)), differentiable in x only. Values over
grids with the edge cases (0, negative, large, inf, NaN; for the polynomials negative,
non-integer, NaN and infinite degrees, |x| >= 1, broadcasting and the result dtype) in
float32 and float64, gradients in float64, and one compiled function."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import fusegrad as fg
from helpers import check_breaks_at
import fusegrad.special as fs

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

INF, NAN = math.inf, math.nan
# the real line with the points where the Cephes algorithms change branch (2.09, 5, 8,
# 8.3203353 for Airy, 103.892 where Ai underflows) and every 0.5 up to 40
LINE = np.concatenate([[0.0, -0.0, 1e-300, 1e-10, -1e-10, 0.5, 1.0, 2.09, -2.09, 5.0, -5.0, 8.0, 8.33, -8.33, 25.0,
                        30.0, 100.0, 103.9, 500.0, 710.0, 1e10, -1e10, 1e300, -1e300, INF, -INF, NAN],
                       np.arange(-40.0, 40.25, 0.5)])
# float32: torch's float32 kernels lose the phase of the oscillating functions at large
# |x| (J0(1e10) is off in the first digit), so the grid stops at |x| = 40 there, but
# for the edges and the decaying functions' range
LINE32 = np.concatenate([[0.0, -0.0, 1e-30, -1e-30, 2.09, -2.09, 8.33, 100.0, 103.9, INF, -INF, NAN],
                         np.arange(-40.0, 40.25, 0.5)])
UNARY = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
         "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
         "spherical_bessel_j0", "airy_ai"]
POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
# x around and beyond [-1, 1] (and [0, 1], the shifted ones' interval), the values where
# the kernels return exact results (+-1, 0), just inside them, and the overflowing ones
PX = np.array([-2.5, -1.0, -0.999, -0.5, -1e-20, 0.0, 1e-20, 0.3, 0.5, 0.75, 0.9999, 1 - 1e-9, 1.0, 1.5, 3.0,
               1e30, -1e30, INF, -INF, NAN])
# degrees: negative, non-integer (truncated toward zero), around the kernels' switches to
# the trigonometric forms (4, 6, 8), beyond float32's overflow and Hermite's limits (128,
# 512), NaN, infinite and beyond int64 (all three a negative degree: 0)
PN = np.array([-3.0, -1.0, -0.5, 0.0, 0.7, 1.0, 2.0, 2.9, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 12.0, 20.0, 60.0, 130.0,
               600.0, NAN, INF, -INF, 1e30])
# these kernels return an uninitialized value for x = NaN and degree >= 2 (their loop
# stops before its first step); fusegrad gives NaN there
UNINITIALIZED_AT_NAN = set(POLYNOMIALS) - {"chebyshev_polynomial_t", "hermite_polynomial_h"}


def _check(ours, theirs, rtol, atol, what, skip=None):
    """Same dtype, NaN pattern and infinities, and close elsewhere (``skip``: a mask of
    elements left out)."""
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], (what, ours.dtype, theirs.dtype)
    ours, theirs = np.asarray(ours.numpy(), np.float64), np.asarray(theirs.numpy(), np.float64)
    if skip is not None:
        ours, theirs = ours[~skip], theirs[~skip]
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=f"{what}: NaN pattern")
    inf = np.isinf(theirs)
    np.testing.assert_array_equal(ours[inf], theirs[inf], err_msg=f"{what}: infinities")
    np.testing.assert_allclose(ours[~inf], theirs[~inf], rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


# ---------------------------------------------------------------- Bessel and Airy functions
@pytest.mark.parametrize("name", UNARY)
def test_unary_values_match_torch(name):
    f, tf = getattr(fs, name), getattr(torch.special, name)
    # float64: PyTorch's J0, J1, Y0, Y1 and Ai are up to ~4e-7 off (SciPy's values) between
    # |x| = 2 and 8
    atol = 1e-6 if name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "airy_ai") else 1e-12
    _check(f(fg.tensor(LINE)), tf(torch.tensor(LINE)), 1e-6, atol, f"{name} float64")
    _check(f(fg.tensor(LINE32, dtype=fg.float32)), tf(torch.tensor(LINE32, dtype=torch.float32)), 1e-4, 1e-5,
           f"{name} float32")
    ints = np.arange(-6, 7)
    _check(f(fg.tensor(ints)), tf(torch.tensor(ints)), 1e-5, 1e-6, f"{name} int64")
    _check(f(fg.tensor(3.5, dtype=fg.float64)), tf(torch.tensor(3.5, dtype=torch.float64)), 1e-6, 1e-12,
           f"{name} 0-d")


def test_airy_ai_far_left_follows_its_asymptotic_form():
    """Below -1e6 (where SciPy has no value) Ai is the asymptotic expansion's leading term,
    as PyTorch computes it (the phase rounds alike in float64)."""
    x = -np.logspace(6.5, 12, 12)
    _check(fs.airy_ai(fg.tensor(x)), torch.special.airy_ai(torch.tensor(x)), 1e-6, 1e-9, "airy_ai far left")


@pytest.mark.parametrize("name", UNARY + POLYNOMIALS)
def test_no_grad_fn(name):
    """PyTorch defines no derivative: the result of an input that requires grad has none."""
    x = fg.tensor([0.3, 1.5], requires_grad=True)
    args = (x,) if name in UNARY else (x, fg.tensor(3.0, requires_grad=True))
    r = getattr(fs, name)(*args)
    assert r.grad_fn is None and not r.requires_grad
    tx = torch.tensor([0.3, 1.5], requires_grad=True)
    assert getattr(torch.special, name)(*((tx,) if name in UNARY else (tx, 3))).grad_fn is None


@pytest.mark.parametrize("name", ["bessel_j0", "airy_ai", "scaled_modified_bessel_k1", "hermite_polynomial_h",
                                  "shifted_chebyshev_polynomial_w"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_dtypes_are_not_implemented(name, dtype):
    """PyTorch has float32 and float64 kernels only."""
    def call(lib):
        t = lib.ones(2, dtype=getattr(lib, dtype))
        return getattr(lib.special, name)(*((t,) if name in UNARY else (t, 2)))
    with pytest.raises(NotImplementedError) as want:
        call(torch)
    with pytest.raises(NotImplementedError, match=f"^{re.escape(str(want.value))}$"):
        call(fg)


# ---------------------------------------------------------------- orthogonal polynomials
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_values_match_torch(name):
    f, tf = getattr(fs, name), getattr(torch.special, name)
    for dt, tol in ((np.float64, 1e-9), (np.float32, 1e-4)):
        x, n = PX.astype(dt)[:, None], PN.astype(dt)[None, :]
        skip = np.zeros((len(PX), len(PN)), bool)
        if name in UNINITIALIZED_AT_NAN:
            skip |= np.isnan(x) & (n >= 2)
        if dt is np.float32:
            # degrees 130 and 600 with |x| < 1: the trigonometric forms, in float32 (glibc's
            # acosf and NumPy's differ by an ulp, times the degree)
            skip |= (n > 100) & (np.abs(x) < 1)
        _check(f(fg.tensor(x), fg.tensor(n)), tf(torch.tensor(x), torch.tensor(n)), tol, tol, f"{name} {dt.__name__}",
               skip)


def test_polynomials_at_nan_give_nan():
    """Where PyTorch's kernels return an uninitialized value (x = NaN, degree >= 2)."""
    for name in POLYNOMIALS:
        r = getattr(fs, name)(fg.tensor([NAN] * 3), fg.tensor([1.0, 2.0, 7.0])).numpy()
        assert np.isnan(r).all(), name


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "hermite_polynomial_he",
                                  "laguerre_polynomial_l", "legendre_polynomial_p"])
def test_polynomial_operands_dtypes_and_broadcasting(name):
    """(x, n): tensors of any dtypes (integers become the default float dtype), a number x
    with a tensor n, a tensor x with a number n, and broadcasting."""
    def cases(lib):
        xf = lib.tensor([[-0.7], [0.2], [1.0], [2.5]])
        return [(xf, lib.tensor([0, 1, 3, 9])), (lib.tensor([-2, 0, 1, 3]), lib.tensor(3)),
                (lib.tensor([-2, 0, 1, 3]), lib.tensor(2.0, dtype=lib.float64)),
                (xf.double(), lib.tensor([2.0, 4.0], dtype=lib.float32)), (xf, lib.tensor([2, 5], dtype=lib.int32)),
                (0.3, lib.tensor([1, 4, 11])), (-1.5, lib.tensor([2.0, 3.0], dtype=lib.float64)), (xf, 3),
                (xf, 2.7), (xf, True), (lib.tensor([1, 2]), 4)]
    f, tf = getattr(fs, name), getattr(torch.special, name)
    for i, (ours, theirs) in enumerate(zip(cases(fg), cases(torch))):
        got, want = f(*ours), tf(*theirs)
        assert tuple(got.shape) == tuple(want.shape), (i, got.shape, want.shape)
        _check(got, want, 1e-5, 1e-5, f"{name} case {i}")


def test_polynomial_out_and_numbers_only():
    out = fg.empty(3)
    r = fs.legendre_polynomial_p(fg.tensor([0.1, 0.5, 0.9]), 4, out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), torch.special.legendre_polynomial_p(torch.tensor([0.1, 0.5, 0.9]), 4),
                               rtol=1e-6)
    with pytest.raises(TypeError):
        fs.legendre_polynomial_p(0.5, 3)


# ---------------------------------------------------------------- incomplete gamma functions
# a and x: 0, tiny, around the algorithms' switches (a ~ x, 20, 200, x 0.5, 1.1), large,
# negative (NaN), inf and NaN
GA = np.array([0.0, 1e-10, 0.5, 1.0, 2.5, 10.0, 25.0, 150.0, 250.0, 1e4, -1.0, INF, NAN])
GX = np.array([0.0, 1e-10, 0.3, 0.5, 0.9, 1.0, 1.1, 2.0, 9.0, 24.0, 160.0, 260.0, 1e4, -0.5, INF, NAN])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gammainc_values_match_torch(dtype):
    a, x = GA.astype(dtype)[:, None], GX.astype(dtype)[None, :]
    # (PyTorch's uniform asymptotic series, for a ~ x from a = 20, is ~1e-9 off SciPy's)
    rtol = 1e-5 if dtype == "float32" else 1e-8
    for ours, theirs, what in [(fs.gammainc, torch.special.gammainc, "gammainc"),
                               (fs.gammaincc, torch.special.gammaincc, "gammaincc"),
                               (fg.igamma, torch.igamma, "igamma"), (fg.igammac, torch.igammac, "igammac")]:
        # (an absolute 1e-15: PyTorch's Q(1e-10, x), ~1e-11, is 5e-18 off SciPy's)
        _check(ours(fg.tensor(a), fg.tensor(x)), theirs(torch.tensor(a), torch.tensor(x)), rtol, 1e-15 if
               dtype == "float64" else 1e-7, f"{what} {dtype}")
    ta, tx = torch.tensor(a).expand(len(GA), len(GX)).clone(), torch.tensor(x)
    fa = fg.tensor(a).expand(len(GA), len(GX)).clone()
    _check(fa.igamma(fg.tensor(x)), ta.igamma(tx), rtol, 1e-7, "Tensor.igamma")
    _check(fa.igammac(fg.tensor(x)), ta.igammac(tx), rtol, 1e-7, "Tensor.igammac")
    fa.igamma_(fg.tensor(x))
    ta.igamma_(tx)
    _check(fa, ta, rtol, 1e-7, "Tensor.igamma_")
    fa.igammac_(fg.tensor(0.5))
    ta.igammac_(torch.tensor(0.5))
    _check(fa, ta, rtol, 1e-7, "Tensor.igammac_")


def test_gammainc_dtypes_and_errors():
    def cases(lib):
        return [(lib.tensor([1, 2]), lib.tensor([1.5])), (lib.tensor([1.5]), lib.tensor(2.0, dtype=lib.float64)),
                (lib.tensor([1.5, 3.0], dtype=lib.float64), lib.tensor([[0.5], [2.0]]))]
    for i, (ours, theirs) in enumerate(zip(cases(fg), cases(torch))):
        _check(fs.gammainc(*ours), torch.special.gammainc(*theirs), 1e-6, 1e-7, f"case {i}")
    with pytest.raises(NotImplementedError, match="\"igamma_cpu\" not implemented for 'Long'"):
        fs.gammainc(fg.tensor([1, 2]), fg.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        fg.tensor([1, 2]).igamma_(fg.tensor(3.0))
    out = fg.empty(2, dtype=fg.float64)
    assert fg.igammac(fg.tensor([1.0, 2.0], dtype=fg.float64), fg.tensor([0.5, 0.5], dtype=fg.float64),
                      out=out) is out
    np.testing.assert_allclose(out.numpy(), torch.igammac(torch.tensor([1.0, 2.0]).double(),
                                                          torch.tensor([0.5, 0.5]).double()).numpy(), rtol=1e-12)


@pytest.mark.parametrize("fn", ["gammainc", "gammaincc"])
def test_gammainc_gradient_in_x_matches_torch(fn):
    """d/dx = +-exp((a - 1) log(x) - x - lgamma(a)), broadcast a (3, 1) against x (4,),
    with x = 0 (0 for a > 1, inf for a < 1) and the backward node's name."""
    a0 = np.array([[0.5], [1.5], [7.0]])
    x0 = np.array([0.0, 0.4, 2.0, 9.0])
    got = []
    for lib, f in ((fg, getattr(fs, fn)), (torch, getattr(torch.special, fn))):
        a, x = lib.tensor(a0), lib.tensor(x0, requires_grad=True)
        r = f(a, x)
        (r * lib.tensor([1.0, 2.0, -1.0, 0.5]).double()).sum().backward()
        got.append((r, x.grad))
    assert type(got[0][0].grad_fn).__name__ == type(got[1][0].grad_fn).__name__
    np.testing.assert_allclose(got[0][0].detach().numpy(), got[1][0].detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(got[0][1].numpy(), got[1][1].numpy(), rtol=1e-10)


@pytest.mark.parametrize("fn,what", [("gammainc", "igamma"), ("gammaincc", "igammac")])
def test_gammainc_gradient_in_a_is_not_implemented(fn, what):
    a = fg.tensor([1.5, 2.0], requires_grad=True)
    r = getattr(fs, fn)(a, fg.tensor([1.0, 3.0]))
    with pytest.raises(NotImplementedError, match=f"^the derivative for '{what}: input' is not implemented.$"):
        r.sum().backward()


# ---------------------------------------------------------------- compile
def test_compiled_call_gives_the_eager_result():
    """The primitives have no kernel lowering: the compiled graph breaks at them and runs
    them eagerly, with the eager values (and gammainc's gradient)."""
    x = np.linspace(0.1, 3.0, 7)

    def f(a):
        return (fs.bessel_j0(a) * a + fs.chebyshev_polynomial_t(a * 0.3, 5) + fs.modified_bessel_k1(a)
                + fs.gammainc(fg.tensor(2.5, dtype=fg.float64), a * 2.0))

    check_breaks_at(f, x, "bessel_j0")
