"""Window functions (``torch.hann_window``, ``hamming_window``, ``blackman_window``,
``bartlett_window``, ``kaiser_window``), computed in float64 NumPy and returned in the
requested dtype. ``periodic`` windows are the first ``N`` points of the symmetric
``N + 1``-point window, as PyTorch's (for spectral analysis)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import dtypes as D
from .exports import op


def _window(name: str, window_length: int, periodic: bool, dtype, device, fn: Callable) -> "Tensor":  # noqa: F821
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = D.get_default_dtype() if dtype is None else dtype
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype={dtype})")
    from .factory import tensor
    if window_length == 0:
        return tensor(np.zeros(0), dtype=dtype, device=device)
    if window_length == 1:
        return tensor(np.ones(1), dtype=dtype, device=device)
    n = window_length + 1 if periodic else window_length
    return tensor(fn(np.arange(n, dtype=np.float64), n)[:window_length], dtype=dtype, device=device)


def _cosine_sum(*a: float) -> Callable:
    """``sum_k (-1)^k a_k cos(2 pi k i / (n - 1))``."""
    return lambda i, n: sum((-1) ** k * c * np.cos(2 * np.pi * k * i / (n - 1)) for k, c in enumerate(a))


@op(method=False)
def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False, pin_memory: bool = False):
    """The Hann window ``0.5 - 0.5 cos(2 pi i / (N - 1))``."""
    return _window("hann_window", window_length, periodic, dtype, device, _cosine_sum(0.5, 0.5)).requires_grad_(
        requires_grad)


@op(method=False)
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory: bool = False):
    """The generalized Hamming window ``alpha - beta cos(2 pi i / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, device, _cosine_sum(alpha, beta)).requires_grad_(
        requires_grad)


@op(method=False)
def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False, pin_memory: bool = False):
    """The Blackman window ``0.42 - 0.5 cos(2 pi i / (N - 1)) + 0.08 cos(4 pi i / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, device,
                   _cosine_sum(0.42, 0.5, 0.08)).requires_grad_(requires_grad)


@op(method=False)
def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False, pin_memory: bool = False):
    """The triangular window ``1 - |2 i / (N - 1) - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, device,
                   lambda i, n: 1 - np.abs(2 * i / (n - 1) - 1)).requires_grad_(requires_grad)


@op(method=False)
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False, pin_memory: bool = False):
    """The Kaiser window ``I0(beta sqrt(1 - (2 i / (N - 1) - 1)^2)) / I0(beta)``."""
    return _window("kaiser_window", window_length, periodic, dtype, device,
                   lambda i, n: np.i0(beta * np.sqrt(np.clip(1 - (2 * i / (n - 1) - 1) ** 2, 0, None)))
                   / np.i0(beta)).requires_grad_(requires_grad)
