"""The scalar operations: what one element of an elementwise primitive, or one step of a
reduction, computes. This is the vocabulary of codegen's kernel IR (codegen.kir): a
primitive registers its per-element semantics as one of these names (``scalar=``), every
kernel renderer implements all of them, and the reference interpreter evaluates them with
the NumPy functions here. A primitive that names an operation outside this table is
rejected when it is defined, so a kernel can never reference an undefined function."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np


@dataclass(frozen=True)
class ScalarOp:
    """``name`` with ``arity`` operands; ``ref(args, dtype, params)`` is its NumPy meaning
    on scalars of the operands' dtype (``dtype``), used by the reference interpreter."""
    name: str
    arity: int
    ref: Callable


def power(x, y):
    """np.power; integers to negative integer powers as PyTorch's: 1 for base 1, +-1 for -1,
    else 0 (NumPy raises); bools to bools stay bool."""
    if np.asarray(x).dtype.kind in "iu" and np.asarray(y).dtype.kind in "iu" and (np.asarray(y) < 0).any():
        r = np.power(x, np.maximum(y, 0))
        small = np.where(x == 1, 1, np.where(x == -1, 1 - 2 * (y % 2), 0))
        return np.where(y < 0, small, r).astype(r.dtype)
    with np.errstate(all="ignore"):
        r = np.power(x, y)
    return r.astype(np.bool_) if np.asarray(x).dtype == np.bool_ and np.asarray(y).dtype == np.bool_ else r


def _typed(fn: Callable) -> Callable:
    """A ufunc evaluated quietly and kept in the operands' dtype (float32 stays float32)."""
    def ref(args, dt, params):
        with np.errstate(all="ignore"):
            r = fn(*args)
        return np.asarray(r).astype(dt)[()] if np.asarray(r).dtype.kind != "b" else np.bool_(r)
    return ref


def _pred(fn: Callable) -> Callable:
    def ref(args, dt, params):
        with np.errstate(all="ignore"):
            return np.bool_(fn(*args))
    return ref


def _int_identity(fn: Callable) -> Callable:
    """Rounding ops: the identity on integers and bools, as NumPy's are."""
    inner = _typed(fn)
    return lambda args, dt, params: args[0] if np.dtype(dt).kind in "iub" else inner(args, dt, params)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _cast(args, dt, params):
    to = np.dtype(params["dtype"])
    return np.bool_(args[0] != 0) if to.kind == "b" else np.asarray(args[0]).astype(to)[()]


def _reduce_precision(args, dt, params):
    with np.errstate(all="ignore"):
        return np.asarray(args[0]).astype(np.dtype(params["dtype"])).astype(dt)[()]


def sign(x):
    """PyTorch's sign: ``(x > 0) - (x < 0)`` in ``x``'s dtype, so 0 (not NaN) for NaN, and +0
    for -0."""
    x = np.asarray(x)
    if x.dtype.kind in "iubc":
        return np.sign(x)
    with np.errstate(invalid="ignore"):
        return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def _where(args, dt, params):
    return args[1] if args[0] else args[2]


def _fma(args, dt, params):
    from .prims.elementwise import fma  # (the primitive's own rounding)
    return fma.impl(*(np.asarray(a, dt) for a in args))[()]


