"""Number arguments that change from call to call, traced as values the compiled code reads
at every call (torch.compile's unspecialized floats and dynamic ints) instead of compiling
anew per value.

When a compiled function is called again with only its float or int arguments changed, its
trace gets a ``DynamicFloat`` in place of each such argument, standing for a 0-d float64
input of the graph that each call passes. As an operand of a tensor op it is that input
cast to the op's dtype (a Python number's weak promotion); arithmetic with numbers or other
DynamicFloats gives a DynamicFloat computed in the graph (``min(1.0, (t + 1) / 3)``, a
warm-up factor); compared with a number, or tested for truth, it gives the result and
guards the graph on it, recomputed from the call's arguments in the function's ``ArgBox``
(a call with the other outcome traces again). Any other use needs the number itself (a
size, an index, ``float()``, a math function, printing): the trace stops with ``FloatUsed``
and the function compiles such signatures per value, as before."""
from __future__ import annotations

import operator
import sys
import threading

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from .live import NamedNumber, guard


class FloatUsed(Exception):
    """The traced code needed a ``DynamicFloat``'s value itself; ``sources``: the positions
    of the arguments that value came from (empty where not known)."""

    def __init__(self, message: str, sources: frozenset = frozenset()):
        super().__init__(message)
        self.sources = sources


class ArgBox(threading.local):
    """Per thread, the float arguments of the call being run, by argument position."""

    def __init__(self):
        self.values: dict = {}

    def __getitem__(self, index: int) -> float:
        return self.values[index]


def weak_dtype(value, like: np.dtype) -> np.dtype:
    """The dtype a Python number ``value`` takes as an operand beside a tensor of dtype
    ``like`` (a weak scalar): ``like`` when floating, when both are integral or for a bool,
    else the default float dtype for a float and int64 for an int."""
    if type(value) is bool or D.np_floating(like) or (type(value) is int and like.kind in "iu"):
        return np.dtype(like)
    return D.get_default_dtype().np if type(value) is float else np.dtype(np.int64)


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne, "truth": lambda v, _: bool(v)}


class DynamicFloat:
    """A number argument in compile's trace, or arithmetic on one (see the module docstring)."""
    __slots__ = ("value", "read", "tensor", "made", "sources")

    def __init__(self, value, read, made: list, tensor=None, sources: frozenset = frozenset()):
        self.value = value  # this trace's value (an int or a float, as Python computes it)
        self.read = read  # () -> the value at a call, from that call's arguments
        self.tensor = tensor  # the traced 0-d float64 value (for an argument: set when the trace starts)
        self.made = made  # every DynamicFloat of this trace (the arguments' and their arithmetic's)
        self.sources = sources  # the positions of the arguments it is computed from
        made.append(self)

    @classmethod
    def argument(cls, value, box: ArgBox, index: int, made: list) -> "DynamicFloat":
        return cls(value, lambda: box[index], made, sources=frozenset((index,)))

    def operand(self, like):
        """The number as a traced 0-d tensor beside the tensor ``like`` (see weak_dtype)."""
        return P.cast(self.tensor, dtype=weak_dtype(self.value, like._data.dtype))

    def _compare(self, op: str, other) -> bool:
        if type(other) is DynamicFloat:
            read_other, key = other.read, ("dynamic", id(other))
        elif op == "truth" or type(other) in (int, float, bool):
            read_other, key = (lambda: other), other
        else:
            raise FloatUsed(f"a comparison with {type(other).__name__}", self.sources)
        read, compare = self.read, _COMPARE[op]
        return guard(("dynamic float", id(self), op, key), lambda: compare(read(), read_other()))

    def __bool__(self) -> bool:
        return self._compare("truth", None)


