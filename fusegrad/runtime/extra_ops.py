"""More of PyTorch's ops, composed from fusegrad's (so their gradients, batching and
compilation are those ops'; no primitive is added here):

- math: ``asin``, ``acos``, ``asinh``, ``acosh``, ``atanh`` (with in-place variants and
  NumPy's ``arc*`` aliases), ``addcmul``, ``addcdiv``, ``logaddexp``, ``logaddexp2``,
  ``baddbmm``, ``addbmm``;
- scans and reductions: ``cumprod`` (a product scan of multiplications, no division or
  log: its gradient is exact where the input has zeros), ``quantile``, ``nanquantile``,
  ``trapezoid``/``trapz``, ``cumulative_trapezoid``;
- shapes and indexing: ``ravel``, ``take``, ``tensor_split``, ``moveaxis``,
  ``column_stack``, ``row_stack``, ``atleast_1d``/``2d``/``3d``, ``tril_indices``,
  ``triu_indices``, ``isin``;
- random: ``bernoulli``, ``Tensor.bernoulli_``;
- ``Tensor.ndimension``, ``is_inference``.

``fusegrad/__init__.py`` imports this module before ``runtime.methods`` binds the methods."""
from __future__ import annotations

import builtins
import math
from typing import Sequence

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from . import ops as O
from .autocast_state import float32_policy, lower_precision
from .complex_ops import complex as make_complex, imag, real
from .composite import one_node
from .exports import alias, op
from .grad_mode import STATE
from .keywords import _type_name, write_out
from .sorting import searchsorted, sort
from .tensor import Tensor

_LN2 = math.log(2.0)
_BIG = 1e8  # above it asinh(x), acosh(x) are log(2|x|) to rounding (and x*x may overflow float32)


def _out(name: str, r: Tensor, out):
    return r if out is None else write_out(name, r, out)


def _eager(*ts) -> bool:
    """Whether every tensor holds a host array (not traced, not on a device): value checks
    run only then."""
    return builtins.all(type(t._data) is np.ndarray for t in ts)


def _ft(x) -> Tensor:
    """``x`` as a floating tensor (integers and bools become the default float dtype)."""
    return O._float(O.as_t(x))


def _dtype_name(t: Tensor) -> str:
    return _type_name(t.dtype)


def _false_like(x: Tensor) -> Tensor:
    return P.full(shape=tuple(x._data.shape), value=False, dtype=np.dtype(np.bool_))


def _zero_grad_link(r: Tensor, x: Tensor, name: str) -> Tensor:
    """``r``, made to depend on ``x`` with a zero gradient when ``x`` requires grad (a
    ``where`` that selects none of ``x``: PyTorch's result of a sampling op is tracked)."""
    if not (STATE.enabled and x._rg):
        return r
    return O.named(O.where(_false_like(x), x, r), name)


# ---------------------------------------------------------------- Tensor-only helpers
@op(function=False)
def ndimension(self):
    """The number of dimensions (``Tensor.dim``)."""
    return len(self.shape)


