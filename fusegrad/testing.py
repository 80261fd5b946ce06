"""``torch.testing``: ``assert_close`` and ``make_tensor``, with PyTorch's default
tolerances per dtype and its failure messages."""
from __future__ import annotations

import collections.abc
import math
from typing import Any, Optional

import numpy as np

from .ir import dtypes as D
from .runtime.tensor import Size, Tensor

__all__ = ["assert_close", "make_tensor"]

#: (rtol, atol) by dtype, as torch.testing's defaults; integers and bool compare exactly
_TOLERANCES = {D.float16: (1e-3, 1e-5), D.bfloat16: (1.6e-2, 1e-5), D.float32: (1.3e-6, 1e-5),
               D.float64: (1e-7, 1e-7), D.complex64: (1.3e-6, 1e-5), D.complex128: (1e-7, 1e-7)}


class _Mismatch(AssertionError):
    pass


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: Optional[float] = None,
                 atol: Optional[float] = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: Any = None) -> None:
    """Raise AssertionError unless ``actual`` and ``expected`` (tensors, NumPy arrays, Python
    numbers, or sequences and mappings of them) are close: ``|a - e| <= atol + rtol * |e|``
    elementwise, tolerances defaulting by dtype; shapes (and dtypes, with ``check_dtype``)
    must match. ``msg`` replaces the message (a callable receives the generated one)."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, "
                         f"but got no {'atol' if atol is None else 'rtol'}.")
    try:
        _compare(actual, expected, (), rtol, atol, equal_nan, check_dtype)
    except _Mismatch as exc:
        text = str(exc)
        if msg is not None:
            text = msg(text) if callable(msg) else str(msg)
        raise AssertionError(text) from None


def _compare(a, e, path: tuple, rtol, atol, equal_nan: bool, check_dtype: bool) -> None:
    if isinstance(a, (Tensor, np.ndarray)) or isinstance(e, (Tensor, np.ndarray)):
        if not (isinstance(a, (Tensor, np.ndarray)) and isinstance(e, (Tensor, np.ndarray))):
            raise TypeError(f"No comparison pair was able to handle inputs of type {type(a)} and {type(e)}.")
        _compare_arrays(a, e, path, rtol, atol, equal_nan, check_dtype)
    elif isinstance(a, (bool, int, float, complex)) and isinstance(e, (bool, int, float, complex)):
        _compare_arrays(np.asarray(a), np.asarray(e), path, rtol, atol, equal_nan, check_dtype)
    elif isinstance(a, collections.abc.Mapping) and isinstance(e, collections.abc.Mapping):
        if set(a) != set(e):
            raise _Mismatch(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                            f"{sorted(map(str, set(e) - set(a)))}\nAdditional keys in the actual mapping: "
                            f"{sorted(map(str, set(a) - set(e)))}" + _where(path))
        for k in e:
            _compare(a[k], e[k], path + (k,), rtol, atol, equal_nan, check_dtype)
    elif isinstance(a, collections.abc.Sequence) and isinstance(e, collections.abc.Sequence) \
            and not isinstance(a, str) and not isinstance(e, str):
        if len(a) != len(e):
            raise _Mismatch(f"The length of the sequences mismatch: {len(a)} != {len(e)}" + _where(path))
        for i, (x, y) in enumerate(zip(a, e)):
            _compare(x, y, path + (i,), rtol, atol, equal_nan, check_dtype)
    elif a is None and e is None:
        return
    else:
        raise TypeError(f"No comparison pair was able to handle inputs of type {type(a)} and {type(e)}.")


def _where(path: tuple) -> str:
    return "" if not path else "\n\nThe failure occurred for item " + "".join(f"[{k!r}]" for k in path)


def _dtype_of(x) -> "D.DType":
    return x.dtype if isinstance(x, Tensor) else D.from_numpy_dtype(x.dtype)


def _compare_arrays(a, e, path: tuple, rtol, atol, equal_nan: bool, check_dtype: bool) -> None:
    scalars = not isinstance(a, Tensor) and np.ndim(a) == 0 and np.ndim(e) == 0 or \
        isinstance(a, Tensor) and a.ndim == 0 and np.ndim(e.numpy() if isinstance(e, Tensor) else e) == 0
    da, de = _dtype_of(a), _dtype_of(e)
    av = np.asarray(a.detach().numpy() if isinstance(a, Tensor) else a)
    ev = np.asarray(e.detach().numpy() if isinstance(e, Tensor) else e)
    if av.shape != ev.shape:
        raise _Mismatch(f"The values for attribute 'shape' do not match: {Size(av.shape)} != {Size(ev.shape)}."
                        + _where(path))
    if check_dtype and da is not de:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {da} != {de}." + _where(path))
    if rtol is None:
        rtol, atol = max(_TOLERANCES.get(da, (0.0, 0.0)), _TOLERANCES.get(de, (0.0, 0.0)))
    exact = rtol == 0 and atol == 0
    floating = D.np_differentiable(av.dtype) or D.np_differentiable(ev.dtype)  # (complex values: compared as such)
    # differences in the inputs' common dtype, as PyTorch computes them (scalars in double)
    work = (np.dtype(np.float64) if scalars else np.result_type(av.dtype, ev.dtype)) if floating \
        else np.dtype(np.int64)
    av, ev = av.astype(work), ev.astype(work)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(av - ev)
        if floating:
            finite = np.isfinite(av) & np.isfinite(ev)
            close = np.where(finite, diff <= atol + rtol * np.abs(ev), av == ev)
            if equal_nan:
                close |= np.isnan(av) & np.isnan(ev)
        else:
            close = diff <= atol + rtol * np.abs(ev)
    if close.all():
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        real = np.float64 if scalars else np.abs(np.zeros(0, work)).dtype if floating else np.float32
        rel = diff.astype(real) / np.abs(ev).astype(real)
    word = "equal" if exact else "close"
    bound = (lambda tol: "") if exact else (lambda tol: f" (up to {tol} allowed)")
    if scalars:
        raise _Mismatch(f"Scalars are not {word}!\n\nExpected {ev.item()} but got {av.item()}.\n"
                        f"Absolute difference: {diff.item()}{bound(atol)}\n"
                        f"Relative difference: {rel.item()}{bound(rtol)}" + _where(path))
    bad = ~close
    n, total = int(bad.sum()), bad.size
    ia, ir = _worst(diff, bad), _worst(rel, bad)
    raise _Mismatch(f"Tensor-likes are not {word}!\n\nMismatched elements: {n} / {total} ({100 * n / total:.1f}%)\n"
                    f"Greatest absolute difference: {diff[ia].item()} at index {ia}{bound(atol)}\n"
                    f"Greatest relative difference: {rel[ir].item()} at index {ir}{bound(rtol)}" + _where(path))


def _worst(values: np.ndarray, bad: np.ndarray) -> tuple:
    """Index of the largest ``values`` among the mismatches (NaN counts as largest)."""
    v = np.where(bad, values, -np.inf)
    flat = int(np.argmax(np.where(np.isnan(v), np.inf, v)))
    return tuple(int(i) for i in np.unravel_index(flat, values.shape))


def make_tensor(*shape, dtype, device=None, low: Optional[float] = None, high: Optional[float] = None,
                requires_grad: bool = False, noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None) -> Tensor:
    """A tensor of ``shape`` filled with values drawn uniformly from [low, high) (defaults
    [-9, 9], clamped to the dtype's range; bool: True/False), as ``torch.testing.make_tensor``."""
    from . import finfo, rand, randint, zeros
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if dtype is D.bool_:
        t = randint(0, 2, shape).to(D.bool_)
    elif dtype.is_floating_point:
        lo, hi = (-9.0 if low is None else low), (9.0 if high is None else high)
        t = (rand(*shape, dtype=D.float64) * (hi - lo) + lo).to(dtype)
        if exclude_zero:
            t = t.masked_fill(t == 0, finfo(dtype).tiny)
    else:
        info = np.iinfo(dtype.np)
        lo = max(-9 if low is None else math.ceil(low), info.min)
        hi = min(10 if high is None else math.ceil(high), info.max)
        t = randint(lo, hi, shape, dtype=dtype)
        if exclude_zero:
            t = t.masked_fill(t == 0, 1)
    if noncontiguous and t.numel() > 1:
        doubled = zeros(*shape[:-1], shape[-1] * 2, dtype=dtype)
        doubled[..., ::2] = t
        t = doubled[..., ::2]
    if requires_grad:
        t.requires_grad_(True)
    return t
