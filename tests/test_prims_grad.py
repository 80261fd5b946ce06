"""Every differentiable primitive's VJP and JVP rule against float64 central finite
differences, and its second derivatives (gradgradcheck).

The table below names each primitive once, with the input cases it is checked on:
plain random inputs, broadcasting shapes, non-contiguous views (transposed / strided
NumPy views wrapped without copying), 0-d and empty tensors."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad
from fusegrad.autograd import grad as ag_grad, gradgradcheck
from fusegrad.ir.prims.layout import encode_key
from fusegrad.ir.primitive import PRIMS

EPS = 1e-6


# ---------------------------------------------------------------- input generators
def _r(shape, lo=-1.0, hi=1.0):
    seed = abs(hash((shape, lo, hi))) % 2**32
    return np.asarray(np.random.default_rng(seed).uniform(lo, hi, shape), dtype=np.float64)


def pos(shape):
    return _r(shape, 0.5, 2.0)


def rnd(shape):
    return _r(shape)


def away0(shape):
    """Values with |x| in [0.2, 1]: away from the kinks of relu/abs/sign."""
    x = _r(shape, 0.2, 1.0)
    return x * np.where(_r(shape) > 0, 1.0, -1.0)


def frac(shape):
    """Values k + [0.2, 0.4]: away from the jumps of floor/ceil/round/trunc."""
    return np.floor(_r(shape, -3, 3)) + _r(shape, 0.2, 0.4)


def T(a):
    """A non-contiguous (transposed) view of a fresh array: shape reversed."""
    return np.ascontiguousarray(a).T


def strided(a):
    """A non-contiguous strided view (every other element along axis 0)."""
    big = np.repeat(a, 2, axis=0)
    return big[::2]


def ints(shape, hi, seed=0):
    return np.random.default_rng(seed).integers(0, hi, shape).astype(np.int64)


# Unary cases: (domain, [shapes and layouts])
def unary_cases(dom):
    return [("2x3", lambda: [dom((2, 3))]),
            ("T", lambda: [T(dom((3, 2)))]),
            ("strided", lambda: [strided(dom((2, 3)))]),
            ("0d", lambda: [dom(())]),
            ("empty", lambda: [dom((0, 3))])]


def binary_cases(dx, dy):
    return [("2x3", lambda: [dx((2, 3)), dy((2, 3))]),
            ("bcast", lambda: [dx((2, 1)), dy((1, 3))]),
            ("bcast_rank", lambda: [dx((2, 3)), dy((3,))]),
            ("0d_tensor", lambda: [dx((2, 3)), dy(())]),
            ("0d_both", lambda: [dx(()), dy(())]),
            ("T", lambda: [T(dx((3, 2))), strided(dy((2, 3)))]),
            ("empty", lambda: [dx((0, 3)), dy((1, 3))])]


def _sep_pair(shape_x, shape_y):
    """x, y with |x - y| >= 0.2 everywhere after broadcasting (maximum/minimum)."""
    x = rnd(shape_x)
    y = rnd(shape_y)
    b = np.broadcast_arrays(x, y)
    close = np.abs(b[0] - b[1]) < 0.2
    if close.any():
        y = y + 0.5  # shift then re-check with a deterministic fix
        b = np.broadcast_arrays(x, y)
        assert not (np.abs(b[0] - b[1]) < 1e-3).any()
    return x, y


def minmax_cases():
    out = []
    for nm, sx, sy in [("2x3", (2, 3), (2, 3)), ("bcast", (2, 1), (1, 3)), ("0d", (2, 3), ()),
                       ("empty", (0, 3), (1, 3))]:
        out.append((nm, (lambda sx=sx, sy=sy: list(_sep_pair(sx, sy)))))
    out.append(("T", lambda: [T(np.array([[0.9, -0.5], [0.1, 0.7], [-0.8, 0.3]])), np.full((2, 3), 0.45)]))
    return out


class Case:
    def __init__(self, prim, name, gen, params=None, fn=None, diff=None, eps=EPS, atol=1e-5, rtol=1e-4,
                 gg=True):
        self.prim, self.name, self.gen, self.params = prim, name, gen, params or {}
        self.fn = fn  # fn(*tensors) if the primitive needs non-tensor arguments arranged
        self.diff = diff  # indices of the differentiable inputs (default: the float ones)
        self.eps, self.atol, self.rtol, self.gg = eps, atol, rtol, gg

    @property
    def id(self):
        return f"{self.prim}-{self.name}"

    def call(self, *xs):
        if self.fn is not None:
            return self.fn(*xs)
        return PRIMS[self.prim](*xs, **self.params)


CASES: list[Case] = []


def add(prim, cases, **kw):
    for nm, gen in cases:
        CASES.append(Case(prim, nm, gen, **kw))


for _p, _dom in [("neg", rnd), ("exp", rnd), ("log", pos), ("log1p", pos), ("expm1", rnd), ("sin", rnd),
                 ("cos", rnd), ("tan", rnd), ("tanh", rnd), ("sigmoid", rnd), ("relu", away0), ("abs", away0),
                 ("sign", away0), ("sqrt", pos), ("rsqrt", pos), ("erf", rnd), ("floor", frac), ("ceil", frac),
                 ("round", frac), ("trunc", frac)]:
    add(_p, unary_cases(_dom))

for _p, (_dx, _dy) in [("add", (rnd, rnd)), ("sub", (rnd, rnd)), ("mul", (rnd, rnd)), ("div", (rnd, pos)),
                       ("pow", (pos, rnd)), ("atan2", (away0, pos))]:
    add(_p, binary_cases(_dx, _dy))
add("pow", [("int_exponent_neg_base", lambda: [away0((2, 3)), np.array([[2.0, 3.0, 1.0]])])], diff=(0,))
# the remainders and floor division of floats, where a / b is away from an integer (their jumps)
_NUM = np.array([[0.3, 1.7, -0.6], [2.9, -2.2, 0.45]])
_DEN = np.array([[0.7, -0.8, 0.9]])
for _p in ("mod", "fmod", "floordiv"):
    add(_p, [("bcast", lambda: [_NUM.copy(), _DEN.copy()]), ("0d", lambda: [_NUM.copy(), _DEN[:, 2].reshape(())]),
             ("T", lambda: [T(_NUM.T.copy()), strided(_NUM + 0.1)])])
add("maximum", minmax_cases())
# CTC's negative log-likelihood of log-probabilities (log_softmax first: its gradient is PyTorch's,
# as if log_softmax came next); the lattice: blank 0, labels [1, 2] and [2, 2] (a repeat: no skip)
_CTC = (np.array([[0, 1, 0, 2, 0], [0, 2, 0, 2, 0]]), np.array([4, 3]), np.array([2, 2]))
CASES.append(Case("ctc_nll", "2x4x3", lambda: [rnd((4, 2, 3))], gg=False, fn=lambda x: PRIMS["ctc_nll"](
    x.log_softmax(2), *(fusegrad.tensor(a, device=x.device) for a in _CTC), zero_infinity=False)))
add("minimum", minmax_cases())

# where(cond, x, y): cond is not differentiable
add("where", [
    ("2x3", lambda: [rnd((2, 3)) > 0, rnd((2, 3)), rnd((2, 3))]),
    ("bcast", lambda: [rnd((2, 3)) > 0, rnd((1, 3)), rnd((2, 1))]),
    ("0d", lambda: [np.array(True), rnd(()), rnd(())]),
    ("T", lambda: [T(rnd((3, 2)) > 0), T(rnd((3, 2))), rnd((2, 3))]),
    ("empty", lambda: [np.zeros((0, 3), bool), rnd((0, 3)), rnd((1, 3))]),
], diff=(1, 2))

# fma(x, y, z) = x * y + z: every operand differentiable, broadcasting, a number operand
add("fma", [
    ("2x3", lambda: [rnd((2, 3)), rnd((2, 3)), rnd((2, 3))]),
    ("bcast", lambda: [rnd((1, 3)), rnd((2, 1)), rnd((3,))]),
    ("0d", lambda: [rnd(()), rnd(()), rnd(())]),
    ("T", lambda: [T(rnd((3, 2))), strided(rnd((2, 3))), rnd((2, 3))]),
    ("empty", lambda: [rnd((0, 3)), rnd((1, 3)), rnd((0, 1))]),
])

# cast to float32 and back: float32 rounding needs a larger step and tolerance
CASES.append(Case("cast", "f64_f32_f64", lambda: [rnd((2, 3))],
                  fn=lambda x: PRIMS["cast"](PRIMS["cast"](x, dtype=np.float32), dtype=np.float64),
                  eps=1e-3, atol=2e-3, rtol=2e-3))
CASES.append(Case("cast", "T", lambda: [T(rnd((3, 2)))], params={"dtype": np.float64}))
# rounding to float16's values (ulp <= 2**-10 here), differentiated as the cast it stands for
CASES.append(Case("reduce_precision", "f16", lambda: [rnd((2, 3))], params={"dtype": np.float16},
                  eps=0.05, atol=0.03, rtol=0.03))

# reductions
for _p, _dom in [("reduce_sum", rnd), ("reduce_max", rnd), ("reduce_min", rnd), ("reduce_prod", away0)]:
    add(_p, [("axis1", lambda d=_dom: [d((2, 3))])], params={"axes": (1,), "keepdims": False})
    add(_p, [("axis0_keep", lambda d=_dom: [d((2, 3))])], params={"axes": (0,), "keepdims": True})
    add(_p, [("all", lambda d=_dom: [d((2, 3))])], params={"axes": (0, 1), "keepdims": False})
    add(_p, [("T", lambda d=_dom: [T(d((3, 2)))])], params={"axes": (1,), "keepdims": False})
    add(_p, [("0d", lambda d=_dom: [d(())])], params={"axes": (), "keepdims": False})
add("reduce_sum", [("empty", lambda: [rnd((0, 3))])], params={"axes": (0,), "keepdims": False})
add("reduce_prod", [("empty", lambda: [rnd((0, 3))])], params={"axes": (0,), "keepdims": False})
add("reduce_prod", [("one_zero", lambda: [np.array([[0.0, 0.5, -1.5], [0.7, 1.2, 0.9]])])],
    params={"axes": (1,), "keepdims": False})
add("reduce_prod", [("two_zeros", lambda: [np.array([[0.0, 0.5, 0.0], [0.7, 0.0, 0.9]])])],
    params={"axes": (1,), "keepdims": False})
add("cumsum", [("axis1", lambda: [rnd((2, 3))]), ("T", lambda: [T(rnd((3, 2)))]),
               ("empty", lambda: [rnd((0, 3))])], params={"axis": 1})
add("cumsum", [("1d", lambda: [rnd((4,))])], params={"axis": 0})

# layout
add("broadcast_to", [("2x1", lambda: [rnd((2, 1))])], params={"shape": (3, 2, 4)})
add("broadcast_to", [("0d", lambda: [rnd(())])], params={"shape": (2, 3)})
add("broadcast_to", [("empty", lambda: [rnd((1, 3))])], params={"shape": (0, 3)})
add("reshape", [("2x3", lambda: [rnd((2, 3))]), ("T", lambda: [T(rnd((3, 2)))])], params={"shape": (3, 2)})
add("reshape", [("0d", lambda: [rnd(())])], params={"shape": (1, 1)})
add("reshape", [("empty", lambda: [rnd((0, 3))])], params={"shape": (3, 0)})
add("transpose", [("3d", lambda: [rnd((2, 3, 2))]), ("T", lambda: [T(rnd((2, 3, 2)))])],
    params={"perm": (2, 0, 1)})
add("transpose", [("empty", lambda: [rnd((0, 3))])], params={"perm": (1, 0)})
add("slice", [("2x5", lambda: [rnd((3, 5))]), ("T", lambda: [T(rnd((5, 3)))])],
    params={"key": encode_key((slice(1, 3), slice(0, 5, 2)), (3, 5))})
add("slice", [("int_newaxis", lambda: [rnd((3, 4))])], params={"key": encode_key((1, None, slice(None, None, 3)), (3, 4))})
add("slice", [("empty", lambda: [rnd((3, 4))])], params={"key": encode_key((slice(2, 2),), (3, 4))})
add("embed", [("2x3", lambda: [rnd((2, 3))]), ("T", lambda: [T(rnd((3, 2)))])],
    params={"key": encode_key((slice(1, 3), slice(0, 5, 2)), (3, 5)), "shape": (3, 5)})
add("flip", [("2x3", lambda: [rnd((2, 3))]), ("T", lambda: [T(rnd((3, 2)))]), ("empty", lambda: [rnd((0, 3))])],
    params={"axes": (1,)})
add("concatenate", [("3", lambda: [rnd((2, 3)), T(rnd((1, 2))), rnd((2, 2))])], params={"axis": 1})
add("concatenate", [("empty", lambda: [rnd((0, 3)), rnd((2, 3))])], params={"axis": 0})
add("pad", [("2x3", lambda: [rnd((2, 3))]), ("T", lambda: [T(rnd((3, 2)))])],
    params={"widths": ((1, 0), (2, 1)), "value": 0.5})
add("pad", [("empty", lambda: [rnd((0, 2))])], params={"widths": ((1, 1), (0, 1)), "value": 0.0})

# indexing: x[idx, 0:3] style keys; index arrays are not differentiable
_I1 = lambda: np.array([3, 0, 3, 1])  # noqa: E731  (a repeated index accumulates)
add("index", [("rows", lambda: [rnd((4, 3)), _I1()])], params={"key": ("T", (0, 3, 1))})
add("index", [("T_cols", lambda: [T(rnd((3, 4))), np.array([[2, 0], [1, 2]])])], params={"key": ((0, 4, 1), "T")})
add("index", [("two_arrays", lambda: [rnd((3, 4)), np.array([0, 2, 2]), np.array([1, 3, 1])])],
    params={"key": ("T", "T")})
add("index", [("empty_idx", lambda: [rnd((4, 3)), np.zeros((0,), np.int64)])], params={"key": ("T", (0, 3, 1))})
add("index_put", [("acc", lambda: [rnd((4, 3)), rnd((4, 3)), _I1()])],
    params={"key": ("T", (0, 3, 1)), "accumulate": True})
add("index_put", [("set", lambda: [T(rnd((3, 4))), rnd((1, 3)), np.array([2, 0])])],
    params={"key": ("T", (0, 3, 1)), "accumulate": False})
add("index_put", [("basic_slice", lambda: [rnd((3, 4)), rnd((2,))])],
    params={"key": ((1, 3, 1), 2), "accumulate": False})
add("gather", [("axis1", lambda: [rnd((3, 4)), ints((3, 2), 4)]), ("T", lambda: [T(rnd((4, 3))), ints((2, 4), 3)])],
    params={"axis": 1})
add("gather", [("axis0_empty", lambda: [rnd((3, 4)), ints((0, 4), 3)])], params={"axis": 0})
add("scatter_add", [("axis1", lambda: [rnd((3, 4)), ints((3, 5), 4), rnd((3, 5))]),
                    ("T", lambda: [T(rnd((4, 3))), ints((2, 2), 4), T(rnd((3, 2)))])],
    params={"axis": 1}, diff=(0, 2))
# distinct values (no ties); a product with one zero at a position (its derivatives are exact)
for _red in ("amax", "amin", "prod"):
    add("scatter_reduce", [(f"{_red}_axis1", lambda: [rnd((3, 4)), ints((3, 5), 4), rnd((3, 5))]),
                           (f"{_red}_T", lambda: [T(rnd((4, 3))), ints((2, 2), 4), T(rnd((2, 2)))])],
        params={"axis": 1, "reduce": _red}, diff=(0, 2))
add("scatter_reduce", [("prod_zero", lambda: [np.array([[0.5, 0.0, -0.7, 1.2]]), np.array([[1, 1, 3, 0]]),
                                              np.array([[0.9, -1.1, 0.0, 0.8]])])],
    params={"axis": 1, "reduce": "prod"}, diff=(0, 2))

# batched matmul with batch broadcasting
add("matmul", [("2d", lambda: [rnd((2, 3)), rnd((3, 2))]),
               ("T", lambda: [T(rnd((3, 2))), T(rnd((2, 3)))]),
               ("batched", lambda: [rnd((2, 2, 3)), rnd((2, 3, 2))]),
               ("bcast_batch", lambda: [rnd((2, 1, 2, 3)), rnd((3, 3, 2))]),
               ("empty_k", lambda: [rnd((2, 0)), rnd((0, 3))]),
               ("empty_m", lambda: [rnd((0, 3)), rnd((3, 2))])])

# Cholesky of a well-conditioned SPD matrix built from the input (symmetric under perturbation);
# triangular solves read one triangle of a diagonally dominant matrix, batches broadcasting
add("cholesky", [("3x3", lambda: [rnd((3, 3))]), ("batched", lambda: [rnd((2, 3, 3))])],
    fn=lambda a: PRIMS["cholesky"](a @ a.mT + fusegrad.eye(3, dtype=a.dtype, device=a.device) * 3))
for _upper in (False, True):
    add("triangular_solve", [(f"upper={_upper}", lambda: [rnd((3, 3)) + 4 * np.eye(3), rnd((3, 2))]),
                             (f"bcast_upper={_upper}", lambda: [rnd((2, 3, 3)) + 4 * np.eye(3), rnd((3, 1))])],
        params=dict(upper=_upper))

# inverse, solve, log-determinant, QR's Q and the matrix exponential of well-conditioned matrices
_WELL = lambda shape: rnd(shape) + 4 * np.eye(shape[-1])  # noqa: E731
add("inv", [("3x3", lambda: [_WELL((3, 3))]), ("batched", lambda: [_WELL((2, 3, 3))])])
add("matrix_exp", [("3x3", lambda: [rnd((3, 3))]), ("batched", lambda: [rnd((2, 3, 3))])])
add("slogdet", [("batched", lambda: [_WELL((2, 3, 3))])])
add("solve", [("3x3", lambda: [_WELL((3, 3)), rnd((3, 2))]), ("batched", lambda: [_WELL((2, 3, 3)), rnd((2, 3, 1))])])
add("qr_q", [("tall", lambda: [rnd((4, 3))]), ("wide", lambda: [rnd((2, 3))])], params=dict(complete=False))
add("svd", [("tall", lambda: [rnd((4, 3))]), ("wide", lambda: [rnd((2, 3))]), ("batched", lambda: [rnd((2, 3, 3))])],
    params=dict(full_matrices=False))
add("svd", [("full_square", lambda: [rnd((3, 3))])], params=dict(full_matrices=True))
add("svdvals", [("tall", lambda: [rnd((4, 3))]), ("wide", lambda: [rnd((2, 2, 3))])])
# eigh (packed eigenvalues and eigenvectors) and eigvalsh of the symmetric matrix the input
# defines: the primitives read one triangle, their gradients are symmetric (as PyTorch's)
_SYM = lambda a: (a + a.mT) * 0.5  # noqa: E731
for _upper in (False, True):
    add("eigh", [(f"upper={_upper}", lambda: [rnd((3, 3))]), (f"batched_upper={_upper}", lambda: [rnd((2, 3, 3))])],
        fn=lambda a, _u=_upper: PRIMS["eigh"](_SYM(a), upper=_u))
    add("eigvalsh", [(f"upper={_upper}", lambda: [rnd((2, 3, 3))])],
        fn=lambda a, _u=_upper: PRIMS["eigvalsh"](_SYM(a), upper=_u))
# the general eigendecomposition through what does not depend on the eigenvectors' phases (their
# moduli, and the eigenvalues'), of a matrix with distinct eigenvalues
add("eig", [("4x4", lambda: [rnd((4, 4)) + np.diag([0.0, 3.0, 6.0, 9.0])]),
            ("batched", lambda: [rnd((2, 3, 3)) + np.diag([0.0, 3.0, 6.0])])],
    fn=lambda a: PRIMS["cabs"](PRIMS["eig"](a)), gg=False)

# the special functions (fusegrad/special.py) on their smooth domains; zeta differentiates in q only
_ARG = lambda lo, hi: lambda shape: _r(shape, lo, hi)  # noqa: E731
for _p, _dom in [("lgamma", _ARG(0.3, 3.0)), ("digamma", _ARG(0.3, 3.0)), ("erfinv", _ARG(-0.9, 0.9)),
                 ("erfcx", rnd), ("ndtri", _ARG(0.05, 0.95)), ("i0", rnd), ("i0e", away0), ("i1", rnd),
                 ("i1e", away0)]:
    add(_p, [("2x3", lambda _dom=_dom: [_dom((2, 3))]), ("T", lambda _dom=_dom: [T(_dom((3, 2)))])])
add("zeta", [("q", lambda: [np.full((2, 3), 3.0), _r((2, 3), 0.5, 2.0)])], diff=(1,))
# the value of its second operand, the derivative of its first: on a + 0.5 the derivative in
# a is the one finite differences see
add("straight_through", [("2x3", lambda: [rnd((2, 3))])],
    fn=lambda a: PRIMS["straight_through"](a, (a + 0.5).detach()))
# the regularized incomplete gamma functions differentiate in x only, as PyTorch's
for _p in ("gammainc", "gammaincc"):
    add(_p, [("x", lambda: [np.full((2, 3), 2.5), _r((2, 3), 0.5, 2.0)])], diff=(1,))

# complex primitives, on real inputs and outputs (parts through make_complex/view_as_real),
# so finite differences see PyTorch's gradient convention
_C = lambda a, b: PRIMS["make_complex"](a, b)  # noqa: E731
_VR = lambda z: PRIMS["view_as_real"](z)  # noqa: E731
_VC = lambda x: PRIMS["view_as_complex"](x)  # noqa: E731
_X = [("2x3x2", lambda: [rnd((2, 3, 2))])]  # (one input: the parts of a 2x3 complex tensor)
add("make_complex", _X, fn=lambda x: _VR(_C(x[..., 0], x[..., 1]) * _C(x[..., 1], x[..., 0])))
add("conj", _X, fn=lambda x: _VR(PRIMS["conj"](_VC(x)) * _C(x[..., 1], x[..., 0])))
add("real", _X, fn=lambda x: PRIMS["real"](_VC(x) * _C(x[..., 1], x[..., 0])))
add("imag", _X, fn=lambda x: PRIMS["imag"](_VC(x) * _VC(x)))
add("cabs", [("2x3x2", lambda: [away0((2, 3, 2))])], fn=lambda x: PRIMS["cabs"](_VC(x)))
add("view_as_real", [("2x3x2", lambda: [rnd((2, 3, 2))])], fn=lambda x: _VR(_VC(x) * _VC(x)))
add("view_as_complex", [("2x3x2", lambda: [rnd((2, 3, 2))])], fn=lambda x: _VR(PRIMS["exp"](_VC(x))))
add("fft_c2c", [("2x5x2", lambda: [rnd((2, 5, 2))])],
    fn=lambda x: _VR(PRIMS["fft_c2c"](_VC(x) * _VC(x), axes=(1,), forward=False, scale=0.2)))
add("fft_r2c", [("2x5", lambda: [rnd((2, 5))]), ("3x4", lambda: [rnd((3, 4))])],
    fn=lambda a: _VR(PRIMS["fft_r2c"](a * a, axes=(0, 1), onesided=True, scale=0.5)))
add("fft_c2r", [("2x4x2", lambda: [rnd((2, 4, 2))])],
    fn=lambda x: PRIMS["fft_c2r"](_VC(x), axes=(1,), last_size=6, scale=1 / 6) ** 2)
add("fft_c2r", [("2x4x2_odd", lambda: [rnd((2, 4, 2))])],
    fn=lambda x: PRIMS["fft_c2r"](_VC(x), axes=(0, 1), last_size=7, scale=1.0) ** 2)

DIFF_PRIMS = sorted(n for n, p in PRIMS.items() if not p.nondiff)


def test_every_differentiable_primitive_is_in_the_table():
    covered = {c.prim for c in CASES}
    assert set(DIFF_PRIMS) - covered == set()


# ---------------------------------------------------------------- finite differences
def _leaves(case):
    arrs = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in case.gen()]
    diff = case.diff if case.diff is not None else tuple(i for i, a in enumerate(arrs) if a.dtype.kind == "f")
    return arrs, diff


def _flat_out(case, arrs):
    with fusegrad.no_grad():
        out = case.call(*[fusegrad.from_numpy(a) for a in arrs])
    return np.asarray(out.numpy(), dtype=np.float64).reshape(-1).copy()


def numerical_jacobian(case, arrs, i):
    """J[k, :] = d out / d arrs[i].flat[k], by central differences, perturbing the
    (possibly non-contiguous) input array in place."""
    a = arrs[i]
    n_out = _flat_out(case, arrs).size
    J = np.zeros((a.size, n_out))
    for k, idx in enumerate(np.ndindex(*a.shape)):
        orig = a[idx]
        a[idx] = orig + case.eps
        plus = _flat_out(case, arrs)
        a[idx] = orig - case.eps
        minus = _flat_out(case, arrs)
        a[idx] = orig
        J[k] = (plus - minus) / (2 * case.eps)
    return J


def _tensor_flat(t, shape):
    if t is None:
        return np.zeros(int(np.prod(shape)))
    if not isinstance(t, fusegrad.Tensor):  # a Python scalar zero tangent
        return np.broadcast_to(np.asarray(t, np.float64), shape).reshape(-1)
    assert tuple(t.shape) == tuple(shape), (t.shape, shape)
    return np.asarray(t.detach().numpy(), np.float64).reshape(-1)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vjp_matches_finite_differences(case):
    arrs, diff = _leaves(case)
    leaves = [fusegrad.from_numpy(a) for a in arrs]
    for i in diff:
        leaves[i].requires_grad_(True)
    out = case.call(*leaves)
    assert out.requires_grad
    rng = np.random.default_rng(7)
    v = rng.standard_normal(out.shape)
    gs = ag_grad(out, [leaves[i] for i in diff], fusegrad.from_numpy(np.asarray(v, dtype=out.detach().numpy().dtype)),
                 allow_unused=True)
    for i, g in zip(diff, gs):
        J = numerical_jacobian(case, arrs, i)
        expect = J @ np.asarray(v, np.float64).reshape(-1)
        got = _tensor_flat(g, arrs[i].shape)
        if g is not None:
            assert g.dtype == leaves[i].dtype
        np.testing.assert_allclose(got, expect, rtol=case.rtol, atol=case.atol, err_msg=f"input {i}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_jvp_matches_finite_differences(case):
    if case.fn is not None:  # composite of primitives: check through the func transform instead
        arrs, diff = _leaves(case)
        primals = [fusegrad.from_numpy(arrs[i]) for i in diff]
        tans = [fusegrad.from_numpy(np.random.default_rng(3).standard_normal(a.shape)) for a in primals]
        _, jt = fusegrad.func.jvp(case.call, tuple(primals), tuple(tans))
        J = numerical_jacobian(case, arrs, diff[0])
        np.testing.assert_allclose(_tensor_flat(jt, jt.shape), tans[0].numpy().reshape(-1) @ J,
                                   rtol=case.rtol, atol=case.atol)
        return
    arrs, diff = _leaves(case)
    ins = [fusegrad.from_numpy(a) for a in arrs]
    out = case.call(*ins)
    rng = np.random.default_rng(11)
    tangents = [None] * len(ins)
    expect = np.zeros(out.numel())
    for i in diff:
        t = rng.standard_normal(arrs[i].shape)
        tangents[i] = fusegrad.from_numpy(np.asarray(t))
        expect += np.asarray(t).reshape(-1) @ numerical_jacobian(case, arrs, i)
    jt = PRIMS[case.prim].jvp(tangents, ins, out, **case.params)
    got = _tensor_flat(jt, tuple(out.shape))
    np.testing.assert_allclose(got, expect, rtol=case.rtol, atol=case.atol)
    # one tangent at a time (the others None) is linear too
    if len(diff) > 1:
        i = diff[0]
        only = [tangents[j] if j == i else None for j in range(len(ins))]
        jt1 = PRIMS[case.prim].jvp(only, ins, out, **case.params)
        exp1 = tangents[i].numpy().reshape(-1) @ numerical_jacobian(case, arrs, i)
        np.testing.assert_allclose(_tensor_flat(jt1, tuple(out.shape)), exp1, rtol=case.rtol, atol=case.atol)


GG_CASES = [c for c in CASES if c.gg and c.name not in ("empty", "empty_idx", "axis0_empty", "empty_k", "empty_m")]


_GG_XFAIL = {
    # d2/dxi dxj prod(x) with two zeros in one reduction: the VJP's "two or more zeros ->
    # zero gradient" branch has zero derivative (PyTorch's full-reduction prod does the
    # same); exact second derivatives there need an exclusive cumprod primitive.
    "reduce_prod-two_zeros": "second derivative of prod with >= 2 zeros in a reduction",
}
GG_PARAMS = [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=_GG_XFAIL[c.id], strict=True)]
                          if c.id in _GG_XFAIL else []) for c in GG_CASES]


@pytest.mark.parametrize("case", GG_PARAMS)
def test_gradgradcheck(case):
    arrs, diff = _leaves(case)
    leaves = [fusegrad.from_numpy(a) for a in arrs]
    for i in diff:
        leaves[i].requires_grad_(True)
    assert gradgradcheck(case.call, leaves, eps=case.eps, atol=max(case.atol, 1e-5), rtol=1e-3)


@pytest.mark.parametrize("name", ["add", "mul", "exp", "reduce_sum", "matmul"])
def test_empty_gradgradcheck(name):
    case = next(c for c in CASES if c.prim == name and c.name.startswith("empty"))
    arrs, diff = _leaves(case)
    leaves = [fusegrad.from_numpy(a) for a in arrs]
    for i in diff:
        leaves[i].requires_grad_(True)
    assert gradgradcheck(case.call, leaves)


def test_gradcheck_on_noncontiguous_leaf():
    """gradcheck perturbs the input itself, also when the input is a strided view."""
    x = fusegrad.from_numpy(T(rnd((3, 2)))).requires_grad_(True)
    assert fusegrad.autograd.gradcheck(lambda a: (a * a).sum(1), (x,))


def test_gradients_at_degenerate_points_match_torch():
    """std where the std is 0 (a constant column: makemore's batch statistics of a dead unit)
    and atan2 at the origin have PyTorch's zero gradients, not NaN (the root's derivative or
    the reciprocal is infinite there, times 0)."""
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 4.0]])
    y, z = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 2.0])
    cases = [(lambda m, a: a.std(0).sum(), [x]), (lambda m, a: m.std_mean(a, 0, correction=0)[0].sum(), [x]),
             (lambda m, a: ((a - a.mean(0)) / (a.std(0) + 1e-5)).pow(2).sum(), [x]),
             (lambda m, a, b: m.atan2(a, b).sum(), [y, z])]
    for fn, args in cases:
        ours = [fusegrad.tensor(a, requires_grad=True) for a in args]
        theirs = [torch.tensor(a, requires_grad=True) for a in args]
        got = fusegrad.autograd.grad(fn(fusegrad, *ours), ours)
        want = torch.autograd.grad(fn(torch, *theirs), theirs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-9)
