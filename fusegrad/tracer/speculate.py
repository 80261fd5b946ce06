"""Reading a traced value without breaking compile's graph: speculation.

In compile's whole-function trace, ``Tensor.item()`` and ``bool(tensor)`` on a traced value,
or on a tensor the trace captures (then read at every call), compute that value from the
call's own inputs (the equations recorded so far, run by the NumPy interpreter) instead of
breaking the graph. ``bool`` returns the truth value;
``item()`` returns a ``Speculated`` number. Comparing it with a Python number (``<``,
``<=``, ``>``, ``>=``, ``==``, ``!=``) or taking its truth gives a plain bool, which the
trace records as a guard: (the value's position, the comparison, the other number, the
result). As an operand of a tensor op it is its traced value (a weak scalar, outside
autodiff, as the number is), and arithmetic with numbers (``+ - * / // % **``, negation,
``abs``) gives another ``Speculated``, computed in the graph too (``lr * scale.item()``);
neither is a use of the number itself, so the trace stays one later calls replay, and
one compile(fullgraph=True) accepts when nothing branches on the values.

The compiled function (runtime.speculation) computes the guarded values first, checks the
guards, and only then runs the rest of the graph, so a call whose values would take another
branch never runs the code traced for this one. As for all compiled code, the Python code
in between runs only when traced. So a trace whose code used the number as such
(``float()``, printing, a size or an index, other arithmetic), kept it after returning
(appended it to a list), or changed an optimizer's hyperparameters is not replayed: it
computes its own call (its Python already ran), and later calls run in segments
(runtime.segments), which run the Python at every call. A read that would need random
numbers drawn or a device tensor is a graph break, as every read was before."""
from __future__ import annotations

import math
import operator
import sys
import weakref
from typing import Optional

import numpy as np

from ..ir.graph import Graph, Var
from .trace import _STACK as STACK, user_frame

_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne, "truth": lambda v, _: bool(v)}
_NUMBER = (bool, int, float)
_DTYPES = {float: np.float64, int: np.int64, bool: np.bool_}  # (a number's type: the dtype it is traced in)


def guard_holds(guard: tuple, values: tuple) -> bool:
    """Whether guard (position, comparison, other, result) holds for the computed values."""
    k, op, other, result = guard
    return _COMPARE[op](values[k].item(), other) == result


class Speculated:
    """The number ``Tensor.item()`` gave traced code (see the module doc). A use other than a
    comparison with a number or its truth works on its value and makes the trace one that
    later calls cannot replay (they run in segments); once its trace ends it stands for its
    value in every use."""

    __slots__ = ("value", "_trace", "_index", "_where", "__weakref__")

    def __init__(self, value, trace, index: int, where: str):
        self.value = value
        self._trace = trace
        self._index = index
        self._where = where

    def _compare(self, op: str, other):
        if self._trace is not None:
            if isinstance(other, _NUMBER) or op == "truth":
                result = _COMPARE[op](self.value, other)
                self._trace.speculation_guards.append((self._index, op, other, result))
                return result
            self._used(f"a comparison with {type(other).__name__}")
        return _COMPARE[op](self.value, _plain(other))

    def __bool__(self) -> bool:
        return self._compare("truth", None)

    def __array__(self, dtype=None, copy=None):
        self._used("a conversion to an array")
        return np.asarray(self.value, dtype=dtype)

    def __getattr__(self, name: str):
        self._used(f"'.{name}'")
        return getattr(self.value, name)

    def number(self, use: str):
        """The number itself, for ``use``."""
        self._used(use)
        return self.value

    def traced(self) -> bool:
        """Whether the number is still its trace's value, that trace innermost (so tensor
        ops on it record there)."""
        tr = self._trace
        return tr is not None and bool(STACK.traces) and STACK.traces[-1] is tr and type(self.value) in _NUMBER

    def tensor(self):
        """The value as a traced 0-d tensor of its Python type's dtype (float64, int64 or
        bool), outside autodiff (``item()`` detaches)."""
        from ..ir import prims as P
        from ..runtime.tensor import wrap
        v = self._trace.speculated[self._index][0]
        t = P.stop_gradient(wrap(v))
        if v.shape != ():
            t = P.reshape(t, shape=())
        dt = np.dtype(_DTYPES[type(self.value)])
        return t if v.dtype == dt else P.cast(t, dtype=dt)

    def operand(self, like):
        """The number as an operand beside the tensor ``like``: its traced value in the dtype
        the number would take (dynamic_float.weak_dtype)."""
        from ..ir import prims as P
        from .dynamic_float import weak_dtype
        return P.cast(self.tensor(), dtype=weak_dtype(self.value, like._data.dtype))

    def _used(self, use: str) -> None:
        """The traced code needs the number itself (``use``): this trace is for this call only."""
        tr = self._trace
        if tr is not None and not tr.speculation_uses:
            tr.speculation_uses.append(f"the number Tensor.item() returned at {self._where} is used as a "
                                       f"number ({use}) at {user_frame()}")


