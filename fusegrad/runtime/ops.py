"""Tensor-level ops: PyTorch's signatures, type promotion and grad_fn names on top of
the primitives. Composite ops (mean, var, softmax, ...) decompose into primitives here.
Each function is also a ``fusegrad.*`` function and, where PyTorch has one, a method."""
from __future__ import annotations

import builtins
import functools
import math
import warnings
from collections import namedtuple
from typing import Optional, Sequence

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from ..ir.graph import Var
from ..ir.prims.indexing import numpy_key
from ..ir.prims.layout import encode_key
from ..ir.prims.shapes import broadcast_shapes, normalize_axes
from ..tracer.trace import capturing
from ..tracer.dynamic_float import DynamicFloat, FloatUsed
from ..tracer import speculate
from ..tracer.speculate import Speculated
from . import devices, forward_state
from .autocast_state import float32_policy, lower_precision
from .dispatch import bind, rederive, replay_view
from .exports import alias, op
from .forward_state import carry_tangent
from .grad_mode import STATE
from .keywords import _type_name, write_out
from .layouts import sparse_coo, sparse_csr
from .nodes import PrimNode, node_class
from .composite import CompositeNode, one_node
from .type_info import channels_last_order, contiguous_format, is_laid_out, laid_out, preserve_format
from .tensor import Tensor, wrap
from .transfer import transfer
from ..tracer.trace import GraphBreak, current_traces, user_frame, user_stacklevel

_SCALARS = (bool, int, float, np.number, np.bool_)


# ---------------------------------------------------------------- helpers
def as_t(x, dtype=None) -> Tensor:
    """``x`` as a Tensor (scalars and array-likes are converted)."""
    if isinstance(x, Tensor):
        return x
    if type(x) is DynamicFloat:  # (tensor ops with a Python float operand take it in _promote2)
        raise FloatUsed("made into a tensor", x.sources)
    from .factory import NoDtype, tensor
    try:
        return tensor(x, dtype=dtype)
    except NoDtype as e:
        raise TypeError(f"{e}: not a tensor operand") from None


def named(out: Tensor, name: str) -> Tensor:
    """Give the node that produced ``out`` PyTorch's grad_fn class name for this op."""
    n = out._grad_fn
    if n is not None and type(n).__name__ != name:
        if isinstance(n, PrimNode):
            n.__class__ = node_class(name)
        elif isinstance(n, CompositeNode):
            n.__class__ = node_class(name, CompositeNode)
    return out


def grad_only(t: Tensor) -> Tensor:
    """Zero in value, with ``t``'s gradient: ``t - t.detach()``, but zero (not NaN) where
    ``t`` is infinite or NaN, whose gradient it then drops. Composites add it to a value
    they computed in NumPy to give that value its gradient."""
    d = t.detach()
    finite = isfinite(d)
    return sub(where(finite, t, 0.0), where(finite, d, 0.0))


def storage_alias(out: Tensor, x: Tensor, view, steps: Optional[tuple] = None) -> Tensor:
    """``out``, a composite's result with its autograd history, made to show ``view``: an
    array over ``x``'s memory holding the same elements, as PyTorch's strided views
    (``unfold``, ``as_strided``) do, so that writes through either reach the other. Without
    ``steps`` no chain of view primitives rebuilds it from ``x``, so an in-place update of it
    that autograd must record raises (clone() it first); one that autograd need not record
    writes ``x``. With ``steps``, the view primitives ((prim, params) pairs) that computed
    ``out`` from ``x`` where NumPy had to copy on the way (a reshape of dims not adjacent in
    memory: a diagonal), it is a view of ``x`` to autograd too. Traced (``view`` None), it
    keeps its value, and an in-place update of it, or a read after one of ``x``, is a graph
    break that makes the call run eagerly."""
    out._base = x._base if x._base is not None else x
    out._view_fn = None if steps is None else ((x._view_fn or ()) if x._base is not None else ()) + steps
    out._inf = x._inf  # (a view of an inference tensor is one)
    if view is not None and type(out._data) is not Var:  # (traced from a concrete x: a segment's value)
        if x._vbox is None:
            x._vbox = [0]
        out._data = view
        out._vbox = x._vbox
        out._vver = x._vbox[0]
    return out


def own(out: Tensor, *inputs: Optional[Tensor], order=None) -> Tensor:
    """``out``, the result of a composite op that PyTorch computes as a tensor of its own
    (a convolution, a pool), made one when it is a view of a temporary the composite made
    (reshaped from a GEMM's result): an in-place update of it (``nn.ReLU(inplace=True)``
    after a convolution) is then a plain update, as in PyTorch, which compile traces,
    rather than an update through a view, which breaks its graph. It keeps sharing memory
    and the version counter with the temporary, which nothing else holds. A view of one of
    ``inputs`` stays a view. An eager host result is laid out in C order, as PyTorch's
    (``view`` needs it: a transposed GEMM result would refuse ``.view(n, -1)``), or with its
    dims in memory in ``order`` when given (a convolution of a channels-last input)."""
    b = out._base
    if b is not None and not builtins.any(x is not None and (b is x or b is x._base) for x in inputs):
        out._base = out._view_fn = None
    d = out._data
    if out._base is None and type(d) is np.ndarray and not (
            d.flags.c_contiguous if order is None else is_laid_out(d, order)):
        out._data = laid_out(d, order)
    return out


def laid_out_like(out: Tensor, ref: Tensor) -> Tensor:
    """``out``, an eager host tensor of its own, with its dims in memory in the order of
    ``ref``'s strides: PyTorch's layout for results that follow an input (attention's output
    follows its query, so ``out.transpose(1, 2).view(b, l, -1)`` works)."""
    d, r = out._data, ref._data
    if type(d) is not np.ndarray or type(r) is not np.ndarray or d.ndim != r.ndim or out._base is not None \
            or r.flags.c_contiguous:
        return out
    order = sorted(range(r.ndim), key=lambda a: -r.strides[a])  # outermost first; ties keep their order
    if order != list(range(r.ndim)):
        out._data = laid_out(d, order)
    return out


def _float(x: Tensor) -> Tensor:
    """Integer and bool tensors become the default float dtype (torch.exp(int) is float)."""
    if x._data.dtype.kind in "iub":
        return P.cast(x, dtype=D.get_default_dtype().np)
    return x


def float_pair(input, other) -> tuple:  # noqa: A002
    """Two operands (tensors or Python scalars) as floating tensors of one dtype: their
    PyTorch result dtype, the default float dtype where that is integral or bool (a Python
    scalar takes the tensor's floating dtype)."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        rt = D.result_type(input, other).np
        to = D.get_default_dtype().np if rt.kind in "iub" else rt  # (each cast straight there: -3 not via uint8)
        return tuple(t if t._data.dtype == to else P.cast(t, dtype=to) for t in (input, other))
    if isinstance(input, Tensor):
        a = _float(input)
        return a, as_t(other, dtype=a.dtype)
    if isinstance(other, Tensor):
        b = _float(other)
        return as_t(input, dtype=b.dtype), b
    return float_pair(_float(as_t(input)), other)


def _scalar(v):
    return v.item() if isinstance(v, (np.number, np.bool_)) else v


def _wrapped(s: int, dt: np.dtype) -> int:
    """A Python int operand of an integer tensor, wrapped into its dtype as PyTorch does
    (``uint8_tensor + -3`` adds 253; NumPy would raise)."""
    info = np.iinfo(dt)
    if info.min <= s <= info.max or not -2 ** 63 <= s < 2 ** 63:
        return s
    return int(np.array(s, np.int64).astype(dt))


def _promote2(a, b):
    """Operands of a binary op, converted to their PyTorch result dtype."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a._data.dtype == b._data.dtype:
            return a, b
        rt = D.result_type(a, b).np
        if a._data.dtype != rt:
            a = P.cast(a, dtype=rt)
        if b._data.dtype != rt:
            b = P.cast(b, dtype=rt)
        return a, b
    t, s, t_first = (a, b, True) if isinstance(a, Tensor) else (b, a, False)
    ts = type(s)
    dk = t._data.dtype.kind  # "V": bfloat16 (ml_dtypes), a float dtype
    if (ts is float and dk in "fV") or (ts is int and dk in "iufV"):
        if ts is int and dk in "iu":
            s = _wrapped(s, t._data.dtype)
            return (t, s) if t_first else (s, t)
        return a, b  # a weak Python scalar keeps the tensor's dtype
    if ts is Speculated:  # (traced: its value in the graph, else the number)
        s = s.operand(t) if s.traced() else s.number("an operand of a tensor op")
        return _promote2(t, s) if t_first else _promote2(s, t)
    if ts is DynamicFloat:
        s = s.operand(t)
        return _promote2(t, s) if t_first else _promote2(s, t)
    if isinstance(s, _SCALARS):
        s = _scalar(s)
        rt = D.result_type(t, s).np
        if t._data.dtype != rt:
            t = P.cast(t, dtype=rt)
        if isinstance(s, bool) and rt.kind != "b":
            s = int(s)
        return (t, s) if t_first else (s, t)
    s = as_t(s)
    return _promote2(t, s) if t_first else _promote2(s, t)


def _binary(prim, a, b, name=None):
    a, b = _promote2(a, b)
    out = bind(prim, (a, b), {})
    return named(out, name) if name else out


def _scalar_in_float32(a, b):
    """The float16 or bfloat16 result dtype of ``a`` (op) ``b`` where PyTorch's CPU kernel reads
    ``b``, a 0-d tensor of another dtype, at its own value: mul and div (every rounding mode)
    compute with it in float32 and round once (add, sub, pow, remainder and the rest round
    ``b`` to the result dtype first, as promotion does); None elsewhere."""
    if isinstance(b, Tensor) and isinstance(a, Tensor) and not b._data.ndim and a._data.dtype != b._data.dtype \
            and b._data.dtype.kind in "biuf":  # (an nn.Parameter too: a learnable 0-d scale)
        rt = D.result_type(a, b).np
        if D.np_half(rt):
            return rt
    return None


def _in_float32(op, a, b, rt: np.dtype, name: str) -> Tensor:
    """``op(a, b)`` computed in float32 (the tensors among them cast) and rounded to ``rt`` once:
    PyTorch's CPU kernels for float16 and bfloat16 (see ``_scalar_in_float32``)."""
    f32 = np.dtype(np.float32)
    wide = [P.cast(t, dtype=f32) if isinstance(t, Tensor) else t for t in (a, b)]
    return named(P.cast(op(*wide), dtype=rt), name)


# ---------------------------------------------------------------- unary math
def _unary(prim, name=None, to_float=True, complex_prim=None):
    """The op of unary primitive ``prim`` (``complex_prim`` for complex operands, where the
    real rule does not hold for them: ``abs``)."""
    def op(input, *, out=None):  # noqa: A002 - PyTorch's names (no adapter: runtime/keywords.py)
        x = input if isinstance(input, Tensor) else as_t(input)
        if to_float and x._data.dtype.kind in "iub":
            x = _float(x)
        r = bind(complex_prim if complex_prim is not None and x._data.dtype.kind == "c" else prim, (x,), {})
        if name:
            r = named(r, name)
        return r if out is None else write_out(prim.name, r, out)
    op.__name__ = prim.name
    return op


exp = op(_unary(P.exp), inplace="both")
log = op(_unary(P.log), inplace="both")
log1p = op(_unary(P.log1p))
expm1 = op(_unary(P.expm1))
sin = op(_unary(P.sin), inplace="both")
cos = op(_unary(P.cos), inplace="both")
tan = op(_unary(P.tan))
tanh = op(_unary(P.tanh), inplace="both")
sigmoid = op(_unary(P.sigmoid), inplace="both")
relu = op(_unary(P.relu, to_float=False), inplace="both")
abs = op(_unary(P.abs_, "AbsBackward0", to_float=False, complex_prim=P.cabs), inplace="both")
_sign = _unary(P.sign, "SignBackward0", to_float=False)


@op(inplace="method")
def sign(input, *, out=None):  # noqa: A002
    if isinstance(input, Tensor) and input._data.dtype.kind == "c":
        raise NotImplementedError("Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
                                  "torch.sgn instead.")
    if isinstance(input, Tensor) and input._data.dtype.kind == "b":  # its own sign (NumPy has no bool loop)
        r = P.ne(input, False)
        return r if out is None else write_out("sign", r, out)
    return _sign(input, out=out)
sqrt = op(_unary(P.sqrt), inplace="both")
rsqrt = op(_unary(P.rsqrt))
erf = op(_unary(P.erf))
floor = op(_unary(P.floor, "FloorBackward0", to_float=False), inplace="both")
ceil = op(_unary(P.ceil, "CeilBackward0", to_float=False))
_round = _unary(P.round_, "RoundBackward0", to_float=False)


@op(inplace="both")
def round(x, *, decimals=0):  # noqa: A001
    """Round half to even; with ``decimals``, at that decimal place (as PyTorch: scaled by a
    power of ten, rounded, scaled back)."""
    if not decimals:
        return _round(x)
    x = as_t(x)

    def scaled(x):  # (a float16 or bfloat16 x in float32, rounded once, as PyTorch's kernel)
        if decimals > 0:
            return div(_round(mul(x, 10.0 ** decimals)), 10.0 ** decimals)
        return mul(_round(div(x, 10.0 ** -decimals)), 10.0 ** -decimals)
    return half_wide(x, scaled)



trunc = op(_unary(P.trunc, "TruncBackward0", to_float=False))
_neg = _unary(P.neg, "NegBackward0", to_float=False)


@op(inplace="both")
def neg(x):
    if isinstance(x, Tensor) and x._data.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return _neg(x)


negative = alias(neg, "negative")
isnan = op(_unary(P.isnan, to_float=False))
logical_not = op(_unary(P.logical_not, to_float=False))
absolute = alias(abs, "absolute", inplace="method")


@op(inplace="both")
def reciprocal(x):
    x = _float(as_t(x))
    return named(div(1.0, x), "ReciprocalBackward0")


@op(inplace="both")
def square(x):
    x = as_t(x)
    if x._data.dtype == np.bool_:  # (as pow(x, 2): a bool's square is int64)
        x = P.cast(x, dtype=np.dtype(np.int64))
    return named(mul(x, x), "PowBackward0")


@op
def exp2(x):  # (half precision: in float32, rounded once)
    return named(half_wide(_float(as_t(x)), lambda x: exp(mul(x, math.log(2.0)))), "Exp2Backward0")


@op
def log2(x):
    return named(half_wide(as_t(x), lambda x: div(log(x), math.log(2.0))), "Log2Backward0")


@op
def log10(x):  # (half precision: in float32, rounded once, as PyTorch's log10f)
    return named(half_wide(as_t(x), lambda x: div(log(x), math.log(10.0))), "Log10Backward0")


@op
def sinh(x):
    """(e^x - e^-x) / 2 as (u + u / (u + 1)) / 2 with u = expm1(|x|): no cancellation near 0
    (e^x - e^-x lost float32's digits there: sinh(1e-5) was 0.14% off)."""
    return named(half_wide(_float(as_t(x)), _sinh), "SinhBackward0")


def _sinh(x: Tensor) -> Tensor:
    neg_x = lt(x, 0)
    u = expm1(where(neg_x, neg(x), x))  # (|x| with a derivative of 1 at 0, not abs's 0)
    big = isinf(u)
    v = where(big, 1.0, u)  # (u / (u + 1) of an infinite u is NaN: there sinh is u)
    s = where(big, u, mul(add(v, div(v, add(v, 1.0))), 0.5))
    return where(neg_x, neg(s), s)


@op
def cosh(x):
    """1 + 2 sinh(x/2)^2: its derivative, sinh(x), without e^x - e^-x's cancellation."""
    def even(x):
        s = _sinh(mul(x, 0.5))
        return add(mul(mul(s, s), 2.0), 1.0)
    return named(half_wide(_float(as_t(x)), even), "CoshBackward0")