@op
def is_inference(input):  # noqa: A002
    """Whether ``input`` is an inference tensor: made inside ``inference_mode`` (or a view of
    one). Outside it such a tensor refuses in-place updates, ``requires_grad_()`` and being
    saved for a backward."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return bool(input._inf)


# ---------------------------------------------------------------- inverse trigonometric and hyperbolic
def _cos_of_asin(x):
    """sqrt(1 - x^2) as sqrt((1 - x)(1 + x)) (exact near |x| = 1); NaN for |x| > 1
    (computed at 2 beyond that, where the product could overflow)."""
    x = O.where(O.gt(O.abs(x), 2.0), 2.0, x)
    return O.sqrt(O.mul(O.sub(1.0, x), O.add(1.0, x)))


# Complex formulas add real constants to real parts and scale part by part: a complex
# product or sum with a constant would lose the signed zeros that pick the side of a
# branch cut (PyTorch's and C99's asin(2+0j) is pi/2 + 1.317j, asin(2-0j) pi/2 - 1.317j)
# and turn infinities into NaNs.
def _plus(z, c: float):
    """``z + c`` for a real number ``c``."""
    return make_complex(O.add(real(z), c), imag(z))


def _scaled(z, c: float, turn: bool = False):
    """``c * z``, or with ``turn`` ``c * i * z``."""
    if turn:
        return make_complex(O.mul(imag(z), -c), O.mul(real(z), c))
    return make_complex(O.mul(real(z), c), O.mul(imag(z), c))


def _asin(x):
    if x.is_complex():  # -i asinh(iz)
        return _scaled(_asinh(_scaled(x, 1.0, turn=True)), -1.0, turn=True)
    return O.atan2(x, _cos_of_asin(x))


def _acos(x):
    if x.is_complex():  # -2i log(sqrt((1 + z) / 2) + i sqrt((1 - z) / 2)): no cancellation near z = 1
        half = _scaled(x, 0.5)
        root = O.add(O.sqrt(_plus(half, 0.5)), _scaled(O.sqrt(_plus(O.neg(half), 0.5)), 1.0, turn=True))
        return _scaled(O.log(root), -2.0, turn=True)
    return O.atan2(_cos_of_asin(x), x)


def _asinh_pos(a):
    """asinh of ``a >= 0``: log1p(a + a^2 / (1 + sqrt(1 + a^2))), log(2a) for large ``a``
    (each branch fed values where it is finite, so that neither makes a NaN gradient)."""
    big = O.gt(a, _BIG)
    s = O.where(big, 0.0, a)
    s2 = O.mul(s, s)
    small = O.log1p(O.add(s, O.div(s2, O.add(1.0, O.sqrt(O.add(1.0, s2))))))
    return O.where(big, O.add(O.log(O.where(big, a, 1.0)), _LN2), small)


def _asinh(x):
    if x.is_complex():  # log(z + sqrt(z^2 + 1)) on the half plane Re z >= 0 (no cancellation), odd
        neg = O.lt(real(x), 0)
        z = O.where(neg, O.neg(x), x)
        r = O.log(O.add(z, O.sqrt(_plus(O.mul(z, z), 1.0))))
        return O.where(neg, O.neg(r), r)
    neg = O.lt(x, 0)
    r = _asinh_pos(O.where(neg, O.neg(x), x))  # (odd: the gradient at 0 is 1, as |x|'s would not give)
    return O.where(neg, O.neg(r), r)


def _acosh(x):
    if x.is_complex():  # log(z + sqrt(z + 1) sqrt(z - 1)), with the principal branches of each
        return O.log(O.add(x, O.mul(O.sqrt(_plus(x, 1.0)), O.sqrt(_plus(x, -1.0)))))
    big = O.gt(x, _BIG)
    u = O.sub(O.where(big, 1.0, O.where(O.lt(x, 0), 0.5, x)), 1.0)  # x < 1: NaN (sqrt of a negative)
    small = O.log1p(O.add(u, O.sqrt(O.mul(u, O.add(u, 2.0)))))
    return O.where(big, O.add(O.log(O.where(big, x, 2.0)), _LN2), small)


def _atanh(x):
    d = O.sub(O.log1p(x), O.log1p(O.neg(x)))
    return _scaled(d, 0.5) if x.is_complex() else O.mul(d, 0.5)


def atan_complex(x):
    """atan of complex ``x``, -i atanh(iz) (runtime.ops.atan's: atan2 is real only)."""
    return _scaled(_atanh(_scaled(x, 1.0, turn=True)), -1.0, turn=True)


def _unary(fn, name: str, node: str):
    def unary(input, *, out=None):  # noqa: A002 - PyTorch's names
        return _out(name, one_node(node, fn, _ft(input)), out)
    unary.__name__ = unary.__qualname__ = name
    unary.__doc__ = f"PyTorch's ``{name}``, composed of other ops."
    return unary


asin = op(_unary(_asin, "asin", "AsinBackward0"), inplace="both")
acos = op(_unary(_acos, "acos", "AcosBackward0"), inplace="both")
asinh = op(_unary(_asinh, "asinh", "AsinhBackward0"), inplace="both")
acosh = op(_unary(_acosh, "acosh", "AcoshBackward0"), inplace="both")
atanh = op(_unary(_atanh, "atanh", "AtanhBackward0"), inplace="both")
arcsin = alias(asin, "arcsin")
arccos = alias(acos, "arccos")
arcsinh = alias(asinh, "arcsinh")
arccosh = alias(acosh, "arccosh")
arctanh = alias(atanh, "arctanh")
# atan and atan2 (runtime/ops.py) gain their in-place variants and NumPy's names
alias(O.atan, "atan", "arctan", inplace="both")
alias(O.atan2, "atan2", "arctan2", inplace="method")


# ---------------------------------------------------------------- addcmul, addcdiv
def _addc_value(value, *ts):
    """``value`` as PyTorch applies it: truncated to an int for an integral result."""
    if isinstance(value, float) and D.result_type(*ts).np.kind in "iub":
        return int(value)
    return value


def _in_common(*ts) -> tuple:
    """``ts`` in their PyTorch result dtype: addcmul and addcdiv compute in it (a product of
    float16 operands beside a float32 ``input`` is float32's, not rounded to float16)."""
    rt = D.result_type(*ts).np
    return tuple(t if t._data.dtype == rt else P.cast(t, dtype=rt) for t in ts)


@op
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``: for floating operands of one dtype, as PyTorch's
    kernel, ``value * tensor1`` then one fused multiply-add (float16 and bfloat16 computed in
    float32 and rounded once)."""
    x, a, b = O.as_t(input), O.as_t(tensor1), O.as_t(tensor2)
    v = _addc_value(value, x, a, b)
    dt = x._data.dtype
    fused = D.np_floating(dt) and dt == a._data.dtype == b._data.dtype
    half = fused and D.np_half(dt)

    def addcmul_of(x, a, b):
        x, a, b = (P.cast(t, dtype=np.dtype(np.float32)) for t in (x, a, b)) if half else _in_common(x, a, b)
        av = O.mul(a, v) if isinstance(v, Tensor) or v != 1 else a  # (a tensor: a compiled step's hyperparameter)
        out = P.fma(av, b, x) if fused else O.add(x, O.mul(av, b))
        return P.cast(out, dtype=dt) if half else out
    return one_node("AddcmulBackward0", addcmul_of, x, a, b)


@op
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2`` (a true division; integral ``tensor1`` and
    ``tensor2`` are refused, as in PyTorch)."""
    x, a, b = O.as_t(input), O.as_t(tensor1), O.as_t(tensor2)
    if a._data.dtype.kind in "iub" and b._data.dtype.kind in "iub":
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a "
            "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
            "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
            "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")

    def addcdiv_of(x, a, b):
        x, a, b = _in_common(x, a, b)
        return O.add(x, O.div(O.mul(a, value) if isinstance(value, Tensor) or value != 1 else a, b))
    return one_node("AddcdivBackward0", addcdiv_of, x, a, b)


