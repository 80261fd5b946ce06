"""Creation primitives: constant fills and counter-based random numbers.

Random numbers are a pure function of (seed, offset, element index), hashed with
SplitMix64, so eager NumPy code and generated kernels produce the same stream."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive

__all__ = ["full", "iota", "random_bits", "uniform", "normal", "splitmix64"]

full = Primitive("full", lambda shape, value, dtype: np.full(shape, value, dtype=dtype),
                 abstract=lambda a, p: (tuple(p["shape"]), np.dtype(p["dtype"])), kind="creation", nondiff=True)

iota = Primitive("iota", lambda n, dtype: np.arange(n, dtype=dtype),
                 abstract=lambda a, p: ((p["n"],), np.dtype(p["dtype"])), kind="creation", nondiff=True)

_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 counters (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _bits(key, n):
    seed, offset = int(key[0]), int(key[1])
    ctr = np.arange(n, dtype=np.uint64) + np.uint64(offset & 0xFFFFFFFFFFFFFFFF)
    return splitmix64(ctr ^ splitmix64(np.full(1, seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64))[0])


def _uniform_impl(key, shape, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    u = (_bits(key, n) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return u.astype(dtype).reshape(shape)


def _normal_impl(key, shape, dtype):
    """Box-Muller on two uniforms per element drawn from counters 2i and 2i+1."""
    n = int(np.prod(shape, dtype=np.int64))
    b = (_bits(key, 2 * n) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    u1, u2 = 1.0 - b[0::2], b[1::2]
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    return z.astype(dtype).reshape(shape)


random_bits = _bits
uniform = Primitive("uniform", _uniform_impl, abstract=lambda a, p: (tuple(p["shape"]), np.dtype(p["dtype"])),
                    kind="random", nondiff=True, effect=True)
normal = Primitive("normal", _normal_impl, abstract=lambda a, p: (tuple(p["shape"]), np.dtype(p["dtype"])),
                   kind="random", nondiff=True, effect=True)
