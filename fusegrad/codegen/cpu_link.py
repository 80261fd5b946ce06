"""How a graph's Numba entry calls its loop kernels: through their machine-code addresses.

An ``@njit`` function that calls another links the callee's LLVM module into its own and
optimizes the whole again, so every kernel's body would be optimized twice, once for the
kernel and once inside the entry (W5's gradient kernel: 1.5 s more). The entry instead
receives the kernels' addresses (a uint64 array the executable passes on each call) and
calls each through ``call_at``, in Numba's own calling convention: nothing is linked, and
the entry, holding no address itself, stays cacheable on disk."""
from __future__ import annotations

import numpy as np
from numba import types
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


def address(dispatcher, dtypes, n_sizes: int = 0) -> int:
    """The native entry of ``dispatcher`` compiled (or loaded from Numba's disk cache) for
    flat C-contiguous arrays of ``dtypes`` and ``n_sizes`` int64 sizes: what ``call_at``
    calls."""
    sig = signature(dtypes, n_sizes)
    dispatcher.compile(sig)
    cres = dispatcher.overloads[sig]
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