# ---------------------------------------------------------------- logaddexp
def _log_pair(name: str, input, other):  # noqa: A002
    for pos, (arg, v) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(v).__name__}")
    a, b = O._promote2(input, other)
    if a._data.dtype.kind in "iub":
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_dtype_name(a)}'")
    return a, b


def _logaddexp(a, b, base2: bool):
    """max(a, b) + log1p(exp(-|a - b|)) (base 2: log1p(2^-|a-b|) / ln 2), with the branch
    chosen by a where so that the gradient at a == b is split evenly; complex operands by
    their real parts, as PyTorch's."""
    if a.is_complex():
        first = O.ge(real(a), real(b))
        m, other = O.where(first, a, b), O.where(first, b, a)
        return O.add(m, O.log1p(O.exp(O.sub(other, m))))
    first = O.ge(a, b)
    m = O.where(first, a, b)
    same_inf = O.logical_and(O.eq(a, b), O.isinf(a))  # (the infinity itself: d = 0, not inf - inf)
    a0, b0 = O.where(same_inf, 0.0, a), O.where(same_inf, 0.0, b)
    d = O.where(first, O.sub(b0, a0), O.sub(a0, b0))  # -|a - b|
    if base2:
        return O.add(m, O.div(O.log1p(O.exp(O.mul(d, _LN2))), _LN2))
    return O.add(m, O.log1p(O.exp(d)))


@op
def logaddexp(input, other, *, out=None):  # noqa: A002
    """``log(exp(input) + exp(other))``, without overflow."""
    a, b = _log_pair("logaddexp", input, other)
    return _out("logaddexp", one_node("LogaddexpBackward0", lambda a, b: _logaddexp(a, b, False), a, b), out)