def erfc_of(x: Tensor) -> Tensor:
    """erfc without 1 - erf(x)'s cancellation for large x: erfcx(x) exp(-x^2) from 0.5 on
    (each branch evaluated where it is finite, so that neither makes a NaN gradient; erfc is
    0 in float64 from 27.3 on, so arguments past 30 are taken at 30)."""
    big = ge(x, 0.5)
    xb = where(big, where(gt(x, 30.0), 30.0, x), 0.5)
    return where(big, mul(bind(P.erfcx, (xb,), {}), exp(neg(mul(xb, xb)))), sub(1.0, erf(where(big, 0.0, x))))


@op
def erfc(x):
    """The complementary error function, computed in float64 and rounded once (1 - erf(x)
    in the input's dtype was 0 for a float32 x past 4, for a bfloat16 one past 2)."""
    return named(in_float64(_float(as_t(x)), erfc_of), "ErfcBackward0")


def in_float64(x: Tensor, fn) -> Tensor:
    """``fn(x)`` computed in float64 and rounded back to ``x``'s floating dtype: composites
    that square their argument and exponentiate (erfc, ndtr), which costs float32 ~1e-6."""
    if x._data.dtype == np.float64:
        return fn(x)
    return P.cast(fn(P.cast(x, dtype=np.dtype(np.float64))), dtype=x._data.dtype)


@op
def atan2(y, x):
    y, x = float_pair(y, x)
    return named(P.atan2(y, x), "Atan2Backward0")


@op
def atan(x):
    x = _float(as_t(x))
    if x._data.dtype.kind == "c":
        from .extra_ops import atan_complex  # (it imports this module)
        return named(atan_complex(x), "AtanBackward0")
    return named(atan2(x, ones_of(x)), "AtanBackward0")


def ones_of(x: Tensor) -> Tensor:
    from .factory import ones
    return ones(x.shape, dtype=x.dtype)


@op
def logit(x, eps=None):
    x = _float(as_t(x))
    if eps is not None:
        x = clamp(x, eps, 1 - eps)
    return named(log(div(x, sub(1.0, x))), "LogitBackward0")


# ---------------------------------------------------------------- binary math
@op(inplace="method")
def add(input, other, *, alpha=1, out=None):  # noqa: A002 - PyTorch's names (no adapter: runtime/keywords.py)
    if type(other) is not Tensor and _sparse(other) and isinstance(input, Tensor):  # dense + sparse: dense (as torch)
        if tuple(input.shape) != tuple(other.shape):
            raise RuntimeError(f"add: expected 'self' and 'other' to have same size, but self has size "
                               f"{list(input.shape)} while other has size {list(other.shape)} (FYI: dense-sparse "
                               "addition does not currently support broadcasting)")
        other = other.to_dense()
    if alpha != 1:
        return _with_alpha(add, input, other, alpha, "AddBackward0", out)
    r = _binary(P.add, input, other, "AddBackward0")
    return r if out is None else write_out("add", r, out)


def _with_alpha(op, input, other, alpha, name: str, out):
    """``op(input, other * alpha)`` as PyTorch's kernel computes it: with float16 or bfloat16
    operands in float32 with ``alpha`` rounded to their dtype, then rounded once (SGD's and
    Adam's updates of half parameters); with float32 ones (a tensor or a number ``other``) as
    one fused multiply-add, ``alpha`` and a number ``other`` rounded to float32 first."""
    a, b = as_t(input), other
    floating = a._data.dtype.kind in "fV" or (isinstance(b, Tensor) and b._data.dtype.kind in "fV")
    rt = D.result_type(a, b).np if floating and isinstance(b, (Tensor, int, float)) else None
    if rt is not None and D.np_half(rt):
        alpha = float(np.asarray(alpha, dtype=rt)) if isinstance(alpha, (int, float)) else alpha
        r = _in_float32(lambda x, y: op(x, y * alpha), a, b, rt, name)
    elif rt is not None and rt.kind == "f" and type(alpha) in (int, float) and (isinstance(b, Tensor) or
                                                                               type(b) in (int, float)):
        # (operands of other dtypes in the result's first: float16 * alpha beside a float32 is float32's)
        a = a if a._data.dtype == rt else P.cast(a, dtype=rt)
        b = (b if b._data.dtype == rt else P.cast(b, dtype=rt)) if isinstance(b, Tensor) else float(np.asarray(b, rt))
        al = float(np.asarray(alpha, rt))
        r = named(P.fma(b, -al if op is sub else al, a), name)
    else:
        if rt is None and isinstance(alpha, (int, float, np.number)):  # (PyTorch checks alpha against the result type)
            kind = D.result_type(a, other).np.kind
            if kind in "biu" and isinstance(alpha, (float, np.floating)):
                raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
            if kind == "b":  # (bools: input or (other and alpha))
                return op(input, bool(other) and bool(alpha) if isinstance(other, _SCALARS) else
                          logical_and(other, bool(alpha)), out=out)
        r = op(input, other * alpha if isinstance(other, _SCALARS) else mul(other, alpha))
    return r if out is None else write_out(op.__name__, r, out)


def muladd(x: Tensor, s, y: Tensor) -> Tensor:
    """``y + x * s`` rounded as PyTorch's ``y.add(x, alpha=s)`` (one fused multiply-add for
    float32); ``s`` a number, or the 0-d tensor a compiled optimizer step reads a
    hyperparameter from (optimizers' updates)."""
    if not isinstance(s, Tensor):
        return add(y, x, alpha=s)
    if y._data.dtype.kind == "f" and y._data.dtype == x._data.dtype == s._data.dtype:
        return P.fma(x, s, y)
    return add(y, mul(x, s))


def muladd_(y: Tensor, x: Tensor, s) -> Tensor:
    """``y.add_(x, alpha=s)`` (see ``muladd``)."""
    return inplace(y, lambda old: muladd(x, s, old), x, *([s] if isinstance(s, Tensor) else []))


@op(inplace="method")
def sub(input, other, *, alpha=1, out=None):  # noqa: A002
    if builtins.any((isinstance(v, Tensor) and v._data.dtype == np.bool_) or isinstance(v, (bool, np.bool_))
                    for v in (input, other)):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                           "to invert a mask, use the `~` or `logical_not()` operator instead.")
    if alpha != 1:
        return _with_alpha(sub, input, other, alpha, "SubBackward0", out)
    r = _binary(P.sub, input, other, "SubBackward0")
    return r if out is None else write_out("sub", r, out)


@op(method=False)
def rsub(a, b, alpha=1):
    return named(sub(b, a, alpha=alpha), "RsubBackward1")


@op(inplace="method")
def mul(input, other, *, out=None):  # noqa: A002
    # (a product with a sparse tensor is sparse: its method; plain tensors skip the layout lookups)
    if (type(input) is not Tensor and _sparse(input)) or (type(other) is not Tensor and _sparse(other)):
        return input.mul(other) if _sparse(input) else other.mul(input)
    rt = _scalar_in_float32(input, other)
    r = _binary(P.mul, input, other, "MulBackward0") if rt is None else \
        _in_float32(P.mul, input, other, rt, "MulBackward0")
    return r if out is None else write_out("mul", r, out)


@op(inplace="method")
def div(input, other, *, rounding_mode=None, out=None):  # noqa: A002
    r = _div(input, other, rounding_mode)
    return r if out is None else write_out("div", r, out)


def _integral(x) -> bool:
    if isinstance(x, Tensor):
        return x._data.dtype.kind in "iu"
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


_READ_LATER = (DynamicFloat, Speculated)  # Python floats read at each call: _promote2 takes them
_DIV_OPERANDS = (Tensor, *_SCALARS, *_READ_LATER)


def _div(a, b, rounding_mode):
    """Division in the operands' promoted dtype, as PyTorch: integral (or bool) operands
    divide exactly in the default float dtype, or as integers under a rounding mode
    (``int64 // True`` is int64, ``int64 / float16`` float16)."""
    a = a if isinstance(a, _DIV_OPERANDS) else as_t(a)
    b = b if isinstance(b, _DIV_OPERANDS) else as_t(b)
    half = _scalar_in_float32(a, b)
    if half is not None:
        return _in_float32(lambda x, y: _div(x, y, rounding_mode), a, b, half, "DivBackward0")
    rt = D.result_type(_stand_in(a), _stand_in(b)).np
    if rounding_mode is not None and rt.kind in "iub":
        if rt.kind == "b":
            raise NotImplementedError(f'"div_{rounding_mode}_cpu" not implemented for \'Bool\'')
        return _int_div(a, b, rounding_mode)
    to = D.get_default_dtype().np if rt.kind in "iub" else rt
    a = _cast_to(a, to)
    b = _cast_to(b, to)
    if isinstance(a, _SCALARS):
        a = full_as(b, a)
    if rounding_mode == "floor":  # (the exact quotient's floor, as PyTorch's: 3.0 // 0.3 is 9)
        return _binary(P.floordiv, a, b, "DivBackward0")
    r = _binary(P.div, a, b, "DivBackward0")
    if rounding_mode == "trunc":
        return trunc(r)
    return r


true_divide = alias(div, "true_divide")


def _stand_in(x):
    """``x``, or this trace's value of a number read at each call (for the result dtype)."""
    return x.value if type(x) in _READ_LATER else x


def _cast_to(x, dt: np.dtype):
    """A division operand in ``dt`` (the float dtype it computes in): tensors cast, a
    Python bool as a float, other scalars as they are (weak)."""
    if isinstance(x, Tensor):
        return x if x._data.dtype == dt else P.cast(x, dtype=dt)
    return float(x) if isinstance(x, (bool, np.bool_)) else x


def _int_div(a, b, rounding_mode):
    """Integer division rounded as ``rounding_mode`` says, in the operands' promoted integer
    dtype, exact over its whole range; dividing by zero raises, as PyTorch."""
    a, b = _promote2(as_t(a), b)
    _check_divisor(b)
    if rounding_mode == "floor":
        return P.floordiv(a, b)
    return P.floordiv(sub(a, _int_fmod(a, b)), b)  # (a - fmod(a, b) is a multiple of b)


def _check_divisor(b) -> None:
    """An integer divisor with a zero raises, as PyTorch: checked on an array, and on a value
    compile's whole-function trace computes, speculated (tracer.speculate): the compiled
    call checks it first and a call with a zero runs eagerly, raising there."""
    if isinstance(b, _SCALARS):
        zero = b == 0
    elif type(b._data) is np.ndarray:
        zero = not b._data.all()
    else:
        zero = speculate.traced(b) is not None and not all(b)
    if zero:
        raise RuntimeError("ZeroDivisionError")


def _int_fmod(a: Tensor, b) -> Tensor:
    """C's remainder (the dividend's sign) of integers, from Python's (the divisor's)."""
    r = P.mod(a, b)
    return where(logical_and(ne(r, 0), ne(lt(r, 0), lt(a, 0))), sub(r, b), r)


def full_as(like: Tensor, value) -> Tensor:
    """A 0-d tensor of ``value`` in ``like``'s dtype (float for ints)."""
    dt = like._data.dtype if D.np_floating(like._data.dtype) or not isinstance(value, float) else D.get_default_dtype().np
    return wrap(np.asarray(value, dtype=dt))


@op
def floor_divide(a, b):
    return div(a, b, rounding_mode="floor")


def _modulo(a, b, prim, name, what):
    """The exact remainder ``prim`` (mod: Python's, fmod: C's) in the operands' dtype."""
    a, b = _promote2(a, b) if isinstance(b, Tensor) else _promote2(as_t(a), b)
    if not isinstance(a, Tensor):  # (a Python number before a tensor: weak, as in promotion)
        a = as_t(a, dtype=b.dtype)
    if a._data.dtype == np.bool_:
        raise NotImplementedError(f'"{what}_cpu" not implemented for \'Bool\'')
    if not D.np_floating(a._data.dtype):  # a is a Tensor here (as_t, and _promote2 keeps it one)
        _check_divisor(b)
        if prim is P.fmod:  # (integers' C remainder from Python's: Numba's np.fmod of integers is wrong)
            return _int_fmod(a, b)
    return _binary(prim, a, b, name)


@op
def remainder(a, b):
    """Python's modulo: the result takes the divisor's sign."""
    return _modulo(a, b, P.mod, "RemainderBackward0", "remainder")


@op
def fmod(a, b):
    """C's fmod: the result takes the dividend's sign."""
    return _modulo(a, b, P.fmod, "FmodBackward0", "fmod")


@op(inplace="method")
def pow(a, b):
    """``a ** b`` in the promoted dtype (``2 ** bool_tensor`` is int64); an integer tensor to
    a negative Python int raises, to negative integer tensor elements gives 0 (or 1, -1 for
    bases 1, -1), as PyTorch."""
    if isinstance(a, _SCALARS) and isinstance(b, Tensor):
        rt = D.result_type(a, b).np
        _pow_check(rt)
        b = b if b._data.dtype == rt else P.cast(b, dtype=rt)
        a = _scalar(a)
        a = _wrapped(a, rt) if rt.kind in "iu" and isinstance(a, int) else a
        return _binary(P.pow_, wrap(np.asarray(a, dtype=rt)), b, "PowBackward1")
    a = as_t(a)
    if isinstance(b, _SCALARS):
        if D.result_type(a, b).np.kind in "iu" and b < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        if b == 0.5 and a._data.dtype.kind == "c":  # (PyTorch's kernel takes the square root: exact on axes)
            return named(sqrt(a), "PowBackward0")
        return _binary(P.pow_, a, b, "PowBackward0")
    if isinstance(b, Tensor):
        _pow_check(D.result_type(a, b).np)
    return _binary(P.pow_, a, b, "PowBackward1")


def _pow_check(rt: np.dtype) -> None:
    if rt.kind == "b":
        raise NotImplementedError('"pow" not implemented for \'Bool\'')


@op
def maximum(a, b):
    return _binary(P.maximum, a, b, "MaximumBackward0")


@op
def minimum(a, b):
    return _binary(P.minimum, a, b, "MinimumBackward0")


def _cmp(prim):
    """The comparison op of ``prim`` (the ordered ones' primitives refuse complex operands)."""
    def op(a, b):
        return _binary(prim, a, b)
    op.__name__ = prim.name
    return op


eq = op(_cmp(P.eq))
ne = op(_cmp(P.ne))
lt = op(_cmp(P.lt))
le = op(_cmp(P.le))
gt = op(_cmp(P.gt))
ge = op(_cmp(P.ge))
greater, greater_equal, less, less_equal, not_equal = (alias(gt, "greater"), alias(ge, "greater_equal"), alias(lt, "less"),
                                                       alias(le, "less_equal"), alias(ne, "not_equal"))
logical_and = op(_cmp(P.logical_and))
logical_or = op(_cmp(P.logical_or))
logical_xor = op(_cmp(P.logical_xor))


@op
def equal(a, b) -> bool:
    if _on_cuda(a, b):
        return tuple(a.shape) == tuple(b.shape) and bool(all(eq(a, b)))
    return tuple(a.shape) == tuple(b.shape) and bool(np.array_equal(a._concrete("equal"), b._concrete("equal")))


@op(method=False)  # Tensor.where(cond, other) takes its operands in another order: methods.py
def where(cond, x=None, y=None):
    if x is None and y is None:
        return nonzero(cond, as_tuple=True)
    if isinstance(cond, Tensor) and cond._data.dtype == np.uint8:  # deprecated in PyTorch, still read as a mask
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
                      "future version of PyTorch. Use a boolean condition instead.", UserWarning,
                      stacklevel=user_stacklevel())
        cond = P.ne(cond, 0)
    if isinstance(cond, Tensor) and cond._data.dtype.kind != "b":
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                           f"{scalar_name(cond)}")
    if not (isinstance(x, Tensor) or isinstance(y, Tensor)):
        x = as_t(x)
    for t, s in ((x, y), (y, x)):  # (a number taking an integer tensor's dtype must fit it: 300 in int8 raises)
        if isinstance(t, Tensor) and t._data.dtype.kind in "iu" and isinstance(s, int):
            _fits(s, t)
    x, y = _promote2(x, y)
    return named(P.where(as_t(cond), x, y), "WhereBackward0")


@op(inplace="both")
def clamp(x, min=None, max=None):
    x = as_t(x)
    for bound in (min, max):
        _fits(bound, x)
    r = x
    if min is not None:
        r = where(_past_bound(r, min, lt), min, r)
    if max is not None:
        r = where(_past_bound(r, max, gt), max, r)
    if r is x:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return named(no_grad_at_nan(x, r), "ClampBackward1")


