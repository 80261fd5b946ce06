"""Per-element expressions for the CPU backend: typed literals, and the Numba code of each
scalar operation (fusegrad.ir.scalar_ops: ``"exp"``, ``"add"``, ...).

Transcendentals go to fusegrad.codegen.fastmath's branch-free functions where it has one
for the dtype (libm calls would keep the loop scalar); the rest are written so that NumPy's
semantics hold (NaN propagation of maximum/minimum, sign(0) == 0, round half to even)."""
from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np

from .backend import Unsupported

try:
    from .fastmath import CALLS as _FASTMATH_CALLS, FUNCS as _FASTMATH, VARIANTS as _VARIANTS
except ImportError:  # pragma: no cover - fastmath ships with the package; libm still works
    _FASTMATH = _FASTMATH_CALLS = _VARIANTS = {}



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


# The fast kernel's count of sin/cos arguments past fastmath's TRIG_MAX, a float32
# added to by a select (a masked add once vectorized): LLVM reduces it in the float lanes
# of the loop, where an int64 count cost W1's gradient a fifth of its time. It only grows,
# so nonzero means "some".
GUARD = "ntrig"


class Lowering:
    """Collects the module-level names (fastmath functions) the expressions use.

    ``guard`` selects how sin/cos are lowered, since fastmath's range reduction is only
    exact for |x| <= fastmath.TRIG_MAX: ``"fast"`` calls the vectorizable function and has
    the loop count arguments beyond that bound in ``GUARD`` (statements handed out
    by ``drain``); ``"exact"`` selects libm for those arguments (a scalar loop, run only
    when the fast kernel reported such an argument); ``None`` does neither. Both modes call
    fastmath's "guarded" sin/cos, which skip the clamps that keep results in [-1, 1] past
    TRIG_MAX, unless ``bounded_trig``: a graph that indexes with computed integers checks
    their range in the fast kernel already, which unbounded values could fail.

    ``nonpositive_vars`` (passes.signs) are the var ids known to be <= 0; the loop emitter
    adds the operand expressions of such vars to ``nonpositive``, and their exp calls
    fastmath's "nonpositive" variant."""

    def __init__(self, guard: str | None = None, nonpositive_vars: frozenset = frozenset(),
                 bounded_trig: bool = False):
        self.globals: dict[str, str] = {}
        self.guard = guard
        self.bounded_trig = bounded_trig
        self.guarded: set = set()  # dtype names of the sin/cos lowered in "fast" mode
        self._pending: list = []
        # The variable the "fast" counts go to. Inside a prange loop the loop emitter points
        # it at a variable private to one iteration (or chunk) and adds that to GUARD once
        # per iteration, the only shape Numba accepts as a prange reduction.
        self.guard_target = GUARD
        # Set per loop group by the emitter. outline: call fastmath's non-inlined functions;
        # scalar: the loop stays scalar (too short to vectorize), call the "scalar" variants.
        self.outline = False
        self.scalar = False
        self.seen: set = set()  # arguments counted in the current loop group (the emitter resets it)
        self.nonpositive_vars = nonpositive_vars
        self.nonpositive: set = set()  # operand expressions of the current loop group known <= 0

    def drain(self) -> list:
        out, self._pending = self._pending, []
        return out

    def guards(self, op: str, dtype: np.dtype) -> bool:
        """True if scalar operation ``op`` lowers to a fast sin/cos that counts huge arguments."""
        return self.guard == "fast" and op in ("sin", "cos") and (op, np.dtype(dtype).name) in _FASTMATH

    def fastmath(self, name: str, dtype: np.dtype, kind: str | None = None) -> str | None:
        """The symbol bound to fastmath's ``name`` for ``dtype`` (None if it has none): the
        outlined call, else the variant of ``kind`` or the loop's "scalar" one where fastmath
        has it, else the vectorizable function."""
        key = (name, np.dtype(dtype).name)
        if key not in _FASTMATH:
            return None
        if self.outline:
            return self._bind(f"_fmc_{name}_{key[1]}", f"_FASTMATH_CALLS[{key!r}]")
        for k in (kind, "scalar" if self.scalar else None):
            if k and (*key, k) in _VARIANTS:
                return self._bind(f"_fm_{name}_{key[1]}_{k}", f"_FASTMATH_VARIANTS[{(*key, k)!r}]")
        return self._bind(f"_fm_{name}_{key[1]}", f"_FASTMATH[{key!r}]")

    def _bind(self, sym: str, value: str) -> str:
        self.globals[sym] = value
        return sym

    def kind(self, name: str, arg: str | None) -> str | None:
        """The fastmath variant kind that ``name`` applied to the expression ``arg`` (None:
        unknown) may use."""
        if name in ("sin", "cos") and self.guard and not self.bounded_trig:
            return "guarded"
        return "nonpositive" if arg in self.nonpositive else None

    def transcendental(self, op: str, dtype: np.dtype) -> bool:
        """True if scalar operation ``op`` lowers to a fastmath function."""
        return op in _FUNCS and (op, np.dtype(dtype).name) in _FASTMATH

    def expr(self, op: str, args: list[str], dtype: np.dtype, params: dict) -> str:
        """The expression for one element of scalar operation ``op``; ``dtype`` is the
        operands' type."""
        if op in _FUNCS:
            return _FUNCS[op](self, args, np.dtype(dtype), params)
        return _INFIX[op].format(*args)