@op
def logaddexp2(input, other, *, out=None):  # noqa: A002
    """``log2(2**input + 2**other)``, without overflow."""
    a, b = _log_pair("logaddexp2", input, other)
    return _out("logaddexp2", one_node("Logaddexp2Backward0", lambda a, b: _logaddexp(a, b, True), a, b), out)


# ---------------------------------------------------------------- _int_mm
@op(name="_int_mm", method=False)
def int_mm(input, mat2):  # noqa: A002
    """``torch._int_mm``: the product of int8 (or uint8) matrices, exact in int32 (int8
    inference's GEMM)."""
    for what, t, kinds in (("self", input, "int8 or uint8"), ("mat2", mat2, "of type int8")):
        if not isinstance(t, Tensor) or t.dtype not in (D.int8, D.uint8):
            found = _dtype_name(t).lower() if isinstance(t, Tensor) else type(t).__name__
            raise RuntimeError(f"int_mm_out_cpu: Expected {what} dtype to be {kinds} but got {found}")
        if t.ndim != 2:
            raise RuntimeError(f"int_mm_out_cpu: Expected 2D tensor for {what}, but got {t.ndim}D tensor")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"int_mm_out_cpu: self.size(1) needs to match mat2.size(0) but got {input.shape[1]} "
                           f"and {mat2.shape[0]}")
    return O.mm(O.to(input, D.int32), O.to(mat2, D.int32))


# ---------------------------------------------------------------- baddbmm, addbmm
def _batches(name: str, input, batch1, batch2):  # noqa: A002
    x, a, b = O.as_t(input), O.as_t(batch1), O.as_t(batch2)
    for what, t in (("batch1", a), ("batch2", b)):
        if t._data.ndim != 3:
            raise RuntimeError(f"{what} must be a 3D tensor")
    if not (x.dtype == a.dtype == b.dtype):
        raise RuntimeError(f"Input dtypes must be the same, got: input {O.cpp_scalar_name(x)}, "
                           f"batch1: {O.cpp_scalar_name(a)}, batch2: {O.cpp_scalar_name(b)}")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    return x, a, b


def _add_scaled(x: Tensor, r: Tensor, beta, alpha) -> Tensor:
    """``beta * x + alpha * r``, ``x`` broadcast to ``r``'s shape; ``beta == 0`` ignores
    ``x`` (its NaNs and infinities too; its gradient is then 0)."""
    shape = tuple(r.shape)
    try:
        xe = O.expand(x, shape) if tuple(x.shape) != shape else x
    except Exception:
        raise RuntimeError(f"The expanded size of the tensor ({shape[-1]}) must match the existing size "
                           f"({x.shape[-1] if x.ndim else 1}) at non-singleton dimension. Target sizes: "
                           f"{list(shape)}.  Tensor sizes: {list(x.shape)}") from None
    if alpha != 1:
        r = O.mul(r, alpha)
    if beta == 0:
        return O.where(_false_like(r), xe, r) if x._rg else r
    return O.add(O.mul(xe, beta) if beta != 1 else xe, r)