def no_grad_at_nan(x: Tensor, r: Tensor) -> Tensor:
    """``r``, with no gradient where ``x`` is NaN: PyTorch's clamp-like backward passes the
    gradient only where ``x`` compares inside its bounds, which a NaN never does."""
    if not (STATE.enabled and x._rg and D.np_floating(x._data.dtype)):
        return r
    return where(isnan(x), P.stop_gradient(r), r)


clip = alias(clamp, "clip")


def _past_bound(r: Tensor, bound, cmp) -> Tensor:
    """Where clamp takes ``bound``: past it, or where it is NaN (a NaN bound gives NaN, as PyTorch's)."""
    if isinstance(bound, Tensor) and D.np_floating(bound._data.dtype):
        return logical_or(cmp(r, bound), isnan(bound))
    if isinstance(bound, float) and math.isnan(bound):
        return ne(r, bound)  # (everywhere)
    return cmp(r, bound)


@op(inplace="both")
def clamp_min(x, m):
    return clamp(x, min=m)


@op(inplace="both")
def clamp_max(x, m):
    return clamp(x, max=m)


_CPP_SCALAR = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "int16": "short int",
               "int8": "signed char", "uint8": "unsigned char", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
               "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def cpp_scalar_name(t: Tensor) -> str:
    """PyTorch's C++ name of ``t``'s scalar type in kernel messages (float, long int, ...)."""
    name = t._data.dtype.name
    return _CPP_SCALAR.get(name, name)


@op(inplace="method")
def masked_fill(x, mask, value):
    x = as_t(x)
    if isinstance(mask, Tensor) and mask._data.dtype.kind != "b":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {cpp_scalar_name(mask)}")
    if isinstance(value, Tensor):
        if value._data.ndim == 0 and type(value._data) is not Var and not value._rg:
            value = value.item()
        elif value._data.dtype != x._data.dtype:
            value = to(value, x.dtype)
    _fits(value, x)
    if not isinstance(value, Tensor) and x._data.dtype.kind in "biu":  # the value takes x's dtype, as PyTorch's
        value = bool(value) if x._data.dtype.kind == "b" else int(value)
    return named(where(mask, value, x), "MaskedFillBackward0")


_OVERFLOW_NAME = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t"}


def _fits(value, x: Tensor) -> None:
    fits(value, x._data.dtype)


def fits(value, dt: np.dtype) -> None:
    """PyTorch's error for a fill value dtype ``dt`` cannot hold: a number outside an integer
    dtype's range (NaN and inf too), or one float16, bfloat16 or float32 would round to inf
    (fill_, full, masked_fill, clamp and where take such a value into a tensor's dtype, where
    arithmetic wraps or overflows quietly)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return
    if dt.kind in "iu":
        info = np.iinfo(dt)
        low = -info.max if dt.kind == "u" else info.min  # (c10: a negative value wraps into an unsigned type)
        if not (math.isfinite(value) and low <= value <= info.max):
            raise RuntimeError(f"value cannot be converted to type {_OVERFLOW_NAME[dt.name]} without overflow")
    elif isinstance(value, (float, np.floating)) and D.np_floating(dt) and dt.itemsize <= 4 and \
            math.isfinite(value) and builtins.abs(value) > float(np.finfo(np.float32).max if dt.itemsize == 4 or
                                                                  dt.name == "bfloat16" else np.finfo(np.float16).max):
        raise RuntimeError(f"value cannot be converted to type {_CPP_SCALAR[dt.name]} without overflow")


@op(inplace="method")
def lerp(a, b, w):
    """``a + w * (b - a)`` for ``|w| < 0.5``, else ``b - (b - a) * (1 - w)`` (so ``w = 1`` gives
    ``b`` exactly), as PyTorch's kernel branches, each a fused multiply-add for real operands
    (float32 rounds as PyTorch's); one node (in float32 for low-precision inputs, rounded once)."""
    a = as_t(a)
    for name, t in (("end", b), ("weight", w)):
        if isinstance(t, Tensor) and t.dtype != a.dtype and (name == "end" or t.ndim > 0):
            raise RuntimeError(f"expected dtype {cpp_scalar_name(a)} for `{name}` but got dtype {cpp_scalar_name(t)}")
    return one_node("LerpBackward1" if isinstance(w, Tensor) else "LerpBackward0", _lerp, a, b, w)


def _lerp(a, b, w):
    d = sub(b, a)
    fused = a._data.dtype.kind == "f"
    if type(w) in (int, float):  # (w - 1 rounded in the tensors' dtype, as PyTorch's opmath does)
        part = a._data.dtype if a._data.dtype.kind != "c" else D.from_numpy_dtype(a._data.dtype).to_real().np
        small = builtins.abs(w) < 0.5
        coeff = float(np.asarray(w, part)) if small else float(np.asarray(float(np.asarray(w, part)) - 1.0, part))
        base = a if small else b
        return P.fma(d, coeff, base) if fused and isinstance(base, Tensor) else add(base, mul(d, coeff))
    w = w if isinstance(w, Tensor) else add(_const(np.zeros((), a._data.dtype), a), w)  # (a number read per call)
    small = lt(abs(w), 0.5)
    coeff, base = where(small, w, sub(w, 1.0)), where(small, a, b)
    return P.fma(coeff, d, base) if fused else add(base, mul(coeff, d))


def _on_cuda(*ts) -> bool:
    """Whether a tensor among ``ts`` is a CUDA tensor (its value is then computed there, from
    primitives, by the NumPy-written ops below)."""
    return builtins.any(isinstance(t, Tensor) and type(t._data) is not np.ndarray and type(t._data) is not Var
                        for t in ts)


@op
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = as_t(a), as_t(b)
    if _on_cuda(a, b):  # NumPy's rule: |a - b| <= atol + rtol |b| where finite, equal infinities
        with _no_grad():
            near = le(abs(sub(a, b)), add(mul(abs(b), rtol), atol))
            out = logical_or(logical_and(near, logical_and(isfinite(a), isfinite(b))), eq(a, b))
            return logical_or(out, logical_and(isnan(a), isnan(b))) if equal_nan else out
    return wrap(np.isclose(a._concrete("isclose"), b._concrete("isclose"), rtol=rtol, atol=atol, equal_nan=equal_nan))


@op
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    close = isclose(a, b, rtol, atol, equal_nan)
    return bool(all(close)) if _on_cuda(close) else bool(close._data.all())


@op
def isinf(x):
    x = as_t(x)
    if _on_cuda(x) or type(x._data) is Var:  # (as primitives: traced, or a device's kernels)
        return logical_and(eq(abs(x), math.inf), logical_not(isnan(x)))
    return wrap(np.isinf(x._concrete("isinf")))


@op
def isfinite(x):
    x = as_t(x)
    if _on_cuda(x) or type(x._data) is Var:
        return logical_not(logical_or(isnan(x), isinf(x)))
    return wrap(np.isfinite(x._concrete("isfinite")))


@op
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default by 0 and the dtype's largest and lowest
    values); differentiable, with gradient 0 where a value was replaced, as PyTorch's."""
    x = as_t(x)
    if not x.dtype.is_floating_point:
        return clone(x)
    from .type_info import finfo
    fi = finfo(x.dtype)
    x = where(isnan(x), nan, x)
    x = where(eq(x, math.inf), fi.max if posinf is None else posinf, x)
    return where(eq(x, -math.inf), fi.min if neginf is None else neginf, x)


