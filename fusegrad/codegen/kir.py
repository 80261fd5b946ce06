"""The kernel IR: one loop kernel as a typed tree, between fusion and every renderer.

A ``Kernel`` has buffer parameters (flat 1-d arrays), named shape symbols and a body of
statements:
- ``Loop(var, extent, kind, body)``: ``var`` runs over ``0 .. extent-1``; ``kind`` is
  ``"parallel"`` (iterations independent), ``"serial"`` or ``"vector"`` (the innermost,
  vectorizable lane loop);
- ``Assign(name, value)``: a scalar local, assigned once;
- ``Store(buf, index, value)``;
- ``Acc(name, op, dtype)`` declares an accumulator at the identity of reduction ``op``
  (one of ``scalar_ops.REDUCE_OPS``) and ``Update(name, value)`` folds a value into it
  (``max``/``min`` propagate NaN, as NumPy's do);
- ``Guard(cond, body)``: ``body`` runs where ``cond`` holds;
- ``Let(name, expr)``: an integer local read by later index expressions (kir_passes);
- ``Extern(fn, args)``: a library call (GEMM) on whole buffers.

Values are ``Const``, ``Ref`` (a local or accumulator), ``Load(buf, index)``, ``Index(expr)``
(an index expression as a value, e.g. iota) and ``Op(op, args, dtype, params)`` whose ``op``
is a scalar operation of ``fusegrad.ir.scalar_ops.OPS`` (a primitive's scalar rule) or a
math function. Index and extent expressions (``IExpr``) are ints, ``Sym`` (a shape symbol
or a loop variable) and ``IBin`` (``+ * // % min``) with constants folded, so a kernel's
extents and strides may be runtime values (see ``kir_lower.lower_group(symbolic=True)``).

``str(kernel)`` is a readable listing, ``verify(kernel)`` checks it is well formed and
``structural_hash(kernel)`` is equal for kernels equal up to renaming."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Iterator, Union

import numpy as np

from ..ir.scalar_ops import OPS, REDUCE_OPS

LOOP_KINDS = ("parallel", "serial", "vector")
BUFFER_ROLES = ("in", "out", "inout", "temp")


# ---------------------------------------------------------------- index expressions
@dataclass(frozen=True)
class Sym:
    """A named integer: a shape symbol (a kernel parameter) or a loop variable."""
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IBin:
    """``a op b`` over integers; ``op`` is one of ``+ * // % min``."""
    op: str
    a: "IExpr"
    b: "IExpr"

    def __str__(self) -> str:
        if self.op == "min":
            return f"min({self.a}, {self.b})"
        return f"({_istr(self.a)} {self.op} {_istr(self.b)})" if self.op in ("//", "%") else \
            f"{_istr(self.a)} {self.op} {_istr(self.b)}"


IExpr = Union[int, Sym, IBin]


def _istr(e: IExpr) -> str:
    return f"({e})" if isinstance(e, IBin) and e.op == "+" else str(e)


def iadd(a: IExpr, b: IExpr) -> IExpr:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if b == 0:
        return a
    if a == 0:
        return b
    if isinstance(a, int):  # constants last: i*4 + 3
        a, b = b, a
    return IBin("+", a, b)


def imul(a: IExpr, b: IExpr) -> IExpr:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 0 or b == 0:
        return 0
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, int):  # constants last: i * 4
        a, b = b, a
    return IBin("*", a, b)


def ifloordiv(a: IExpr, b: IExpr) -> IExpr:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return a if b == 1 else IBin("//", a, b)


def imod(a: IExpr, b: IExpr) -> IExpr:
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return 0 if b == 1 else IBin("%", a, b)


def imin(a: IExpr, b: IExpr) -> IExpr:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return a if a == b else IBin("min", a, b)


def iprod(items) -> IExpr:
    acc: IExpr = 1
    for x in items:
        acc = imul(acc, x)
    return acc


def isyms(e: IExpr) -> Iterator[str]:
    """Names of the symbols ``e`` reads."""
    if isinstance(e, Sym):
        yield e.name
    elif isinstance(e, IBin):
        yield from isyms(e.a)
        yield from isyms(e.b)