def _plain(x):
    return x.value if type(x) is Speculated else x


def _comparison(op: str):
    def method(self, other):
        return self._compare(op, other)
    return method


def _unary(name: str, fn):
    def method(self, *args):
        self._used(f"'{name}'")
        return fn(self.value, *args)
    method.__name__ = name
    return method


def _traced_unary(name: str, fn, op_name: str):
    def method(self):
        if self.traced():
            return _derived(fn(self.value), op_name, (self,), self)
        self._used(f"'{name}'")
        return fn(self.value)
    method.__name__ = name
    return method


def _binary(name: str, fn, reflected: bool, op_name: Optional[str] = None):
    """``self <name> other``; with ``op_name`` (the runtime op computing it), a Speculated
    traced in the graph too while ``other`` is a number or a Speculated of the same trace."""
    def method(self, other):
        if op_name is not None and self.traced() and (
                type(other) in _NUMBER or (type(other) is Speculated and other._trace is self._trace)):
            a, b = (other, self) if reflected else (self, other)
            return _derived(fn(_plain(a), _plain(b)), op_name, (a, b), self)
        self._used(f"'{name}'")
        return fn(_plain(other), self.value) if reflected else fn(self.value, _plain(other))
    method.__name__ = name
    return method


def _derived(value, op_name: str, operands: tuple, like: Speculated):
    """A Speculated ``value``, traced as ops.``op_name`` of ``operands`` (numbers and
    Speculateds) computed in the dtype of value's Python type."""
    from ..ir import prims as P
    from ..runtime import ops as O
    if type(value) not in _DTYPES:  # (a complex power: the number itself)
        like._used(f"'{op_name}'")
        return value
    dt = np.dtype(_DTYPES[type(value)])
    args = []
    for x in operands:
        if type(x) is Speculated:
            t = x.tensor()
            args.append(t if t._data.dtype == dt else P.cast(t, dtype=dt))
        else:
            args.append(type(value)(x))
    traced = getattr(O, op_name)(*args)
    tr = like._trace
    s = Speculated(value, tr, len(tr.speculated), like._where)
    tr.speculated.append((traced._data, weakref.ref(s), like._where))
    return s


for _name, _op in (("__lt__", "<"), ("__le__", "<="), ("__gt__", ">"), ("__ge__", ">="), ("__eq__", "=="),
                   ("__ne__", "!=")):
    setattr(Speculated, _name, _comparison(_op))
for _name, _fn in (("__float__", float), ("__int__", int), ("__index__", operator.index), ("__complex__", complex),
                   ("__round__", round), ("__trunc__", math.trunc), ("__floor__", math.floor), ("__ceil__", math.ceil),
                   ("__pos__", operator.pos),
                   ("__invert__", operator.invert), ("__hash__", hash), ("__str__", str), ("__repr__", repr),
                   ("__format__", format)):
    setattr(Speculated, _name, _unary(_name, _fn))
for _name, _fn, _op in (("add", operator.add, "add"), ("sub", operator.sub, "sub"), ("mul", operator.mul, "mul"),
                        ("truediv", operator.truediv, "div"), ("floordiv", operator.floordiv, "floor_divide"),
                        ("mod", operator.mod, "remainder"), ("pow", pow, "pow"), ("divmod", divmod, None),
                        ("and", operator.and_, None), ("or", operator.or_, None), ("xor", operator.xor, None),
                        ("lshift", operator.lshift, None), ("rshift", operator.rshift, None)):
    setattr(Speculated, f"__{_name}__", _binary(f"__{_name}__", _fn, False, _op))
    setattr(Speculated, f"__r{_name}__", _binary(f"__r{_name}__", _fn, True, _op))
for _name, _fn, _op in (("__neg__", operator.neg, "neg"), ("__abs__", abs, "abs")):
    setattr(Speculated, _name, _traced_unary(_name, _fn, _op))


def traced(t) -> Optional[Var]:
    """The value whose reading (``t.item()``, ``bool(t)``) is speculated, or None (a graph
    break for a traced ``t``, an eager read otherwise): ``t``'s Var in compile's
    whole-function trace (innermost on the stack), or a tensor that trace captures, which
    it then reads at every call (a global flag tensor, a module's buffer)."""
    d = t._data
    traces = STACK.traces
    if not traces or not traces[-1].speculates:
        return None
    tr = traces[-1]
    if type(d) is Var:
        return d if d.trace is tr else None
    return tr.lift(t) if type(d) is np.ndarray else None


def read_captured(t, data) -> None:
    """``t``, a tensor captured from outside the traces on the stack, is read as a number or
    an array (``float(t)``, ``t.tolist()``, ``t.numpy()``): its value is now part of what the
    traced code computed, so each capturing trace is guarded on it, as on a global number
    (a later call with another value retraces instead of replaying the old one)."""
    from .live import guard
    ref = weakref.ref(t)
    guard(("value", id(t)), lambda: _contents(ref))


