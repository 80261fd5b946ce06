"""Half precision on the device. The cuda backend computes bfloat16/float16 graphs in
float32 (passes.upcast), as the cpu backend does; this module holds what that needs:

- ``round_half``: a float rounded to the nearest value of a half format, kept in its
  dtype (the scalar operation "reduce_precision"; cpu_half is the CPU one). Exact in
  float64: ``frexp``/``ldexp`` split off the exponent, ``rint`` rounds the mantissa to the
  format's bits (nearest even), values below the smallest normal round on the subnormal
  grid, values from the largest finite value plus half its ulp up become inf; NaN stays.
  The formats' constants are cuda_render.HALF_FORMATS.
- ``widen``/``narrow``: a half device array to float32 and back, by kernels that read and
  write the values' 16-bit patterns (Numba's CUDA target has no bfloat16), so a half
  tensor's values never leave the device.

Device functions and kernels on a GPU, plain Python on the simulator."""
from __future__ import annotations

import math

import numpy as np

from ..runtime.cuda_driver import numba_cuda, simulated
from .cuda_render import DEVICE, HALF_FORMATS, SIMULATOR, grid_of

_F32 = np.dtype(np.float32)

cuda = numba_cuda()  # a module global: the simulator swaps it for its fake one in kernels
if simulated():
    _rint = np.rint
else:
    from numba.cuda import libdevice
    _rint = libdevice.rint


@cuda.jit(device=True)
def round_half(x, bits, emin, big):
    if x != x:
        return x
    if abs(x) >= big:
        return math.copysign(math.inf, x)
    if abs(x) < 2.0 ** emin:  # the subnormal grid: multiples of 2**(emin - bits + 1)
        q = 2.0 ** (bits - 1 - emin)
        return _rint(x * q) / q
    m, e = math.frexp(x)
    return math.ldexp(_rint(m * 2.0 ** bits), e - bits)


@cuda.jit
def _widen(out, pattern, man, ebits):
    emax, bias = (1 << ebits) - 1, (1 << (ebits - 1)) - 1
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        b = np.int32(pattern[i])
        e, m = (b >> man) & emax, b & ((1 << man) - 1)
        if e == emax:
            v = math.nan if m else math.inf
        elif e == 0:
            v = math.ldexp(np.float64(m), int(1 - bias - man))
        else:
            v = math.ldexp(np.float64(m + (1 << man)), int(e - bias - man))
        out[i] = np.float32(-v if b >> (man + ebits) else v)


@cuda.jit
def _narrow(pattern, x, man, ebits, emin, big):
    bias = (1 << (ebits - 1)) - 1
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        v = round_half(np.float64(x[i]), man + 1, emin, big)  # a value of the format
        a = abs(v)
        if v != v:
            e, m = (1 << ebits) - 1, 1 << (man - 1)
        elif a == math.inf:
            e, m = (1 << ebits) - 1, 0
        elif a < 2.0 ** emin:
            e, m = 0, np.int32(a * 2.0 ** (man - emin))
        else:
            f, ex = math.frexp(a)
            e, m = ex - 1 + bias, np.int32((f * 2.0 - 1.0) * 2.0 ** man)
        sign = 1 if math.copysign(1.0, v) < 0 and v == v else 0
        pattern[i] = np.uint16((sign << (man + ebits)) | (e << man) | m)


def _fields(name: str) -> tuple:
    """(stored mantissa bits, exponent bits) of half format ``name``: its smallest normal's
    exponent is 1 - bias, the bias 2**(exponent bits - 1) - 1."""
    bits, emin, _ = HALF_FORMATS[name]
    return bits - 1, (2 - emin).bit_length()


def _launch(n: int) -> tuple:
    return grid_of(n, SIMULATOR if simulated() else DEVICE)


def widen(arr):
    """A float32 device array holding the values of the half device array ``arr``."""
    flat = arr.reshape(arr.size)
    out = cuda.device_array(arr.size, _F32)
    if arr.size:
        _widen[_launch(arr.size)](out, flat.view(np.uint16), *_fields(arr.dtype.name))
    return out.reshape(arr.shape)


def narrow(arr, dtype: np.dtype):
    """A ``dtype`` (bfloat16/float16) device array holding float32 device array ``arr``'s
    values rounded to it (nearest even, overflow to inf, NaN kept)."""
    out = cuda.device_array(arr.size, np.dtype(dtype))
    if arr.size:
        name = np.dtype(dtype).name
        (man, ebits), (_, emin, big) = _fields(name), HALF_FORMATS[name]
        _narrow[_launch(arr.size)](out.view(np.uint16), arr.reshape(arr.size), man, ebits, emin, big)
    return out.reshape(arr.shape)