def _arithmetic(name: str, fn, op_name: str, reflected: bool = False):
    """``self <name> other`` for a number or DynamicFloat ``other``: a DynamicFloat whose
    value, read and traced tensor follow ``fn`` (ops.``op_name`` in the graph)."""
    def method(self, other):
        sources = self.sources
        if type(other) is DynamicFloat:
            value, read, tensor, sources = other.value, other.read, other.tensor, sources | other.sources
        elif type(other) in (int, float, bool):
            value, read, tensor = other, (lambda: other), other
        else:
            from ..runtime.tensor import Tensor
            if isinstance(other, Tensor):
                return NotImplemented  # the tensor's reflected operator: an operand of a tensor op
            raise FloatUsed(f"'{name}' with {type(other).__name__}", sources)
        from ..runtime import ops as O
        own = self.read
        if reflected:
            return DynamicFloat(fn(value, self.value), lambda: fn(read(), own()), self.made,
                                getattr(O, op_name)(tensor, self.tensor), sources)
        return DynamicFloat(fn(self.value, value), lambda: fn(own(), read()), self.made,
                            getattr(O, op_name)(self.tensor, tensor), sources)
    method.__name__ = name
    return method


def _unary(name: str, fn, op_name: str):
    def method(self):
        from ..runtime import ops as O
        own = self.read
        return DynamicFloat(fn(self.value), lambda: fn(own()), self.made, getattr(O, op_name)(self.tensor),
                            self.sources)
    method.__name__ = name
    return method


def _comparison(op: str):
    return lambda self, other: self._compare(op, other)


def _unusable(name: str):
    def method(self, *args):
        from ..runtime.tensor import Tensor
        if args and isinstance(args[0], Tensor):
            return NotImplemented  # the tensor's reflected operator: an operand of a tensor op
        raise FloatUsed(f"'{name}'", self.sources)
    method.__name__ = name
    return method


for _name, _op in (("__lt__", "<"), ("__le__", "<="), ("__gt__", ">"), ("__ge__", ">="), ("__eq__", "=="),
                   ("__ne__", "!=")):
    setattr(DynamicFloat, _name, _comparison(_op))
for _name in ("float", "int", "index", "complex", "round", "trunc", "floor", "ceil", "hash", "str", "repr",
              "format", "array", "divmod", "rdivmod"):
    setattr(DynamicFloat, f"__{_name}__", _unusable(f"__{_name}__"))


def _attribute(self, name: str):
    """A float's own attributes (``.real``, ``.is_integer()``) need the number; probes for
    private ones (``hasattr(x, "__dict__")``) find none, as on a float."""
    if name.startswith("_"):
        raise AttributeError(name)
    raise FloatUsed(f"'.{name}'", self.sources)


DynamicFloat.__getattr__ = _attribute
for _name, _fn, _op in (("add", operator.add, "add"), ("sub", operator.sub, "sub"), ("mul", operator.mul, "mul"),
                        ("truediv", operator.truediv, "div"), ("floordiv", operator.floordiv, "floor_divide"),
                        ("mod", operator.mod, "remainder"), ("pow", operator.pow, "pow")):
    setattr(DynamicFloat, f"__{_name}__", _arithmetic(f"__{_name}__", _fn, _op))
    setattr(DynamicFloat, f"__r{_name}__", _arithmetic(f"__r{_name}__", _fn, _op, reflected=True))
for _name, _fn, _op in (("neg", operator.neg, "neg"), ("abs", abs, "abs")):
    setattr(DynamicFloat, f"__{_name}__", _unary(f"__{_name}__", _fn, _op))
DynamicFloat.__pos__ = lambda self: self


def name_proxy(trace, value, read) -> DynamicFloat:
    """A global's or closure cell's number as a DynamicFloat in ``trace`` (compile's): its
    traced tensor is a constant the compiled code reads from the name at each call."""
    from ..runtime.tensor import wrap

    def number():  # (while traced the name holds the proxy: its value then)
        v = read()
        return v.value if type(v) is DynamicFloat else v
    holder = wrap(np.asarray(value, dtype=np.float64), NamedNumber)
    holder.read = number
    return DynamicFloat(value, number, trace.numbers, wrap(trace.lift(holder)))


def kept(made: list, held: frozenset = frozenset()) -> bool:
    """Whether traced code kept one of the DynamicFloats ``made`` after it returned (in a
    list, an attribute): it would stand for that call's value. (References: ``made``, the
    loop, getrefcount's argument, and one more for those whose ids are ``held``.)"""
    return any(sys.getrefcount(p) > 3 + (id(p) in held) for p in made)
