"""Arrays in generated Numba code, as intrinsics: allocation, ``empty(n, np.float32)`` and
``zeros(n, ...)`` (flat, C-contiguous), and offset views, ``tail(a, k)`` (``a[k:]``).

``np.empty`` and ``np.zeros`` are ``@overload`` implementations that Numba compiles as
functions of their own, again for every set of caller flags (an entry and a kernel module
differ), before the caller can be typed, and Numba's own lowering of an allocation compiles
a helper function for the allocator call: a graph's first compile paid for both. These intrinsics emit the NRT call ``np.empty`` ends in (an aligned meminfo) in place.
Likewise a slice ``a[k:]`` goes through Numba's general slicing (bounds clamped, steps,
negative indices) where ``tail`` offsets the data pointer. A large block asks for huge pages
(``cpu_malloc.huge_page_advice``)."""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from .cpu_malloc import HUGE_PAGE_MIN, huge_page_advice

huge_page_advice()  # its symbol known before any cached kernel that calls it is loaded

__all__ = ["IMPORT", "allocate", "empty", "release", "release_blocks", "tail", "zeros"]

IMPORT = "from fusegrad.codegen.cpu_arrays import empty, tail, zeros"  # a generated module's line


def _array_type(n, dtype):
    if isinstance(n, types.Integer) and isinstance(dtype, (types.NumberClass, types.DType)):
        return types.Array(dtype.dtype, 1, "C")
    return None


def _allocate(context, builder, sig, args, zero: bool):
    arrty = sig.return_type
    n = context.cast(builder, args[0], sig.args[0], types.intp)
    datatype = context.get_data_type(arrty.dtype)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(datatype))
    nbytes = builder.mul(n, itemsize)
    meminfo = context.nrt.meminfo_alloc_aligned(builder, size=nbytes,
                                                 align=context.get_preferred_array_alignment(arrty.dtype))
    raw = context.nrt.meminfo_data(builder, meminfo)
    _advise_huge_pages(builder, raw, nbytes)
    data = builder.bitcast(raw, datatype.as_pointer())
    ary = make_array(arrty)(context, builder)
    populate_array(ary, data=data, shape=[n], strides=[itemsize], itemsize=itemsize, meminfo=meminfo)
    if zero:
        cgutils.memset(builder, data, nbytes, 0)
    return impl_ret_new_ref(context, builder, arrty, ary._getvalue())


def _advise_huge_pages(builder, data, nbytes) -> None:
    """``madvise`` the whole 4 KiB pages of a block of at least ``HUGE_PAGE_MIN`` bytes."""
    advice = huge_page_advice()
    if advice is None:
        return
    symbol, flag = advice
    intp = nbytes.type
    big = builder.icmp_unsigned(">=", nbytes, ir.Constant(intp, HUGE_PAGE_MIN))
    with builder.if_then(big, likely=False):
        start = builder.ptrtoint(data, intp)
        first = builder.and_(builder.add(start, ir.Constant(intp, 4095)), ir.Constant(intp, ~4095))
        end = builder.and_(builder.add(start, nbytes), ir.Constant(intp, ~4095))
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(8).as_pointer(), intp, ir.IntType(32)])
        madvise = cgutils.get_or_insert_function(builder.module, fnty, symbol)
        builder.call(madvise, [builder.inttoptr(first, ir.IntType(8).as_pointer()),
                               builder.sub(end, first), ir.Constant(ir.IntType(32), flag)])


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


@intrinsic
def tail(typingctx, a, k):
    """``a[k:]`` of a 1-d array for 0 <= k <= len(a) (unchecked): a view sharing ``a``'s memory."""
    if isinstance(a, types.Array) and a.ndim == 1 and isinstance(k, types.Integer):
        def codegen(context, builder, sig, args):
            arrty = sig.args[0]
            ary = make_array(arrty)(context, builder, args[0])
            off = context.cast(builder, args[1], sig.args[1], types.intp)
            view = make_array(arrty)(context, builder)
            populate_array(view, data=builder.gep(ary.data, [off], inbounds=True),
                           shape=[builder.sub(builder.extract_value(ary.shape, 0), off)],
                           strides=[builder.extract_value(ary.strides, 0)], itemsize=ary.itemsize,
                           meminfo=ary.meminfo, parent=ary.parent)
            return impl_ret_borrowed(context, builder, arrty, view._getvalue())
        return a(a, k), codegen


@intrinsic
def allocate(typingctx, nbytes):
    """A new block of ``nbytes`` from Numba's allocator, as its address (int64), advised to
    use huge pages when large; ``release`` frees it (no reference counting: for blocks
    reached only through addresses, cpu_program)."""
    if isinstance(nbytes, types.Integer):
        def codegen(context, builder, sig, args):
            n = context.cast(builder, args[0], sig.args[0], types.intp)
            raw = context.nrt.allocate(builder, n)
            _advise_huge_pages(builder, raw, n)
            return builder.ptrtoint(raw, ir.IntType(64))
        return types.int64(nbytes), codegen


@intrinsic
def release(typingctx, addr):
    """Free the block at ``addr`` that ``allocate`` returned."""
    if isinstance(addr, types.Integer):
        def codegen(context, builder, sig, args):
            context.nrt.free(builder, builder.inttoptr(args[0], ir.IntType(8).as_pointer()))
            return context.get_dummy_value()
        return types.none(addr), codegen


@njit(cache=True)
def release_blocks(blocks):
    """Free the blocks whose addresses ``blocks`` still holds (a program a kernel's error
    stopped, cpu_program) and clear them."""
    for j in range(len(blocks)):
        if blocks[j]:
            release(blocks[j])
            blocks[j] = 0