# ---------------------------------------------------------------- dtype conversion
@op(function=False)
def to(x, *args, dtype=None, device=None, copy=False, non_blocking=False, memory_format=None):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)`` (its device and
    dtype): ``x`` itself when nothing changes (unless ``copy``)."""
    for a in args:
        if isinstance(a, (D.dtype, type)) or isinstance(a, np.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            device = a
    dev = devices.resolve(device) if device is not None else None
    if memory_format is not None and memory_format is not preserve_format:
        x = to(x, dtype=dtype, device=device, copy=copy)
        y = contiguous(x, memory_format)
        return y if y is x else named(y, "ToCopyBackward0")
    if dev is not None and dev != x.device:
        if dtype is not None and dev.type != "cpu":  # cast where x is, then move
            x = to(x, dtype)
        x = transfer(x, dev)
        return x if dtype is None else to(x, dtype)
    if dtype is None:
        return x.clone() if copy else x
    d = D.to_dtype(dtype)
    if d.np == x._data.dtype:
        return x.clone() if copy else x
    return named(P.cast(x, dtype=d.np), "ToCopyBackward0")


@op(function=False)
def cuda(x, device=None, non_blocking=False, memory_format=None):
    """``x`` on a CUDA device (the current one by default); PyTorch's AssertionError
    without one."""
    return transfer(x, devices.resolve(device if device is not None else "cuda"))


@op(function=False)
def cpu(x, memory_format=None):
    return transfer(x, devices.CPU)


@op(function=False)
def type_as(x, other):
    return to(x, other.dtype)


# Tensor.type()'s names, as PyTorch's legacy tensor types (programs compare these strings)
_TYPE_NAMES = {D.float32: "FloatTensor", D.float64: "DoubleTensor", D.float16: "HalfTensor",
               D.bfloat16: "BFloat16Tensor", D.int64: "LongTensor", D.int32: "IntTensor", D.int16: "ShortTensor",
               D.int8: "CharTensor", D.uint8: "ByteTensor", D.bool_: "BoolTensor", D.complex64: "ComplexFloatTensor",
               D.complex128: "ComplexDoubleTensor"}


def _tensor_type(x, dtype=None, non_blocking=False, **kwargs):
    """``x.type()``: the type name (``"torch.FloatTensor"``, ``"torch.cuda.FloatTensor"``);
    ``x.type(dtype)`` or ``x.type("torch.DoubleTensor")``: ``x`` cast (and moved, for a
    ``torch.cuda.`` name or from a CUDA tensor to a CPU name) to it, ``x`` itself when it
    already is."""
    if dtype is None:
        return ("torch.cuda." if x.is_cuda else "torch.") + _TYPE_NAMES[x.dtype]
    if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), D.dtype):  # torch.LongTensor
        dtype = dtype.dtype
    if isinstance(dtype, str):
        on_cuda = dtype.startswith("torch.cuda.")
        by_name = {"torch." + n: d for d, n in _TYPE_NAMES.items()}
        name = "torch." + dtype[len("torch.cuda."):] if on_cuda else dtype
        if name not in by_name:
            raise ValueError(f"invalid type: '{dtype}'")
        return to(x, "cuda" if on_cuda else "cpu", by_name[name])
    return to(x, dtype)


op(_tensor_type, name="type", function=False)


def _caster(d):
    def f(x, memory_format=None):
        return to(x, d)
    return f


# ---------------------------------------------------------------- reductions
def _axes(x: Tensor, dim) -> tuple:
    return normalize_axes(dim, x._data.ndim)


def _red_axes(x: Tensor, dim, empty_all: bool = True) -> tuple:
    """The axes a reduction over ``dim`` reduces: all of them for None (and, with
    ``empty_all``, for an empty dim list, as PyTorch's ``sum(dim=[])``); none for a 0-d
    tensor, whose dim 0 (or -1) is its one element. Out-of-range and repeated dims raise."""
    if dim is None or (empty_all and isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(x._data.ndim))
    axes = _axes(x, dim)
    return axes if x._data.ndim else ()


@op
def sum(x, dim=None, keepdim=False, *, dtype=None, out=None):
    if out is not None:  # summed in out's dtype (the input cast to it first), as PyTorch's
        if dtype is not None and D.to_dtype(dtype) != out.dtype:
            name = D.to_dtype(dtype).name
            raise RuntimeError(f"Expected out tensor to have dtype {_CPP_SCALAR.get(name, name)}, but got "
                               f"{cpp_scalar_name(out)} instead")
        return write_out("sum", sum(x, dim, keepdim, dtype=out.dtype), out)
    x = as_t(x)
    if dtype is not None:
        x = to(x, dtype)
    elif x._data.dtype.kind in "bu" or x._data.dtype in (np.int8, np.int16, np.int32):
        x = P.cast(x, dtype=np.dtype(np.int64))
    full = dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0)
    r = P.reduce_sum(x, axes=_red_axes(x, dim), keepdims=bool(keepdim))
    if r._data.dtype != x._data.dtype and x._data.dtype.kind in "biu":  # a narrow dtype asked for: it wraps
        r = P.cast(r, dtype=x._data.dtype)
    return named(r, "SumBackward0" if full else "SumBackward1")


@op
def mean(x, dim=None, keepdim=False, *, dtype=None):
    x = as_t(x)
    if dtype is not None:
        x = to(x, dtype)
    if not D.np_floating(x._data.dtype) and x._data.dtype.kind != "c":
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {x.dtype.name.capitalize()}")
    full = dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0)
    axes = _red_axes(x, dim)
    n = 1
    for a in axes:
        n *= x._data.shape[a]
    def mean_of(x):
        r = P.reduce_sum(x, axes=axes, keepdims=bool(keepdim))
        return P.div(r, float(n)) if n else P.mul(r, float("nan"))
    return one_node("MeanBackward0" if full else "MeanBackward1", mean_of, x)


@op
@float32_policy
def prod(x, dim=None, keepdim=False, *, dtype=None):
    x = as_t(x)
    if dtype is not None:
        x = to(x, dtype)
    elif x._data.dtype.kind in "bui" and x._data.dtype != np.int64:  # integral -> int64, as torch
        x = P.cast(x, dtype=np.dtype(np.int64))
    r = P.reduce_prod(x, axes=_red_axes(x, dim), keepdims=bool(keepdim))
    if r._data.dtype != x._data.dtype and x._data.dtype.kind in "biu":  # a narrow dtype asked for: it wraps
        r = P.cast(r, dtype=x._data.dtype)
    return named(r, "ProdBackward0" if dim is None else "ProdBackward1")


RETURN_TYPES: dict = {}  # registry: name -> the named tuple type (fusegrad.return_types)


def _return_type(name: str, fields: tuple) -> type:
    """A named tuple printed and named as ``torch.return_types.<name>`` (registered there)."""
    t = RETURN_TYPES[name] = namedtuple(name, fields)
    t.__module__ = "fusegrad.return_types"
    t.__repr__ = lambda self: (f"fusegrad.return_types.{name}(\n"
                               + ",\n".join(f"{k}={v!r}" for k, v in zip(fields, self)) + ")")
    return t


_RESULT_TYPES = {"Max": _return_type("max", ("values", "indices")), "Min": _return_type("min", ("values", "indices"))}


def _extreme(x, dim, keepdim, red, arg, name):
    x = as_t(x)
    if dim is None:
        return named(_evenly(x, red(x, axes=_axes(x, None), keepdims=False)), name + "Backward1")
    if isinstance(dim, Tensor):  # torch.max(a, b) is the elementwise maximum
        return (maximum if red is P.reduce_max else minimum)(x, dim)
    ax = _axes(x, dim)[0]
    if x._data.ndim == 0:  # its one element, at index 0 (a 0-d result, keepdim or not, as PyTorch's)
        v, i = _extreme(P.reshape(x, shape=(1,)), 0, False, red, arg, name)
        return _RESULT_TYPES[name](named(P.reshape(v, shape=()), name + "Backward0"), P.reshape(i, shape=()))
    idx = arg(x, axis=ax, keepdims=True)
    vals = P.gather(x, idx, axis=ax)
    if not keepdim:
        vals = P.reshape(vals, shape=tuple(s for i, s in enumerate(x._data.shape) if i != ax))
        idx = P.reshape(idx, shape=vals._data.shape)
    return _RESULT_TYPES[name](named(vals, name + "Backward0"), idx)


def _evenly(x: Tensor, v: Tensor) -> Tensor:
    """``v``, the maximum or minimum of all of ``x``, with PyTorch's gradient of it: shared
    evenly by the elements equal to it, or by the NaNs when it is NaN (amax's gradient, a
    share of 0 elements, is NaN everywhere then)."""
    if not (STATE.enabled and x._rg):
        return v
    xs, vs = P.stop_gradient(x), P.stop_gradient(v)
    mask = P.logical_or(P.eq(xs, vs), P.logical_and(P.isnan(xs), P.isnan(vs)))
    share = P.div(P.reduce_sum(P.where(mask, x, 0.0), axes=_axes(x, None), keepdims=False),
                  P.reduce_sum(P.cast(mask, dtype=x._data.dtype), axes=_axes(x, None), keepdims=False))
    return P.straight_through(share, v)


@op
def max(x, dim=None, keepdim=False):
    return _extreme(x, dim, keepdim, P.reduce_max, P.argmax, "Max")


@op
def min(x, dim=None, keepdim=False):
    return _extreme(x, dim, keepdim, P.reduce_min, P.argmin, "Min")


@op
def amax(x, dim=(), keepdim=False):
    x = as_t(x)
    return named(P.reduce_max(x, axes=_red_axes(x, dim), keepdims=bool(keepdim)), "AmaxBackward0")


@op
def amin(x, dim=(), keepdim=False):
    x = as_t(x)
    return named(P.reduce_min(x, axes=_red_axes(x, dim), keepdims=bool(keepdim)), "AminBackward0")


@op
def argmax(x, dim=None, keepdim=False):
    x = as_t(x)
    if dim is None or _red_axes(x, dim) == ():  # (a 0-d x: its one element)
        return P.argmax(P.reshape(x, shape=(x.numel(),)), axis=0, keepdims=False)
    return P.argmax(x, axis=_axes(x, dim)[0], keepdims=bool(keepdim))


@op
def argmin(x, dim=None, keepdim=False):
    x = as_t(x)
    if dim is None or _red_axes(x, dim) == ():  # (a 0-d x: its one element)
        return P.argmin(P.reshape(x, shape=(x.numel(),)), axis=0, keepdims=False)
    return P.argmin(x, axis=_axes(x, dim)[0], keepdims=bool(keepdim))


def half_wide(x: Tensor, fn) -> Tensor:
    """``fn(x)``, computed in float32 for a float16 or bfloat16 ``x`` (PyTorch's
    accumulation type on the CPU: a square of a float16 overflows at 256) and cast back."""
    if D.np_half(x._data.dtype):
        return P.cast(fn(P.cast(x, dtype=np.dtype(np.float32))), dtype=x._data.dtype)
    return fn(x)


@op
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x = _var_operand(x)
    return named(_in_double(x, lambda x: _var(x, dim, unbiased, keepdim, correction)), "VarBackward0")


def _var_operand(x) -> Tensor:
    x = as_t(x)
    if x._data.dtype.kind in "iub":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    return x


def _in_double(x: Tensor, fn) -> Tensor:
    """``fn(x)`` in float64 for a real ``x``: PyTorch's var and std accumulate in double (a
    float32 mean of a constant column is off by an ulp, and its variance is not 0)."""
    return fn(x) if x._data.dtype.kind == "c" else in_float64(x, fn)


def _var(x, dim, unbiased, keepdim, correction):
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    axes = _red_axes(x, dim)
    n = 1
    for a in axes:
        n *= x._data.shape[a]
    m = P.reduce_sum(x, axes=axes, keepdims=True)
    m = P.div(m, float(n))
    d = P.sub(x, m)
    if d._data.dtype.kind == "c":  # the mean squared modulus: a real variance
        d = P.cabs(d)
    r = P.reduce_sum(P.mul(d, d), axes=axes, keepdims=bool(keepdim))
    return P.div(r, float(builtins.max(n - correction, 0)))  # (no degrees of freedom: inf, or 0/0, as PyTorch)


@op
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    from .linalg import _root  # (its gradient where the std is 0 is 0, as PyTorch's)
    x = _var_operand(x)
    return named(_in_double(x, lambda x: _root(var(x, dim, unbiased, keepdim, correction=correction), 2)),
                 "StdBackward0")


@op(method=False)
def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(x, dim, unbiased, keepdim, correction=correction), mean(x, dim, keepdim)


@op(method=False)
def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(x, dim, unbiased, keepdim, correction=correction), mean(x, dim, keepdim)


@op
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    x = _float(as_t(x))
    if p == "nuc":
        from .linalg import matrix_norm
        return matrix_norm(x, "nuc", dim if dim is not None else (-2, -1), keepdim)
    from .linalg import vector_norm  # (its gradient at a zero vector is 0, as PyTorch's)
    return vector_norm(x, 2 if p == "fro" or p is None else p, dim, keepdim, dtype=dtype)


@op
def logsumexp(x, dim, keepdim=False, *, out=None):
    if out is not None:  # computed in out's dtype, which must be a floating one (PyTorch's)
        if not out.is_floating_point():
            raise RuntimeError(f"logsumexp(): Expected floating point type for result tensor, but got: "
                               f"{_type_name(out._data.dtype)}")
        return write_out("logsumexp", logsumexp(to(as_t(x), out.dtype), dim, keepdim), out)
    x = _float(as_t(x))
    axes = _red_axes(x, dim, empty_all=False)
    if builtins.any(x._data.shape[a] == 0 for a in axes):  # log(0): -inf, as PyTorch's
        return named(P.add(P.reduce_sum(x, axes=axes, keepdims=bool(keepdim)), float("-inf")), "LogsumexpBackward0")
    # (complex values shift by their largest real part, as PyTorch's)
    m = P.reduce_max(P.real(x) if x._data.dtype.kind == "c" else x, axes=axes, keepdims=True)
    m = where(isinf_t(m), 0.0, m)
    m = _shift(m)
    s = P.reduce_sum(P.exp(P.sub(x, m)), axes=axes, keepdims=True)
    r = P.add(P.log(s), m)
    if not keepdim:
        r = P.reshape(r, shape=tuple(s_ for i, s_ in enumerate(x._data.shape) if i not in axes))
    return named(r, "LogsumexpBackward0")


def isinf_t(x: Tensor) -> Tensor:
    """isinf as primitives (traceable): |x| == inf."""
    return P.eq(P.abs_(x), float("inf"))


@op
def cumsum(x, dim, *, dtype=None):
    x = as_t(x)
    if dtype is not None:
        x = to(x, dtype)
    elif x._data.dtype.kind in "bui" and x._data.dtype != np.int64:  # integral -> int64, as torch
        x = P.cast(x, dtype=np.dtype(np.int64))
    ax = _axes(x, dim)[0]
    if x._data.ndim == 0:  # its one element: a 0-d result, as PyTorch's
        return named(P.reshape(P.cumsum(P.reshape(x, shape=(1,)), axis=0), shape=()), "CumsumBackward0")
    return named(P.cumsum(x, axis=ax), "CumsumBackward0")


@op
def all(x, dim=None, keepdim=False):
    x = as_t(x)
    if type(x._data) is not np.ndarray:  # traced, or a CUDA tensor: as primitives
        r = logical_not(any(logical_not(x), dim, keepdim))
    else:  # (an empty dim list reduces nothing, as PyTorch's)
        r = wrap(np.all(x._data, axis=_red_axes(x, dim, empty_all=False), keepdims=bool(keepdim)))
    return P.cast(r, dtype=x._data.dtype) if x._data.dtype == np.uint8 else r  # (uint8 stays uint8, as PyTorch's)


@op
def any(x, dim=None, keepdim=False):
    x = as_t(x)
    if type(x._data) is not np.ndarray:  # traced, or a CUDA tensor: as primitives (a sum: 0 when empty)
        nz = P.cast(P.ne(x, False if x.dtype == D.bool_ else 0), dtype=np.dtype(np.int32))
        r = P.ne(P.reduce_sum(nz, axes=_red_axes(x, dim, empty_all=False), keepdims=bool(keepdim)), 0)
    else:  # (an empty dim list reduces nothing, as PyTorch's)
        r = wrap(np.any(x._data, axis=_red_axes(x, dim, empty_all=False), keepdims=bool(keepdim)))
    return P.cast(r, dtype=x._data.dtype) if x._data.dtype == np.uint8 else r  # (uint8 stays uint8, as PyTorch's)


@op
def count_nonzero(x, dim=None):
    return sum(ne(x, 0), dim)


# ---------------------------------------------------------------- softmax family
def _shift(m):
    """A stabilizing shift cut from eager autograd by rewrapping its data. The result does
    not depend on the shift mathematically, so traced graphs (e.g. the IR transforms of
    fusegrad.func) may differentiate through it without a stop_gradient."""
    return _rewrapped(m._data)


def _rewrapped(data) -> Tensor:
    """A new tensor over payload ``data``; a value of a segmented trace is tracked, as every
    tensor the dispatcher makes there, so that a graph break computes it."""
    t = wrap(data)
    if type(data) is Var and data.trace.tracks:
        data.trace.track(t)
    return t


def _softmax_input(x, dim, dtype, name: str) -> Tensor:
    """``x`` as (log_)softmax computes on it: cast to ``dtype`` if given; an integer or bool
    tensor without one is refused as by PyTorch's kernels (naming the one of ``dim``)."""
    x = as_t(x)
    if dtype is not None:
        return to(x, dtype)
    if x._data.dtype.kind in "iub":
        last = x._data.ndim <= 1 or _axes(x, dim)[0] == x._data.ndim - 1
        raise NotImplementedError(f"\"{name}_{'lastdim_' if last else ''}kernel_impl\" not implemented for "
                                  f"'{scalar_name(x)}'")
    return x


@op
def softmax(x, dim=None, dtype=None, _stacklevel=3):
    x = _softmax_input(x, dim, dtype, "softmax")
    ax = (_axes(x, dim)[0],) if x._data.ndim else ()

    def softmax_of(x):
        with np.errstate(invalid="ignore"):  # (a row of -inf is NaN, as in PyTorch, without a warning)
            e = P.exp(P.sub(x, _row_max(x, ax)))
            return P.div(e, P.reduce_sum(e, axes=ax, keepdims=True))
    def backward(g, y):  # (a half x: PyTorch's y (g - sum(g y)) from the rounded y, in float32, rounded once)
        g32, y32 = P.cast(g, dtype=np.dtype(np.float32)), P.cast(y, dtype=np.dtype(np.float32))
        dot = P.reduce_sum(P.mul(g32, y32), axes=ax, keepdims=True)
        return (P.cast(P.mul(y32, P.sub(g32, dot)), dtype=y.dtype.np),)
    # (C order whatever x's layout, as PyTorch's)
    return own(one_node("SoftmaxBackward0", softmax_of, x, half_backward=backward if ax else None), x)


def _row_max(x: Tensor, ax: tuple) -> Tensor:
    """The shift of a softmax along ``ax``: its maximum (see ``_shift``), or 0 along an empty
    dim (a sum over none), where PyTorch's softmax is empty too."""
    if not x._data.ndim:
        return _shift(x)
    if x._data.shape[ax[0]] == 0:
        return P.reduce_sum(x, axes=ax, keepdims=True)
    return _shift(P.reduce_max(x, axes=ax, keepdims=True))


@op
def log_softmax(x, dim=None, dtype=None, _stacklevel=3):
    x = _softmax_input(x, dim, dtype, "log_softmax")
    ax = (_axes(x, dim)[0],) if x._data.ndim else ()

    # (PyTorch's kernel along the last dimension rounds the sum and its log to a low-precision
    # input's dtype; along another, it computes in float32 and rounds once, as one_node does)
    low = x._data.dtype if x._data.dtype.itemsize == 2 and ax == (x._data.ndim - 1,) else None

    def rounded(v):
        return v if low is None else P.cast(P.cast(v, dtype=low), dtype=v.dtype.np)

    def log_softmax_of(x):  # (one_node runs it in float32 for a low-precision x)
        with np.errstate(invalid="ignore"):
            s = P.sub(x, _row_max(x, ax))
            return P.sub(s, rounded(P.log(rounded(P.reduce_sum(P.exp(s), axes=ax, keepdims=True)))))

    def backward(g, y):  # (a half x: PyTorch's g - exp(y) sum(g) from the rounded y, in float32, rounded once)
        g32, y32 = P.cast(g, dtype=np.dtype(np.float32)), P.cast(y, dtype=np.dtype(np.float32))
        return (P.cast(P.sub(g32, P.mul(P.exp(y32), P.reduce_sum(g32, axes=ax, keepdims=True))), dtype=y.dtype.np),)
    return own(one_node("LogSoftmaxBackward0", log_softmax_of, x, half_backward=backward if ax else None), x)


# ---------------------------------------------------------------- shapes and views
def _size_args(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size)


def _infer_shape(shape, numel: int) -> tuple:
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


@op
def reshape(x, *shape):
    x = as_t(x)
    shape = _infer_shape(_size_args(shape), math.prod(x._data.shape))
    if type(x._data) is Var:  # a traced view no view can reshape is copied first, as eager's
        layout = _view_layout(x)
        if layout is not None and not np.may_share_memory(layout.reshape(shape), layout):
            x = contiguous(x)
    return named(P.reshape(x, shape=shape), "ViewBackward0")


@op(function=False)
def view(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (D.dtype, type, np.dtype)):
        d = D.to_dtype(shape[0])
        return wrap((x._data if _on_cuda(x) else x._concrete("view(dtype)")).view(d.np))
    d = x._data
    target = _infer_shape(_size_args(shape), math.prod(d.shape))
    if type(d) is Var:
        d = _view_layout(x)
    if type(d) is np.ndarray and not d.flags.c_contiguous:
        probe = d.view()
        try:  # NumPy refuses an in-place shape change exactly when a view is impossible
            probe.shape = target
        except AttributeError:
            raise RuntimeError(f"view size is not compatible with input tensor's size and stride (shape "
                               f"{list(d.shape)} to {list(target)}: at least one dimension spans across "
                               f"two contiguous subspaces). Use .reshape(...) instead.") from None
    return named(P.reshape(x, shape=target), "ViewBackward0")


@op(function=False)
def view_as(x, other):
    return view(x, other.shape)


@op(function=False)
def reshape_as(x, other):
    return reshape(x, other.shape)


@op
def flatten(x, start_dim=0, end_dim=-1):
    x = as_t(x)
    nd = x._data.ndim
    if nd == 0:
        return reshape(x, 1)
    s, e = _axes(x, start_dim)[0], _axes(x, end_dim)[0]
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shp = x._data.shape
    n = 1
    for d in shp[s:e + 1]:
        n *= d
    return reshape(x, tuple(shp[:s]) + (n,) + tuple(shp[e + 1:]))


@op
def unflatten(x, dim, sizes):
    x = as_t(x)
    shp = list(x.shape)
    ax = _axes(x, dim)[0]  # (a dimension out of range raises, as PyTorch's)
    sizes = tuple(int(s) for s in sizes)
    if -1 not in sizes and int(np.prod(sizes)) != shp[ax]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({shp[ax]}) in the input tensor")
    return reshape(x, tuple(shp[:ax]) + sizes + tuple(shp[ax + 1:]))


@op
def squeeze(x, dim=None):
    x = as_t(x)
    shp = x._data.shape
    if dim is None:
        new = tuple(s for s in shp if s != 1)
    else:
        axes = _axes(x, dim) if shp else ()
        new = tuple(s for i, s in enumerate(shp) if not (i in axes and s == 1))
    name = "SqueezeBackward0" if dim is None else (
        "SqueezeBackward2" if isinstance(dim, (tuple, list)) else "SqueezeBackward1")
    return named(P.reshape(x, shape=new), name)


@op
def unsqueeze(x, dim):
    x = as_t(x)
    nd = x._data.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    dim %= nd
    shp = list(x._data.shape)
    shp.insert(dim, 1)
    return named(P.reshape(x, shape=tuple(shp)), "UnsqueezeBackward0")


@op
def permute(x, *dims):
    x = as_t(x)
    dims = _size_args(dims)
    nd = x._data.ndim
    if len(dims) == nd:
        dims = tuple(_axes(x, d)[0] if nd else d for d in dims)  # IndexError when out of range
        if len(set(dims)) != nd:
            raise RuntimeError("permute(): duplicate dims are not allowed.")
    if len(dims) != nd or sorted(d % nd for d in dims) != list(range(nd)) if nd else dims:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal to "
                           f"len(dims) = {len(dims)}")
    return named(P.transpose(x, perm=tuple(d % nd for d in dims)), "PermuteBackward0")


