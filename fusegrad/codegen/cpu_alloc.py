"""Array allocation for generated Numba code: ``empty(n, np.float32)`` and ``zeros(n, ...)``,
flat and C-contiguous, as intrinsics.

``np.empty`` and ``np.zeros`` are ``@overload`` implementations that Numba compiles as
functions of their own, again for every set of caller flags (an entry and a kernel module
differ), before the caller can be typed: 40-170 ms each at the first compile of a graph.
An intrinsic's allocation is emitted in place, the same NRT call ``np.empty`` makes."""
from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_new_ref
from numba.extending import intrinsic
from numba.np.arrayobj import _empty_nd_impl

__all__ = ["empty", "zeros"]


def _array_type(n, dtype):
    if isinstance(n, types.Integer) and isinstance(dtype, (types.NumberClass, types.DType)):
        return types.Array(dtype.dtype, 1, "C")
    return None


def _allocate(context, builder, sig, args, zero: bool):
    arrty = sig.return_type
    size = context.cast(builder, args[0], sig.args[0], types.intp)
    ary = _empty_nd_impl(context, builder, arrty, [size])
    if zero:
        cgutils.memset(builder, ary.data, builder.mul(ary.itemsize, ary.nitems), 0)
    return impl_ret_new_ref(context, builder, arrty, ary._getvalue())


@intrinsic
def empty(typingctx, n, dtype):
    """``np.empty(n, dtype)``: a new uninitialized 1-d array."""
    arrty = _array_type(n, dtype)
    if arrty is not None:
        return arrty(n, dtype), lambda context, builder, sig, args: _allocate(context, builder, sig, args, False)


@intrinsic
def zeros(typingctx, n, dtype):
    """``np.zeros(n, dtype)``: a new 1-d array of zeros."""
    arrty = _array_type(n, dtype)
    if arrty is not None:
        return arrty(n, dtype), lambda context, builder, sig, args: _allocate(context, builder, sig, args, True)