@op(inplace="method")
@lower_precision
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2)``, batch by batch."""
    x, a, b = _batches("baddbmm", input, batch1, batch2)
    return one_node("BaddbmmBackward0", lambda x, a, b: _add_scaled(x, O.bmm(a, b), beta, alpha), x, a, b)


@op(inplace="method")
@lower_precision
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """``beta * input + alpha * sum_i(batch1[i] @ batch2[i])``."""
    x, a, b = _batches("addbmm", input, batch1, batch2)
    return one_node("AddbmmBackward0", lambda x, a, b: _add_scaled(x, O.sum(O.bmm(a, b), 0), beta, alpha), x, a, b)


# ---------------------------------------------------------------- cumprod
def _prod_scan(x: Tensor, ax: int) -> Tensor:
    """Inclusive product scan along ``ax`` by recursive doubling (Hillis-Steele): log2(n)
    steps of ``y[i] *= y[i - k]``, multiplications only, so the gradient is exact where
    the input has zeros (no division by the input, no log)."""
    n = x._data.shape[ax]
    one = 1.0 if x._data.dtype.kind in "fV" else 1
    y, k = x, 1
    with np.errstate(over="ignore", invalid="ignore"):  # (overflow to inf: as PyTorch, silently)
        while k < n:
            widths = tuple((k, 0) if i == ax else (0, 0) for i in range(x._data.ndim))
            y = O.mul(y, P.pad(O.narrow(y, ax, 0, n - k), widths=widths, value=one))
            k *= 2
    return y


@op(inplace="method")
def cumprod(input, dim, *, dtype=None, out=None):  # noqa: A002
    """Cumulative product along ``dim`` (integral and bool inputs: int64, as PyTorch)."""
    x = O.as_t(input)
    if dtype is not None:
        x = O.to(x, dtype)
    elif x._data.dtype.kind in "bui" and x._data.dtype != np.int64:
        x = P.cast(x, dtype=np.dtype(np.int64))
    ax = O._axes(x, dim)[0]
    if x._data.ndim == 0:
        r = one_node("CumprodBackward0", lambda x: O.add(x, 0) if x._data.dtype != np.bool_ else x, x)
    else:
        r = one_node("CumprodBackward0", lambda x: O.half_wide(x, lambda w: _prod_scan(w, ax)), x)
    if r is x:  # (a one-element dim: a copy, as PyTorch's result is its own tensor)
        r = O.clone(x)
    return _out("cumprod", r, out)


# ---------------------------------------------------------------- quantile, nanquantile
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _lerp(a: Tensor, b: Tensor, w: Tensor) -> Tensor:
    """PyTorch's lerp: ``a + w (b - a)`` below w = 0.5, ``b - (b - a)(1 - w)`` from it
    (exact at both ends)."""
    d = O.sub(b, a)
    return O.where(O.lt(w, 0.5), O.add(a, O.mul(w, d)), O.sub(b, O.mul(d, O.sub(1.0, w))))


def _quantile(name: str, input, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool):  # noqa: A002
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    x = O.as_t(input)
    q_tensor = isinstance(q, Tensor)
    if not q_tensor:
        q = float(q)
        if not 0.0 <= q <= 1.0:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
    if x.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if q_tensor and q._data.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if x.dtype not in (D.float32, D.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if q_tensor:
        if q.dtype != x.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if _eager(q) and not np.all((q._data >= 0) & (q._data <= 1)):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
    scalar_q = not q_tensor or q._data.ndim == 0
    qv = O.reshape(q, (-1,)) if q_tensor else O.as_t([q], dtype=x.dtype)
    nq = qv.shape[0]

    if dim is None:
        xs, out_shape = O.reshape(x, (-1,)), ((1,) * x._data.ndim if keepdim else ())
    else:
        ax = O._axes(x, dim)[0]
        if x._data.ndim == 0:
            xs, out_shape = O.reshape(x, (1,)), ()
        else:
            xs = O.movedim(x, ax, -1)
            out_shape = tuple(1 if i == ax else s for i, s in enumerate(x.shape)) if keepdim else \
                tuple(s for i, s in enumerate(x.shape) if i != ax)
    srt = sort(xs, -1).values  # S + (n,), NaNs last
    n = srt.shape[-1]
    lead = tuple(srt.shape[:-1])
    full = (nq,) + lead + (1,)
    qb = O.reshape(qv, (nq,) + (1,) * srt._data.ndim)
    if ignore_nan:  # rank among the numbers (0 where there are none: NaN, the first element)
        count = O.sum(O.logical_not(O.isnan(srt)), -1, True)
        ranks = O.mul(qb, O.sub(count, 1))
        ranks = O.where(O.lt(ranks, 0), 0.0, ranks)
    else:  # a row with a NaN: its last element, a NaN
        ranks = O.where(O.any(O.isnan(srt), -1, True), float(n - 1), O.mul(qb, n - 1))
    ranks = O.expand(ranks, full) if tuple(ranks.shape) != full else ranks
    if interpolation == "lower":
        ranks = O.floor(ranks)
    elif interpolation == "higher":
        ranks = O.ceil(ranks)
    elif interpolation == "nearest":
        ranks = O.round(ranks)  # (half to even, as PyTorch's)
    sb = O.expand(O.unsqueeze(srt, 0), (nq,) + tuple(srt.shape))
    below = O.to(ranks, D.int64)
    r = O.gather(sb, -1, below)
    if interpolation in ("linear", "midpoint"):
        w = O.mul(O.ones_of(ranks), 0.5) if interpolation == "midpoint" else O.sub(ranks, below)
        r = _lerp(r, O.gather(sb, -1, O.to(O.ceil(ranks), D.int64)), w)
    r = O.reshape(r, (nq,) + out_shape)
    return O.reshape(r, out_shape) if scalar_q else r


@op
@float32_policy
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The ``q``-th quantiles of ``input`` along ``dim`` (of all its elements without one);
    a 1-D ``q`` puts its dimension first. NaN where a NaN is among the elements."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@op
@float32_policy
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """``quantile`` of the non-NaN elements (NaN where all are NaN)."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, True)


