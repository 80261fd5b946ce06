"""How a graph's Numba entry calls its loop kernels: through their machine-code addresses.

An ``@njit`` function that calls another links the callee's LLVM module into its own and
optimizes the whole again, so every kernel's body would be optimized twice, once for the
kernel and once inside the entry (W5's gradient kernel: 1.5 s more). The entry instead
receives the kernels' addresses (a uint64 array the executable passes on each call) and
calls each through ``call_at``, in Numba's own calling convention: nothing is linked, and
the entry, holding no address itself, stays cacheable on disk."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def call_at(typingctx, addr, args):
    """``call_at(addr, (a, b, ...))``: call the Numba-compiled function returning None whose
    native entry is at ``addr``, compiled for exactly the types of ``a, b, ...`` (see
    ``address``); an exception it raises propagates."""
    def codegen(context, builder, sig, llargs):
        argtys = list(args.types)
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        vals = cgutils.unpack_tuple(builder, llargs[1], len(argtys))
        status, _ = context.call_conv.call_function(builder, fn, types.none, argtys, vals)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(types.uint64, args), codegen


def signature(dtypes, n_sizes: int = 0) -> tuple:
    """The Numba signature of a kernel taking flat C-contiguous arrays of ``dtypes``, then
    ``n_sizes`` int64 sizes (a shape-symbolic kernel's)."""
    import numba
    return tuple(types.Array(numba.from_dtype(np.dtype(d)), 1, "C") for d in dtypes) + (types.int64,) * n_sizes


# A kernel an entry calls takes the entry's table (cpu_program): the pointer slots, the
# program and where in it the kernel's operands start.
TABLE = (types.Array(types.int64, 1, "C"), types.Array(types.int64, 1, "C"), types.int64)


def address(dispatcher, sig: tuple = TABLE) -> int:
    """The native entry of ``dispatcher`` compiled (or loaded from Numba's disk cache) for
    ``sig``, by default a kernel's table (``TABLE``): what ``call_at`` calls."""
    link_chunks(dispatcher)
    return _native(dispatcher, sig)


def _native(dispatcher, sig: tuple) -> int:
    dispatcher.compile(sig)
    cres = dispatcher.overloads[sig]
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)


# ------------------------------------------------------------ outlined parallel loops
# A ``prange`` loop costs Numba's parfor passes and gufunc lowering in every kernel that has
# one, more than compiling the same loop serial. The renderer
# (cpu_outline) writes a kernel's parallel loop instead as a serial *chunk* function over
# iterations [lo, hi) and has the kernel hand it to ``_launch``, the one parallel function,
# compiled once and cached on disk with the package. Kernel and launcher find each other
# through symbols (``llvm.add_symbol``), as Numba's own code finds its runtime's, so every
# module stays cacheable and takes plain arrays.

LAUNCH = "fusegrad_launch"


@intrinsic
def call_symbol(typingctx, name, args):
    """``call_symbol("sym", (a, b, ...))``: ``call_at`` the function registered as ``sym``."""
    if not isinstance(name, types.StringLiteral):
        return None
    symbol = name.literal_value

    def codegen(context, builder, sig, llargs):
        argtys = list(args.types)
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
        vals = cgutils.unpack_tuple(builder, llargs[1], len(argtys))
        status, _ = context.call_conv.call_function(builder, fn, types.none, argtys, vals)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(name, args), codegen


@intrinsic
def symbol_address(typingctx, name):
    """The address of the function registered as the literal ``name``, as a uint64."""
    if not isinstance(name, types.StringLiteral):
        return None
    symbol = name.literal_value

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []), symbol)
        return builder.ptrtoint(fn, ir.IntType(64))
    return types.uint64(name), codegen


@intrinsic
def thread_count(typingctx):
    """Numba's current thread count, read as its parfors read it (through the threading
    layer's symbol: ``numba.get_num_threads`` in nopython code would make the caller
    uncacheable)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(cgutils.intp_t, []), "get_num_threads")
        return builder.call(fn, [])
    return types.intp(), codegen


@intrinsic
def pointer(typingctx, addr):
    """The integer ``addr`` as a ``void*`` (for ``carray``)."""
    if isinstance(addr, types.Integer):
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return types.voidptr(addr), codegen


@intrinsic
def address_of(typingctx, a):
    """The address of 1-d array ``a``'s first element, as an int64."""
    if isinstance(a, types.Array):
        def codegen(context, builder, sig, args):
            from numba.np.arrayobj import make_array
            return builder.ptrtoint(make_array(sig.args[0])(context, builder, args[0]).data, ir.IntType(64))
        return types.int64(a), codegen


@njit(cache=True)
def operand(ptrs, prog, k, dtype):
    """A kernel's buffer from an entry's table (cpu_program): the 1-d ``dtype`` array in
    slot ``prog[k]`` at byte offset ``prog[k + 1]``, ``prog[k + 2]`` elements long. One
    shared function: spelled out in each kernel, Numba typed and lowered the ``carray``
    anew per buffer, half the compile time of a kernel with many buffers."""
    return carray(pointer(ptrs[prog[k]] + prog[k + 1]), prog[k + 2], dtype)


@njit(cache=True)
def raw_array(addr, size, dtype):
    """The 1-d array of ``size`` ``dtype`` elements at address ``addr`` (owned elsewhere)."""
    return carray(pointer(addr), size, dtype)


@njit(parallel=True, cache=True)
def _launch(chunk, argv, extent, n):
    """Run ``chunk(argv, lo, hi, c)`` for the ``n`` chunks ``c`` of ``range(extent)`` in parallel."""
    for c in prange(n):
        call_at(chunk, (argv, c * extent // n, (c + 1) * extent // n, c))


_LINKED: set = set()  # cache: the symbols registered in this process (LLVM's table has no lookup)


def link_chunks(kernel) -> None:
    """Register the chunk functions of ``kernel``'s module (its ``CHUNKS``: (dispatcher,
    symbol) pairs), compiled or loaded from disk, and the launcher: before the kernel
    compiles, since its code refers to them by symbol."""
    chunks = kernel.py_func.__globals__.get("CHUNKS")
    if not chunks:
        return
    import llvmlite.binding as llvm
    import numba
    numba.get_num_threads()  # starts the threading layer, which registers get_num_threads
    launcher = (types.uint64,) + signature(["uint64"], 2)
    for fn, symbol, sig in [(_launch, LAUNCH, launcher)] + [(f, s, signature(["uint64"], 3)) for f, s in chunks]:
        if symbol not in _LINKED:
            llvm.add_symbol(symbol, _native(fn, sig))
            _LINKED.add(symbol)
