"""The Numba CPU renderer of the kernel IR: one ``kir.Kernel`` becomes one module holding
one ``@njit`` function ``kernel(<buffers>, <symbols>)``. Buffers are flat contiguous 1-d
arrays, symbols ints; temp buffers are allocated at the top. Parallel loops at the top
level run as chunk functions that cpu_link's launcher calls (cpu_outline), so the kernel
needs none of Numba's parfor passes; a kernel that cannot (a parallel loop nested in
another) keeps ``prange``. Each scalar operation is written by cpu_scalar, a fastmath
function as its ``variant`` says (kir_fastmath); the module binds the functions the
kernel's operations name, read from the IR.

``prepare`` runs the kernel passes the renderer wants (kir_passes.optimize, the trig guard
and fastmath's variants); ``render`` prints a prepared kernel in canonical form
(kir.canonical), so kernels equal up to renaming have the same source, hence one module:
compiled once per process and cached once on disk (runtime.kernel_cache), whichever
graphs or layers they come from."""
from __future__ import annotations

import functools
from typing import Callable, Optional

import numpy as np

from ..ir.scalar_ops import REDUCE_OPS, reduce_identity
from .cpu_program import TABLE_IMPORT, TABLE_OPERAND
from .cpu_outline import IMPORTS as OUTLINE_IMPORTS, Outliner, outlinable
from .cpu_arrays import IMPORT as ARRAYS
from .cpu_scalar import binding, expr, imports, literal
from .kir import (Acc, Assign, Extern, Guard, IBin, Kernel, Let, Load, Loop, Op, Scratch, Store, Sym, Update, canonical,
                  checked, iadd, isyms, rebuild, stmt_values, stmts, structural_hash, values, verify)
from .kir_fastmath import choose_variants, trig_guard
from .kir_passes import optimize
from .value_text import value_text

# see cpu.py: reassoc lets LLVM vectorize reductions, contract allows FMA; NaN and inf keep
# NumPy semantics; x/0 gives inf. Only native code calls kernels (cpu_link), so they go
# without the wrappers that make a function callable from Python and from C, a good part of
# a small kernel's compile, unless a caller in Python needs one (``compiled``).
_DECORATOR = '@njit(cache=True, fastmath={{"reassoc", "contract"}}, error_model="numpy", parallel={}{})'
_NATIVE_ONLY = ", no_cpython_wrapper=True, no_cfunc_wrapper=True"


def decorator(parallel: bool = False, from_python: bool = False) -> str:
    """The ``@njit`` line of a kernel module's function."""
    return _DECORATOR.format(parallel, "" if from_python else _NATIVE_ONLY)


def prepare(k: Kernel, guard: Optional[str] = "exact", nonpositive: frozenset = frozenset(),
            bounded_trig: bool = False) -> Kernel:
    """``k`` after the passes: kir_passes.optimize, then kir_fastmath's trig guard in mode
    ``guard`` ("fast" adds the count buffer, see kir_fastmath; "exact" needs no rerun) and
    its choice of variants (``nonpositive``: names of the locals and buffers known <= 0);
    the result verified (and each step under ``FUSEGRAD_VERIFY=1``, ``kir.checked``)."""
    k = optimize(k)
    if guard:
        k = checked(trig_guard(k, guard, bounded_trig))
    return verify(choose_variants(k, nonpositive))


def render(k: Kernel, from_python: bool = False, table: bool = False) -> str:
    """The module source of prepared kernel ``k`` (see the module docstring); its function
    ``kernel`` can be called from Python only when ``from_python``, and takes an entry's
    table (cpu_program) instead of its buffers and sizes with ``table``."""
    k = canonical(k)
    outliner = Outliner(k, lambda: _Writer(k), decorator()) if outlinable(k) else None
    lines = list(_Writer(k, outliner).body(k.body, 1))
    parallel = not outliner and any(isinstance(s, Loop) and s.kind == "parallel" for s in stmts(k.body))
    params = [b.name for b in k.params()] + list(k.syms)
    scratch = {s.buf for s in stmts(k.body) if isinstance(s, Scratch)}
    temps = ["    " + _alloc(b) for b in k.buffers if b.role == "temp" and b.name not in scratch]
    extra = imports(_bindings(k)) + (OUTLINE_IMPORTS if outliner else [])
    before = [line for src, _ in outliner.chunks for line in (src, "")] + [outliner.link_line(), ""] if outliner else []
    dtypes = [np.dtype(b.dtype).name for b in k.params()] if table else None
    head = kernel_head("renderer from kernel IR", params, parallel, extra, before, from_python, dtypes)
    return "\n".join(head + temps + (lines or ["    pass"])) + "\n"


