"""In-place sampling methods of PyTorch's Tensor beyond ``uniform_``/``normal_``:
``random_``, ``exponential_``, ``geometric_``, ``log_normal_`` and ``cauchy_``, each an
inverse-CDF transform of uniform draws (from ``generator`` when given), written without
gradient tracking as PyTorch's."""
from __future__ import annotations

import math

import numpy as np

from . import ops as O
from .exports import op
from .tensor import Tensor


def _uniform(self: Tensor, generator) -> Tensor:
    """Uniform draws on ``[0, 1)`` of ``self``'s shape in float64 (fine enough for every transform)."""
    from ..ir import dtypes as D
    from .factory import rand
    return rand(tuple(self.shape), dtype=D.float64, generator=generator, device=self.device)


def _fill(self: Tensor, values, name: str) -> Tensor:
    """``self`` overwritten by ``values()`` (see ops.sampled_)."""
    return O.sampled_(self, values, name)


@op(function=False)
def random_(self: Tensor, from_=0, to=None, *, generator=None) -> Tensor:
    """Integers uniform on ``[from, to - 1]`` (``random_(to)``: from 0; no bound: up to the largest
    integer the dtype holds exactly)."""
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        dt = self._data.dtype
        nmant = 7 if dt.kind == "V" else np.finfo(dt).nmant if dt.kind == "f" else None  # (V: bfloat16)
        to = (2 ** (nmant + 1) + 1 if nmant is not None else
              2 if dt.kind == "b" else int(np.iinfo(dt).max) + 1)
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    return _fill(self, lambda: O.floor(O.add(O.mul(_uniform(self, generator), to - from_), from_)), "RandomBackward0")


@op(function=False)
def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Exponential draws of rate ``lambd``."""
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _fill(self, lambda: O.div(O.neg(O.log1p(O.neg(_uniform(self, generator)))), lambd), "ExponentialBackward0")


@op(function=False)
def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Geometric draws: the number of Bernoulli(``p``) trials up to the first success (from 1)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform(self, generator)
    return _fill(self, lambda: O.clamp_min(O.ceil(O.div(O.log1p(O.neg(u)), math.log1p(-p))), 1.0), "GeometricBackward0")


@op(function=False)
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """``exp`` of normal draws of ``mean`` and ``std``."""
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    from ..ir import dtypes as D
    from .factory import randn
    z = randn(tuple(self.shape), dtype=D.float64, generator=generator, device=self.device)
    return _fill(self, lambda: O.exp(O.add(O.mul(z, std), mean)), "LogNormalBackward0")


@op(function=False)
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Cauchy draws of ``median`` and scale ``sigma``."""
    if sigma <= 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform(self, generator)
    return _fill(self, lambda: O.add(O.mul(O.tan(O.mul(O.sub(u, 0.5), math.pi)), sigma), median), "CauchyBackward0")
