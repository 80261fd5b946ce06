"""The smallest Numba program: W6 times a fresh process importing Numba and calling this
function from Numba's on-disk cache, the start-up every first call that runs a Numba
kernel pays (import, CPU target initialization, loading cached machine code) before any
of fusegrad's own work."""
import numba


@numba.njit(cache=True)
def one(x: float) -> float:
    return x + 1.0
