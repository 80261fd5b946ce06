"""Batched matrix multiplication: NumPy's matmul on operands of rank >= 2 (the Tensor
layer turns vectors into matrices), broadcasting the batch dimensions. Lowers to BLAS."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive
from .batchdims import elementwise_rule, to_front
from .elementwise import sum_to
from .shapes import broadcast_shapes, shape_of

__all__ = ["matmul", "swap_last", "cholesky", "triangular_solve", "LinAlgError"]


def swap_last(x):
    from .layout import transpose
    nd = len(shape_of(x))
    return transpose(x, perm=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _mm_abstract(avals, params):
    (sa, da), (sb, db) = avals
    if sa[-1] != sb[-2]:
        raise ValueError(f"shapes cannot be multiplied ({'x'.join(map(str, sa))} and {'x'.join(map(str, sb))})")
    return broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]), da


def _mm_impl(a, b):
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"shapes cannot be multiplied ({'x'.join(map(str, a.shape))} and {'x'.join(map(str, b.shape))})")
    if a.dtype.itemsize == 2 and a.dtype.kind != "i":
        # float16/bfloat16: accumulate in float32 (as PyTorch's CPU kernels; NumPy has no BLAS for
        # them, and returns float32 for ml_dtypes' bfloat16), round once to the operands' dtype
        f32 = np.float32
        with np.errstate(over="ignore", invalid="ignore"):  # inf in, or overflow out: as PyTorch, silently
            return np.matmul(a.astype(f32), b.astype(f32)).astype(a.dtype)
    return np.matmul(a, b)


def _transposed(x) -> bool:
    """``x`` is an eager matrix stored transposed (Fortran order: ``weight.t()``)."""
    d = getattr(x, "_data", None)
    return type(d) is np.ndarray and d.ndim == 2 and d.flags.f_contiguous and not d.flags.c_contiguous


def _mm_vjp(g, ins, out, needs):
    # A 2-D operand stored transposed gets its gradient in the same order, computed as the
    # transpose of a C-ordered product (PyTorch's layout rule: a gradient's strides follow its
    # input's): the weight gradient of Linear's x @ w.t() comes out as w's own C order,
    # which .grad would otherwise get by a strided copy.
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


matmul = Primitive("matmul", _mm_impl, abstract=_mm_abstract, vjp=_mm_vjp, jvp=_mm_jvp, saves="in",
                   kind="matmul", node_name="BmmBackward0")


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
class LinAlgError(RuntimeError):
    """A matrix had no factorization (as ``torch.linalg.LinAlgError``, a RuntimeError)."""


_NO_LOWERING = "matrix factorizations and solves run in NumPy (LAPACK); they have no loop kernel"


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
    # A = L L^T: gA = sym(L^-T Phi(L^T gL) L^-1) (Murray 2016), by two triangular solves
    lt = swap_last(out)
    p = _phi(matmul(lt, g))
    y = triangular_solve(lt, p, upper=True)  # L^-T P
    s_t = triangular_solve(lt, swap_last(y), upper=True)  # (L^-T P L^-1)^T
    return ((s_t + swap_last(s_t)) * 0.5,)


def _cholesky_jvp(ts, ins, out):
    if ts[0] is None:
        return None
    # dL = L Phi(L^-1 dA L^-T)
    x = triangular_solve(out, ts[0], upper=False)  # L^-1 dA
    m = swap_last(triangular_solve(out, swap_last(x), upper=False))  # L^-1 dA L^-T
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


def _cholesky_batch(args, bdims):
    return cholesky(to_front(args[0], bdims[0])), 0


cholesky = Primitive("cholesky", _cholesky_impl, abstract=lambda a, p: a[0], vjp=_cholesky_vjp,
                     jvp=_cholesky_jvp, saves="out", node_name="LinalgCholeskyExBackward0",
                     no_lowering=_NO_LOWERING, batch=_cholesky_batch)


def _solve_impl(a, b, upper):
    """Solve ``A X = B`` reading only ``A``'s upper or lower triangle; batch axes broadcast."""
    a = np.triu(a) if upper else np.tril(a)
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise LinAlgError("linalg.solve_triangular: The diagonal of A has a zero: the system is singular") from None


def _solve_abstract(avals, params):
    (sa, da), (sb, db) = avals
    if sa[-1] != sa[-2] or sa[-1] != sb[-2]:
        raise ValueError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B "
                         f"({'x'.join(map(str, sa))} and {'x'.join(map(str, sb))})")
    return broadcast_shapes(sa[:-2], sb[:-2]) + sb[-2:], np.result_type(da, db)


def _solve_vjp(g, ins, out, needs, upper):
    a, b = ins
    gb = triangular_solve(swap_last(a), g, upper=not upper)  # A^-T g
    ga = sum_to(_triangle(-matmul(gb, swap_last(out)), upper), shape_of(a)) if needs[0] else None
    return ga, (sum_to(gb, shape_of(b)) if needs[1] else None)


def _solve_jvp(ts, ins, out, upper):
    a, b = ins
    rhs = ts[1]
    if ts[0] is not None:
        t = -matmul(_triangle(ts[0], upper), out)
        rhs = t if rhs is None else rhs + t
    if rhs is None:
        return None
    x = triangular_solve(a, rhs, upper=upper)
    if shape_of(x) != shape_of(out):
        from .layout import broadcast_to
        x = broadcast_to(x, shape=shape_of(out))
    return x


triangular_solve = Primitive("triangular_solve", _solve_impl, abstract=_solve_abstract, vjp=_solve_vjp,
                             jvp=_solve_jvp, saves="in,out", node_name="LinalgSolveTriangularBackward0",
                             no_lowering=_NO_LOWERING,
                             batch=lambda args, bdims, upper: (triangular_solve(*_square_batch(args, bdims),
                                                                                upper=upper), 0))
