"""Rounding a float to the nearest bfloat16 or float16 value, kept in its own dtype (the
scalar operation "reduce_precision" in CUDA kernels; cpu_half is the CPU one). Exact in
float64: ``frexp``/``ldexp`` split off the exponent, ``rint`` rounds the mantissa to the
format's bits (nearest even), values below the smallest normal round on the subnormal
grid, and values from the format's largest finite value plus half its ulp up become inf;
NaN stays NaN. The formats' constants are cuda_render.HALF_FORMATS. A device function on a GPU, plain Python on the simulator."""
from __future__ import annotations

import math

import numpy as np

from ..runtime.cuda_driver import numba_cuda, simulated

def _rounder():
    cuda = numba_cuda()
    if simulated():
        rint = np.rint
    else:
        from numba.cuda import libdevice
        rint = libdevice.rint

    @cuda.jit(device=True)
    def round_half(x, bits, emin, big):
        if x != x:
            return x
        if abs(x) >= big:
            return math.copysign(math.inf, x)
        if abs(x) < 2.0 ** emin:  # the subnormal grid: multiples of 2**(emin - bits + 1)
            q = 2.0 ** (bits - 1 - emin)
            return rint(x * q) / q
        m, e = math.frexp(x)
        return math.ldexp(rint(m * 2.0 ** bits), e - bits)
    return round_half


round_half = _rounder()