@op
def transpose(x, dim0, dim1):
    x = as_t(x)
    nd = x._data.ndim
    if nd == 0:
        return x
    perm = list(range(nd))
    a, b = _axes(x, dim0)[0], _axes(x, dim1)[0]
    perm[a], perm[b] = perm[b], perm[a]
    return named(P.transpose(x, perm=tuple(perm)), "TransposeBackward0")


swapaxes = swapdims = alias(transpose, "swapaxes", "swapdims")


@op
def t(x):
    x = as_t(x)
    if x._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x._data.ndim}D")
    return named(transpose(x, 0, -1) if x._data.ndim == 2 else x, "TBackward0")


@op(function=False)
def expand(x, *sizes):
    x = as_t(x)
    sizes = _size_args(sizes)
    shp = x._data.shape
    lead = len(sizes) - len(shp)
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({len(shp)})")
    new = tuple(shp[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(sizes))
    for i, s in enumerate(shp):
        if s != 1 and s != new[i + lead]:
            raise RuntimeError(f"The expanded size of the tensor ({new[i + lead]}) must match the existing size "
                               f"({s}) at non-singleton dimension {i + lead}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(shp)}")
    if new == tuple(shp):
        return named(P.reshape(x, shape=new), "ExpandBackward0")
    return named(P.broadcast_to(x, shape=new), "ExpandBackward0")


@op(function=False)
def expand_as(x, other):
    return expand(x, other.shape)


@op
def broadcast_to(x, *shape):
    """``x`` expanded to ``shape`` (a sequence, or the sizes themselves as the method takes them)."""
    return expand(x, *shape)


def broadcast_shape_of(*xs) -> tuple:
    return broadcast_shapes(*[tuple(getattr(x, "shape", ())) for x in xs])


@op(method=False)
def broadcast_tensors(*xs):
    shp = ()
    for x in xs:  # (pairwise, for PyTorch's error naming the sizes and the dim)
        shp = _infer_size(shp, tuple(getattr(x, "shape", ())))
    return tuple(expand(as_t(x), shp) for x in xs)


def _order(x: Tensor, memory_format):
    return None if memory_format is None else memory_format.order(x._data.ndim)


def is_contiguous(x: Tensor, memory_format=None) -> bool:
    """Whether ``x`` is laid out densely in ``memory_format`` (C order by default). A traced
    value is (layouts are the compiler's), unless it is a view: then as eager's view of a
    dense base would be (``x.t()`` is not, so ``x.t().contiguous()`` is a copy, not an alias)."""
    d = x._data
    try:
        order = _order(x, memory_format)
    except RuntimeError:  # (a format of another rank: not laid out so, as PyTorch answers)
        return False
    if type(d) is Var:
        d = _view_layout(x)
        if d is None:  # (the compiler's layout is C order: channels_last only where that coincides)
            return order is None or is_laid_out(np.empty(x._data.shape, np.uint8), order)
        return d.flags.c_contiguous if order is None else is_laid_out(d, order)
    return devices.is_contiguous(d) if order is None or type(d) is not np.ndarray else is_laid_out(d, order)


def _view_layout(x: Tensor) -> Optional[np.ndarray]:
    """For a traced view, an array laid out as eager's view of a dense base would be (its
    elements never read); None for any other traced value."""
    if x._base is None or not x._view_fn:
        return None
    d = np.empty(x._base._data.shape, np.uint8)
    try:  # (a view of a strided view, unfold's, has no chain from its base: unknown)
        for prim, params in x._view_fn:
            d = prim.impl(d, **params)
    except ValueError:
        return None
    return d if d.shape == tuple(x._data.shape) else None


@op(function=False)
def contiguous(x, memory_format=None):
    """``x`` if laid out in ``memory_format`` (C order by default), else a copy that is."""
    x = as_t(x)
    order = _order(x, memory_format)
    if is_contiguous(x, memory_format):
        return x
    out = named(P.add(x, 0) if x._data.dtype.kind != "b" else P.logical_or(x, False), "CloneBackward0")
    if type(out._data) is np.ndarray:  # NumPy's ufuncs keep a transposed operand's layout; view() needs C order
        out._data = laid_out(out._data, order)
    return out


@op
def clone(x, memory_format=None):
    x = as_t(x)
    order = _order(x, memory_format)
    if type(x._data) is not Var and not x._rg and not capturing():  # (compile records the copy)
        d = x._data
        if order is not None or (memory_format is contiguous_format and type(d) is np.ndarray):
            a = laid_out(d, order)
            out = wrap(a.copy(order="K") if a is d or np.shares_memory(a, d) else a)  # (laid out so already)
        else:
            out = wrap(devices.copy(d, keep_layout=True))
        carry_tangent(x, out)
        return out
    r = named(P.add(x, 0) if x._data.dtype.kind != "b" else P.logical_or(x, False), "CloneBackward0")
    if order is not None and type(r._data) is np.ndarray:
        r._data = laid_out(r._data, order)
    return r


@op
def flip(x, *dims):
    """``flip(x, dims)``, and ``x.flip(0, 1)`` with the dims as separate arguments."""
    x = as_t(x)
    if not dims:
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    dims = _size_args(dims)
    seen = [d % builtins.max(x._data.ndim, 1) for d in dims]
    for k, d in enumerate(seen):
        if d in seen[:k]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return laid_out_like(named(P.flip(x, axes=_red_axes(x, dims, empty_all=False)), "FlipBackward0"), x)


@op
def roll(x, shifts, dims=None):
    """Elements shifted along ``dims``, wrapping around; without ``dims``, along the
    flattened tensor, its shape restored (as PyTorch's)."""
    x = as_t(x)
    if dims is None or dims == ():
        s = shifts if isinstance(shifts, int) else tuple(shifts)
        if not isinstance(s, int) and len(s) != 1:
            raise RuntimeError(f"roll(): shifts {list(s)} need as many dims, got none")
        return roll(x.reshape(-1), s if isinstance(s, int) else s[0], 0).reshape(tuple(x.shape))
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = x
    for s, d in zip(shifts, dims):
        n = out.shape[d]
        s = s % n if n else 0  # (an empty dimension: nothing moves)
        if s:
            out = cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], d)
    # (a new tensor laid out as x, as PyTorch's, even with no shift)
    return laid_out_like(out, x) if out is not x else named(clone(x), "RollBackward0")


@op(method=False)
def cat(tensors: Sequence, dim=0):
    ts = [as_t(t) for t in tensors]
    if not ts:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    ts = [t for t in ts if not (t._data.ndim == 1 and t._data.shape[0] == 0)] or ts[:1]
    rt = D.result_type(*ts).np
    ts = [P.cast(t, dtype=rt) if t._data.dtype != rt else t for t in ts]
    ax = _axes(ts[0], dim)[0]
    for t in ts[1:]:
        if t._data.ndim != ts[0]._data.ndim or builtins.any(a != b for i, (a, b) in enumerate(zip(t.shape, ts[0].shape)) if i != ax):
            raise RuntimeError(f"cat: Sizes of tensors must match except in dimension {ax}. Expected sizes "
                               f"{list(ts[0].shape)} but got {list(t.shape)}")
    out = named(P.concatenate(*ts, axis=ax), "CatBackward0")
    order = channels_last_order(ts[0]._data)  # (all channels-last: so is the result, as PyTorch's)
    if order is not None and builtins.all(channels_last_order(t._data) == order for t in ts[1:]):
        out._data = laid_out(out._data, order)
    return out


concat = concatenate = alias(cat, "concat", "concatenate")


@op(method=False)
def stack(tensors: Sequence, dim=0):
    ts = [as_t(t) for t in tensors]
    if not ts:
        raise RuntimeError("stack expects a non-empty TensorList")
    for t in ts[1:]:
        if t.shape != ts[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ts[0].shape)} at entry 0 "
                               f"and {list(t.shape)} at entry {ts.index(t)}")
    r = cat([unsqueeze(t, dim) for t in ts], dim)
    if len(ts) == 1:
        return r
    return named(r, "StackBackward0")


@op(method=False)
def hstack(ts):
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@op(method=False)
def vstack(ts):
    return cat([t if t.ndim > 1 else unsqueeze(t, 0) for t in ts], 0)


@op
def narrow(x, dim, start, length):
    x = as_t(x)
    ax = _axes(x, dim)[0]
    n = x._data.shape[ax]
    start, length = int(start), int(length)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    start %= n if n else 1
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    key = tuple((start, start + length, 1) if i == ax else (0, s, 1) for i, s in enumerate(x._data.shape))
    return named(P.slice_(x, key=key), "SliceBackward0")


@op
def select(x, dim, index):
    x = as_t(x)
    ax = _axes(x, dim)[0]
    n = x._data.shape[ax]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(x.shape)} at dimension {ax}")
    key = tuple(index % n if i == ax else (0, s, 1) for i, s in enumerate(x._data.shape))
    return named(P.slice_(x, key=key), "SelectBackward0")


@op
def split(x, split_size_or_sections=None, dim=0, *, split_size=None):
    """(``split_size=``: Tensor.split's keyword name for it.)"""
    if split_size_or_sections is None:
        if split_size is None:
            raise TypeError("split() missing 1 required positional argument: 'split_size_or_sections'")
        split_size_or_sections = split_size
    x = as_t(x)
    ax = _axes(x, dim)[0]
    n = x._data.shape[ax]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        sizes = ([s] * (n // s) + ([n % s] if n % s else []) if s else [0]) or [0]  # (an empty dim: one chunk)
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {ax}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(named(narrow(x, ax, start, s), "SplitBackward0"))
        start += s
    return tuple(out)


@op
def chunk(x, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = x.shape[dim]
    if n == 0:  # an empty dim: as many empty chunks as asked, as PyTorch's
        return split(x, [0] * chunks, dim)
    size = -(-n // chunks)
    return split(x, size, dim)


@op
def unbind(x, dim=0):
    return tuple(named(select(x, dim, i), "UnbindBackward0") for i in range(x.shape[dim]))


@op
def movedim(x, source, destination):
    x = as_t(x)
    nd = x.ndim
    # each checked in range (normalize_axes raises), in the order given
    src = [_axes(x, s)[0] for s in ((source,) if isinstance(source, int) else source)]
    dst = [_axes(x, d)[0] for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
                           f"the same number of dims as destination ({list(dst)} dims)")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError("movedim: repeated dim in `source` or `destination`")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(x, order)


@op(function=False)
def repeat(x, *sizes):
    x = as_t(x)
    sizes = _size_args(sizes)
    shp = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    x = reshape(x, shp)
    inter = []
    for s, r in zip(shp, sizes):
        inter += [1, s]
    big = []
    for s, r in zip(shp, sizes):
        big += [r, s]
    out = reshape(expand(reshape(x, inter), big), tuple(s * r for s, r in zip(shp, sizes)))
    out = clone(out) if out._base is not None else out  # (new memory, as PyTorch's, even when traced)
    return named(out, "RepeatBackward0")


@op
def tile(x, *dims):
    """``x`` repeated ``dims`` times per dimension; fewer ``dims`` than dimensions repeat the
    last ones (leading 1s), as PyTorch's."""
    dims = _size_args(dims)
    x = as_t(x)
    return repeat(x, (1,) * (x._data.ndim - len(dims)) + dims)


def pad(x, pad_, mode="constant", value=0.0):
    x = as_t(x)
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r}")
    nd = x._data.ndim
    widths = [(0, 0)] * nd
    for i in range(len(pad_) // 2):
        widths[nd - 1 - i] = (int(pad_[2 * i]), int(pad_[2 * i + 1]))
    return named(P.pad(x, widths=tuple(widths), value=float(value)), "ConstantPadNdBackward0")


def _const(arr: np.ndarray, like: Tensor) -> Tensor:
    """A constant ``arr`` (masks, index tables) on ``like``'s device."""
    d = like._data
    return wrap(arr if type(d) is np.ndarray or type(d) is Var else devices.move(arr, like.device))


def _zero_of(x):
    """A scalar zero that keeps ``x``'s dtype in ``where`` (``False`` for a boolean ``x``)."""
    return False if x.dtype == D.bool_ else 0


@op
def tril(x, diagonal=0):
    x = as_t(x)
    n, m = x.shape[-2], x.shape[-1]
    mask = _const(np.tril(np.ones((n, m), dtype=bool), diagonal), x)
    return named(where(mask, x, _zero_of(x)), "TrilBackward0")


@op
def triu(x, diagonal=0):
    x = as_t(x)
    n, m = x.shape[-2], x.shape[-1]
    mask = _const(np.triu(np.ones((n, m), dtype=bool), diagonal), x)
    return named(where(mask, x, _zero_of(x)), "TriuBackward0")


@op
def diag(x, diagonal=0):
    x = as_t(x)
    k = diagonal
    if x.ndim == 1:
        m = x.shape[0]
        n = m + builtins.abs(k)
        rows = _const(np.arange(m) + builtins.max(-k, 0), x)
        cols = _const(np.arange(m) + builtins.max(k, 0), x)
        z = _const(np.zeros((n, n), dtype=x._data.dtype), x)
        return named(P.index_put(z, x, rows, cols, key=("T", "T"), accumulate=False), "DiagEmbedBackward0")
    n = builtins.min(x.shape[0] - builtins.max(-k, 0), x.shape[1] - builtins.max(k, 0))
    rows = _const(np.arange(builtins.max(n, 0)) + builtins.max(-k, 0), x)
    cols = _const(np.arange(builtins.max(n, 0)) + builtins.max(k, 0), x)
    return x[rows, cols]


@op
@float32_policy
def trace(x):
    return sum(diag(x))


# ---------------------------------------------------------------- matmul family
@op
@lower_precision
def matmul(a, b):
    if _sparse_operand(a, b):
        from .sparse_ops import matmul as sparse_matmul  # (imports this module)
        return sparse_matmul(a, b)
    a, b = as_t(a), as_t(b)
    na, nb = a._data.ndim, b._data.ndim
    if na == 1 and nb == 1:
        return dot(a, b)
    _same_dtype(a, b)
    if na == 0 or nb == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D")
    if na == 1:  # PyTorch's nodes: the vector unsqueezed, a matrix product, squeezed
        r = P.matmul(named(P.reshape(a, shape=(1, a._data.shape[0])), "UnsqueezeBackward0"), b)
        r = named(r, "MmBackward0" if nb == 2 else "BmmBackward0")
        return named(P.reshape(r, shape=r._data.shape[:-2] + (r._data.shape[-1],)), "SqueezeBackward4")
    if nb == 1:
        _mm_check(a, b, "mv")

        def mv_of(a, b):
            return P.reshape(P.matmul(a, P.reshape(b, shape=(b._data.shape[0], 1))), shape=a._data.shape[:-1])
        return one_node("MvBackward0", mv_of, a, b)
    _mm_check(a, b, "matmul")
    r = P.matmul(a, b)
    return named(r, "MmBackward0" if na == 2 and nb == 2 else ("BmmBackward0" if na == nb == 3 else "UnsafeViewBackward0"))


def _sparse_operand(a, b) -> bool:
    """Whether an operand of a matrix product is a sparse COO or CSR tensor (runtime/sparse_coo.py),
    whose product runtime/sparse_ops.py computes (checked past the dense operands at once)."""
    return not (isinstance(a, Tensor) and isinstance(b, Tensor)) and (_sparse(a) or _sparse(b))


def _sparse(x) -> bool:
    # (the class's layout: a traced number's attributes would guard its value)
    return getattr(type(x), "layout", None) in (sparse_coo, sparse_csr)


def _same_dtype(a: Tensor, b: Tensor) -> None:
    """A matrix product's operands have one dtype (PyTorch promotes none: a float32 model
    fed bfloat16 or float64 inputs raises)."""
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {cpp_scalar_name(a)} != "
                           f"{cpp_scalar_name(b)}")


def _mm_check(a, b, what):
    sa, sb = a._data.shape, b._data.shape
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if sa[-1] != kb:
        if what == "mv":
            raise RuntimeError(f"size mismatch, got input ({sa[0]}), mat ({sa[0]}x{sa[-1]}), vec ({sb[0]})")
        raise RuntimeError(f"{what}: mat1 and mat2 shapes cannot be multiplied "
                           f"({'x'.join(map(str, sa))} and {'x'.join(map(str, sb))})")


@op
@lower_precision
def mm(a, b):
    if _sparse_operand(a, b):
        from .sparse_ops import spmm
        return spmm(a, b)
    a, b = as_t(a), as_t(b)
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {a.ndim}D and {b.ndim}D")
    _mm_check(a, b, "mm")
    return matmul(a, b)


@op
@lower_precision
def bmm(a, b):
    a, b = as_t(a), as_t(b)
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3D tensors, got {a.ndim}D and {b.ndim}D")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ ({a.shape[0]} and {b.shape[0]})")
    _mm_check(a, b, "bmm")
    return named(matmul(a, b), "BmmBackward0")


@op
def mv(a, v):
    return matmul.__wrapped__(a, v)  # not cast under autocast, as in PyTorch


@op
def dot(a, b):
    a, b = as_t(a), as_t(b)
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {_type_name(a._data.dtype)} and "
                           f"{_type_name(b._data.dtype)}")
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have "
                           f"the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively")
    if D.np_half(a._data.dtype):
        return _in_float32(dot, a, b, a._data.dtype, "DotBackward0")
    r = P.reduce_sum(P.mul(a, b), axes=(0,), keepdims=False)
    return named(r, "DotBackward0")