def ieval(e: IExpr, env: dict) -> int:
    if isinstance(e, int):
        return e
    if isinstance(e, Sym):
        return env[e.name]
    a, b = ieval(e.a, env), ieval(e.b, env)
    if e.op == "min":
        return min(a, b)
    return a + b if e.op == "+" else a * b if e.op == "*" else a // b if e.op == "//" else a % b


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class Const:
    value: object
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{self.value!r}:{_dt(self.dtype)}"


@dataclass(frozen=True)
class Ref:
    """A scalar local or accumulator, by name."""
    name: str
    dtype: np.dtype

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Load:
    buf: str
    index: IExpr
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{self.buf}[{self.index}]"


@dataclass(frozen=True)
class Index:
    """An index expression's value, of integer or float ``dtype``."""
    expr: IExpr
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{_dt(self.dtype)}({self.expr})"


@dataclass(frozen=True)
class Op:
    """Scalar operation ``op`` (see scalar_ops.OPS) on ``args``; ``dtype`` is the result's,
    ``params`` sorted (name, value) pairs (e.g. cast's target dtype)."""
    op: str
    args: tuple
    dtype: np.dtype
    params: tuple = ()

    def __str__(self) -> str:
        p = "".join(f", {k}={_param(v)}" for k, v in self.params)
        return f"{self.op}({', '.join(map(str, self.args))}{p}):{_dt(self.dtype)}"

    def operand_dtype(self) -> np.dtype:
        """The type the operation computes in: its first non-predicate operand's."""
        skip = 1 if self.op == "where" else 0
        for a in self.args[skip:]:
            return a.dtype
        return self.dtype


Value = Union[Const, Ref, Load, Index, Op]


def _dt(dt) -> str:
    return np.dtype(dt).name


def _param(v) -> str:
    return _dt(v) if isinstance(v, (np.dtype, type)) else repr(v)


# ---------------------------------------------------------------- statements
@dataclass
class Assign:
    name: str
    value: Value


@dataclass
class Store:
    buf: str
    index: IExpr
    value: Value


@dataclass
class Acc:
    name: str
    op: str
    dtype: np.dtype


@dataclass
class Update:
    name: str
    value: Value


@dataclass
class Loop:
    var: str
    extent: IExpr
    kind: str
    body: list = field(default_factory=list)


@dataclass
class Guard:
    cond: Value
    body: list = field(default_factory=list)


@dataclass
class Let:
    """An integer local ``name = expr`` that later index expressions read as ``Sym(name)``."""
    name: str
    expr: IExpr


@dataclass
class Extern:
    """A library call ``fn`` on whole buffers and integer arguments (e.g. a GEMM)."""
    fn: str
    args: tuple


@dataclass
class Scratch:
    """Temp buffer ``buf`` allocated here, afresh each time the statement runs (uninitialized):
    at the top of a parallel loop's body it is private to one iteration, so one thread's
    carries never meet another's (kir_reroll inside reduction chunks). It is visible to the
    statements after it in the same body."""
    buf: str


Stmt = Union[Assign, Store, Acc, Update, Loop, Guard, Let, Extern, Scratch]


@dataclass(frozen=True)
class Buffer:
    """A flat array: ``size`` elements of ``dtype``; ``role`` is "in", "out" or "inout" for
    a parameter, "temp" for scratch the kernel allocates itself (uninitialized; e.g. the
    carries of a rerolled loop, kir_reroll). Temps follow the parameters."""
    name: str
    dtype: np.dtype
    size: IExpr
    role: str


@dataclass
class Kernel:
    name: str
    buffers: list
    syms: tuple
    body: list

    def params(self) -> list:
        """The buffers a caller passes (all but the temps), in order."""
        return [b for b in self.buffers if b.role != "temp"]

    def __str__(self) -> str:
        params = ", ".join(f"{b.name}: {_dt(b.dtype)}[{b.size}] {b.role}" for b in self.buffers)
        head = f"kernel {self.name}({params})" + (f" syms({', '.join(self.syms)})" if self.syms else "") + ":"
        return "\n".join([head] + list(_lines(self.body, 1)))

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)