def prelude(names: dict, body: list) -> list[str]:
    """The module-level lines binding those of ``names`` (Lowering.globals) that ``body``
    (source lines) uses."""
    used = set(re.findall(r"\b\w+\b", "\n".join(body)))
    lines = [f"{k} = {v}" for k, v in sorted(names.items()) if k in used]
    imp = ["from fusegrad.codegen.fastmath import CALLS as _FASTMATH_CALLS, FUNCS as _FASTMATH, "
           "VARIANTS as _FASTMATH_VARIANTS", "from fusegrad.codegen.cpu_half import ROUND as _HALF_ROUND"]
    return imp + lines if lines else []


def _typed(dt: np.dtype, v) -> str:
    return literal(v, dt)


def _fm_or(name: str, fallback: Callable[[list, np.dtype], str]) -> Callable:
    def lower(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
        sym = lw.fastmath(name, dt, lw.kind(name, a[0]))
        if not sym:
            return fallback(a, dt)
        call = f"{sym}({', '.join(a)})"
        if name in ("sin", "cos") and lw.guard:
            from .fastmath import TRIG_MAX
            big = f"abs({a[0]}) > {literal(TRIG_MAX[dt.name], dt)}"
            if lw.guard == "exact":
                return f"({call} if not {big} else {fallback(a, dt)})"
            lw.guarded.add(dt.name)
            if a[0] in lw.seen:  # sin and cos of one value (their gradients): count it once
                return call
            lw.seen.add(a[0])
            # +-inf counts too: the exact rerun gives the same NaN, and leaving it out
            # took one more compare per element (W1's gradient: 2% of its time)
            lw._pending.append(f"{GUARD} += np.float32(1) if {big} else np.float32(0)"
                               if lw.guard_target == GUARD else f"{lw.guard_target} |= {big}")
        return call
    return lower


def _np(fn: str, int_identity: bool = False) -> Callable:
    def lower(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
        if int_identity and dt.kind in "iub":
            return a[0]
        return f"np.{dt.name}(np.{fn}({', '.join(a)}))"
    return lower


def _cast(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
    to = np.dtype(p["dtype"])
    return f"({a[0]} != 0)" if to.kind == "b" else f"np.{to.name}({a[0]})"


def _reduce_precision(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
    if dt != np.float32:  # passes.upcast makes it on float32 values only
        raise Unsupported(f"cpu backend: reduce_precision of {dt} values is not supported")
    name = np.dtype(p["dtype"]).name
    return f"{lw._bind(f'_round_{name}', f'_HALF_ROUND[{name!r}]')}({a[0]})"


def _extreme(op: str) -> Callable:
    def lower(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
        x, y = a
        if dt.kind != "f":
            return f"({x} if {x} {op} {y} else {y})"
        return f"({x} if ({x} {op} {y} or {x} != {x}) else {y})"  # NaN in either wins, as in NumPy
    return lower


def _sign(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
    x, z = a[0], _typed(dt, 0)
    return f"({_typed(dt, 1)} if {x} > {z} else ({_typed(dt, -1)} if {x} < {z} else {x}))"


def _relu(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
    z = _typed(dt, 0)
    return f"({z} if {a[0]} < {z} else {a[0]})"


def _rsqrt(lw: Lowering, a: list, dt: np.dtype, p: dict) -> str:
    return f"({_typed(dt, 1)} / np.sqrt({a[0]}))"


# Scalar operations written as Python operators (the rest are in _FUNCS).
_INFIX = {"copy": "{0}", "neg": "-{0}", "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
          "div": "({0} / {1})", "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})",
          "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})", "and": "({0} and {1})",
          "or": "({0} or {1})", "xor": "({0} != {1})", "not": "(not {0})", "isnan": "({0} != {0})",
          "where": "({1} if {0} else {2})"}

_FUNCS: dict[str, Callable] = {
    "exp": _fm_or("exp", lambda a, dt: f"np.exp({a[0]})"),
    "expm1": _fm_or("expm1", lambda a, dt: f"np.expm1({a[0]})"),
    "log": _fm_or("log", lambda a, dt: f"np.log({a[0]})"),
    "log1p": _fm_or("log1p", lambda a, dt: f"np.log1p({a[0]})"),
    "sin": _fm_or("sin", lambda a, dt: f"np.{dt.name}(np.sin({a[0]}))"),
    "cos": _fm_or("cos", lambda a, dt: f"np.{dt.name}(np.cos({a[0]}))"),
    "tanh": _fm_or("tanh", lambda a, dt: f"np.tanh({a[0]})"),
    "erf": _fm_or("erf", lambda a, dt: f"np.{dt.name}(math.erf({a[0]}))"),
    "pow": _fm_or("pow", lambda a, dt: f"({a[0]} ** {a[1]})"),
    "sigmoid": _fm_or("sigmoid", lambda a, dt: f"({_typed(dt, 1)} / ({_typed(dt, 1)} + np.exp(-{a[0]})))"),
    "tan": _np("tan"),
    "atan2": _np("arctan2"),
    "sqrt": _np("sqrt"),
    "floor": _np("floor", int_identity=True),
    "ceil": _np("ceil", int_identity=True),
    "trunc": _np("trunc", int_identity=True),
    "round": _np("rint", int_identity=True),
    "abs": lambda lw, a, dt, p: f"abs({a[0]})",
    "sign": _sign,
    "relu": _relu,
    "rsqrt": _rsqrt,
    "max": _extreme(">"),
    "min": _extreme("<"),
    "cast": _cast,
    "reduce_precision": _reduce_precision,
}
