"""Batched matrix multiplication: NumPy's matmul on operands of rank >= 2 (the Tensor
layer turns vectors into matrices), broadcasting the batch dimensions. Lowers to BLAS."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive
from .batchdims import elementwise_rule, to_front
from .elementwise import sum_to
from .shapes import broadcast_shapes, shape_of

__all__ = ["matmul", "swap_last"]


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


def _mm_vjp(g, ins, out, needs):
    a, b = ins
    ga = sum_to(matmul(g, swap_last(b)), shape_of(a)) if needs[0] else None
    gb = sum_to(matmul(swap_last(a), g), shape_of(b)) if needs[1] else None
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
