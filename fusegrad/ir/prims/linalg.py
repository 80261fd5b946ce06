"""Batched matrix multiplication: NumPy's matmul on operands of rank >= 2 (the Tensor
layer turns vectors into matrices), broadcasting the batch dimensions. Lowers to BLAS.
The matrix functions (Cholesky, solves, inverse, log-determinant, QR, exponential, SVD, symmetric
eigendecomposition) run in
NumPy/SciPy (LAPACK) with no kernel lowering; their VJPs and JVPs are written in primitives,
so they differentiate to any order, trace and batch."""
from __future__ import annotations

import numpy as np

from ..primitive import PRIMS, Primitive
from .batchdims import elementwise_rule, to_front
from .complex import _is_complex_value, complex_of, conj, conj_operands, imag, make_complex, real, real_of
from .elementwise import eq, sum_to, where
from .shapes import broadcast_shapes, shape_of

__all__ = ["matmul", "swap_last", "cholesky", "triangular_solve", "solve", "inv", "slogdet", "qr_q", "matrix_exp",
           "svd", "svdvals", "svd_split", "eigh", "eigvalsh", "eigh_split", "eig", "LinAlgError"]


def swap_last(x):
    from .layout import transpose
    nd = len(shape_of(x))
    return transpose(x, perm=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def adjoint(x):
    """The conjugate transpose of ``x``'s matrices (their transpose, when real): the rules
    below are PyTorch's, written for complex matrices, and reduce to the real ones."""
    return conj(swap_last(x)) if _is_complex_value(x) else swap_last(x)


_EIG_PHASE = ("linalg_{}_backward: The eigenvectors in the complex case are specified up to multiplication by "
              "e^{{i phi}}. The specified loss function depends on this quantity, so it is ill-defined.")
_SVD_PHASE = ("svd_backward: The singular vectors in the complex case are specified up to multiplication by "
              "e^{i phi}. The specified loss function depends on this phase term, making it ill-defined.")


def _phase_free(x, message: str) -> None:
    """PyTorch's check that a loss does not depend on complex singular or eigenvectors'
    phases: ``x``, the imaginary parts of its gradient's diagonal terms, is about 0 (checked
    where its value is known: eagerly)."""
    if _is_complex_value(x):
        d = getattr(imag(_diagonal(x)), "_data", None)
        if type(d) is np.ndarray and not np.allclose(d, 0.0, rtol=1e-2, atol=1e-2):
            raise RuntimeError(message)


def _like(x, like):
    """Real ``x`` as a complex value where ``like`` is complex (a real factor of a complex rule)."""
    from .elementwise import cast
    return cast(x, dtype=like.dtype.np) if _is_complex_value(like) and not _is_complex_value(x) else x


def _diagonal(x):
    """The diagonals (..., n) of ``x``'s matrices."""
    from .reduce import reduce_sum
    return reduce_sum(_diag_part(x), axes=(len(shape_of(x)) - 1,), keepdims=False)


def _i_imag(z):
    """``i Im(z)``, complex, of a complex ``z``."""
    return make_complex(_zeros_of(real(z)), imag(z))


def _mm_abstract(avals, params):
    (sa, da), (sb, db) = avals
    if sa[-1] != sb[-2]:
        raise ValueError(f"shapes cannot be multiplied ({'x'.join(map(str, sa))} and {'x'.join(map(str, sb))})")
    return broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]), da


# The runtime installs how eager matmuls call BLAS (runtime.blas_threads: a thread count
# chosen by timing, as compiled graphs' is); ir stays free of runtime imports.
_GEMM_CALL: list = [lambda gemm, a, b: gemm(a, b)]


def install_gemm_call(call) -> None:
    """Run each eager BLAS product ``gemm(a, b)`` as ``call(gemm, a, b)``."""
    _GEMM_CALL[0] = call


