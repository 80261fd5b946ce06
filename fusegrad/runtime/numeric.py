"""Numeric ops with PyTorch's signatures, composed from other ops (so their gradients,
batching and lowering are those ops'): ``hypot``, ``xlogy``, ``frac``,
``float_power``, ``nansum``, ``nanmean``, ``diff``, ``aminmax``, ``median``, ``rot90``,
``fliplr``, ``flipud``, ``mvlgamma`` and ``Tensor.fill_diagonal_``."""
from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes as D
from . import ops as O
from .exports import op
from .factory import full, ones_like, zeros_like
from .sorting import _return_type, sort
from .tensor import Tensor

aminmax_type = _return_type("aminmax", ("min", "max"))
median_type = _return_type("median", ("values", "indices"))


@op(inplace="method")
def hypot(a, b):
    """``sqrt(a**2 + b**2)`` without overflow or underflow on the way: ``hi * sqrt(1 + q**2)``
    with ``hi``, ``lo`` the larger and smaller magnitude and ``q = lo / hi``; infinite where
    either is (NaN or not), as C's hypot; float16 and bfloat16 in float32, rounded once, as
    PyTorch's kernel."""
    a, b = O.float_pair(a, b)
    rt = a._data.dtype
    if D.np_half(rt):
        return O.to(hypot(O.to(a, D.float32), O.to(b, D.float32)), D.from_numpy_dtype(rt))
    ma, mb = O.abs(a), O.abs(b)
    hi, lo = O.maximum(ma, mb), O.minimum(ma, mb)
    q = O.div(lo, O.where(O.gt(hi, 0), hi, 1.0))
    r = O.mul(hi, O.sqrt(O.add(O.mul(q, q), 1.0)))
    return O.where(O.logical_or(O.isinf(a), O.isinf(b)), math.inf, r)


@op(inplace="both")
def xlogy(x, y):
    """``x * log(y)``, 0 where ``x`` is 0 (unless ``y`` is NaN). As PyTorch's, its derivative
    in ``x`` is ``log(y)`` also where ``x`` is 0 (a Dirichlet's concentration of 1), except
    where the log is not finite there."""
    x, y = O.float_pair(x, y)
    r = O.mul(x, O.log(O.where(zero_log(x, y, 0), ones_like(y), y)))
    return O.where(O.isnan(y), y, r)


def zero_log(x, y, pole: float):
    """Where ``x * log(y - pole)`` is 0 because ``x`` is 0 and the log is not finite."""
    return O.logical_and(O.eq(x, 0), O.logical_or(O.le(y, pole), O.isinf(y)))


@op(inplace="both")
def frac(x):
    """The fractional part ``x - trunc(x)`` (its gradient is 1)."""
    return O.sub(x, O.trunc(x))


@op
def float_power(a, b):
    """``a ** b`` computed in float64."""
    a = O.to(O.as_t(a), D.float64)
    return O.pow(a, O.to(b, D.float64) if isinstance(b, Tensor) else b)


@op(function=False)
def float_power_(self: Tensor, exponent) -> Tensor:
    """In place: only a float64 tensor can hold float_power's result (PyTorch refuses others)."""
    if self.dtype != D.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {O._type_name(self._data.dtype)} but the "
                           "operation's result requires dtype Double")
    return O._inplace_of(float_power)(self, exponent)


def _no_nan(x: Tensor) -> Tensor:
    return O.where(O.isnan(x), zeros_like(x), x)


def _nansum_operand(x) -> Tensor:
    """``x`` as a tensor, refused when complex (PyTorch's nansum kernel, which nanmean calls too)."""
    x = O.as_t(x)
    if x.is_complex():
        raise RuntimeError("nansum on CPU does not support complex inputs")
    return x