@op
def inner(a, b):
    """The sum of products over the last dimension of each (``a * b`` when one is 0-d)."""
    a, b = _promote2(as_t(a), as_t(b))
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b)
    if a.ndim == 1 and b.ndim == 1:
        return dot(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(a.shape)} and {list(b.shape)}")
    k = a.shape[-1]
    r = matmul(reshape(a, (-1, k)), transpose(reshape(b, (-1, k)), 0, 1))
    return reshape(r, tuple(a.shape[:-1]) + tuple(b.shape[:-1]))


@op
def outer(a, b):
    a, b = as_t(a), as_t(b)
    return named(mul(unsqueeze(a, 1), unsqueeze(b, 0)), "MulBackward0")


ger = alias(outer, "ger")


@op
@lower_precision
def addmm(bias, a, b, *, beta=1, alpha=1):
    if not isinstance(a, Tensor) and _sparse(a):  # (a sparse mat1: torch.sparse.addmm's)
        from .sparse_ops import addmm as sparse_addmm
        return sparse_addmm(as_t(bias), a, b, beta=beta, alpha=alpha)

    def addmm_of(bias, a, b):
        dt = D.promote_types(D.promote_types(bias.dtype, a.dtype), b.dtype)
        low = dt in (D.float16, D.bfloat16)  # computed in float32 and rounded once, as PyTorch's kernel
        if low:
            bias, a, b = (to(x, D.float32) for x in (bias, a, b))
        r = matmul(a, b)
        if alpha != 1:
            r = mul(r, alpha)
        if beta == 0:  # the input ignored, its NaNs and infinities too, as PyTorch's (its gradient then 0)
            if bias._rg:
                r = where(P.full(shape=tuple(r._data.shape), value=False, dtype=np.dtype(np.bool_)), bias, r)
        else:
            r = add(mul(bias, beta) if beta != 1 else bias, r)
        return to(r, dt) if low else r
    return one_node("AddmmBackward0", addmm_of, as_t(bias), as_t(a), as_t(b))


@op(method=False)
@lower_precision
def einsum(spec, *ops):
    if not isinstance(spec, str):  # the sublist form: einsum(op0, [0, 1], op1, [1, 2], [0, 2])
        spec, ops = _sublists(spec, *ops)
    elif len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = ops[0]
    return _einsum(spec, [as_t(o) for o in ops])


_SUBSCRIPTS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublists(*args) -> tuple:
    """``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])`` as (spec, operands):
    subscripts 0-51 are letters, ``...`` (Ellipsis) the ellipsis, as in PyTorch."""
    def letters(sub) -> str:
        out = ""
        for k in sub:
            if k is Ellipsis:
                out += "..."
            elif isinstance(k, int) and 0 <= k < len(_SUBSCRIPTS):
                out += _SUBSCRIPTS[k]
            else:
                raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52), "
                                 f"got {k}")
        return out
    ops, subs = list(args[0:len(args) - len(args) % 2:2]), [letters(s) for s in args[1::2]]
    out = "->" + letters(args[-1]) if len(args) % 2 else ""
    return ",".join(subs) + out, ops


def _einsum_letters(spec: str, ops: list) -> tuple:
    """``spec`` without ellipses or repeated letters within an operand: each ``...`` becomes
    letters of its own (the operands' ellipsis dimensions aligned from the right), and an
    operand whose letter repeats is replaced by its diagonal. Returns (spec, operands)."""
    lhs, rhs = spec.split("->") if "->" in spec else (spec, None)
    ins = lhs.split(",")
    if len(ins) != len(ops):
        raise RuntimeError(f"einsum(): {'fewer' if len(ins) > len(ops) else 'more'} operands were provided than "
                           "specified in the equation")
    free = [c for c in _SUBSCRIPTS if c not in spec]
    n_ell = builtins.max([o.dim() - len(s.replace("...", "")) for s, o in zip(ins, ops) if "..." in s], default=0)
    ell = "".join(free[:n_ell])
    own = [o.dim() - len(s) + 3 for s, o in zip(ins, ops)]  # each operand's ellipsis dimensions (the last ones)
    ins = [s.replace("...", ell[len(ell) - k:] if k else "") for s, k in zip(ins, own)]
    if rhs is None:
        rhs = ell + "".join(sorted(c for c in set("".join(ins)) if c not in ell and "".join(ins).count(c) == 1))
    else:
        rhs = rhs.replace("...", ell)
    from .linalg import diagonal
    for k, (s, o) in enumerate(zip(ins, ops)):
        while len(set(s)) < len(s):  # the diagonal moves to the last axis
            c = next(c for c in s if s.count(c) > 1)
            i = s.index(c)
            j = s.index(c, i + 1)
            o = diagonal(o, 0, i, j)
            s = s[:i] + s[i + 1:j] + s[j + 1:] + c
        ins[k], ops[k] = s, o
    return ",".join(ins) + "->" + rhs, ops


def _einsum(spec, ops):
    """Einsum by broadcasting products and sums (primitives only)."""
    spec = spec.replace(" ", "")
    ops = list(ops)
    if "." in spec or builtins.any(len(set(s)) < len(s) for s in spec.split("->")[0].split(",")):
        spec, ops = _einsum_letters(spec, ops)
    lhs, rhs = spec.split("->") if "->" in spec else (spec, None)
    ins = lhs.split(",")
    if len(ins) > len(ops):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(ins) < len(ops):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    for c in rhs or "":
        if c not in lhs:
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input operand")
    for k, (s, o) in enumerate(zip(ins, ops)):
        if len(s) != o.dim():
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(s)}) does not match "
                               f"the number of dimensions ({o.dim()}) for operand {k} and no ellipsis was given")
    letters = []
    for s in ins:
        for c in s:
            if c not in letters:
                letters.append(c)
    if rhs is None:
        rhs = "".join(sorted(c for c in letters if lhs.count(c) == 1))
    sizes = {}
    for s, o in zip(ins, ops):
        for c, n in zip(s, o.shape):
            sizes.setdefault(c, set()).add(n)
    if len(ins) == 2 and len(set(rhs)) == len(rhs) and builtins.all(len(v) == 1 for v in sizes.values()):
        return _einsum_matmul(ins[0], ins[1], rhs, ops[0], ops[1])
    acc = None
    for s, o in zip(ins, ops):
        # move o's axes into the global letter order, inserting size-1 axes
        perm = sorted(range(len(s)), key=lambda i: letters.index(s[i]))
        o = permute(o, perm) if perm != list(range(len(s))) else o
        present = sorted(s, key=letters.index)
        shp = [o.shape[present.index(c)] if c in present else 1 for c in letters]
        o = reshape(o, shp)
        acc = o if acc is None else mul(acc, o)
    red = [i for i, c in enumerate(letters) if c not in rhs]
    if red:
        acc = sum(acc, red)
    kept = [c for c in letters if c in rhs]
    perm = [kept.index(c) for c in rhs]
    return permute(acc, perm) if perm != list(range(len(perm))) else acc


def _einsum_matmul(sa: str, sb: str, rhs: str, a, b):
    """Two-operand einsum as one batched matmul: both operands' letters ordered (batch, kept,
    contracted), the second transposed as a view, so the contraction runs in BLAS instead of
    materializing the broadcast product (NTK's 'Naf,Mbf->NMab' of Jacobians), and operands
    already in that order are not copied."""
    only_a = [c for c in sa if c not in sb and c not in rhs]  # summed out of one operand first
    only_b = [c for c in sb if c not in sa and c not in rhs]
    if only_a:
        a, sa = sum(a, [sa.index(c) for c in only_a]), "".join(c for c in sa if c not in only_a)
    if only_b:
        b, sb = sum(b, [sb.index(c) for c in only_b]), "".join(c for c in sb if c not in only_b)
    batch = [c for c in sa if c in sb and c in rhs]
    contract = [c for c in sa if c in sb and c not in rhs]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {c: n for s, t in ((sa, a), (sb, b)) for c, n in zip(s, t.shape)}

    def arranged(t, s: str, order: list, shape: tuple):
        perm = [s.index(c) for c in order]
        t = permute(t, perm) if perm != list(range(len(s))) else t
        return reshape(t, shape)

    def n(cs) -> int:
        return int(np.prod([size[c] for c in cs], dtype=np.int64))
    am = arranged(a, sa, batch + left + contract, (n(batch), n(left), n(contract)))
    bm = arranged(b, sb, batch + right + contract, (n(batch), n(right), n(contract)))
    out = reshape(matmul(am, transpose(bm, 1, 2)), tuple(size[c] for c in batch + left + right))
    got = batch + left + right
    perm = [got.index(c) for c in rhs]
    return permute(out, perm) if perm != list(range(len(perm))) else out


# ---------------------------------------------------------------- gather / scatter / indexing
@op
def gather(x, dim, index, *, sparse_grad=False):
    x, index = as_t(x), as_t(index)
    if index._data.dtype.kind not in "iu":
        raise RuntimeError(f"gather(): Expected dtype int64 for index, got {index.dtype}")
    ax = _axes(x, dim)[0]
    if builtins.max(index._data.ndim, 1) != builtins.max(x._data.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if index._data.ndim != x._data.ndim:  # a 0-d input or index: as a 1-d one (PyTorch's), the result index's shape
        r = P.gather(P.reshape(x, shape=(x.numel(),)), P.reshape(index, shape=(index.numel(),)), axis=0)
        return named(P.reshape(r, shape=tuple(index._data.shape)), "GatherBackward0")
    if x._data.ndim == 0:  # one element, along dim 0 (or -1): as 1-d tensors
        return named(P.reshape(P.gather(P.reshape(x, shape=(1,)), P.reshape(index, shape=(1,)), axis=0), shape=()),
                     "GatherBackward0")
    return named(P.gather(x, index, axis=ax), "GatherBackward0")


@op
def scatter_add(x, dim, index, src):
    x, index, src = as_t(x), as_t(index), as_t(src)
    if index._data.dtype.kind not in "iu":
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src._data.dtype != x._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    ax = _axes(x, dim)[0]
    # (a 0-d operand counts as 1-d, as PyTorch's; an index not expanded to src's rows is refused)
    if builtins.max(index._data.ndim, 1) != builtins.max(x._data.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if builtins.max(index._data.ndim, 1) != builtins.max(src._data.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if index._data.ndim == 0 and x._data.ndim:  # (one position: a 1-element index and src)
        index, src = reshape(index, (1,)), reshape(src, (1,))
    if index._data.ndim == x._data.ndim == src._data.ndim and builtins.any(
            n > (x._data.shape[a] if a != ax else n) or n > src._data.shape[a]
            for a, n in enumerate(index._data.shape)):
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(x.shape)} apart "
                           f"from dimension {ax} and to be no larger size than src {list(src.shape)}")
    return named(P.scatter_add(x, index, src, axis=_axes(x, dim)[0]), "ScatterAddBackward0")


@op
def index_select(x, dim, index):
    if not isinstance(x, Tensor) and getattr(x, "is_sparse", False):
        return x.index_select(dim, index)
    x, index = as_t(x), as_t(index)
    if index._data.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index._data.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    ax = _axes(x, dim)[0]
    key = tuple("T" if i == ax else (0, s, 1) for i, s in enumerate(x._data.shape))
    if D.np_half(x._data.dtype) and x._data.ndim > 1 and STATE.enabled and x._rg:
        # (PyTorch's backward adds half-precision rows in float32, rounding once: exact casts around it)
        return named(to(P.index(to(x, D.float32), index, key=key), x.dtype), "IndexSelectBackward0")
    return named(P.index(x, index, key=key), "IndexSelectBackward0")


@op
def take_along_dim(x, indices, dim=None):
    """``gather`` with ``x`` and ``indices`` broadcast over the dims other than ``dim``
    (both flattened when ``dim`` is None), as PyTorch's."""
    x, indices = as_t(x), as_t(indices)
    if dim is None:
        return gather(reshape(x, (-1,)), 0, reshape(indices, (-1,)))
    if x.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {x.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    ax = _axes(x, dim)[0]
    at = [tuple(s[:ax]) + (d,) + tuple(s[ax + 1:]) for s, d in ((x.shape, indices.shape[ax]),
                                                                 (indices.shape, x.shape[ax]))]
    idx = expand(indices, _infer_size(at[0], tuple(indices.shape)))
    return gather(expand(x, _infer_size(at[1], tuple(x.shape))), ax, idx)


def _infer_size(a: tuple, b: tuple) -> tuple:
    """The broadcast shape of ``a`` and ``b``, or PyTorch's error naming the dim."""
    for i in range(1, builtins.min(len(a), len(b)) + 1):
        if a[-i] != b[-i] and 1 not in (a[-i], b[-i]):
            raise RuntimeError(f"The size of tensor a ({a[-i]}) must match the size of tensor b ({b[-i]}) at "
                               f"non-singleton dimension {builtins.max(len(a), len(b)) - i}")
    return broadcast_shapes(a, b)


@op
def nonzero(x, as_tuple=False):
    """The indices of the nonzero elements. On a CUDA tensor the count is read on the host
    first (PyTorch synchronizes there too: the output's shape depends on it); the indices
    are made on the tensor's device."""
    x = as_t(x)
    a = x._concrete("nonzero() (data-dependent output shape)", host=True)
    if a.ndim == 0:  # as PyTorch: the indices of a 1-element vector, with no index columns
        if as_tuple:
            return (_const(np.arange(int(bool(a)), dtype=np.int64), x),)
        return _const(np.zeros((int(bool(a)), 0), np.int64), x)
    nz = np.nonzero(a)
    if as_tuple:
        return tuple(_const(i.astype(np.int64), x) for i in nz)
    return _const(np.stack(nz, axis=1).astype(np.int64), x)


@op
def masked_select(x, mask):
    x, mask = broadcast_tensors(as_t(x), as_t(mask))
    return x[mask]


def _index_parts(x: Tensor, key):
    """Split an index into a basic key (slices/ints/None) or an advanced key template with
    its index tensors. Returns (basic_key | None, template, index tensors)."""
    if type(key) is list and len(key) < 32 and builtins.any(
            k is None or k is Ellipsis or isinstance(k, (Tensor, list, tuple, range, slice)) for k in key):
        key = tuple(key)  # PyTorch (and old NumPy) read such a list as a tuple of indices
    if not isinstance(key, tuple):
        key = (key,)
    key = tuple(range(0) if type(k) is list and not k else k for k in key)  # [] indexes nothing, as int64
    advanced = builtins.any(isinstance(k, (Tensor, list, np.ndarray, range)) for k in key)
    if not advanced:
        return encode_key(key, tuple(x._data.shape)), None, ()
    # expand Ellipsis and turn bool masks into integer index tensors
    n_real = builtins.sum(_index_dims(k) for k in key)
    out, idx, dim = [], [], 0
    for k in key:
        if k is Ellipsis:
            for _ in range(x._data.ndim - n_real):
                out.append((0, x._data.shape[dim], 1))
                dim += 1
        elif k is None:
            out.append(None)
        elif isinstance(k, slice):
            out.append(k.indices(x._data.shape[dim]))
            dim += 1
        elif isinstance(k, (Tensor, list, np.ndarray, range)):
            kt = wrap(np.asarray(k, dtype=np.int64) if isinstance(k, range) else k) \
                if isinstance(k, (np.ndarray, range)) else as_t(k)
            if kt._data.dtype.kind == "b":
                if kt.ndim == 0:
                    raise IndexError("a 0-dimensional boolean index is supported only first in the index")
                if tuple(kt.shape) != tuple(x._data.shape[dim:dim + kt.ndim]):
                    raise IndexError(f"The shape of the mask {list(kt.shape)} at index {dim} does not match the shape "
                                     f"of the indexed tensor {list(x.shape)}")
                for part in nonzero(kt, as_tuple=True):
                    out.append("T")
                    idx.append(part)
                    dim += 1
            else:
                if kt._data.dtype.kind not in "iu":
                    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
                _check_bounds(kt, x._data.shape[dim], dim)
                out.append("T")
                idx.append(kt)
                dim += 1
        else:
            k = int(k)
            n = x._data.shape[dim]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {n}")
            out.append(k % n)
            dim += 1
    while dim < x._data.ndim:
        out.append((0, x._data.shape[dim], 1))
        dim += 1
    if dim > x._data.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x._data.ndim}")
    return None, tuple(out), tuple(idx)


def _is_bool(k) -> bool:
    return (isinstance(k, Tensor) and k._data.dtype.kind == "b") or (isinstance(k, np.ndarray) and k.dtype.kind == "b")


def _torch_placement(template: tuple, idx: tuple):
    """``(p, shape)`` where PyTorch places the dims of an advanced index's result (``shape``, the
    index tensors' broadcast one) at ``p`` and NumPy (P.index's rule) at the front; None where
    they agree. PyTorch applies integers
    first, as selects, so index tensors separated only by them stay adjacent, their dims in
    place (``x[0, :, idx]`` is (len(x[0]), len(idx)) there); NumPy counts an integer as an
    advanced index, and advanced indices separated by a slice go to the front."""
    if not builtins.any(type(k) is int for k in template):
        return None
    tensors = [i for i, k in enumerate(template) if k == "T"]
    advanced = [i for i, k in enumerate(template) if k == "T" or type(k) is int]
    if builtins.all(k == "T" or type(k) is int for k in template[advanced[0]:advanced[-1] + 1]):
        return None  # adjacent for NumPy too: the same place
    if not builtins.all(k == "T" or type(k) is int for k in template[tensors[0]:tensors[-1] + 1]):
        return None  # apart for PyTorch too: the front
    p = builtins.sum(1 for k in template[:tensors[0]] if k is None or type(k) is tuple)
    return p, tuple(np.broadcast_shapes(*(tuple(i.shape) for i in idx)))


def _check_bounds(idx: Tensor, n: int, dim: int) -> None:
    d = idx._data
    if type(d) is Var or d.size == 0:
        return
    lo, hi = int(d.min()), int(d.max())
    if lo < -n or hi >= n:
        bad = hi if hi >= n else lo
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {n}")


_SELECT = node_class("SelectBackward0")


@functools.lru_cache(maxsize=1024)
def _full_tail(shape: tuple) -> tuple:
    return tuple((0, s, 1) for s in shape)


def getitem(x: Tensor, key):
    if type(key) is int and x._data.ndim:  # x[i]: the common case, without key parsing
        shp = x._data.shape
        n = shp[0]
        if not -n <= key < n:
            raise IndexError(f"index {key} is out of bounds for dimension 0 with size {n}")
        r = bind(P.slice_, (x,), {"key": (key % n,) + _full_tail(shp[1:])})
        if r._grad_fn is not None:
            r._grad_fn.__class__ = _SELECT
        return r
    parts = key if isinstance(key, tuple) else (key,)
    if builtins.any(_is_byte(k) for k in parts):  # a uint8 mask (deprecated in PyTorch, still read as one)
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                      UserWarning, stacklevel=user_stacklevel())
        key = parts = tuple(ne(k, 0) if _is_byte(k) else k for k in parts)
    if builtins.any(_is_scalar_mask(k) for k in parts):
        x, key = _unit_masks(x, parts)
    basic, template, idx = _index_parts(x, key)
    if basic is not None:
        r = P.slice_(x, key=basic)
        return named(r, "SelectBackward0" if builtins.any(isinstance(k, int) for k in basic) else
                     ("UnsqueezeBackward0" if builtins.any(k is None for k in basic) else "SliceBackward0"))
    r = P.index(x, *idx, key=template)
    placement = _torch_placement(template, idx)
    if placement is not None:
        p, nb = placement[0], len(placement[1])
        r = movedim(r, tuple(range(nb)), tuple(range(p, p + nb)))
    return named(r, "IndexBackward0")