# ---------------------------------------------------------------- shapes and indexing
@op
def ravel(input):  # noqa: A002
    """``input`` as a 1-D tensor (a view when possible)."""
    return O.reshape(O.as_t(input), (-1,))


moveaxis = alias(O.movedim, "moveaxis")
row_stack = alias(O.vstack, "row_stack")


@op
def take(input, index):  # noqa: A002
    """``input`` read as a 1-D tensor at ``index`` (negative indices count from the end);
    the result has ``index``'s shape."""
    x, idx = O.as_t(input), O.as_t(index)
    if idx._data.dtype != np.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_dtype_name(idx)}")
    n = x.numel()
    if _eager(idx):
        flat = idx._data.reshape(-1)
        bad = (flat >= n) | (flat < -n)
        if bad.any():
            raise IndexError(f"out of range: tried to access index {int(flat[np.argmax(bad)])} on a tensor of "
                             f"{n} elements.")

    def take_of(x):
        i = O.reshape(idx, (-1,))
        i = O.where(O.lt(i, 0), O.add(i, n), i)
        return O.reshape(O.index_select(O.reshape(x, (-1,)), 0, i), tuple(idx.shape))
    return one_node("TakeBackward0", take_of, x)


@op
def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None):  # noqa: A002
    """Views of ``input`` split along ``dim``: into ``sections`` parts as equal as can be
    (the first ``n % sections`` one longer), or at the ``indices`` (Python's slicing)."""
    x = O.as_t(input)
    if x._data.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    spec = next((s for s in (indices_or_sections, sections, indices) if s is not None), None)
    if isinstance(spec, Tensor):
        if spec._data.dtype != np.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{_dtype_name(spec)}")
        if spec._data.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {spec._data.ndim} dims")
        spec = int(spec.item()) if spec._data.ndim == 0 else [int(v) for v in spec.tolist()]
    ax = O._axes(x, dim)[0]
    n = x._data.shape[ax]
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, (bool, np.bool_)):
        k = int(spec)
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        size, extra = divmod(n, k)
        bounds, start = [], 0
        for j in range(k):
            stop = start + size + (j < extra)
            bounds.append((start, stop))
            start = stop
    elif isinstance(spec, (list, tuple)) and builtins.all(
            isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in spec):
        cuts = [None] + [int(i) for i in spec] + [None]
        bounds = [slice(a, b).indices(n)[:2] for a, b in zip(cuts[:-1], cuts[1:])]
    else:
        raise TypeError(f"tensor_split() received an invalid combination of arguments - got (Tensor, "
                        f"{type(spec).__name__}), but expected one of: (Tensor input, tuple of ints indices, int dim "
                        f"= 0), (Tensor input, Tensor tensor_indices_or_sections, int dim = 0), (Tensor input, int "
                        f"sections, int dim = 0)")
    return tuple(O.narrow(x, ax, min(a, n), builtins.max(b - a, 0)) for a, b in bounds)


@op(method=False)
def column_stack(tensors: Sequence):
    """The tensors side by side as columns: 0-d and 1-d ones become (n, 1) columns first."""
    ts = [O.as_t(t) for t in tensors]
    if not ts:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    return O.cat([O.reshape(t, (-1, 1)) if t._data.ndim <= 1 else t for t in ts], 1)


def _atleast(name: str, nd: int, tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got ({type(t).__name__}), but "
                            f"expected one of: (Tensor input), (tuple of Tensors tensors)")
    out = []
    for t in tensors:
        d = t._data.ndim
        if d < nd:
            if d == 0:
                t = O.reshape(t, (1,) * nd)
            elif nd == 2 or d == 2:  # (n,) -> (1, n); (m, n) -> (m, n, 1)
                t = O.unsqueeze(t, 0 if nd == 2 else -1)
            else:  # (n,) -> (1, n, 1)
                t = O.unsqueeze(O.unsqueeze(t, 0), -1)
        out.append(t)
    return out[0] if single else tuple(out)