@op
def nansum(x, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as 0."""
    return O.sum(_no_nan(_nansum_operand(x)), dim, keepdim, dtype=dtype)


@op
def nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements (NaN where there are none)."""
    x = _nansum_operand(x)
    if not x.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{O.scalar_name(x)}")
    if dtype is not None:
        x = O.to(x, dtype)
    count = O.sum(O.logical_not(O.isnan(x)), dim, keepdim)
    return O.div(nansum(x, dim, keepdim), count)


@op
def diff(x, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` joined first)."""
    x = O.as_t(x)
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if int(n) < 0:
        raise RuntimeError(f"order must be non-negative but got {int(n)}")
    ax = O._axes(x, dim)[0]
    parts = [p for p in (prepend, x, append) if p is not None]
    if any(O.as_t(p).ndim != x.ndim for p in parts):
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if len(parts) > 1:
        x = O.cat([O.as_t(p) for p in parts], ax)
    for _ in range(int(n)):
        m = x.shape[ax]
        if m == 0:
            break
        hi, lo = O.narrow(x, ax, 1, m - 1), O.narrow(x, ax, 0, m - 1)
        x = O.ne(hi, lo) if x._data.dtype.kind == "b" else O.sub(hi, lo)
    return x


@op
def aminmax(x, *, dim=None, keepdim=False):
    """(``amin``, ``amax``) over ``dim`` (all elements without one)."""
    x = O.as_t(x)
    d = () if dim is None else dim
    return aminmax_type(O.amin(x, d, keepdim), O.amax(x, d, keepdim))


@op
def median(x, dim=None, keepdim=False):
    """The lower median (element ``(n - 1) // 2`` in sorted order), NaN where a NaN is
    among the elements; along ``dim`` also its index (of the first NaN, there)."""
    x = O.as_t(x)
    if dim is None:
        flat = O.reshape(x, (-1,))
        if flat.shape[0] == 0:  # NaN (an integer tensor's smallest value), as PyTorch's
            fill = math.nan if flat.dtype.is_floating_point else np.iinfo(flat._data.dtype).min
            return O.add(O.sum(flat), fill) if flat.dtype.is_floating_point else full((), fill, dtype=flat.dtype)
        d = flat.detach()
        v = O.getitem(sort(d).values, (flat.shape[0] - 1) // 2)
        if not flat.dtype.is_floating_point:  # (no NaN; the input's dtype, as PyTorch's)
            return v
        nan = O.isnan(d)
        m = O.where(O.gt(O.sum(nan), 0), O.sum(O.where(nan, d, zeros_like(d))), v)  # (NaN, there)
        # the gradient is shared evenly by the elements equal to the median (the NaNs, when it
        # is NaN), as PyTorch's: m - (sum of m - sum of x, over them) / their count, which is m
        mask = O.logical_or(O.eq(d, m), O.logical_and(nan, O.isnan(m)))
        gap = O.sub(O.sum(O.where(mask, m, zeros_like(flat))), O.sum(O.where(mask, flat, zeros_like(flat))))
        return O.named(O.sub(m, O.div(gap, O.sum(O.to(mask, flat.dtype)))), "MedianBackward0")
    ax = O._axes(x, dim)[0]
    if x.ndim == 0:  # its one element, at index 0 (0-d results, as PyTorch's)
        v, i = median(O.reshape(x, (1,)), 0)
        return median_type(O.reshape(v, ()), O.reshape(i, ()))
    n = x.shape[ax]
    if n == 0:
        raise IndexError("median() cannot compute median for an empty dimension")
    s = sort(x, ax)
    k = (n - 1) // 2
    v, i = O.narrow(s.values, ax, k, 1), O.narrow(s.indices, ax, k, 1)
    if x.dtype.is_floating_point:  # the first NaN, where there is one
        nan = O.isnan(x)
        has = O.gt(O.sum(nan, ax, True), 0)
        v = O.where(has, O.sum(O.where(nan, x, zeros_like(x)), ax, True), v)
        i = O.where(has, O.argmax(O.to(nan, D.int64), ax, True), i)
    if not keepdim:
        v, i = O.squeeze(v, ax), O.squeeze(i, ax)
    return median_type(v, i)


@op
def rot90(x, k=1, dims=(0, 1)):
    """``x`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
    towards the second."""
    x = O.as_t(x)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    d0, d1 = (O._axes(x, d)[0] for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return O.transpose(O.flip(x, [d1]), d0, d1)
    if k == 2:
        return O.flip(x, [d0, d1])
    if k == 3:
        return O.transpose(O.flip(x, [d0]), d0, d1)
    return O.clone(x)


def _flipped(x, dim: int) -> Tensor:
    x = O.as_t(x)
    if x.ndim <= dim:
        raise RuntimeError(f"Input must be >= {dim + 1}-d.")
    return O.flip(x, [dim])


@op
def fliplr(x):
    """``x`` with its columns (dimension 1) reversed."""
    return _flipped(x, 1)


@op
def flipud(x):
    """``x`` with its rows (dimension 0) reversed."""
    return _flipped(x, 0)


@op(function=False)
def fill_diagonal_(self, fill_value, wrap=False):
    """Set the main diagonal (every dimension's index equal) to ``fill_value``, in place;
    a tall matrix's diagonal restarts below the first one with ``wrap``."""
    shp = tuple(self.shape)
    if len(shp) < 2 or (len(shp) > 2 and len(set(shp)) != 1):
        raise RuntimeError("all dimensions of input must be of equal length")
    step = int(np.sum(np.cumprod((1,) + shp[:0:-1])))  # one step along every dimension, flattened
    total = int(np.prod(shp))
    end = total if wrap or len(shp) > 2 else min(total, shp[1] * shp[1])
    where = np.unravel_index(np.arange(0, end, step, dtype=np.int64), shp)
    O.setitem(self, tuple(O._const(w, self) for w in where), fill_value)
    return self


@op(inplace="method")
def mvlgamma(input: Tensor, p: int) -> Tensor:  # noqa: A002
    """The multivariate log-gamma of dimension ``p`` (``special.multigammaln``)."""
    from ..special import multigammaln
    return multigammaln(input, p)