def _mm_impl(a, b):
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"shapes cannot be multiplied ({'x'.join(map(str, a.shape))} and {'x'.join(map(str, b.shape))})")
    if a.dtype.itemsize == 2 and a.dtype.kind != "i":
        # float16/bfloat16: accumulate in float32 (as PyTorch's CPU kernels; NumPy has no BLAS for
        # them, and returns float32 for ml_dtypes' bfloat16), round once to the operands' dtype
        f32 = np.float32
        with np.errstate(over="ignore", invalid="ignore"):  # inf in, or overflow out: as PyTorch, silently
            return np.matmul(a.astype(f32), b.astype(f32)).astype(a.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # (NaN or inf operands: as PyTorch, silently)
        return _GEMM_CALL[0](np.matmul, _blas_ready(a), _blas_ready(b))


def _blas_ready(x):
    """``x``, or a contiguous copy where its matrices are neither row- nor column-major:
    NumPy's matmul leaves BLAS for a slow loop on those (a broadcast gradient, all strides
    0, took 150 ms where BLAS takes 1)."""
    if x.ndim == 0 or x.flags.c_contiguous or x.flags.f_contiguous or x.dtype.kind not in "fc":
        return x
    s, it = x.strides, x.itemsize
    if x.ndim == 1:
        return x if s[0] == it else np.ascontiguousarray(x)
    if (s[-1] == it and s[-2] >= x.shape[-1] * it) or (s[-2] == it and s[-1] >= x.shape[-2] * it):
        return x
    return np.ascontiguousarray(x)


def _transposed(x) -> bool:
    """``x`` is an eager matrix stored transposed (Fortran order: ``weight.t()``)."""
    d = getattr(x, "_data", None)
    return type(d) is np.ndarray and d.ndim == 2 and d.flags.f_contiguous and not d.flags.c_contiguous


def holomorphic(vjp):
    """``vjp`` for complex operands too: its real rule on conjugated operands and result
    (PyTorch's convention, ``prims.complex.conj_operands``); exact for holomorphic maps."""
    def rule(g, ins, out, needs, **params):
        if g._data.dtype.kind == "c":
            ins, out = conj_operands(ins, out)
        return vjp(g, ins, out, needs, **params)
    return rule


def _mm_vjp(g, ins, out, needs):
    # A 2-D operand stored transposed gets its gradient in the same order, computed as the
    # transpose of a C-ordered product (PyTorch's layout rule: a gradient's strides follow its
    # input's): the weight gradient of Linear's x @ w.t() comes out as w's own C order,
    # which .grad would otherwise get by a strided copy.
    if g._data.dtype.kind == "c":
        ins, out = conj_operands(ins, out)
    a, b = ins
    plain = len(shape_of(a)) == len(shape_of(b)) == 2
    ga = gb = None
    if needs[0]:
        ga = (swap_last(matmul(b, swap_last(g))) if plain and _transposed(a)
              else sum_to(matmul(g, swap_last(b)), shape_of(a)))
    if needs[1]:
        gb = (swap_last(matmul(swap_last(g), a)) if plain and _transposed(b)
              else sum_to(matmul(swap_last(a), g), shape_of(b)))
    return ga, gb


def _mm_jvp(ts, ins, out):
    a, b = ins
    acc = None
    if ts[0] is not None:
        acc = matmul(ts[0], b)
    if ts[1] is not None:
        t = matmul(a, ts[1])
        acc = t if acc is None else acc + t
    if acc is not None and shape_of(acc) != shape_of(out):
        from .layout import broadcast_to
        acc = broadcast_to(acc, shape=shape_of(out))
    return acc


# (a's gradient reads b and b's reads a: PyTorch checks the versions of those only, so an
# operand updated in place after a product with a constant is legal, as a squeeze-excite h.mul_)
matmul = Primitive("matmul", _mm_impl, abstract=_mm_abstract, vjp=_mm_vjp, jvp=_mm_jvp, saves="in",
                   kind="matmul", node_name="BmmBackward0", reads=lambda needs: ((needs[1], needs[0]), False))


# ---------------------------------------------------------------- batching rule (vmap)
def _matmul_batch(args, bdims):
    """A batched matrix times an unbatched 2-D one is one GEMM, not a loop of batched
    small products: the batch folds into the free dimension (the cotangent batch of
    jacrev through ``W @ x`` becomes one (B, k) x (k, m) product)."""
    from .layout import reshape, transpose
    (a, b), (da, db) = args, bdims
    sa, sb = shape_of(a), shape_of(b)
    if da is None and db is not None and len(sa) == 2 and len(sb) == 3:
        bf = to_front(b, db)
        n_b, k, n = shape_of(bf)
        m = sa[0]
        if n == 1:
            r = matmul(reshape(bf, shape=(n_b, k)), transpose(a, perm=(1, 0)))
            return reshape(r, shape=(n_b, m, 1)), 0
        t = reshape(transpose(bf, perm=(1, 0, 2)), shape=(k, n_b * n))
        return reshape(matmul(a, t), shape=(m, n_b, n)), 1
    if db is None and da is not None and len(sb) == 2 and len(sa) == 3:
        af = to_front(a, da)
        n_b, m, k = shape_of(af)
        r = matmul(reshape(af, shape=(n_b * m, k)), b)
        return reshape(r, shape=(n_b, m, sb[1])), 0
    return elementwise_rule(matmul, args, bdims, {})


matmul.batch = _matmul_batch


# ---------------------------------------------------------------- Cholesky and triangular solves
class _LinAlgError(RuntimeError):
    """A matrix had no factorization (``torch.linalg.LinAlgError``, a RuntimeError; its class
    is named ``_LinAlgError``, as PyTorch's)."""


LinAlgError = _LinAlgError


_NO_LOWERING = ("matrix factorizations, solves and matrix functions run in NumPy/SciPy (LAPACK); they have no "
                "loop kernel")


def _triangle(x, upper: bool):
    """``x``'s lower (``upper``: upper) triangle over its last two axes, the rest zeroed."""
    from .creation import iota
    from .elementwise import cast, ge, le, mul
    from .layout import reshape
    n = shape_of(x)[-1]
    r = reshape(iota(n=n, dtype=np.dtype(np.int64)), shape=(n, 1))
    c = reshape(iota(n=n, dtype=np.dtype(np.int64)), shape=(1, n))
    return mul(x, cast(le(r, c) if upper else ge(r, c), dtype=x.dtype.np))


NOT_POSITIVE_DEFINITE = ("linalg.cholesky: The factorization could not be completed because the input is not "
                         "positive-definite.")


def _cholesky_impl(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise LinAlgError(NOT_POSITIVE_DEFINITE) from None


def _phi(x):
    """The lower triangle of ``x`` with its diagonal halved."""
    from .elementwise import mul
    return _triangle(x, False) - mul(_diag_part(x), 0.5)


def _diag_part(x):
    """``x`` with everything off its diagonal zeroed."""
    return _triangle(_triangle(x, False), True)


def _cholesky_vjp(g, ins, out, needs):
    # A = L L^H: PyTorch's cholesky_backward, gA = L^-H X L^-1 with M = tril(L^H gL) and
    # X = (M + tril(M, -1)^H) / 2 (Murray 2016), by two triangular solves
    lh = adjoint(out)
    m = _triangle(matmul(lh, g), False)
    x = (m + adjoint(m - _diag_part(m))) * 0.5
    y = triangular_solve(lh, x, upper=True)  # L^-H X
    return (adjoint(triangular_solve(lh, adjoint(y), upper=True)),)  # (L^-H (L^-H X)^H)^H


def _cholesky_jvp(ts, ins, out):
    if ts[0] is None:
        return None
    # dL = L Phi(L^-1 dA L^-H)
    x = triangular_solve(out, ts[0], upper=False)  # L^-1 dA
    m = adjoint(triangular_solve(out, adjoint(x), upper=False))  # L^-1 dA L^-H
    return matmul(out, _phi(m))


def _square_batch(args, bdims, **params):
    """Matrix primitives broadcast their batch axes: a batched operand moves its batch to
    axis 0, an unbatched one keeps its shape (NumPy then broadcasts it)."""
    from .layout import reshape
    r = max(len(shape_of(a)) - (d is not None) for a, d in zip(args, bdims))
    out = []
    for a, d in zip(args, bdims):
        if d is not None:
            a = to_front(a, d)
            s = shape_of(a)
            a = reshape(a, shape=s[:1] + (1,) * (r + 1 - len(s)) + s[1:])
        out.append(a)
    return out


def _front_batch(prim_name: str):
    """The batching rule of a one-operand matrix primitive: vmap's batch axis moves to the
    front, where it is one more batch axis of the matrices."""
    def rule(args, bdims, **params):
        return PRIMS[prim_name](to_front(args[0], bdims[0]), **params), 0
    return rule


cholesky = Primitive("cholesky", _cholesky_impl, abstract=lambda a, p: a[0], vjp=_cholesky_vjp,
                     jvp=_cholesky_jvp, saves="out", node_name="LinalgCholeskyExBackward0",
                     no_lowering=_NO_LOWERING, batch=_front_batch("cholesky"))


def _triangular_impl(a, b, upper):
    """Solve ``A X = B`` reading only ``A``'s upper or lower triangle; batch axes broadcast."""
    a = np.triu(a) if upper else np.tril(a)
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise LinAlgError("linalg.solve_triangular: The diagonal of A has a zero: the system is singular") from None


def _system_abstract(what: str):
    """The shape/dtype rule of ``X = A^-1 B`` (B a batch of matrices, batch axes broadcast)."""
    def abstract(avals, params):
        (sa, da), (sb, db) = avals
        if sa[-1] != sa[-2] or sa[-1] != sb[-2]:
            raise ValueError(f"{what}: Incompatible shapes of A and B for the equation AX = B "
                             f"({'x'.join(map(str, sa))} and {'x'.join(map(str, sb))})")
        return broadcast_shapes(sa[:-2], sb[:-2]) + sb[-2:], np.result_type(da, db)
    return abstract


def _system_rules(solve_with, part):
    """VJP and JVP of ``X = A^-1 B``, shared by the general and the triangular solve:
    ``solve_with(a, rhs, transposed, **params)`` solves with ``A`` (``transposed``: ``A^T``),
    ``part(dA, **params)`` is the part of ``A`` the solve reads."""
    def vjp(g, ins, out, needs, **params):
        a, b = ins
        gb = solve_with(a, g, True, **params)  # A^-T g
        ga = sum_to(part(-matmul(gb, swap_last(out)), **params), shape_of(a)) if needs[0] else None
        return ga, (sum_to(gb, shape_of(b)) if needs[1] else None)

    def jvp(ts, ins, out, **params):
        a, _ = ins
        rhs = ts[1]  # dX = A^-1 (dB - dA X)
        if ts[0] is not None:
            t = -matmul(part(ts[0], **params), out)
            rhs = t if rhs is None else rhs + t
        if rhs is None:
            return None
        x = solve_with(a, rhs, False, **params)
        if shape_of(x) != shape_of(out):
            from .layout import broadcast_to
            x = broadcast_to(x, shape=shape_of(out))
        return x
    return vjp, jvp


_tri_vjp, _tri_jvp = _system_rules(
    lambda a, r, transposed, upper: triangular_solve(swap_last(a) if transposed else a, r, upper=upper != transposed),
    lambda x, upper: _triangle(x, upper))


def _pair_batch(prim_name: str):
    """The batching rule of a two-operand system solve (see ``_square_batch``)."""
    def rule(args, bdims, **params):
        return PRIMS[prim_name](*_square_batch(args, bdims), **params), 0
    return rule


triangular_solve = Primitive("triangular_solve", _triangular_impl, abstract=_system_abstract("linalg.solve_triangular"),
                             vjp=holomorphic(_tri_vjp), jvp=_tri_jvp, saves="in,out",
                             node_name="LinalgSolveTriangularBackward0",
                             no_lowering=_NO_LOWERING, batch=_pair_batch("triangular_solve"))


# ---------------------------------------------------------------- LU-based: solve, inverse, log-determinant
def _singular(what: str, a: np.ndarray, detail: str) -> LinAlgError:
    """PyTorch's error for a singular ``a``: which batch element (when batched) failed first."""
    zeros = [_lu_zero(m) for m in a.reshape((-1,) + a.shape[-2:])]  # the error path only
    bad = next((i for i, z in enumerate(zeros) if z is not None), 0)
    where = f"(Batch element {bad}): " if a.ndim > 2 else ""
    return LinAlgError(f"{what}: {where}{detail.format(zeros[bad] or 1)}")


def _lu_zero(m: np.ndarray):
    """The 1-based index of the first exactly zero pivot of ``m``'s LU factorization (LAPACK's
    getrf ``info``, which PyTorch reports), or None."""
    import scipy.linalg
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns of the singular matrix we are locating
        lu, _ = scipy.linalg.lu_factor(m, check_finite=False)
    zero = np.flatnonzero(np.diagonal(lu) == 0)
    return int(zero[0]) + 1 if zero.size else None


def _lu_solve_impl(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("torch.linalg.solve", a, "The solver failed because the input matrix is singular.") from None


_solve_vjp, _solve_jvp = _system_rules(lambda a, r, transposed: solve(swap_last(a) if transposed else a, r),
                                       lambda x: x)
solve = Primitive("solve", _lu_solve_impl, abstract=_system_abstract("linalg.solve"), vjp=holomorphic(_solve_vjp),
                  jvp=_solve_jvp, saves="in,out", node_name="LinalgSolveExBackward0", no_lowering=_NO_LOWERING,
                  batch=_pair_batch("solve"))


def _inv_impl(a, singular: str = "raise"):
    """``a``'s inverse; a singular ``a`` raises PyTorch's error, or with ``singular="lu"``
    (determinants' gradients) is solved through its LU factors as LAPACK's getrs does it,
    which divides by the zero pivots: inf and NaN entries, as PyTorch's gradients there."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        if singular == "lu":
            return _lu_inverse(a)
        raise _singular("linalg.inv", a, "The diagonal element {} is zero, the inversion could not be completed "
                        "because the input matrix is singular.") from None


def _lu_inverse(a: np.ndarray) -> np.ndarray:
    """The inverse of each matrix of ``a`` through its LU factors, dividing by zero pivots."""
    import scipy.linalg
    import warnings
    flat = a.reshape((-1,) + a.shape[-2:])
    out = np.empty_like(flat)
    eye = np.eye(a.shape[-1], dtype=a.dtype)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # (SciPy warns of the singular matrix)
        for i, m in enumerate(flat):
            out[i] = scipy.linalg.lu_solve(scipy.linalg.lu_factor(m, check_finite=False), eye, check_finite=False)
    return out.reshape(a.shape)


inv = Primitive("inv", _inv_impl, abstract=lambda a, p: a[0],
                # d(A^-1) = -A^-1 dA A^-1, so gA = -A^-T g A^-T
                vjp=holomorphic(lambda g, ins, out, needs, **_: (-matmul(swap_last(out), matmul(g, swap_last(out))),)),
                jvp=lambda ts, ins, out, **_: None if ts[0] is None else -matmul(out, matmul(ts[0], out)),
                saves="out", node_name="LinalgInvExBackward0", no_lowering=_NO_LOWERING, batch=_front_batch("inv"))


def _slogdet_impl(a):
    sign, logabs = np.linalg.slogdet(a)  # (complex a: a complex sign, a real log-magnitude)
    return np.stack([sign, logabs.astype(sign.dtype)], -1).astype(a.dtype, copy=False)


def _last(x, i: int):
    """``x[..., i]``, the sign (0) or the log-magnitude (1) of a ``slogdet`` result."""
    from .layout import slice_
    return slice_(x, key=tuple((0, s, 1) for s in shape_of(x)[:-1]) + (i,))


def _slogdet_vjp(g, ins, out, needs):
    # d log det A = tr(A^-1 dA), whose real part is d log|det A| and imaginary part the sign's
    # angle (a real sign is piecewise constant): gA = (gl + i Im(conj(sign) gsign)) A^-H
    from .layout import reshape
    gl = _last(g, 1)
    if _is_complex_value(g):
        gl = make_complex(real(gl), imag(conj(_last(out, 0)) * _last(g, 0)))
    # (a zero gradient of a singular matrix stays 0 beside the inverse's inf entries: det's)
    g = reshape(gl, shape=shape_of(gl) + (1, 1))
    return (where(eq(g, 0), 0.0, g * inv(adjoint(ins[0]), singular="lu")),)


def _slogdet_jvp(ts, ins, out):
    if ts[0] is None:
        return None
    from .layout import pad, reshape
    from .reduce import reduce_sum
    nd = len(shape_of(ins[0]))
    t = reduce_sum(swap_last(inv(ins[0], singular="lu")) * ts[0], axes=(nd - 2, nd - 1), keepdims=False)  # tr(A^-1 dA)
    if _is_complex_value(t):  # d log|det| = Re t, d sign = i sign Im t
        from .layout import concatenate
        zero = _zeros_of(real(t))
        return concatenate(reshape(_last(out, 0) * make_complex(zero, imag(t)), shape=shape_of(t) + (1,)),
                           reshape(make_complex(real(t), zero), shape=shape_of(t) + (1,)), axis=nd - 2)
    return pad(reshape(t, shape=shape_of(t) + (1,)), widths=((0, 0),) * (nd - 2) + ((1, 0),), value=0.0)


# sign and log|det| stacked on a last axis of 2 (a primitive has one result)
slogdet = Primitive("slogdet", _slogdet_impl, abstract=lambda a, p: (a[0][0][:-2] + (2,), a[0][1]),
                    vjp=_slogdet_vjp, jvp=_slogdet_jvp, saves="in,out", node_name="LinalgSlogdetBackward0",
                    no_lowering=_NO_LOWERING, batch=_front_batch("slogdet"))


# ---------------------------------------------------------------- QR
def _qr_abstract(avals, params):
    (sa, da), = avals
    m, n = sa[-2:]
    return sa[:-2] + (m, m if params["complete"] else min(m, n)), da


def _qr_q_impl(a, complete):
    return np.linalg.qr(a, mode="complete" if complete else "reduced")[0]


def _qr_square(a, q, complete):
    """``X``, ``A``'s first k = min(m, n) columns, on which Q alone depends, and ``U`` with
    ``X = Q U`` (upper triangular); PyTorch's error where Q is not a function of ``A``."""
    from .layout import slice_
    m, n = shape_of(a)[-2:]
    if complete and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    k = min(m, n)
    x = a if k == n else slice_(a, key=tuple((0, s, 1) for s in shape_of(a)[:-1]) + ((0, k, 1),))
    return x, _triangle(matmul(adjoint(q), x), True)


def _qr_q_vjp(g, ins, out, needs, complete):
    # The reduced case of PyTorch's linalg_qr_backward with gR = 0 (the Tensor layer makes R
    # = triu(Q^H A), whose gradient reaches Q and A through that product):
    # gX = (gQ + Q sym(triu(-Q^H gQ))) U^-H, sym(M) = M + M^H - Re(diag(M)); zero for A's other columns
    from .layout import pad
    a = ins[0]
    x, u = _qr_square(a, out, complete)
    m_ = _triangle(-matmul(adjoint(out), g), True)
    d = _diag_part(m_)
    rhs = g + matmul(out, m_ + adjoint(m_) - (_like(real(d), d) if _is_complex_value(d) else d))
    gx = adjoint(triangular_solve(u, adjoint(rhs), upper=True))  # rhs U^-H
    n, k = shape_of(a)[-1], shape_of(x)[-1]
    return (gx if k == n else pad(gx, widths=((0, 0),) * (len(shape_of(a)) - 1) + ((0, n - k),), value=0.0),)


def _qr_q_jvp(ts, ins, out, complete):
    # PyTorch's linalg_qr_jvp: C = Q^H dX U^-1; Q^H dQ is the skew-Hermitian
    # tril(C, -1) - tril(C, -1)^H + i Im(diag(C)) (R's diagonal stays real)
    if ts[0] is None:
        return None
    from .layout import slice_
    x, u = _qr_square(ins[0], out, complete)
    k = shape_of(x)[-1]
    dx = ts[0] if k == shape_of(ins[0])[-1] else slice_(ts[0], key=tuple((0, s, 1) for s in shape_of(x)[:-1]) + ((0, k, 1),))
    d = swap_last(triangular_solve(swap_last(u), swap_last(dx), upper=False))  # dX U^-1
    c = matmul(adjoint(out), d)
    lo = _triangle(c, False) - _diag_part(c)
    qhdq = lo - adjoint(lo)
    if _is_complex_value(c):
        qhdq = qhdq + _i_imag(_diag_part(c))
    return d - matmul(out, c - qhdq)


qr_q = Primitive("qr_q", _qr_q_impl, abstract=_qr_abstract, vjp=_qr_q_vjp, jvp=_qr_q_jvp, saves="in,out",
                 node_name="LinalgQrBackward0", no_lowering=_NO_LOWERING, batch=_front_batch("qr_q"))


# ---------------------------------------------------------------- matrix exponential
def _expm_impl(a):
    import scipy.linalg
    return scipy.linalg.expm(a) if a.size else a.copy()


def _expm_block(a, t):
    """The upper-right block of exp([[A, T], [0, A]]): the derivative of exp at ``A`` in
    direction ``T`` (Mathias 1996), itself a matrix exponential, so differentiable again."""
    from .creation import full
    from .layout import concatenate, slice_
    s = shape_of(a)
    nd, n = len(s), s[-1]
    z = full(shape=s, value=0.0, dtype=a.dtype.np)
    big = concatenate(concatenate(a, t, axis=nd - 1), concatenate(z, a, axis=nd - 1), axis=nd - 2)
    return slice_(matrix_exp(big), key=tuple((0, d, 1) for d in s[:-2]) + ((0, n, 1), (n, 2 * n, 1)))


matrix_exp = Primitive("matrix_exp", _expm_impl, abstract=lambda a, p: a[0],
                       # <G, D exp(A)[T]> = <D exp(A^T)[G], T>
                       vjp=holomorphic(lambda g, ins, out, needs: (_expm_block(swap_last(ins[0]), g),)),
                       jvp=lambda ts, ins, out: None if ts[0] is None else _expm_block(ins[0], ts[0]),
                       saves="in", node_name="LinalgMatrixExpBackward0", no_lowering=_NO_LOWERING,
                       batch=_front_batch("matrix_exp"))


# ---------------------------------------------------------------- singular value decomposition
def _svd_sizes(m: int, n: int, full: bool):
    """k = min(m, n) and the column count of U and row count of Vh (m and n when ``full``, else k)."""
    k = min(m, n)
    return k, (m if full else k), (n if full else k)


def _svd_abstract(avals, params):
    (sa, da), = avals
    if len(sa) < 2:
        raise ValueError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    m, n = sa[-2:]
    k, cu, cv = _svd_sizes(m, n, params["full_matrices"])
    return sa[:-2] + (m * cu + k + cv * n,), da


def _svd_impl(a, full_matrices):
    """U, S and Vh of each matrix of ``a``, packed on one last axis: U's m*cu elements (row
    major), S's k, Vh's cv*n (a primitive has one result; ``svd_split`` unpacks them)."""
    *batch, m, n = a.shape
    batch = tuple(batch)
    k, cu, cv = _svd_sizes(m, n, full_matrices)
    if a.size == 0:  # LAPACK has nothing to do; an empty side's full basis is the identity (PyTorch's)
        u = np.broadcast_to(np.eye(m, cu, dtype=a.dtype), batch + (m, cu))
        vh = np.broadcast_to(np.eye(cv, n, dtype=a.dtype), batch + (cv, n))
        s = np.zeros(batch + (k,), a.dtype)
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)  # (real s, packed as a's dtype)
    return np.concatenate([u.reshape(batch + (m * cu,)), s.astype(a.dtype, copy=False),
                           vh.reshape(batch + (cv * n,))], -1).astype(a.dtype, copy=False)


def svd_split(x, m: int, n: int, full_matrices: bool):
    """U (..., m, cu), S (..., k) and Vh (..., cv, n) of an ``svd`` result (or cotangent) ``x``."""
    from .layout import reshape, slice_
    k, cu, cv = _svd_sizes(m, n, full_matrices)
    b = shape_of(x)[:-1]
    lead = tuple((0, d, 1) for d in b)
    u = reshape(slice_(x, key=lead + ((0, m * cu, 1),)), shape=b + (m, cu))
    s = slice_(x, key=lead + ((m * cu, m * cu + k, 1),))
    vh = reshape(slice_(x, key=lead + ((m * cu + k, m * cu + k + cv * n, 1),)), shape=b + (cv, n))
    return u, s, vh


def _narrow_last(x, k: int, axis: int):
    """``x`` cut to its first ``k`` entries along ``axis`` (-1 or -2)."""
    from .layout import slice_
    s = shape_of(x)
    if s[axis] == k:
        return x
    ax = len(s) + axis
    return slice_(x, key=tuple((0, d, 1) if i != ax else (0, k, 1) for i, d in enumerate(s)))


def _eye_like(k: int, dtype):
    from .creation import iota
    from .elementwise import cast, eq
    from .layout import reshape
    r = reshape(iota(n=k, dtype=np.dtype(np.int64)), shape=(k, 1))
    c = reshape(iota(n=k, dtype=np.dtype(np.int64)), shape=(1, k))
    return cast(eq(r, c), dtype=dtype)


def _row(v):
    """``v`` (..., k) as (..., 1, k)."""
    from .layout import reshape
    s = shape_of(v)
    return reshape(v, shape=s[:-1] + (1, s[-1]))


def _col(v):
    """``v`` (..., k) as (..., k, 1)."""
    from .layout import reshape
    return reshape(v, shape=shape_of(v) + (1,))


def _gap(s):
    """E with E_ij = s_j^2 - s_i^2, its (zero) diagonal replaced by 1 (only 0 / E_ii is taken)."""
    s2 = s * s
    return _row(s2) - _col(s2) + _eye_like(shape_of(s)[-1], s.dtype.np)


def _svd_backward(gu, gs, gvh, u, s, vh):
    """PyTorch's svd_backward for the reduced factors: with E_ij = s_j^2 - s_i^2,
    skew(X) = X - X^H, J = (skew(U^H gU) S + S skew(Vh gVh^H)) / E + diag(gS)
    (+ i Im(diag(U^H gU)) / S for complex matrices); gA = U J Vh, plus
    (I - U U^H) gU S^-1 Vh when m > n, or U S^-1 gVh (I - V Vh) when m < n."""
    from .elementwise import div
    m, n = shape_of(u)[-2], shape_of(vh)[-1]
    uhgu = matmul(adjoint(u), gu)
    vhgv = matmul(vh, adjoint(gvh))
    _phase_free(uhgu + vhgv, _SVD_PHASE)  # (a loss may depend on U's and V's phases together)
    j = div(matmul(uhgu - adjoint(uhgu), _diag_of(s)) + matmul(_diag_of(s), vhgv - adjoint(vhgv)), _gap(s))
    j = j + _diag_of(gs)
    if _is_complex_value(uhgu):
        j = j + _diag_of(div(_i_imag(_diagonal(uhgu)), s))
    if m > n:
        gusinv = div(gu, _row(s))
        return matmul(matmul(u, j) + gusinv - matmul(u, matmul(adjoint(u), gusinv)), vh)
    if m < n:
        sinvgvh = div(gvh, _col(s))
        return matmul(u, matmul(j, vh) + sinvgvh - matmul(matmul(sinvgvh, adjoint(vh)), vh))
    return matmul(u, matmul(j, vh))


def _diag_of(v):
    """The diagonal matrices with ``v`` (..., k) on their diagonals."""
    return _row(v) * _eye_like(shape_of(v)[-1], v.dtype.np)


def _zeros_of(x):
    from .creation import full
    return full(shape=shape_of(x), value=0.0, dtype=x.dtype.np)


def _svd_vjp(g, ins, out, needs, full_matrices):
    # With full_matrices, the gradients of U's last m - k columns and Vh's last n - k rows are
    # ignored (as PyTorch's: those vectors are any basis of a complement)
    a = ins[0]
    m, n = shape_of(a)[-2:]
    k = min(m, n)
    if k == 0:
        return (_zeros_of(a),)
    u, s, vh = svd_split(out, m, n, full_matrices)
    gu, gs, gvh = svd_split(g, m, n, full_matrices)
    u, gu = _narrow_last(u, k, -1), _narrow_last(gu, k, -1)
    vh, gvh = _narrow_last(vh, k, -2), _narrow_last(gvh, k, -2)
    return (_svd_backward(gu, gs, gvh, u, s, vh),)


def _svd_jvp(ts, ins, out, full_matrices):
    # PyTorch's linalg_svd_jvp (real case): dP = U^T dA V, dS = diag(dP), X = dP - diag(dS),
    # dU = U (sym(X S) / E) [+ (I - U U^T) dA V S^-1], dVh = -(sym(S X) / E) Vh [+ S^-1 U^T dA (I - V Vh)];
    # full_matrices: the extra columns of U / rows of Vh get a zero tangent
    if ts[0] is None:
        return None
    if _is_complex_value(ins[0]):
        raise NotImplementedError("linalg.svd: forward-mode derivatives of complex matrices' singular vectors are "
                                  "not implemented in fusegrad (svdvals' are)")
    from .elementwise import div
    from .layout import concatenate, pad, reshape
    a, da = ins[0], ts[0]
    m, n = shape_of(a)[-2:]
    k, cu, cv = _svd_sizes(m, n, full_matrices)
    if k == 0:
        return _zeros_of(out)
    u, s, vh = svd_split(out, m, n, full_matrices)
    u, vh = _narrow_last(u, k, -1), _narrow_last(vh, k, -2)
    v = swap_last(vh)
    dp = matmul(swap_last(u), matmul(da, v))
    eye = _eye_like(k, s.dtype.np)
    from .reduce import reduce_sum
    nd = len(shape_of(dp))
    ds = reduce_sum(dp * eye, axes=(nd - 1,), keepdims=False)
    dp = dp - dp * eye  # the rotations of the singular vectors come from dP's off-diagonal part
    e = _gap(s)
    x = dp * _row(s)
    du = matmul(u, div(x + swap_last(x), e))
    y = _col(s) * dp
    dvh = -matmul(div(y + swap_last(y), e), vh)
    if m > n:
        davsinv = matmul(da, div(v, _row(s)))
        du = du + davsinv - matmul(u, matmul(swap_last(u), davsinv))
    elif m < n:
        uhdasinv = matmul(div(swap_last(u), _col(s)), da)
        dvh = dvh + uhdasinv - matmul(matmul(uhdasinv, v), vh)
    b = shape_of(out)[:-1]
    nb = len(b)
    if cu != k:
        du = pad(du, widths=((0, 0),) * (nb + 1) + ((0, cu - k),), value=0.0)
    if cv != k:
        dvh = pad(dvh, widths=((0, 0),) * nb + ((0, cv - k), (0, 0)), value=0.0)
    return concatenate(reshape(du, shape=b + (m * cu,)), ds, reshape(dvh, shape=b + (cv * n,)), axis=nb)


svd = Primitive("svd", _svd_impl, abstract=_svd_abstract, vjp=_svd_vjp, jvp=_svd_jvp, saves="in,out",
                node_name="LinalgSvdBackward0", no_lowering=_NO_LOWERING, batch=_front_batch("svd"))


def _real_dtype(da: np.dtype) -> np.dtype:
    """The dtype of the singular values or eigenvalues of matrices of dtype ``da`` (real)."""
    return real_of(da) if da.kind == "c" else da


def _svdvals_abstract(avals, params):
    (sa, da), = avals
    if len(sa) < 2:
        raise ValueError("linalg.svdvals: The input tensor A must have at least 2 dimensions.")
    return sa[:-2] + (min(sa[-2:]),), _real_dtype(np.dtype(da))


def _svdvals_impl(a):
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (min(a.shape[-2:]),), _real_dtype(a.dtype))
    return np.linalg.svd(a, compute_uv=False).astype(_real_dtype(a.dtype), copy=False)


def _svdvals_factors(a):
    m, n = shape_of(a)[-2:]
    return svd_split(svd(a, full_matrices=False), m, n, False)


def _svdvals_vjp(g, ins, out, needs):
    # gA = U diag(gS) Vh: no division by singular value gaps, so it holds at repeated ones
    a = ins[0]
    if min(shape_of(a)[-2:]) == 0:
        return (_zeros_of(a),)
    u, _, vh = _svdvals_factors(a)
    return (matmul(u * _row(_like(g, u)), vh),)


def _svdvals_jvp(ts, ins, out):
    # dS_i = Re(u_i^H dA v_i)
    if ts[0] is None:
        return None
    a = ins[0]
    if min(shape_of(a)[-2:]) == 0:
        return _zeros_of(out)
    from .reduce import reduce_sum
    u, _, vh = _svdvals_factors(a)
    nd = len(shape_of(vh))
    if _is_complex_value(a):
        return real(reduce_sum(matmul(adjoint(u), ts[0]) * conj(vh), axes=(nd - 1,), keepdims=False))
    return reduce_sum(matmul(swap_last(u), ts[0]) * vh, axes=(nd - 1,), keepdims=False)


svdvals = Primitive("svdvals", _svdvals_impl, abstract=_svdvals_abstract, vjp=_svdvals_vjp, jvp=_svdvals_jvp,
                    saves="in", node_name="LinalgSvdBackward0", no_lowering=_NO_LOWERING,
                    batch=_front_batch("svdvals"))


# ---------------------------------------------------------------- symmetric eigendecomposition
def _eigh_abstract(vectors: bool):
    """The shape rule of ``eigh`` (``vectors``: eigenvalues (n) and eigenvectors (n*n) packed on
    one last axis) and of ``eigvalsh`` (the n eigenvalues)."""
    def abstract(avals, params):
        (sa, da), = avals
        if len(sa) < 2:
            raise ValueError("linalg.eigh: The input tensor A must have at least 2 dimensions.")
        if sa[-1] != sa[-2]:
            raise ValueError(f"linalg.eigh: A must be batches of square matrices, but they are {sa[-2]} by {sa[-1]} "
                             "matrices")
        n = sa[-1]
        return sa[:-2] + ((n + n * n) if vectors else n,), (da if vectors else _real_dtype(np.dtype(da)))
    return abstract


def _eigh_failed(a: np.ndarray, upper: bool, vectors: bool) -> LinAlgError:
    """PyTorch's error where LAPACK's syevd did not converge: which batch element failed
    first, and its ``info`` (recomputed per matrix, on the error path only)."""
    import scipy.linalg.lapack as lapack
    flat = a.reshape((-1,) + a.shape[-2:])
    syevd = lapack.get_lapack_funcs("syevd", (flat,))
    infos = [int(syevd(m, compute_v=int(vectors), lower=int(not upper))[-1]) for m in flat]
    bad = next((i for i, x in enumerate(infos) if x != 0), 0)
    where = f"(Batch element {bad}): " if a.ndim > 2 else ""
    return LinAlgError(f"linalg.eigh: {where}The algorithm failed to converge because the input matrix is "
                       f"ill-conditioned or has too many repeated eigenvalues (error code: {infos[bad] or 1}).")


def _eigh_impl(a, upper):
    """The eigenvalues (ascending) and eigenvectors (as columns) of each symmetric matrix of
    ``a``, reading only its lower (``upper``: upper) triangle, packed on one last axis: the n
    eigenvalues, then V's n*n elements (row major); ``eigh_split`` unpacks them."""
    *batch, n, _ = a.shape
    batch = tuple(batch)
    if a.size == 0:
        return np.zeros(batch + (n + n * n,), a.dtype)
    try:
        w, v = np.linalg.eigh(a, UPLO="U" if upper else "L")
    except np.linalg.LinAlgError:
        raise _eigh_failed(a, upper, True) from None
    # (a Hermitian a's real eigenvalues packed as its dtype)
    return np.concatenate([w.astype(a.dtype, copy=False), v.reshape(batch + (n * n,)).astype(a.dtype, copy=False)],
                          -1)


def eigh_split(x, n: int):
    """The eigenvalues (..., n) and eigenvectors (..., n, n) of an ``eigh`` result (or cotangent) ``x``."""
    from .layout import reshape, slice_
    b = shape_of(x)[:-1]
    lead = tuple((0, d, 1) for d in b)
    w = slice_(x, key=lead + ((0, n, 1),))
    v = reshape(slice_(x, key=lead + ((n, n + n * n, 1),)), shape=b + (n, n))
    return w, v


def _eig_gap(w):
    """E with E_ij = w_j - w_i, its (zero) diagonal replaced by 1 (PyTorch's Econj, real case)."""
    return _row(w) - _col(w) + _eye_like(shape_of(w)[-1], w.dtype.np)


def _eigen_parts(g, out, n: int, which: str) -> tuple:
    """The eigenvalues, eigenvectors, the eigenvalues' cotangent and V^H gV of an ``eigh`` or
    ``eig`` result and cotangent, the loss checked not to depend on the eigenvectors' phases."""
    w, v = eigh_split(out, n)
    gw, gv = eigh_split(g, n)
    x = matmul(adjoint(v), gv)
    _phase_free(x, _EIG_PHASE.format(which))
    return w, v, gw, x


def _eigh_vjp(g, ins, out, needs, upper):
    # PyTorch's linalg_eig_backward, Hermitian case: with E_ij = w_j - w_i,
    # gA = V (skew(V^H gV) / 2 / E + diag(gw)) V^H, Hermitian (not restricted to the triangle
    # read, as PyTorch's). Where V^T gV's skew part is exactly 0 (no gradient reaches V:
    # eigh(A).eigenvalues alone) its quotient is 0, not 0/0 at repeated eigenvalues, as
    # PyTorch's, which skips that term when gV is undefined (the divisor is 1 there, so
    # neither the quotient nor its derivatives make a NaN).
    from .elementwise import div, eq, where
    a = ins[0]
    n = shape_of(a)[-1]
    if n == 0:
        return (_zeros_of(a),)
    w, v, gw, x = _eigen_parts(g, out, n, "eigh")
    x = (x - adjoint(x)) * 0.5
    x = div(x, where(eq(x, 0.0), 1.0, _eig_gap(w)))
    return (matmul(v, matmul(x + _diag_of(gw), adjoint(v))),)


def _eigh_jvp(ts, ins, out, upper):
    # PyTorch's linalg_eig_jvp, Hermitian case: dP = V^H dA V, dw = Re(diag(dP)),
    # dV = V ((dP - diag(dP)) / E)
    if ts[0] is None:
        return None
    from .elementwise import div
    from .layout import concatenate, reshape
    from .reduce import reduce_sum
    a, da = ins[0], ts[0]
    n = shape_of(a)[-1]
    if n == 0:
        return _zeros_of(out)
    w, v = eigh_split(out, n)
    dp = matmul(adjoint(v), matmul(da, v))
    eye = _eye_like(n, w.dtype.np)
    nd = len(shape_of(dp))
    dw = reduce_sum(dp * eye, axes=(nd - 1,), keepdims=False)
    if _is_complex_value(dw):
        dw = _like(real(dw), dw)
    dv = matmul(v, div(dp - dp * eye, _eig_gap(w)))
    b = shape_of(out)[:-1]
    return concatenate(dw, reshape(dv, shape=b + (n * n,)), axis=len(b))


eigh = Primitive("eigh", _eigh_impl, abstract=_eigh_abstract(True), vjp=_eigh_vjp, jvp=_eigh_jvp, saves="out",
                 node_name="LinalgEighBackward0", no_lowering=_NO_LOWERING, batch=_front_batch("eigh"))


def _eigvalsh_impl(a, upper):
    *batch, n, _ = a.shape
    if a.size == 0:
        return np.zeros(tuple(batch) + (n,), _real_dtype(a.dtype))
    try:
        return np.linalg.eigvalsh(a, UPLO="U" if upper else "L").astype(_real_dtype(a.dtype), copy=False)
    except np.linalg.LinAlgError:
        raise _eigh_failed(a, upper, False) from None


def _eigvalsh_vectors(a, upper):
    return eigh_split(eigh(a, upper=upper), shape_of(a)[-1])[1]


def _eigvalsh_vjp(g, ins, out, needs, upper):
    # gA = V diag(gw) V^H: no division by eigenvalue gaps, so it holds at repeated ones
    a = ins[0]
    if shape_of(a)[-1] == 0:
        return (_zeros_of(a),)
    v = _eigvalsh_vectors(a, upper)
    return (matmul(v * _row(_like(g, v)), adjoint(v)),)


def _eigvalsh_jvp(ts, ins, out, upper):
    # dw_i = Re(v_i^H dA v_i)
    if ts[0] is None:
        return None
    a = ins[0]
    if shape_of(a)[-1] == 0:
        return _zeros_of(out)
    from .reduce import reduce_sum
    v = _eigvalsh_vectors(a, upper)
    nd = len(shape_of(v))
    if _is_complex_value(v):
        return real(reduce_sum(conj(v) * matmul(ts[0], v), axes=(nd - 2,), keepdims=False))
    return reduce_sum(v * matmul(ts[0], v), axes=(nd - 2,), keepdims=False)


eigvalsh = Primitive("eigvalsh", _eigvalsh_impl, abstract=_eigh_abstract(False), vjp=_eigvalsh_vjp,
                     jvp=_eigvalsh_jvp, saves="in", node_name="LinalgEighBackward0", no_lowering=_NO_LOWERING,
                     batch=_front_batch("eigvalsh"))


# ---------------------------------------------------------------- general eigendecomposition
def _eig_abstract(avals, params):
    (sa, da), = avals
    if len(sa) < 2 or sa[-1] != sa[-2]:
        raise ValueError(f"linalg.eig: A must be batches of square matrices, but they are {sa[-2:]} matrices")
    n, da = sa[-1], np.dtype(da)
    return sa[:-2] + (n + n * n,), (da if da.kind == "c" else complex_of(da))


def _eig_impl(a):
    """LAPACK's general eigendecomposition (geev, as PyTorch's): the n eigenvalues, then the
    unit-norm eigenvectors (as columns, n*n row major), complex, packed on one last axis."""
    *batch, n, _ = a.shape
    ctype = a.dtype if a.dtype.kind == "c" else complex_of(a.dtype)
    if a.size == 0:
        return np.zeros(tuple(batch) + (n + n * n,), ctype)
    w, v = np.linalg.eig(a)
    return np.concatenate([w.astype(ctype), v.reshape(tuple(batch) + (n * n,)).astype(ctype)], -1)


def _eig_vjp(g, ins, out, needs):
    # PyTorch's linalg_eig_backward, general case: with E_ij = conj(w_j) - conj(w_i) (1 on the
    # diagonal) and X = V^H gV projected onto the unit-norm eigenvectors' tangent space,
    # X - V^H V diag(Re(diag(X))): gA = V^-H (X / E + diag(gw)) V^H, its real part for a real A
    from .elementwise import div
    a = ins[0]
    n = shape_of(a)[-1]
    if n == 0:
        return (_zeros_of(a),)
    w, v, gw, x = _eigen_parts(g, out, n, "eig")
    vh = adjoint(v)
    re_diag = real(_diagonal(x))
    x = x - matmul(vh, v * _row(_like(re_diag, v)))
    wc = conj(w)
    ga = solve(vh, matmul(div(x, _row(wc) - _col(wc) + _eye_like(n, wc.dtype.np)) + _diag_of(gw), vh))
    return (ga if _is_complex_value(a) else real(ga),)


def _eig_jvp(ts, ins, out):
    # PyTorch's linalg_eig_jvp, general case: dP = V^-1 dA V, dw = diag(dP), X = (dP / E) with a
    # zero diagonal (E_ij = w_j - w_i), dV = V (X - diag(Re(diag(V^H V X)))) (unit norms kept)
    if ts[0] is None:
        return None
    from .elementwise import div
    from .layout import concatenate, reshape
    n = shape_of(ins[0])[-1]
    if n == 0:
        return _zeros_of(out)
    w, v = eigh_split(out, n)
    eye = _eye_like(n, v.dtype.np)
    dp = solve(v, matmul(_like(ts[0], v), v))
    dw = _diagonal(dp)
    x = div(dp, _row(w) - _col(w) + eye)
    x = x - x * eye
    norms = real(_diagonal(matmul(adjoint(v), matmul(v, x))))
    dv = matmul(v, x - _diag_of(_like(norms, v)))
    b = shape_of(out)[:-1]
    return concatenate(dw, reshape(dv, shape=b + (n * n,)), axis=len(b))


eig = Primitive("eig", _eig_impl, abstract=_eig_abstract, vjp=_eig_vjp, jvp=_eig_jvp, saves="in,out",
                node_name="LinalgEigBackward0", no_lowering=_NO_LOWERING, batch=_front_batch("eig"))