def _lines(body: list, depth: int) -> Iterator[str]:
    pad = "  " * depth
    for s in body:
        if isinstance(s, Loop):
            yield f"{pad}{s.kind} for {s.var} in 0..{s.extent}:"
            yield from _lines(s.body, depth + 1)
        elif isinstance(s, Guard):
            yield f"{pad}if {s.cond}:"
            yield from _lines(s.body, depth + 1)
        elif isinstance(s, Assign):
            yield f"{pad}{s.name} = {s.value}"
        elif isinstance(s, Store):
            yield f"{pad}{s.buf}[{s.index}] = {s.value}"
        elif isinstance(s, Acc):
            yield f"{pad}acc {s.name}: {_dt(s.dtype)} = identity({s.op})"
        elif isinstance(s, Update):
            yield f"{pad}{s.name} <- {s.value}"
        elif isinstance(s, Let):
            yield f"{pad}let {s.name} = {s.expr}"
        elif isinstance(s, Scratch):
            yield f"{pad}scratch {s.buf}"
        else:
            yield f"{pad}call {s.fn}({', '.join(map(str, s.args))})"


# ---------------------------------------------------------------- traversal
def values(v: Value) -> Iterator[Value]:
    """``v`` and every value inside it."""
    yield v
    if isinstance(v, Op):
        for a in v.args:
            yield from values(a)


def stmts(body: list) -> Iterator[Stmt]:
    """Every statement of ``body``, nested ones after their loop or guard."""
    for s in body:
        yield s
        if isinstance(s, (Loop, Guard)):
            yield from stmts(s.body)


def stmt_values(s: Stmt) -> list:
    """The values statement ``s`` holds itself (a guard's condition, not its body's)."""
    if isinstance(s, (Assign, Update, Store)):
        return [s.value]
    return [s.cond] if isinstance(s, Guard) else []


def map_values(s: Stmt, fn) -> Stmt:
    """Statement ``s`` with ``fn`` applied to each value it holds itself (see stmt_values)."""
    if isinstance(s, Assign):
        return Assign(s.name, fn(s.value))
    if isinstance(s, Store):
        return Store(s.buf, s.index, fn(s.value))
    if isinstance(s, Update):
        return Update(s.name, fn(s.value))
    if isinstance(s, Guard):
        return Guard(fn(s.cond), s.body)
    return s


def map_stmts(body: list, fn) -> list:
    """``body`` with ``fn`` applied to every statement, nested ones too (a loop's or guard's
    before its body)."""
    out = []
    for s in map(fn, body):
        if isinstance(s, Loop):
            s = Loop(s.var, s.extent, s.kind, map_stmts(s.body, fn))
        elif isinstance(s, Guard):
            s = Guard(s.cond, map_stmts(s.body, fn))
        out.append(s)
    return out


def map_body(body: list, fn) -> list:
    """``body`` with ``fn`` applied to every value its statements hold, nested ones too."""
    return map_stmts(body, lambda s: map_values(s, fn))


def rebuild(v: Value, fn) -> Value:
    """Value ``v`` with ``fn`` applied to it and every value inside it, innermost first."""
    if isinstance(v, Op):
        v = Op(v.op, tuple(rebuild(a, fn) for a in v.args), v.dtype, v.params)
    return fn(v)


# ---------------------------------------------------------------- verifier
class KernelError(ValueError):
    """A malformed kernel (see ``verify``)."""


def verify(k: Kernel) -> Kernel:
    """Check ``k`` is well formed and return it: names are defined before use and once,
    index expressions read only shape symbols and enclosing loop variables, loads and
    stores name buffers of matching dtype (stores only to "out"/"inout" buffers),
    operations are known scalar operations of the right arity, loops have a known kind,
    updates fold into a declared accumulator. Raises KernelError naming the problem."""
    bufs = {b.name: b for b in k.buffers}
    if len(bufs) != len(k.buffers):
        raise KernelError(f"kernel {k.name}: duplicate buffer names")
    roles = [b.role for b in k.buffers]
    if any(r not in BUFFER_ROLES for r in roles) or "temp" in roles[:len(k.params())]:
        raise KernelError(f"kernel {k.name}: buffer roles {roles}: each one of {BUFFER_ROLES}, temps last")
    for b in k.buffers:
        _check_index(k, b.size, set(k.syms), f"size of {b.name}")
    scratch = [s.buf for s in stmts(k.body) if isinstance(s, Scratch)]
    if len(set(scratch)) != len(scratch) or any(bufs.get(n, Buffer(n, None, 0, "")).role != "temp" for n in scratch):
        raise KernelError(f"kernel {k.name}: scratch {scratch}: each a temp buffer, allocated once")
    defined: dict = {}
    _verify_body(k, k.body, {n: b for n, b in bufs.items() if n not in scratch}, set(k.syms), defined)
    return k