def _contents(ref) -> Optional[tuple]:
    """dtype, shape and bytes of the tensor's value; None once it is gone or traced."""
    t = ref()
    d = None if t is None else t._data
    if d is None or type(d) is Var:
        return None
    if type(d) is not np.ndarray:
        from ..cuda import driver
        d = driver.to_host(d)
    return d.dtype.str, d.shape, d.tobytes()


def item(v: Var) -> Speculated:
    """``t.item()`` for ``t`` traced as ``v`` in a speculating trace."""
    tr = v.trace
    value = _value(tr, v, "Tensor.item()")
    if value.size != 1:
        raise RuntimeError(f"a Tensor with {value.size} elements cannot be converted to Scalar")
    where = user_frame()
    s = Speculated(value.reshape(()).item(), tr, len(tr.speculated), where)
    tr.speculated.append((v, weakref.ref(s), where))
    return s


def truth(v: Var) -> bool:
    """``bool(t)`` for ``t`` traced as ``v`` in a speculating trace."""
    tr = v.trace
    value = _value(tr, v, "converting a Tensor to a Python bool")
    if value.size != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    result = bool(value.reshape(()))
    tr.speculation_guards.append((len(tr.speculated), "truth", None, result))
    tr.speculated.append((v, None, user_frame()))
    return result


def _value(tr, v: Var, what: str) -> np.ndarray:
    """The value of ``v`` for this call: the trace's equations so far on its concrete inputs.
    A graph break where those are not all known arrays (a random key: drawing it would
    advance the generator; a device array)."""
    from ..runtime.interpreter import run_arrays
    from .live import CallTimeConst, LiveArray, LiveGrad, LiveNumber
    g = tr.graph
    known = {id(v): d for v, d in tr.captured_arrays()}
    consts = []
    for var, holder in g.consts:
        if isinstance(holder, (LiveNumber, LiveArray)):
            a = holder.draw()
        elif isinstance(holder, CallTimeConst) and not isinstance(holder, LiveGrad):  # (a .grad: this call's)
            a = None
        else:
            a = known.get(id(var), holder._data)
        consts.append(a)
    if any(type(a) is not np.ndarray for a in consts) or any(type(a) is not np.ndarray for a in tr.concrete):
        tr.graph_break(f"{what} needs a concrete value (it depends on random numbers or a device tensor) "
                       f"at {user_frame()}")
    sub = Graph()
    sub.inputs, sub.consts, sub.eqns, sub.outputs = list(g.inputs), list(g.consts), list(g.eqns), [v]
    return run_arrays(sub, list(tr.concrete) + consts)[0]


def start(tr, leaves: list) -> None:
    """Let ``tr`` (compile's trace of a call on ``leaves``) speculate."""
    tr.speculates = True
    tr.concrete = [x._data for x in leaves if hasattr(x, "_data")]
    tr.speculated = []  # (Var, weak reference to its Speculated or None, file:line) per value read
    tr.speculation_guards = []
    tr.speculation_uses = []  # why this trace cannot be replayed (a number used as such), if so


def finish(tr, out) -> str:
    """End the trace's speculation: every ``Speculated`` stands for its value from now on.
    Returns why later calls cannot replay the trace (the traced code used a number as such,
    or still references one after it returned, other than in its result: appended it to a
    list, stored it on an object), or ''. A number in the result (``return loss.item()``)
    becomes an output of the graph (see compiled._finish_trace)."""
    from ..func.pytree import flatten
    why = tr.speculation_uses[0] if tr.speculation_uses else ""
    tr.concrete = None  # (the call's arrays: not kept by the compiled code)
    leaves = flatten(out)[0]
    for _, ref, where in tr.speculated:
        s = ref() if ref is not None else None
        if s is None:
            continue
        s._trace = None
        n = sum(x is s for x in leaves)
        # the references a number in the result has: ``s`` here and getrefcount's argument;
        # per occurrence, ``leaves`` and its container in ``out`` (or, returned alone, the
        # caller's ``out`` and this function's): any other is a reference kept elsewhere
        expected = 2 + n + (2 if out is s else n)
        if sys.getrefcount(s) > expected:
            why = why or f"the number Tensor.item() returned at {where} is kept after the function returns"
    return why


def branching(tr) -> str:
    """What the first guard of ``tr`` branches on, for fullgraph=True's refusal."""
    k, op, other, _ = tr.speculation_guards[0]
    _, ref, where = tr.speculated[k]
    what = f"bool() of a traced tensor at {where}" if ref is None else \
        f"the number Tensor.item() returned at {where}, {'tested' if op == 'truth' else f'compared ({op} {other!r})'}"
    return f"data-dependent branching: {what}"


def returned(tr, x) -> Optional[Var]:
    """The traced value of ``x`` when it is a ``Speculated`` number of ``tr``, else None."""
    return tr.speculated[x._index][0] if type(x) is Speculated else None