def _is_scalar_mask(k) -> bool:
    """A Python bool or a 0-d bool tensor in an index."""
    return type(k) is bool or (isinstance(k, Tensor) and k.ndim == 0 and k._data.dtype.kind == "b")


def _index_dims(k) -> int:
    """How many dimensions of the indexed tensor index part ``k`` consumes (a mask its own
    number, None, Ellipsis and a scalar mask none)."""
    if k is None or k is Ellipsis or _is_scalar_mask(k):
        return 0
    if isinstance(k, (Tensor, np.ndarray)) and _is_bool(k):
        return k.ndim
    return as_t(k).ndim if type(k) is list and k and _is_bool(as_t(k)) else 1


def _unit_masks(x: Tensor, parts: tuple) -> tuple:
    """``(x', key)`` with ``x'[key]`` reading (and writing) ``x[parts]``, as PyTorch reads a
    Python bool or 0-d bool tensor in an index: a new unit dimension of ``x`` there (``x'`` is a
    view), masked by a 1-element mask, so it is one more advanced index (size 1 or 0)."""
    ellipsis = x._data.ndim - builtins.sum(_index_dims(k) for k in parts)
    dim, key = 0, []
    for k in parts:
        if _is_scalar_mask(k):
            x = unsqueeze(x, dim)
            k = reshape(k, (1,)) if isinstance(k, Tensor) else as_t(np.array([k]))
        dim += ellipsis if k is Ellipsis else _index_dims(k)
        key.append(k)
    return x, tuple(key)


def _is_byte(k) -> bool:
    return isinstance(k, Tensor) and k._data.dtype == np.uint8


def _no_byte_masks(key) -> None:
    """PyTorch writes through a mask only of dtype bool."""
    if builtins.any(_is_byte(k) for k in (key if isinstance(key, tuple) else (key,))):
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype unsigned char")


def _one_mask(key) -> bool:
    """Whether the advanced part of an index is exactly one boolean mask (no integer arrays)."""
    masks = 0
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, (Tensor, np.ndarray)) or (isinstance(k, list) and k):
            kind = k._data.dtype.kind if isinstance(k, Tensor) else np.asarray(k).dtype.kind
            if kind != "b":
                return False
            masks += 1
    return masks == 1


def setitem(x: Tensor, key, value) -> None:
    _no_byte_masks(key)
    if type(value) is DynamicFloat:  # a float argument read at each call: a 0-d tensor of x's dtype
        value = value.operand(x)
    if x._data.dtype.kind in "iu":  # (a float into float16 becomes inf quietly here, as PyTorch's)
        _fits(value, x)
    if isinstance(key, Tensor) and key._data.dtype.kind == "b" and 0 < key._data.ndim <= x._data.ndim \
            and tuple(key.shape) == tuple(x.shape[:key._data.ndim]) and (
            not isinstance(value, Tensor) or value._data.ndim == 0):
        # x[mask] = v: a select, no data-dependent shape (compiled code traces it: nanoGPT's top-k)
        mask = key if key._data.ndim == x._data.ndim else reshape(key, *key.shape, *[1] * (x._data.ndim - key.ndim))
        v = value if isinstance(value, Tensor) else _scalar(value)
        if isinstance(v, Tensor) and v._data.dtype != x._data.dtype:
            v = P.cast(v, dtype=x._data.dtype)
        fill = v if isinstance(v, Tensor) else as_t(v, dtype=x.dtype)
        inplace(x, lambda old: named(P.where(mask, fill, old), "IndexPutBackward0"), *([v] if v is fill else []),
                written=lambda: key._data)
        return
    if builtins.any(_is_scalar_mask(k) for k in (key if isinstance(key, tuple) else (key,))):
        x, key = _unit_masks(x, key if isinstance(key, tuple) else (key,))
    basic, template, idx = _index_parts(x, key)
    if basic is not None:
        template, idx = basic, ()
    value = value if isinstance(value, Tensor) else _scalar(value)
    if isinstance(value, Tensor) and value._data.dtype != x._data.dtype:
        if basic is None and not (value.numel() == 1 and _one_mask(key)):
            # (an advanced index: PyTorch's index_put casts nothing, but a one-element value at
            # one boolean mask, which it turns into a masked fill)
            raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                               f"{_type_name(x._data.dtype)} for the destination and {_type_name(value._data.dtype)} "
                               "for the source.")
        value = P.cast(value, dtype=x._data.dtype)
    placement = _torch_placement(template, idx) if basic is None else None
    if placement is not None and isinstance(value, Tensor) and value._data.ndim:
        # the value is laid out as PyTorch's result: moved to NumPy's order, which index_put reads
        p, b = placement
        basic_dims = tuple(1 if k is None else len(range(*k)) for k in template if k is None or type(k) is tuple)
        value = movedim(expand(value, basic_dims[:p] + b + basic_dims[p:]), tuple(range(p, p + len(b))),
                        tuple(range(len(b))))
    inplace(x, lambda old: named(P.index_put(old, value, *idx, key=template, accumulate=False),
                                 "CopySlices" if basic is not None else "IndexPutBackward0"), value,
            written=lambda: numpy_key(template, [i._data for i in idx]))


@op
def index_put(x, indices, values, accumulate=False):
    _no_byte_masks(tuple(indices))
    _, template, idx = _index_parts(x, tuple(indices))
    return named(P.index_put(x, as_t(values).to(x.dtype), *idx, key=template, accumulate=accumulate),
                 "IndexPutBackward0")


# ---------------------------------------------------------------- in-place
def inplace(self: Tensor, fn, *others, written=None) -> Tensor:
    """Run ``fn(old) -> new`` and write the result into ``self``'s memory: the autograd
    graph continues from the new node, the version counter is bumped. ``written()``, when
    given, is the NumPy index of the elements ``fn`` changes: only those are stored (another
    process sharing the memory may be writing the others)."""
    grad_on = STATE.enabled
    if self._inf and not STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
                           "clone to get a normal tensor before doing inplace update.See "
                           "https://github.com/pytorch/rfcs/pull/17 for more details.")
    trs = current_traces()
    if grad_on and self._rg and self._grad_fn is None:
        if trs and id(self) in getattr(trs[-1], "nonleaf_inputs", ()):
            trs[-1].graph_break(f"in-place update of an argument that requires grad at {user_frame()}")
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = self._base
    if grad_on and base is not None and self._rg and base._rg and base._grad_fn is None:
        # (a detached alias, as from .detach() or .data, does not require grad and may be written)
        if trs and id(base) in getattr(trs[-1], "nonleaf_inputs", ()):  # (traced as a leaf, it is none)
            trs[-1].graph_break(f"in-place update of a view of an argument that requires grad at {user_frame()}")
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    # a captured (concrete) tensor mutated inside fusegrad.compile: its update is traced so
    # that it is replayed (written back) on every call, not applied once at trace time
    captured = bool(trs) and type(self._data) is not Var and trs[-1].captures_state
    if trs and base is not None and self._view_fn is None:
        raise GraphBreak(f"in-place update of a strided view (unfold, as_strided) at {user_frame()}: the call "
                         "runs eagerly, where the view shares its base's memory")
    if trs and (captured or type(self._data) is Var or builtins.any(isinstance(o, Tensor) and type(o._data) is Var
                                                                    for o in others)):
        # tracing (the target or an operand is traced): rebind the target's SSA value. A
        # view's update runs eagerly on its memory (before the view is lifted: its input
        # value would otherwise be written back over its base's later updates); so does an
        # update through a detached alias of a non-leaf that requires grad, which changes
        # the base's value but not its gradient (its traced value would become a
        # stop_gradient's, cutting the IR's derivative); so does an update of a tensor that
        # retains grad (its .grad is the new value's, whose uses inside a segment would not
        # pass through the value's own node)
        if (self._retains is False and base is not None and self._view_fn and (self._rg or not base._rg)
                and type(base._data) is Var and base._data.trace is trs[-1]
                and not builtins.any(p is P.broadcast_to for p, _ in self._view_fn)):
            return _traced_inplace_view(self, base, fn, trs[-1])
        if self._retains is not False or (
                base is not None and (self._view_fn or (not self._rg and base._rg and base._grad_fn is not None))):
            what = ("a tensor that retains grad" if self._retains is not False else
                    "a view" if self._view_fn else "a detached alias")
            with trs[-1].eagerly(f"in-place op on {what} while tracing at {user_frame()}"):
                return inplace(self, fn, *others)
        if captured:
            self._data = trs[-1].lift(self)
        # fn reads a stand-in: the nodes it records must keep the old value, which the
        # rebinding below would change under them (x * sigmoid(x)'s gradient read the new)
        old = _snapshot(self, copy=False)
        new = _cast_back(fn(old), old)
        if not grad_on and self._grad_fn is not None and not new._rg:
            # under no_grad the tensor keeps its history (PyTorch): its gradient passes the update
            from .grad_mode import enable_grad
            with enable_grad():
                new = P.straight_through(old, new)
        self._data = new._data
        if type(self._data) is Var and type(old._data) is not Var and self._data.trace.tracks:
            self._data.trace.track(self)  # fn broke the graph (old got its value): self takes the later segment's
        if self._rg and self._grad_fn is None and not new._rg:  # a leaf stays one (see rebound_leaves)
            trs[-1].rebound_leaves[id(self)] = self
        else:
            self._grad_fn, self._out_nr, self._rg = new._grad_fn, new._out_nr, new._rg
        if base is not None:  # a full alias (detach(), .data): its base holds the same values
            trs[-1].rebind(base, _through_alias(base, new, trs[-1]))
            if base._rg and base._grad_fn is None:
                trs[-1].rebound_leaves[id(base)] = base
        trs[-1].updated(base if base is not None else self, self)
        return self
    tracking = grad_on and (self._rg or builtins.any(isinstance(o, Tensor) and o._rg for o in others))
    if tracking and base is not None and self._view_fn != ():
        # (a detached alias, from .detach() or .data, is no view to autograd: its update
        # changes its base's memory, not the base's history, as in PyTorch)
        return _inplace_view(self, base, fn)
    if tracking:
        new = fn(_snapshot(self))
    else:
        new = fn(self)
    _write(self, new, written)
    self._bump()
    if base is not None and self._view_fn:
        _view_tangent(self, base, new)
    else:
        carry_tangent(new, self)
    if tracking and new._rg:
        self._regraft(new._grad_fn, new._out_nr)
        self._rg = True
        node = new._grad_fn
        if isinstance(node, PrimNode) and node.out_data is new._data and node.out_box is not None:
            node.out_data, node.out_box, node.out_ver = self._data, self._vbox, self._vbox[0]
    return self


def _through_alias(base: Tensor, new: Tensor, trace) -> Var:
    """The traced value of ``base`` after an update through a detached alias of it gave it
    ``new``'s value: that value, differentiated as the identity of the old one (eager's
    update changes the memory, not the autograd graph). Under a func transform, where the
    IR may differentiate any value, that is ``old + stop_gradient(new - old)`` (within an
    ulp of ``new``); compile's traces, which differentiate by requires_grad, give a base
    that requires grad a graph break before this (leaves excepted: their later reads in
    the same graph are rare, and their values stay exact)."""
    if trace.follows_requires_grad or not D.np_differentiable(new._data.dtype):
        return new._data
    from ..ir.prims.elementwise import add, stop_gradient, sub
    return add(base, stop_gradient(sub(new, base)))._data


