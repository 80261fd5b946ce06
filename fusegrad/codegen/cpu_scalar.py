"""Per-element expressions for the CPU backend: typed literals, and the Numba code of each
scalar operation (fusegrad.ir.scalar_ops: ``"exp"``, ``"add"``, ...).

Transcendentals call fusegrad.codegen.fastmath's branch-free functions (libm calls would
keep the loop scalar) as the kernel IR says (kir_fastmath's ``variant`` on the operation;
``binding`` and ``imports`` give the module-level names they call); the rest are written so
that NumPy's semantics hold (NaN propagation of maximum/minimum, sign(0) == 0, round half to
even)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .backend import Unsupported

def literal(value, dtype: np.dtype) -> str:
    """``value`` as a constant of ``dtype``: a float32 literal must not promote the loop."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "True" if value else "False"
    if dtype.kind == "f":
        v = float(value)
        text = "np.nan" if math.isnan(v) else ("np.inf" if v == math.inf else ("-np.inf" if v == -math.inf else repr(v)))
        return f"np.{dtype.name}({text})"
    return f"np.{dtype.name}({int(value)})"


def expr(op: str, args: list[str], dtype: np.dtype, params: dict) -> str:
    """The expression for one element of scalar operation ``op`` on operand expressions
    ``args``; ``dtype`` is the operands' type, ``params`` a kernel IR Op's (a fastmath
    operation calls the function its ``variant`` names, kir_fastmath; none: libm)."""
    dt = np.dtype(dtype)
    if dt.kind == "b" and op in _BOOL_ARITH:
        return _BOOL_ARITH[op].format(*args)
    e = _FUNCS[op](args, dt, params) if op in _FUNCS else _INFIX[op].format(*args)
    if op in _WRAPPING and dt.kind in "iu" and dt.itemsize < 8:  # (Numba computes in int64)
        return f"np.{dt.name}({e})"
    return e


# Integer arithmetic that wraps around in a narrow dtype (uint8 200 + 100 is 44), as PyTorch's.
_WRAPPING = frozenset({"add", "sub", "mul", "neg", "pow"})
# On bools, + is "or" and * is "and" (NumPy's and PyTorch's: True + True is True).
_BOOL_ARITH = {"add": "({0} or {1})", "mul": "({0} and {1})"}


def _typed(dt: np.dtype, v) -> str:
    return literal(v, dt)


def binding(op: str, dtype: np.dtype, params: dict) -> tuple | None:
    """(symbol, value) of the module-level name that scalar operation ``op`` with ``params``
    (a kernel IR Op's: its fastmath ``variant``, see kir_fastmath) calls, or None."""
    dt = np.dtype(dtype).name
    v = params.get("variant")
    if op == "reduce_precision":
        name = np.dtype(params["dtype"]).name
        return f"_round_{name}", f"_HALF_ROUND[{name!r}]"
    if op == "fma":
        return ("_fma", "_FASTMATH_FMA") if dt in ("float32", "float64") else None
    if v is None or v == "libm":
        return None
    if v == "call":
        return f"_fmc_{op}_{dt}", f"_FASTMATH_CALLS[{(op, dt)!r}]"
    if v == "fast":
        return f"_fm_{op}_{dt}", f"_FASTMATH[{(op, dt)!r}]"
    return f"_fm_{op}_{dt}_{v}", f"_FASTMATH_VARIANTS[{(op, dt, v)!r}]"


def imports(bindings: list) -> list[str]:
    """The module lines importing the tables ``bindings`` (symbol, value) index and binding them."""
    if not bindings:
        return []
    return ["from fusegrad.codegen.fastmath import CALLS as _FASTMATH_CALLS, FMA as _FASTMATH_FMA, "
            "FUNCS as _FASTMATH, VARIANTS as _FASTMATH_VARIANTS",
            "from fusegrad.codegen.cpu_half import ROUND as _HALF_ROUND",
            *(f"{k} = {v}" for k, v in sorted(set(bindings)))]


def _fm_or(name: str, fallback: Callable[[list, np.dtype], str]) -> Callable:
    def lower(a: list, dt: np.dtype, p: dict) -> str:
        b = binding(name, dt, p)
        return f"{b[0]}({', '.join(a)})" if b else fallback(a, dt)
    return lower


def _np(fn: str, int_identity: bool = False) -> Callable:
    def lower(a: list, dt: np.dtype, p: dict) -> str:
        if int_identity and dt.kind in "iub":
            return a[0]
        return f"np.{dt.name}(np.{fn}({', '.join(a)}))"
    return lower


def _cast(a: list, dt: np.dtype, p: dict) -> str:
    to = np.dtype(p["dtype"])
    return f"({a[0]} != 0)" if to.kind == "b" else f"np.{to.name}({a[0]})"