def kernel_head(origin: str, params: list, parallel: bool = False, extra: list = (), before: list = (),
                from_python: bool = False, table: Optional[list] = None) -> list:
    """The lines opening a kernel module: imports (``extra`` too), the lines ``before``, and
    ``def kernel(params)`` (see ``decorator``). With ``table``, the dtype names of the
    buffers among ``params`` (the rest are sizes), the function takes an entry's table
    instead, ``kernel(ptrs, prog, at)``, and binds each parameter from it (cpu_program)."""
    lines = [f"# generated by fusegrad's cpu {origin}", "import math", "", "import numpy as np",
             "from numba import njit, prange", ARRAYS, *extra]
    if table is None:
        return lines + ["", *before, decorator(parallel, from_python), f"def kernel({', '.join(params)}):"]
    binds = [f"    {p} = {TABLE_OPERAND.format(s=3 * j, dtype=dt)}" for j, (p, dt) in enumerate(zip(params, table))]
    binds += [f"    {p} = prog[at + {3 * len(table) + j}]" for j, p in enumerate(params[len(table):])]
    return lines + [TABLE_IMPORT, "", *before, decorator(parallel, from_python), "def kernel(ptrs, prog, at):", *binds]


def _alloc(b) -> str:
    return f"{b.name} = empty({b.size}, np.{np.dtype(b.dtype).name})"


def _bindings(k: Kernel) -> list:
    """The module-level names the operations of ``k`` call (fastmath's functions, rounding)."""
    return [b for s in stmts(k.body) for x in stmt_values(s) for v in values(x)
            if isinstance(v, Op) and (b := binding(v.op, v.operand_dtype(), dict(v.params)))]


