"""Rounding a float32 to the nearest bfloat16 or float16 value, kept in float32 (the scalar
operation "reduce_precision" in generated CPU code: Numba has no bfloat16 and no CPU
float16 arithmetic). Both round to nearest even, overflow to inf and keep NaN, as
ml_dtypes' and NumPy's casts do."""
from __future__ import annotations

import numpy as np
from numba import njit

_F16_INF_FROM = np.float32(65520.0)  # 65504 + half its ulp: a tie with an odd mantissa, rounds to inf
_F16_SUBNORMAL_BELOW = np.float32(2.0 ** -14)  # float16's subnormals: multiples of 2**-24


@njit(inline="always")
def _drop_bits(x, n):
    """x with its low ``n`` mantissa bits rounded off (nearest even; a carry into the
    exponent is the right result, up to inf)."""
    b = np.uint32(np.float32(x).view(np.uint32))
    half = np.uint32((1 << (n - 1)) - 1)
    keep = np.uint32(~np.uint32((1 << n) - 1))
    r = np.uint32((b + half + ((b >> np.uint32(n)) & np.uint32(1))) & keep)
    return r.view(np.float32)


@njit(inline="always")
def round_bfloat16(x):
    if x != x:
        return x
    return _drop_bits(x, 16)


@njit(inline="always")
def round_float16(x):
    if x != x:
        return x
    a = abs(x)
    if a >= _F16_INF_FROM:
        return np.float32(np.inf) if x > 0 else np.float32(-np.inf)
    if a < _F16_SUBNORMAL_BELOW:  # scaling by powers of two is exact; rint rounds to even
        return np.float32(np.rint(x * np.float32(2.0 ** 24)) * np.float32(2.0 ** -24))
    return _drop_bits(x, 13)


ROUND = {"bfloat16": round_bfloat16, "float16": round_float16}
