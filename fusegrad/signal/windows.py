"""``torch.signal.windows``: ``M``-point windows (symmetric, or with ``sym=False`` periodic:
the first ``M`` points of the ``M + 1``-point one), each a function of a ``linspace`` of
its dtype, computed with the same operations in the same order as PyTorch's."""
from __future__ import annotations

import math
from typing import Iterable, Optional

from ..ir import dtypes as D
from .. import special
from ..runtime import ops as O
from ..runtime.factory import arange, empty, linspace, ones, tensor
from ..runtime.tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checks(name: str, M: int, dtype, layout) -> object:
    """The window's dtype (the default when None), after PyTorch's checks."""
    dtype = D.get_default_dtype() if dtype is None else dtype
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (D.float32, D.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    return dtype


def _short(M: int, dtype, device, requires_grad: bool, one: bool = True) -> Optional[Tensor]:
    """The window of 0 points (and, with ``one``, of 1 point), else None."""
    if M == 0:
        return empty((0,), dtype=dtype, device=device).requires_grad_(requires_grad)
    if M == 1 and one:
        return ones((1,), dtype=dtype, device=device).requires_grad_(requires_grad)
    return None


def _points(start, end, M: int, dtype, device, requires_grad: bool) -> Tensor:
    return linspace(start, end, M, dtype=dtype, device=device).requires_grad_(requires_grad)


def exponential(M: int, *, center: Optional[float] = None, tau: float = 1.0, sym: bool = True, dtype=None,
                layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """``exp(-|n - center| / tau)``."""
    dtype = _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    short = _short(M, dtype, device, requires_grad, one=False)
    if short is not None:
        return short
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k = _points(-center / tau, (-center + (M - 1)) / tau, M, dtype, device, requires_grad)
    return O.exp(O.neg(O.abs(k)))


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """``sin(pi (n + 1/2) / M)`` (the sine window)."""
    dtype = _checks("cosine", M, dtype, layout)
    short = _short(M, dtype, device, requires_grad, one=False)
    if short is not None:
        return short
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    return O.sin(_points(0.5 * c, (0.5 + (M - 1)) * c, M, dtype, device, requires_grad))


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``exp(-(n - (M-1)/2)^2 / (2 std^2))``."""
    dtype = _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    short = _short(M, dtype, device, requires_grad, one=False)
    if short is not None:
        return short
    start, c = -(M if not sym and M > 1 else M - 1) / 2.0, 1 / (std * math.sqrt(2))
    k = _points(start * c, (start + (M - 1)) * c, M, dtype, device, requires_grad)
    return O.exp(O.neg(O.pow(k, 2)))


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """``I0(beta sqrt(1 - (2n / (M-1) - 1)^2)) / I0(beta)``."""
    dtype = _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    short = _short(M, dtype, device, requires_grad)
    if short is not None:
        return short
    b = tensor(beta, dtype=dtype, device=device)
    c = O.div(O.mul(b, 2.0), M if not sym else M - 1)
    end = O.minimum(b, O.add(O.neg(b), O.mul(c, M - 1)))
    k = _points(O.neg(b), end, M, dtype, device, requires_grad)
    return O.div(special.i0(O.sqrt(O.sub(O.mul(b, b), O.pow(k, 2)))), special.i0(b))


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The triangular window ``1 - |2n / (M-1) - 1|``."""
    dtype = _checks("bartlett", M, dtype, layout)
    short = _short(M, dtype, device, requires_grad)
    if short is not None:
        return short
    c = 2 / (M if not sym else M - 1)
    return O.rsub(O.abs(_points(-1, -1 + (M - 1) * c, M, dtype, device, requires_grad)), 1)


def general_cosine(M: int, *, a: Iterable, sym: bool = True, dtype=None, layout=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """``sum_i (-1)^i a_i cos(2 pi i n / (M-1))``."""
    dtype = _checks("general_cosine", M, dtype, layout)
    short = _short(M, dtype, device, requires_grad)
    if short is not None:
        return short
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("Coefficients cannot be empty")
    c = 2 * math.pi / (M if not sym else M - 1)
    k = _points(0, (M - 1) * c, M, dtype, device, requires_grad)
    ai = tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype, device=device).requires_grad_(requires_grad)
    i = arange(len(a), dtype=dtype, device=device).requires_grad_(requires_grad)
    return O.sum(O.mul(O.unsqueeze(ai, -1), O.cos(O.mul(O.unsqueeze(i, -1), k))), 0)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """``alpha - (1 - alpha) cos(2 pi n / (M-1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The Hann window (general Hamming with alpha 0.5)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The Hamming window (general Hamming with alpha 0.54)."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The Blackman window (cosine coefficients 0.42, 0.5, 0.08)."""
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)