class _Writer:
    def __init__(self, k: Kernel, outliner: Optional[Outliner] = None):
        self.k = k
        self.outliner = outliner  # writes the top level's parallel loops as launches (cpu_outline)
        self.accs: dict = {}  # accumulator name -> (reduce op, dtype)
        self.views: dict = {}  # (buffer, offset) -> the name of its view in the loop being written

    def body(self, body: list, depth: int):
        pad = "    " * depth
        top = self.outliner if depth == 1 else None
        for s in body:
            if top:
                top.see(s)
            if isinstance(s, Loop) and top and s.kind == "parallel":
                yield from top.launch(s, self, pad)
            elif isinstance(s, Loop):
                yield from self.loop(s, pad, f"{'prange' if s.kind == 'parallel' else 'range'}({s.extent})")
            elif isinstance(s, Guard):
                yield f"{pad}if {self.value(s.cond)}:"
                yield from self.body(s.body, depth + 1) if s.body else iter([f"{pad}    pass"])
            elif isinstance(s, Assign):
                yield f"{pad}{s.name} = {self.value(s.value)}"
            elif isinstance(s, Store):
                buf, index = self.viewed(s.buf, s.index)
                yield f"{pad}{buf}[{_index(index)}] = {self.value(s.value)}"
            elif isinstance(s, Acc):
                self.accs[s.name] = (s.op, np.dtype(s.dtype))
                yield f"{pad}{s.name} = {literal(reduce_identity(s.op, np.dtype(s.dtype)), s.dtype)}"
            elif isinstance(s, Update):
                yield pad + self.update(s)
            elif isinstance(s, Let):
                yield f"{pad}{s.name} = {s.expr}"
            elif isinstance(s, Scratch):
                yield pad + _alloc(self.k.buffer(s.buf))
            elif isinstance(s, Extern):
                raise NotImplementedError(f"cpu renderer: library call {s.fn} inside a loop kernel")

    def loop(self, s: Loop, pad: str, rng: str):
        """Loop ``s`` over ``rng`` (the text after ``in``)."""
        views = _offset_views(s, len(self.views))
        for (buf, rest), name in views.items():
            yield f"{pad}{name} = tail({buf}, {rest})"
        self.views.update(views)
        yield f"{pad}for {s.var} in {rng}:"
        yield from self.body(s.body, len(pad) // 4 + 1) if s.body else iter([f"{pad}    pass"])
        for key in views:
            del self.views[key]

    def update(self, s: Update) -> str:
        op, dt = self.accs[s.name]
        v = self.value(s.value)
        if np.dtype(s.value.dtype) != dt:
            v = f"np.{dt.name}({v})"
        if op in ("+", "*"):
            return f"{s.name} {op}= {v}"
        if dt.kind == "b":  # any / all
            return f"{s.name} {'|' if op in ('max', 'fmax') else '&'}= {v}"
        if op in ("fmax", "fmin"):
            # keeping the accumulator unless the value compares beyond it ignores a NaN value,
            # and the accumulator never is NaN (it starts at +-inf), as fmax does; a conditional
            # rather than the max builtin, an overload Numba compiles apart
            return f"{s.name} = ({v}) if ({v}) {'>' if op == 'fmax' else '<'} {s.name} else {s.name}"
        # max/min propagate NaN, as the elementwise operation does
        return f"{s.name} = {expr(REDUCE_OPS[op], [v, s.name], dt, {})}"

    def viewed(self, buf: str, index) -> tuple:
        """(buffer or view, index) addressing element ``index`` of ``buf``."""
        for (b, rest), name in self.views.items():
            if b == buf:
                lane = _minus(index, rest)
                if lane is not None:
                    return name, lane
        return buf, index

    def value(self, v) -> str:
        if self.views:
            v = rebuild(v, lambda x: Load(*self.viewed(x.buf, x.index), x.dtype) if isinstance(x, Load) else x)
        return value_text(v, _index, lambda o, args: expr(o.op, args, o.operand_dtype(), dict(o.params)))


def _terms(e) -> list:
    """The terms of a sum ``e``."""
    return _terms(e.a) + _terms(e.b) if isinstance(e, IBin) and e.op == "+" else [e]


def _minus(index, rest):
    """``index - rest`` when ``rest``'s terms are among ``index``'s, else None."""
    terms = _terms(index)
    for t in _terms(rest):
        if t not in terms:
            return None
        terms.remove(t)
    return functools.reduce(iadd, terms, 0)


def _offset_views(loop: Loop, first: int) -> dict:
    """{(buffer, offset): view name} for an innermost loop that stores: each buffer it
    addresses at ``offset + lane`` with an offset computed before the loop (a rerolled
    step's row). Addressed through a view ``buffer[offset:]`` at the lane, LLVM sees an
    induction variable where it saw a sum that might wrap, and vectorizes the loop with
    runtime alias checks instead of giving up (W5's gradient: 3x the loop's speed)."""
    body = loop.body
    if any(isinstance(s, (Loop, Guard)) for s in body) or not any(isinstance(s, Store) for s in body):
        return {}
    inner = {loop.var} | {s.name for s in body if isinstance(s, Let)}
    found: dict = {}

    def see(buf: str, index) -> None:
        terms = _terms(index)
        if Sym(loop.var) not in terms:
            return
        rest = [t for t in terms if t != Sym(loop.var)]
        if rest and not all(isinstance(t, int) for t in rest) and not inner & {n for t in rest for n in isyms(t)}:
            found.setdefault((buf, functools.reduce(iadd, rest, 0)), f"w{first + len(found)}")

    for s in body:
        if isinstance(s, Store):
            see(s.buf, s.index)
        for x in stmt_values(s):
            for v in values(x):
                if isinstance(v, Load):
                    see(v.buf, v.index)
    return found


def _index(e) -> str:
    """An index as uint64. A signed index makes Numba select ``i + len`` for negative i;
    inside a prange body LLVM cannot prove i >= 0 (the chunk bounds come from the
    scheduler), so it kept that select per lane and turned every load and store into a
    gather/scatter (W1: 2-3x slower). Generated indices never wrap, so unsigned is exact."""
    return str(e) if isinstance(e, int) else f"np.uint64({e})"


_COMPILED: dict = {}  # cache: structural hash -> the compiled function of kernels of that structure


def compiled(k: Kernel) -> Callable:
    """The compiled function of kernel ``k``, callable from Python (prepared with sin/cos
    exact: one module per distinct kernel). Kernels of one structure share it without being
    prepared again (a shape-symbolic graph at each new size: its kernels are the same)."""
    from ..runtime.kernel_cache import load_module
    from .cpu_link import link_chunks
    key = structural_hash(k)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = load_module(render(prepare(k), from_python=True)).kernel
        link_chunks(fn)
        _COMPILED[key] = fn
    return fn