@op(method=False)
def atleast_1d(*tensors):
    """Each tensor with at least one dimension (a tuple for several, or a sequence)."""
    return _atleast("atleast_1d", 1, tensors)


@op(method=False)
def atleast_2d(*tensors):
    """Each tensor with at least two dimensions: (n,) becomes (1, n)."""
    return _atleast("atleast_2d", 2, tensors)


@op(method=False)
def atleast_3d(*tensors):
    """Each tensor with at least three dimensions: (n,) becomes (1, n, 1), (m, n) (m, n, 1)."""
    return _atleast("atleast_3d", 3, tensors)


def _tri_indices(name, np_fn, row, col, offset, dtype, device):
    for what, v in (("row", row), ("col", col)):
        if int(v) < 0:
            raise RuntimeError(f"{what} must be non-negative, got{int(v)}")
    dtype = D.int64 if dtype is None else dtype
    if dtype.np.kind not in "iu":
        raise NotImplementedError(f"\"{name}\" not implemented for '{_type_name(dtype)}'")
    r, c = np_fn(int(row), int(offset), int(col))
    from .factory import tensor
    return tensor(np.stack([r, c]).astype(dtype.np).reshape(2, -1), dtype=dtype, device=device)


@op(method=False)
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """The (row, column) indices of the lower triangle of a ``row`` x ``col`` matrix, as a
    2 x N tensor in row-major order (``offset``: diagonals above the main one included)."""
    return _tri_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


@op(method=False)
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """The (row, column) indices of the upper triangle (``offset``: diagonals above the
    main one left out), as ``tril_indices``."""
    return _tri_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)


@op(method=False)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of ``elements`` is among ``test_elements`` (a bool tensor of
    ``elements``' shape; ``invert``: whether it is not). A binary search in the sorted test
    elements; NaN is in nothing."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got ({type(elements).__name__}, "
                        f"{type(test_elements).__name__}), but expected one of: (Tensor elements, Tensor "
                        f"test_elements), (Number element, Tensor test_elements), (Tensor elements, Number "
                        f"test_element)")
    if not isinstance(elements, Tensor):
        e = O.as_t(elements)
        t = test_elements
    else:
        e, t = elements, O.as_t(test_elements)
    e, t = O._promote2(e, t)
    if e._data.dtype == np.bool_:
        raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    e, t = e.detach(), t.detach()
    flat = O.reshape(t, (-1,))
    m = flat._data.shape[0]
    if m == 0:
        found = _false_like(e)
    else:
        srt = sort(flat).values
        ev = O.reshape(e, (-1,))
        # (NaN, sorted last, searched as inf: PyTorch's binary search places nothing among NaN)
        key = O.where(O.isnan(srt), math.inf, srt) if srt.is_floating_point() else srt
        i = O.clamp(searchsorted(key, ev), max=m - 1)
        found = O.reshape(O.eq(O.index_select(srt, 0, i), ev), tuple(e.shape))
    return O.logical_not(found) if invert else found


# ---------------------------------------------------------------- trapezoid rule
def _trapezoid_args(name, y, x, dx, dim):
    y = O.as_t(y)
    if x is not None and dx is not None:
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, Tensor, dx=...), but "
                        f"expected one of: (Tensor y, Tensor x, *, int dim = -1), (Tensor y, *, Number dx = 1, "
                        f"int dim = -1)")
    if y._data.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    ax = O._axes(y, dim)[0]
    if y._data.dtype == np.bool_ or (x is not None and O.as_t(x)._data.dtype == np.bool_):
        raise RuntimeError(f"{name}: received a bool input for `{'x' if y._data.dtype != np.bool_ else 'y'}`, but "
                           "bool is not supported")
    return y, ax


def _spacing(name: str, y: Tensor, x, ax: int) -> Tensor:
    """The differences of the sample points ``x``, shaped to broadcast against ``y``'s."""
    x = O.as_t(x)
    if x._data.ndim == 1:
        if x.shape[0] != y.shape[ax]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        x = O.reshape(x, tuple(s if i == ax else 1 for i, s in enumerate(y.shape)))
    elif x._data.ndim < y._data.ndim:
        x = O.reshape(x, (1,) * (y._data.ndim - x._data.ndim) + tuple(x.shape))
    m = x.shape[ax]
    return O.sub(O.narrow(x, ax, 1, builtins.max(m - 1, 0)), O.narrow(x, ax, 0, builtins.max(m - 1, 0)))