_OPS = [
    ("copy", 1, lambda a, dt, p: a[0]),
    ("second", 2, lambda a, dt, p: a[1]),  # (prims.straight_through: the first is only differentiated)
    ("neg", 1, _typed(np.negative)),
    ("exp", 1, _typed(np.exp)),
    ("log", 1, _typed(np.log)),
    ("log1p", 1, _typed(np.log1p)),
    ("expm1", 1, _typed(np.expm1)),
    ("sin", 1, _typed(np.sin)),
    ("cos", 1, _typed(np.cos)),
    ("tan", 1, _typed(np.tan)),
    ("tanh", 1, _typed(np.tanh)),
    ("sigmoid", 1, _typed(lambda x: 1 / (1 + np.exp(-x)))),
    ("relu", 1, _typed(lambda x: np.maximum(x, 0))),
    ("abs", 1, _typed(np.abs)),
    ("sign", 1, _typed(sign)),
    ("sqrt", 1, _typed(np.sqrt)),
    ("rsqrt", 1, _typed(lambda x: 1 / np.sqrt(x))),
    ("erf", 1, _typed(_erf)),
    ("floor", 1, _int_identity(np.floor)),
    ("ceil", 1, _int_identity(np.ceil)),
    ("round", 1, _int_identity(np.rint)),
    ("trunc", 1, _int_identity(np.trunc)),
    ("add", 2, _typed(np.add)),
    ("sub", 2, _typed(np.subtract)),
    ("mul", 2, _typed(np.multiply)),
    ("div", 2, _typed(np.divide)),
    ("pow", 2, _typed(power)),
    ("max", 2, _typed(np.maximum)),
    ("min", 2, _typed(np.minimum)),
    ("fmax", 2, _typed(np.fmax)),  # NaN-ignoring (kernel passes: a float max counts NaNs apart)
    ("fmin", 2, _typed(np.fmin)),
    ("atan2", 2, _typed(np.arctan2)),
    ("floordiv", 2, _typed(np.floor_divide)),  # the exact quotient's floor (prims.floordiv)
    ("mod", 2, _typed(np.remainder)),  # Python's: the divisor's sign
    ("fmod", 2, _typed(np.fmod)),  # C's: the dividend's sign
    ("eq", 2, _pred(np.equal)),
    ("ne", 2, _pred(np.not_equal)),
    ("lt", 2, _pred(np.less)),
    ("le", 2, _pred(np.less_equal)),
    ("gt", 2, _pred(np.greater)),
    ("ge", 2, _pred(np.greater_equal)),
    ("and", 2, _pred(np.logical_and)),
    ("or", 2, _pred(np.logical_or)),
    ("xor", 2, _pred(np.logical_xor)),
    ("not", 1, _pred(np.logical_not)),
    ("isnan", 1, _pred(np.isnan)),
    ("where", 3, _where),
    ("fma", 3, _fma),  # x * y + z, rounded once
    ("cast", 1, _cast),
    ("reduce_precision", 1, _reduce_precision),  # to the nearest value of params["dtype"]
]
OPS: dict[str, ScalarOp] = {n: ScalarOp(n, k, f) for n, k, f in _OPS}
# Operations whose operands are truth values (a non-bool operand means "!= 0"); for
# "where" only the first operand is one.
PREDICATE_OPERANDS = {"and": (0, 1), "or": (0, 1), "xor": (0, 1), "not": (0,), "where": (0,)}

# Reductions: the operation folding one element into the accumulator.
REDUCE_OPS = {"+": "add", "*": "mul", "max": "max", "min": "min", "fmax": "fmax", "fmin": "fmin"}


def reduce_identity(op: str, dtype: np.dtype):
    """The value a reduction ``op`` over no elements gives (its accumulator's start) in
    ``dtype``, as a NumPy scalar."""
    dt = np.dtype(dtype)
    if op in ("+", "*"):
        return dt.type(0 if op == "+" else 1)
    up = op in ("max", "fmax")
    if dt.kind == "b":
        return np.bool_(not up)
    if dt.kind == "f" or dt.kind == "V":  # (V: bfloat16)
        return dt.type(-np.inf if up else np.inf)
    info = np.iinfo(dt)
    return dt.type(info.min if up else info.max)


def check_lowering(name: str, kind: str, scalar: Optional[str], no_lowering: Optional[str]) -> None:
    """Raise ValueError naming primitive ``name`` if its codegen lowering is malformed: an
    elementwise primitive names an operation of ``OPS`` (or says why it has none with
    ``no_lowering``), a reduction one of ``REDUCE_OPS``."""
    if kind == "elementwise" and scalar is None and no_lowering is None:
        raise ValueError(f"primitive {name}: an elementwise primitive needs scalar=<one of "
                         f"fusegrad.ir.scalar_ops.OPS> or no_lowering=<reason>")
    if kind == "elementwise" and scalar is not None and scalar not in OPS:
        raise ValueError(f"primitive {name}: scalar={scalar!r} is not a scalar operation; "
                         f"known: {sorted(OPS)} (or pass no_lowering=<reason>)")
    if kind == "reduce" and scalar is not None and scalar not in REDUCE_OPS:
        raise ValueError(f"primitive {name}: reduction scalar={scalar!r} is not one of {sorted(REDUCE_OPS)}")