def _snapshot(t: Tensor, copy: bool = True) -> Tensor:
    """A copy of ``t``'s current value that keeps its place in the autograd graph (with
    ``copy`` False, a new tensor over the same value: a traced one, which nothing changes)."""
    old = wrap(devices.copy(t._data)) if copy else _rewrapped(t._data)
    old._rg, old._grad_fn, old._out_nr = t._rg, t._grad_fn, t._out_nr
    carry_tangent(t, old)
    return old


class _Shape:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)


def _embed_chain(t: Tensor, chain, base_shape) -> Tensor:
    """Place ``t`` (shaped like the view) into a base-shaped tensor: the transpose of the
    view chain, applied with the view primitives' own VJP rules."""
    shapes = [tuple(base_shape)]
    for prim, params in chain:
        shapes.append(prim.abstract([(shapes[-1], t._data.dtype)], params)[0])
    for (prim, params), s_in in zip(reversed(chain), reversed(shapes[:-1])):
        t = prim.vjp(t, (_Shape(s_in),), None, (True,), **params)[0]
    return t


def _view_tangent(view: Tensor, base: Tensor, new: Tensor) -> None:
    """Forward AD: an in-place op wrote ``new`` into ``view`` of ``base``. PyTorch's tangents
    of views are views of the base's tangent; here each tensor holds its own, so the base's
    tangent (made from its views' where it has none) takes ``new``'s tangent (zero when it
    has none) in the view's elements, and every view of the base holding a tangent gets its
    part of the result."""
    if forward_state.STATE.level is None:
        return
    holders = forward_state.holders(base)
    t_new = forward_state.get_tangent(new)
    if t_new is None and not holders:
        return

    def embed(t: Tensor, chain) -> Tensor:  # base-shaped: t in the chain's elements, else zero
        return _embed_chain(t, chain, base._data.shape)

    def mask(v: Tensor, chain) -> Tensor:
        return embed(_const(np.ones(v._data.shape, dtype=np.bool_), v), chain)

    forward_state.STATE.busy = True  # (the tangents' own arithmetic carries no tangent)
    try:
        tb = forward_state.get_tangent(base)
        if tb is None:
            tb = _const(np.zeros(base._data.shape, base._data.dtype), base)
            for u, tu in holders:
                if u is not base and u is not view and u._view_fn:
                    tb = P.where(mask(u, u._view_fn), embed(tu, u._view_fn), tb)
        tv = t_new if t_new is not None else _const(np.zeros(view._data.shape, view._data.dtype), view)
        tb = P.where(mask(view, view._view_fn), embed(tv, view._view_fn), tb)
        parts = [(u, replay_view(tb, u._view_fn)) for u, _ in holders if u is not base and u is not view
                 and u._view_fn]
    finally:
        forward_state.STATE.busy = False
    forward_state.set_tangent(base, tb)
    forward_state.set_tangent(view, tv)
    for u, tu in parts:
        forward_state.set_tangent(u, tu)


def _no_part_views(chain, parts=(P.real, P.imag, P.view_as_real, P.view_as_complex)) -> None:
    """Refuse an in-place op that autograd records through views that reinterpret the
    elements (``view_as_real``/``view_as_complex``; in traces and under forward AD also
    ``.real``/``.imag``): the base's new value (elements replaced) cannot express them."""
    if builtins.any(prim in parts for prim, _ in chain):
        raise RuntimeError("in-place update through view_as_real or view_as_complex (in compiled code or under "
                           "forward AD also .real or .imag) of a tensor that requires grad: not supported by "
                           "fusegrad; build the new tensor with torch.complex(real, imag) instead")


def _part_of(chain):
    """The ``.real``/``.imag`` primitive in a view chain (at most one: they give real
    tensors), and the chain's other views, which select elements and so commute with it."""
    part = next((prim for prim, _ in chain if prim is P.real or prim is P.imag), None)
    return part, ([c for c in chain if c[0] is not part] if part is not None else chain)


def _inplace_view(view: Tensor, base: Tensor, fn) -> Tensor:
    """In-place op on a view of a tensor in the graph (PyTorch's CopySlices): the base's
    new value is the old base with the view's elements replaced by the op's result."""
    chain = view._view_fn
    if chain is None:
        raise RuntimeError("in-place op on a tensor sharing memory with another tensor of unknown layout; "
                           "clone() it first")
    _no_part_views(chain, (P.view_as_real, P.view_as_complex))
    part, rest = _part_of(chain)
    if part is not None and forward_state.STATE.level is not None:
        _no_part_views(chain)
    if type(view._data) is np.ndarray and _overlaps(view._data):
        raise RuntimeError(_OVERLAP)
    if chain and view._vver != view._vbox[0]:  # the base changed since the view's grad_fn was made
        rederive(view)
    new = fn(_snapshot(view))
    base_old = _snapshot(base)
    _write(view, new)
    view._bump()
    _view_tangent(view, base, new)
    from .grad_mode import no_grad
    with no_grad():
        mask = _embed_chain(_const(np.ones(view._data.shape, dtype=np.bool_), view), rest, base._data.shape)
    if part is None:
        base_new = named(P.where(mask, _embed_chain(new, chain, base._data.shape), base_old), "CopySlices")
    else:  # z.real[...] written: the part's new value, the other part as it was
        written = P.where(mask, _embed_chain(new, rest, base._data.shape), part(base_old))
        other = P.imag(base_old) if part is P.real else P.real(base_old)
        base_new = named(P.make_complex(*((written, other) if part is P.real else (other, written))), "CopySlices")
    base._regraft(base_new._grad_fn, 0)
    base._rg = True
    view._rg = True
    rederive(view)  # the view's grad_fn continues from the base's new node
    return view


def _traced_inplace_view(view: Tensor, base: Tensor, fn, trace) -> Tensor:
    """An in-place op, in a trace, on a view of a value the trace computed (``out[t] = h``,
    ``alphas[0][k] = 0``): the base's new value is the old one with the view's elements
    replaced by the op's result (as ``_inplace_view`` computes it eagerly); the view and the
    base's other views are derived from it again when next used. (Views that broadcast,
    whose elements share memory, detached views of a base that requires grad and views of
    tensors from outside the trace still break.)"""
    chain = view._view_fn
    _no_part_views(chain)
    # fn reads a stand-in: the nodes it records keep the view's old value, which deriving the
    # view again from the updated base would change under them (mul_'s saved operand)
    trace.lift(view)  # (derived again first if the base was updated since)
    old = _snapshot(view, copy=False)
    new = _cast_back(fn(old), old)
    from .grad_mode import no_grad
    with no_grad():
        mask = _embed_chain(_const(np.ones(view._data.shape, dtype=np.bool_), view), chain, base._data.shape)
    base_new = P.where(mask, _embed_chain(new, chain, base._data.shape), base)
    trace.rebind(base, base_new._data)
    base._grad_fn, base._out_nr, base._rg = base_new._grad_fn, base_new._out_nr, base_new._rg
    view._rg = base._rg
    trace.updated(base, base)
    return view


def _check_write_cast(s: np.dtype, d: np.dtype) -> None:
    """An in-place result of dtype ``s`` may be written into a tensor of dtype ``d`` (as
    PyTorch's canCast: not a float into an integer, nor a complex into a real; any integer
    type into another)."""
    if s != d and not np.can_cast(s, d, "same_kind") and not (s.kind in "iu" and d.kind in "iu"):
        raise RuntimeError(f"result type {_type_name(s)} can't be cast to the desired output type {_type_name(d)}")


def _cast_back(new: Tensor, old: Tensor) -> Tensor:
    """A traced in-place result in its target's dtype (as ``_write`` stores it eagerly)."""
    s, d = new._data.dtype, old._data.dtype
    if s == d:
        return new
    _check_write_cast(s, d)
    return P.cast(new, dtype=d)


def _write(dst: Tensor, src: Tensor, written=None) -> None:
    d, s = dst._data, src._data
    _check_write_cast(s.dtype, d.dtype)
    if type(d) is not np.ndarray:  # a CUDA tensor: written on its device
        if devices.of(s) != dst.device:
            raise devices.mixed_error(dst.device, devices.of(s))
        if tuple(s.shape) != tuple(d.shape) and broadcast_shapes(tuple(s.shape), tuple(d.shape)) != tuple(d.shape):
            raise RuntimeError(f"output with shape {list(d.shape)} doesn't match the broadcast shape "
                               f"{list(s.shape)}")
        devices.write(d, s)
        return
    if tuple(s.shape) != tuple(d.shape):
        try:
            s = np.broadcast_to(s, d.shape)
        except ValueError:
            raise RuntimeError(f"output with shape {list(d.shape)} doesn't match the broadcast shape "
                               f"{list(s.shape)}") from None
    key = written() if written is not None and type(s) is np.ndarray else None
    if not d.flags.writeable:  # a view of an expanded tensor (NumPy's broadcast views are read-only)
        if _overlaps(_written_region(d, key)):
            raise RuntimeError(_OVERLAP)
        d = _writable(d)
    if key is not None:
        d[key] = s[key].astype(d.dtype, copy=False)
        return
    np.copyto(d, s, casting="unsafe")


def _written_region(d: np.ndarray, key) -> np.ndarray:
    """The elements of ``d`` a write through NumPy index ``key`` (None: all) changes, as a view
    where the key is basic; only those may not share memory (PyTorch: ``e[0, 1] = v`` into an
    expanded ``e`` is allowed, ``e[:, 1] = v`` not). An advanced key's elements are not checked."""
    if key is None:
        return d
    parts = key if isinstance(key, tuple) else (key,)
    basic = builtins.all(k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)) for k in parts)
    return d[key] if basic else np.empty(0, d.dtype)


def _writable(d: np.ndarray) -> np.ndarray:
    """A writable array over read-only view ``d``'s elements: the same strides over the
    memory of the array that owns it (the base the view was expanded from)."""
    owner = d
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if not owner.flags.writeable:
        raise ValueError("assignment destination is read-only")
    offset = d.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return np.ndarray(d.shape, d.dtype, buffer=owner, offset=offset, strides=d.strides)


_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")


def _overlaps(a) -> bool:
    """Whether two elements of host array ``a`` share memory (an expanded dimension)."""
    return builtins.any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape))


def _inplace_of(op, name=None):
    def method(self, *args, **kwargs):
        if "out" in kwargs:  # PyTorch's in-place methods take no out=, even where the function does
            raise TypeError(f"{method.__name__}() got an unexpected keyword argument 'out'")
        return inplace(self, (lambda old: named(op(old, *args, **kwargs), name)) if name else
                       (lambda old: op(old, *args, **kwargs)), *args, *kwargs.values())  # (clamp_(min=t))
    method.__name__ = op.__name__ + "_"
    return method


def _filled_like(old: Tensor, value, name: str) -> Tensor:
    """``old``'s shape and dtype with every element ``value`` (a scalar, or a tensor that
    may require grad). When ``old`` is tracked, a ``where`` that selects none of it: zero
    gradient, where ``old * 0`` would make inf and nan elements nan. A fill primitive, so
    that it is recorded when ``old`` is traced; made on ``old``'s device."""
    with devices.creating_on(old.device):
        return _filled_like_here(old, value, name)


def _filled_like_here(old: Tensor, value, name: str) -> Tensor:
    d = old._data
    fill = P.full(shape=tuple(d.shape), value=0 if isinstance(value, Tensor) else value, dtype=d.dtype)
    if isinstance(value, Tensor):
        fill = add(fill, value)
    if not old._rg:
        return named(fill, name) if fill._rg else fill
    return named(where(P.full(shape=tuple(d.shape), value=False, dtype=np.dtype(np.bool_)), old, fill), name)


@op
def zero_(self):
    return inplace(self, lambda old: _filled_like(old, 0, "ZeroBackward0"))


@op
def fill_(self, value):
    if isinstance(value, Tensor) and (value._rg or forward_state.get_tangent(value) is not None):
        return inplace(self, lambda old: _filled_like(old, value, "FillBackward1"), value)
    v = value.item() if isinstance(value, Tensor) else value
    _fits(v, self)
    return inplace(self, lambda old: _filled_like(old, v, "FillBackward0"))


@op(function=False)
def copy_(self, src, non_blocking=False):
    src = as_t(src)
    if type(src._data) is not Var and type(self._data) is not Var and src.device != self.device:
        src = transfer(src, self.device)  # the one op that crosses devices

    def fn(old):
        s = src if src._data.dtype == old._data.dtype else P.cast(src, dtype=old._data.dtype)
        if tuple(s.shape) != tuple(old.shape):
            s = expand(s, old.shape)
        if not s._rg:
            if old._rg:
                return named(add(mul(old, 0), s), "CopyBackwards")
            out = wrap(s._data)
            carry_tangent(s, out)  # (forward AD: a dual source's tangent is copied too)
            return out
        return named(add(mul(wrap(old._data), 0), s), "CopyBackwards")  # no grad to old either way
    return inplace(self, fn, src)


def sampled_(self: Tensor, draw, name: str) -> Tensor:
    """``self`` overwritten in place by the values ``draw()`` samples, as PyTorch's random
    fills: recorded as node ``name``, which gives ``self``'s earlier value a zero gradient (a
    leaf that requires grad refuses, outside no_grad)."""
    with _no_grad():
        values = draw()
        if values._data.dtype != self._data.dtype:
            values = to(values, self.dtype)
        if values.device != self.device:  # (drawn on the host: a CUDA or meta tensor's values move there)
            values = values.to(self.device)
    return inplace(self, lambda old: _filled_like(old, values, name))


@op(function=False)
def uniform_(self, a=0.0, b=1.0, generator=None):
    from .factory import rand
    return sampled_(self, lambda: add(mul(rand(self.shape, dtype=self.dtype, generator=generator), b - a), a),
                    "UniformBackward0")


@op(function=False)
def normal_(self, mean=0.0, std=1.0, generator=None):
    from .factory import randn
    return sampled_(self, lambda: add(mul(randn(self.shape, dtype=self.dtype, generator=generator), std), mean),
                    "NormalBackward0")


def refuse_kinds(x: Tensor, kernel: str, kinds: str = "c") -> None:
    """PyTorch's error for an op ``x`` meets that has no kernel for its dtype's kind (NumPy's
    letters: "c" complex, "iub" integers and bool)."""
    if x._data.dtype.kind in kinds:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(x._data.dtype)}'")


def scalar_name(t: Tensor) -> str:
    """PyTorch's name of ``t``'s scalar type in messages (Float, Double, Long, ...)."""
    return t.type().split(".")[-1][:-len("Tensor")]


@op
def index_put_(self, indices, values, accumulate=False):
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put_(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    if isinstance(values, Tensor) and values.dtype != self.dtype and not (
            not accumulate and values.numel() == 1 and _one_mask(tuple(indices))):  # (a masked fill: cast)
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got {scalar_name(self)} "
                           f"for the destination and {scalar_name(values)} for the source.")
    return inplace(self, lambda old: index_put(old, indices, values, accumulate), values)


@op(function=False)
def scatter_add_(self, dim, index, src):
    return inplace(self, lambda old: scatter_add(old, dim, index, src), src)


@op(function=False)
def addcmul_(self, a, b, value=1):
    from .extra_ops import addcmul  # (it imports this module)
    return inplace(self, lambda old: addcmul(old, a, b, value=value), a, b)


@op(function=False)
def addcdiv_(self, a, b, value=1):
    from .extra_ops import addcdiv  # (it imports this module)
    return inplace(self, lambda old: addcdiv(old, a, b, value=value), a, b)


@op(method=False)
def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-d tensors: ``indexing="ij"`` (matrix: output i varies along
    dimension i) or ``"xy"`` (Cartesian: the first two dimensions swapped); no
    ``indexing`` means "ij", with PyTorch's warning."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=user_stacklevel())
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    ts = [as_t(t) for t in tensors]
    for t in ts:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
    ts = [reshape(t, (-1,)) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = [t.shape[0] for t in ts]
    grids = [expand(reshape(t, tuple(-1 if j == i else 1 for j in range(len(ts)))), *sizes) for i, t in enumerate(ts)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


op(Tensor.detach)  # defined on Tensor; declared so that fusegrad.detach exists too
op(Tensor.detach_)


def _no_grad():
    from .grad_mode import no_grad
    return no_grad()

