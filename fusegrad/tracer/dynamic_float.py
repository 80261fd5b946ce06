"""Float arguments that change from call to call, traced as values the compiled code reads
at every call (torch.compile's unspecialized floats) instead of compiling anew per value.

When a compiled function is called again with only its float arguments changed, its trace
gets a ``DynamicFloat`` in place of each float argument, standing for a 0-d float64 input
of the graph that each call passes. As an operand of a tensor op it is that input cast to
the other operand's floating dtype (a Python float's weak promotion); compared with a
number, or tested for truth, it gives the result and guards the graph on it, read from the
call's arguments in the function's ``ArgBox`` (a call with the other outcome traces
again). Any other use needs
the number itself (arithmetic in Python, ``float()``, a math function, printing): the trace
stops with ``FloatUsed`` and the function compiles such signatures per value, as before."""
from __future__ import annotations

import operator
import threading

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from .live import guard


class FloatUsed(Exception):
    """The traced code needed a ``DynamicFloat``'s value itself."""


class ArgBox(threading.local):
    """Per thread, the float arguments of the call being run, by argument position."""

    def __init__(self):
        self.values: dict = {}

    def __getitem__(self, index: int) -> float:
        return self.values[index]


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne, "truth": lambda v, _: bool(v)}


class DynamicFloat:
    """A float argument in compile's trace (see the module docstring)."""
    __slots__ = ("value", "box", "index", "tensor")

    def __init__(self, value: float, box: ArgBox, index: int):
        self.value, self.box, self.index = value, box, index
        self.tensor = None  # the traced 0-d float64 input (set when the trace starts)

    def operand(self, like):
        """The number as a traced 0-d tensor beside the tensor ``like``: of its dtype when
        floating, else of the default dtype (as a Python float promotes)."""
        dtype = like._data.dtype if D.np_floating(like._data.dtype) else D.get_default_dtype().np
        return P.cast(self.tensor, dtype=np.dtype(dtype))

    def _compare(self, op: str, other) -> bool:
        if op != "truth" and (type(other) not in (int, float, bool)):
            raise FloatUsed(f"a comparison with {type(other).__name__}")
        box, index = self.box, self.index
        return guard(("dynamic float", index, op, other), lambda: _COMPARE[op](box[index], other))

    def __bool__(self) -> bool:
        return self._compare("truth", None)


def _comparison(op: str):
    return lambda self, other: self._compare(op, other)


def _unusable(name: str):
    def method(self, *args):
        from ..runtime.tensor import Tensor
        if args and isinstance(args[0], Tensor):
            return NotImplemented  # the tensor's reflected operator: an operand of a tensor op
        raise FloatUsed(f"'{name}'")
    method.__name__ = name
    return method


for _name, _op in (("__lt__", "<"), ("__le__", "<="), ("__gt__", ">"), ("__ge__", ">="), ("__eq__", "=="),
                   ("__ne__", "!=")):
    setattr(DynamicFloat, _name, _comparison(_op))
for _name in ("float", "int", "index", "complex", "round", "trunc", "floor", "ceil", "abs", "neg", "pos", "hash",
              "str", "repr", "format", "array", "add", "sub", "mul", "truediv", "floordiv", "mod", "divmod",
              "pow", "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rdivmod", "rpow", "getattr"):
    setattr(DynamicFloat, f"__{_name}__", _unusable(f"__{_name}__"))