def checked(k: Kernel) -> Kernel:
    """``verify(k)`` where every step is checked (``FUSEGRAD_VERIFY=1``, as in the tests);
    ``k`` otherwise. The passes between lowering and rendering check their results with
    this; the kernel a renderer receives is verified always (``cpu_render.prepare``)."""
    return verify(k) if os.environ.get("FUSEGRAD_VERIFY") == "1" else k


def _check_index(k: Kernel, e: IExpr, scope: set, where: str) -> None:
    for n in isyms(e):
        if n not in scope:
            raise KernelError(f"kernel {k.name}: {where} reads {n!r}, not a symbol or enclosing loop variable")


def _verify_body(k: Kernel, body: list, bufs: dict, scope: set, defined: dict) -> None:
    bufs = dict(bufs)  # buffers visible here: scratch from its statement to the end of its body
    local = dict(defined)  # names visible here: defined before, in this or an enclosing body
    scope = set(scope)  # integer names: symbols, enclosing loop variables, lets before here
    for s in body:
        if isinstance(s, Loop):
            if s.kind not in LOOP_KINDS:
                raise KernelError(f"kernel {k.name}: loop {s.var} has kind {s.kind!r}, not one of {LOOP_KINDS}")
            if s.var in scope or s.var in local:
                raise KernelError(f"kernel {k.name}: loop variable {s.var} shadows a name")
            _check_index(k, s.extent, scope, f"extent of loop {s.var}")
            _verify_body(k, s.body, bufs, scope | {s.var}, local)
        elif isinstance(s, Guard):
            _check_value(k, s.cond, bufs, scope, local)
            _verify_body(k, s.body, bufs, scope, local)
        elif isinstance(s, Assign):
            _check_value(k, s.value, bufs, scope, local)
            _define(k, s.name, "local", s.value.dtype, local, scope)
        elif isinstance(s, Acc):
            if s.op not in REDUCE_OPS:
                raise KernelError(f"kernel {k.name}: accumulator {s.name} has unknown op {s.op!r}")
            _define(k, s.name, "acc", np.dtype(s.dtype), local, scope)
        elif isinstance(s, Update):
            if local.get(s.name, ("",))[0] != "acc":
                raise KernelError(f"kernel {k.name}: update of {s.name}, not a declared accumulator")
            _check_value(k, s.value, bufs, scope, local)
        elif isinstance(s, Store):
            b = bufs.get(s.buf)
            if b is None or b.role == "in":
                raise KernelError(f"kernel {k.name}: store to {s.buf}, not an output buffer")
            _check_index(k, s.index, scope, f"store to {s.buf}")
            _check_value(k, s.value, bufs, scope, local)
            if np.dtype(s.value.dtype) != np.dtype(b.dtype):
                raise KernelError(f"kernel {k.name}: store of {_dt(s.value.dtype)} into {_dt(b.dtype)} buffer {s.buf}")
        elif isinstance(s, Let):
            _check_index(k, s.expr, scope, f"let {s.name}")
            if s.name in scope or s.name in local:
                raise KernelError(f"kernel {k.name}: {s.name} is defined twice")
            scope.add(s.name)
        elif isinstance(s, Extern):
            for a in s.args:
                if isinstance(a, str) and a not in bufs:
                    raise KernelError(f"kernel {k.name}: call {s.fn} names unknown buffer {a}")
        elif isinstance(s, Scratch):
            bufs[s.buf] = k.buffer(s.buf)
        else:
            raise KernelError(f"kernel {k.name}: unknown statement {s!r}")


def _define(k: Kernel, name: str, what: str, dtype, local: dict, scope: set) -> None:
    if name in local or name in scope:
        raise KernelError(f"kernel {k.name}: {name} is defined twice")
    local[name] = (what, np.dtype(dtype))