def _reduce_precision(a: list, dt: np.dtype, p: dict) -> str:
    if dt != np.float32:  # passes.upcast makes it on float32 values only
        raise Unsupported(f"cpu backend: reduce_precision of {dt} values is not supported")
    return f"{binding('reduce_precision', dt, p)[0]}({a[0]})"


def _extreme(op: str) -> Callable:
    def lower(a: list, dt: np.dtype, p: dict) -> str:
        x, y = a
        if dt.kind != "f":
            return f"({x} if {x} {op} {y} else {y})"
        return f"({x} if ({x} {op} {y} or {x} != {x}) else {y})"  # NaN in either wins, as in NumPy
    return lower


def _ignoring_nan(op: str) -> Callable:
    def lower(a: list, dt: np.dtype, p: dict) -> str:
        x, y = a
        if dt.kind != "f":
            return f"({x} if {x} {op} {y} else {y})"
        return f"({x} if ({x} {op}= {y} or {y} != {y}) else {y})"  # NaN loses, as in np.fmax
    return lower


def _sign(a: list, dt: np.dtype, p: dict) -> str:
    x, z = a[0], _typed(dt, 0)
    return f"({_typed(dt, 1)} if {x} > {z} else ({_typed(dt, -1)} if {x} < {z} else {z}))"  # (NaN: 0, as PyTorch)


def _relu(a: list, dt: np.dtype, p: dict) -> str:
    z = _typed(dt, 0)
    return f"({z} if {a[0]} < {z} else {a[0]})"


def int_power(a: list) -> str:
    """Signed integers to integer powers, negative ones as PyTorch's (scalar_ops.power)."""
    return f"({a[0]} ** {a[1]} if {a[1]} >= 0 else (1 if {a[0]} == 1 else ((1 - 2 * ({a[1]} & 1)) if {a[0]} == -1 else 0)))"


def _rsqrt(a: list, dt: np.dtype, p: dict) -> str:
    return f"({_typed(dt, 1)} / np.sqrt({a[0]}))"


# Scalar operations written as Python operators (the rest are in _FUNCS).
_INFIX = {"copy": "{0}", "second": "{1}", "neg": "-{0}", "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
          "div": "({0} / {1})", "floordiv": "({0} // {1})", "mod": "({0} % {1})", "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})",
          "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})", "and": "({0} and {1})",
          "or": "({0} or {1})", "xor": "({0} != {1})", "not": "(not {0})", "isnan": "({0} != {0})",
          "where": "({1} if {0} else {2})"}

_FUNCS: dict[str, Callable] = {
    "fma": _fm_or("fma", lambda a, dt: f"({a[0]} * {a[1]} + {a[2]})"),
    "exp": _fm_or("exp", lambda a, dt: f"np.exp({a[0]})"),
    "expm1": _fm_or("expm1", lambda a, dt: f"np.expm1({a[0]})"),
    "log": _fm_or("log", lambda a, dt: f"np.log({a[0]})"),
    "log1p": _fm_or("log1p", lambda a, dt: f"np.log1p({a[0]})"),
    "sin": _fm_or("sin", lambda a, dt: f"np.{dt.name}(np.sin({a[0]}))"),
    "cos": _fm_or("cos", lambda a, dt: f"np.{dt.name}(np.cos({a[0]}))"),
    "tanh": _fm_or("tanh", lambda a, dt: f"np.tanh({a[0]})"),
    "erf": _fm_or("erf", lambda a, dt: f"np.{dt.name}(math.erf({a[0]}))"),
    "pow": _fm_or("pow", lambda a, dt: int_power(a) if dt.kind == "i" else f"({a[0]} ** {a[1]})"),
    "sigmoid": _fm_or("sigmoid", lambda a, dt: f"({_typed(dt, 1)} / ({_typed(dt, 1)} + np.exp(-{a[0]})))"),
    "tan": _np("tan"),
    "atan2": _np("arctan2"),
    "fmod": _np("fmod"),
    "sqrt": _np("sqrt"),
    "floor": _np("floor", int_identity=True),
    "ceil": _np("ceil", int_identity=True),
    "trunc": _np("trunc", int_identity=True),
    "round": _np("rint", int_identity=True),
    "abs": lambda a, dt, p: f"abs({a[0]})",
    "sign": _sign,
    "relu": _relu,
    "rsqrt": _rsqrt,
    "max": _extreme(">"),
    "min": _extreme("<"),
    "fmax": _ignoring_nan(">"),
    "fmin": _ignoring_nan("<"),
    "cast": _cast,
    "reduce_precision": _reduce_precision,
}