@op(method=False)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of ``y`` along ``dim`` by the trapezoid rule, at the sample points
    ``x`` or with the constant spacing ``dx`` (1 without either)."""
    y, ax = _trapezoid_args("trapezoid", y, x, dx, dim)
    n = y.shape[ax]
    if n == 0:  # (0, as NumPy's)
        return O.sum(y, ax) if y._data.dtype.kind != "f" else O.mul(O.sum(y, ax), 0)
    if x is None:
        ends = O.mul(O.add(O.select(y, ax, 0), O.select(y, ax, -1)), 0.5)
        return O.mul(O.sub(O.sum(y, ax), ends), 1 if dx is None else dx)
    d = _spacing("trapezoid", y, x, ax)
    return O.div(O.sum(O.mul(d, O.add(O.narrow(y, ax, 0, n - 1), O.narrow(y, ax, 1, n - 1))), ax), 2.0)


trapz = alias(trapezoid, "trapz")


@op(method=False)
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running integral of ``y`` along ``dim`` by the trapezoid rule (one element
    fewer than ``y`` along ``dim``); ``x``, ``dx`` as in ``trapezoid``."""
    y, ax = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    n = y.shape[ax]
    m = builtins.max(n - 1, 0)
    pair = O.add(O.narrow(y, ax, 0, m), O.narrow(y, ax, 1, m)) if n else y
    if x is None:
        parts = O.mul(pair, (1 if dx is None else dx) / 2.0)
    else:
        parts = O.mul(O.div(_spacing("cumulative_trapezoid", y, x, ax), 2.0), pair)
    return O.cumsum(parts, ax)


# ---------------------------------------------------------------- random
def _p_check(p) -> None:
    if isinstance(p, Tensor):
        if _eager(p) and not np.all((p._data >= 0) & (p._data <= 1)):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    elif not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")


def _draw(shape, p, dtype, generator, device) -> Tensor:
    """1 with probability ``p`` (a float, or a tensor broadcast to ``shape``), else 0."""
    from .factory import rand
    udt = p.dtype if isinstance(p, Tensor) and p.dtype.is_floating_point else dtype
    u = rand(tuple(shape), dtype=udt if udt.is_floating_point else D.float64, generator=generator, device=device)
    return O.lt(u, p.detach() if isinstance(p, Tensor) else p)


@op
def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """A 0/1 sample of ``input``'s shape and dtype: 1 with probability ``input`` (or ``p``,
    where given) at each element. Its gradient to ``input`` is 0, as PyTorch's."""
    x = O.as_t(input)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{_dtype_name(x)}'")
    prob = x if p is None else p
    _p_check(prob)
    r = O.to(_draw(x.shape, prob, x.dtype, generator, x.device), x.dtype)
    return _zero_grad_link(r, x, "BernoulliBackward0") if p is None else r


@op(method=False)
def poisson(input, generator=None):  # noqa: A002
    """A Poisson draw per element with rate ``input`` (in its dtype), from NumPy keyed by
    ``generator`` (a graph break in compiled code); its gradient to ``input`` is 0, as
    PyTorch's."""
    from .factory import numpy_rng, tensor
    x = O.as_t(input)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{_dtype_name(x)}'")
    rate = np.asarray(x._concrete("poisson"), np.float64)
    if np.any(rate < 0) or not np.all(np.isfinite(rate)):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    draw = numpy_rng(rate.size, generator).poisson(rate)
    r = tensor(draw.reshape(rate.shape), dtype=x.dtype, device=x.device)
    return _zero_grad_link(r, x, "PoissonBackward0")


@op(function=False)
def bernoulli_(self, p=0.5, *, generator=None):
    """Fill ``self`` (of any dtype) with 0/1 draws, 1 with probability ``p`` (a float, or
    a tensor broadcast to ``self``'s shape)."""
    _p_check(p)
    return O.sampled_(self, lambda: _draw(self.shape, p, self.dtype, generator, self.device), "BernoulliBackward2")