def _check_value(k: Kernel, v: Value, bufs: dict, scope: set, local: dict) -> None:
    for x in values(v):
        if isinstance(x, Ref):
            if x.name not in local:
                raise KernelError(f"kernel {k.name}: {x.name} is read before it is defined")
            if local[x.name][1] != np.dtype(x.dtype):
                raise KernelError(f"kernel {k.name}: {x.name} read as {_dt(x.dtype)}, defined as {_dt(local[x.name][1])}")
        elif isinstance(x, Load):
            b = bufs.get(x.buf)
            if b is None:
                raise KernelError(f"kernel {k.name}: load from unknown buffer {x.buf}")
            if np.dtype(b.dtype) != np.dtype(x.dtype):
                raise KernelError(f"kernel {k.name}: load of {_dt(x.dtype)} from {_dt(b.dtype)} buffer {x.buf}")
            _check_index(k, x.index, scope, f"load from {x.buf}")
        elif isinstance(x, Index):
            _check_index(k, x.expr, scope, "index value")
        elif isinstance(x, Op):
            op = OPS.get(x.op)
            if op is None:
                raise KernelError(f"kernel {k.name}: unknown scalar operation {x.op!r}")
            if len(x.args) != op.arity:
                raise KernelError(f"kernel {k.name}: {x.op} takes {op.arity} operands, got {len(x.args)}")


# ---------------------------------------------------------------- canonical form and hash
def canonical(k: Kernel) -> Kernel:
    """``k`` renamed canonically: kernel ``kernel``, buffers ``b0, b1, ...`` and symbols
    ``n0, ...`` in parameter order, loop variables ``i0, ...`` and locals ``v0, ...`` in
    order of definition. Kernels equal up to renaming have equal canonical forms (and
    render to the same source)."""
    names: dict = {}
    counts: dict = {}

    def name(old: str, prefix: str) -> str:
        if old not in names:
            names[old] = f"{prefix}{counts.get(prefix, 0)}"
            counts[prefix] = counts.get(prefix, 0) + 1
        return names[old]

    def ix(e: IExpr) -> IExpr:
        if isinstance(e, Sym):
            return Sym(names[e.name])
        return IBin(e.op, ix(e.a), ix(e.b)) if isinstance(e, IBin) else e

    def val(v: Value) -> Value:
        if isinstance(v, Ref):
            return Ref(names[v.name], v.dtype)
        if isinstance(v, Load):
            return Load(names[v.buf], ix(v.index), v.dtype)
        if isinstance(v, Index):
            return Index(ix(v.expr), v.dtype)
        if isinstance(v, Op):
            return Op(v.op, tuple(val(a) for a in v.args), v.dtype, v.params)
        return v

    def body(stmts: list) -> list:
        out: list = []
        for s in stmts:
            if isinstance(s, Loop):
                out.append(Loop(name(s.var, "i"), ix(s.extent), s.kind, body(s.body)))
            elif isinstance(s, Guard):
                out.append(Guard(val(s.cond), body(s.body)))
            elif isinstance(s, Assign):
                value = val(s.value)
                out.append(Assign(name(s.name, "v"), value))
            elif isinstance(s, Store):
                out.append(Store(names[s.buf], ix(s.index), val(s.value)))
            elif isinstance(s, Acc):
                out.append(Acc(name(s.name, "v"), s.op, s.dtype))
            elif isinstance(s, Update):
                out.append(Update(names[s.name], val(s.value)))
            elif isinstance(s, Let):
                expr = ix(s.expr)
                out.append(Let(name(s.name, "t"), expr))
            elif isinstance(s, Scratch):
                out.append(Scratch(names[s.buf]))
            else:
                out.append(Extern(s.fn, tuple(names.get(a, a) if isinstance(a, str) else a for a in s.args)))
        return out

    bufs = [Buffer(name(b.name, "b"), b.dtype, b.size, b.role) for b in k.buffers]
    syms = tuple(name(x, "n") for x in k.syms)
    bufs = [Buffer(b.name, b.dtype, ix(b.size), b.role) for b in bufs]
    return Kernel("kernel", bufs, syms, body(k.body))


def structural_hash(k: Kernel) -> str:
    """A digest equal for kernels that differ only in the names of their kernel, buffers,
    symbols, loop variables and locals (buffers and symbols in parameter order)."""
    return hashlib.sha256(str(canonical(k)).encode()).hexdigest()[:32]
