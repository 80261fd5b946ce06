"""The IR: a graph of SSA values (``Var``) defined by equations (``Eqn``) that apply one
primitive each. ``str(graph)`` is a readable listing, its values numbered from ``%0`` in the
order the listing defines them."""
from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from typing import Any, Iterator, Optional

import numpy as np

_ids = itertools.count()  # unique SSA numbering across all graphs (cheap, monotonic)

class _Listing(threading.local):
    def __init__(self):
        self.names: Optional[dict] = None  # var id -> number while a listing is printed
        self.sizes: Optional[dict] = None  # size -> symbol while a symbolic graph's is (symbolic_sizes)


_LISTING = _Listing()


@contextlib.contextmanager
def numbering(defined: Iterator["Var"] = ()) -> Iterator[None]:
    """While a listing is printed: each Var prints as ``%n``, n counting from 0 in the order
    of ``defined`` and then of first appearance; a listing printed inside another shares
    the outer one's numbers."""
    if _LISTING.names is not None:
        yield
        return
    _LISTING.names = {}
    try:
        for v in defined:
            _LISTING.names.setdefault(v.id, len(_LISTING.names))
        yield
    finally:
        _LISTING.names = None


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}


@functools.cache
def _short_name(dtype: np.dtype) -> str:
    """A dtype as listings spell it (cached: NumPy builds ``dtype.name`` anew each time, and
    fingerprints read it for every value on every call of a segmented function)."""
    return _SHORT.get(dtype.name, dtype.name)


@contextlib.contextmanager
def symbolic_sizes(sizes: Optional[dict]) -> Iterator[None]:
    """While listings are printed inside: a dimension whose size is a key of ``sizes``
    prints as its symbol (``f32[s0,4]``). A graph compiled with symbolic dimensions is
    traced at one size; its values' dimensions of a symbolic input size are that symbol."""
    prev, _LISTING.sizes = _LISTING.sizes, sizes or None
    try:
        yield
    finally:
        _LISTING.sizes = prev


def dims_str(shape: tuple) -> str:
    """``shape`` as a listing prints it: "2,3", or with symbols (``symbolic_sizes``)."""
    sizes = _LISTING.sizes if _LISTING.names is not None else None
    return ",".join(sizes.get(n, str(n)) for n in shape) if sizes else ",".join(map(str, shape))


class Var:
    """One SSA value: shape and NumPy dtype, numbered; ``trace`` is the trace that made it.
    ``recompute`` is a rematerialization hint: the value was computed inside a
    ``checkpoint`` region, so a backward recomputes it rather than keeping it."""
    __slots__ = ("shape", "dtype", "id", "trace", "recompute")

    def __init__(self, shape: tuple, dtype, trace=None):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.id = next(_ids)
        self.trace = trace
        self.recompute = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def type_str(self) -> str:
        return f"{_short_name(self.dtype)}[{dims_str(self.shape)}]"

    def __repr__(self) -> str:
        names = _LISTING.names
        if names is None:
            return f"%{self.id}"
        return f"%{names.setdefault(self.id, len(names))}"


class Eqn:
    """``out = prim(*inputs, **params)``; inputs are Vars or Python scalar literals."""
    __slots__ = ("prim", "inputs", "params", "out", "where")

    def __init__(self, prim, inputs: tuple, params: dict, out: Var, where: Optional[str] = None):
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.out = out
        self.where = where

    def __repr__(self) -> str:
        args = ", ".join(repr(a) if isinstance(a, Var) else repr(a) for a in self.inputs)
        ps = ", ".join(f"{k}={_fmt(v, k)}" for k, v in self.params.items())
        sep = ", " if args and ps else ""
        return f"{self.out!r}: {self.out.type_str()} = {self.prim.name}({args}{sep}{ps})"


def _fmt(v: Any, key: str = "") -> str:
    if isinstance(v, np.dtype):
        return v.name
    if key == "shape" and _LISTING.sizes and isinstance(v, tuple) and all(type(n) is int for n in v):
        return f"({', '.join(_LISTING.sizes.get(n, str(n)) for n in v)}{',' if len(v) == 1 else ''})"
    return repr(v)


class Graph:
    """A traced function: ``inputs`` (arguments), ``consts`` (captured values, read at call
    time from the held object), ``eqns`` in execution order and ``outputs``."""

    def __init__(self):
        self.inputs: list[Var] = []
        self.consts: list[tuple[Var, Any]] = []
        self.eqns: list[Eqn] = []
        self.outputs: list = []

    def arguments(self) -> list:
        """The inputs then the consts' Vars: the order in which executables and the
        interpreter take their arrays, and the primals of a closed graph."""
        return list(self.inputs) + [v for v, _ in self.consts]

    def view_roots(self) -> dict:
        """Var id -> id of the value it views, for each value an aliasing primitive
        (``Primitive.aliases``) makes from another, through chains of them."""
        roots: dict = {}
        for e in self.eqns:
            a = e.inputs[0] if e.prim.aliases and e.inputs else None
            if type(a) is Var:
                roots[e.out.id] = roots.get(a.id, a.id)
        return roots

    def defined(self) -> Iterator[Var]:
        """The Vars in the order the graph defines them: inputs, consts, equation results."""
        yield from self.inputs
        for v, _ in self.consts:
            yield v
        for e in self.eqns:
            yield e.out

    def __str__(self) -> str:
        with numbering(self.defined()):
            return self._listing()

    def _listing(self) -> str:
        lines = ["graph("]
        for v in self.inputs:
            lines.append(f"    {v!r}: {v.type_str()},")
        for v, c in self.consts:
            lines.append(f"    {v!r}: {v.type_str()} = const,")
        lines.append(") {")
        for e in self.eqns:
            notes = [n for n in (e.where, "checkpointed" if e.out.recompute else None) if n]
            lines.append(f"  {e!r}" + (f"    # {'; '.join(notes)}" if notes else ""))
        outs = ", ".join(repr(o) for o in self.outputs)
        lines.append(f"  return ({outs})")
        lines.append("}")
        return "\n".join(lines)

    __repr__ = __str__
