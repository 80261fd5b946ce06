"""The Numba-CUDA renderer: the only module that knows CUDA kernel syntax. One
``kir.Kernel`` becomes one module holding one ``@cuda.jit`` function
``kernel(<buffers>, <symbols>)`` (flat 1-d device arrays, int symbols); ``render_matmul``
writes the tiled shared-memory GEMM that library-call matmuls run as.

Mapping of the kernel IR onto the grid (``Rendered.block`` says which one a kernel uses):
- A top-level perfect loop nest (every loop kind alike) is linearized and split over the
  threads by a grid-stride loop: one thread per element of an elementwise kernel, or per
  output element of a reducing kernel whose reductions are short (serial loops per thread).
- A reducing kernel with long reductions (over ``BLOCK_MIN`` elements, or a symbolic
  extent) runs one block per output element (a block-stride loop over the outer nest):
  the block's threads split each reduction loop, then fold their partial accumulators by
  a tree reduction in shared memory, so every thread holds the result for the phases and
  stores after it (stores of per-row values by thread 0).
- A full reduction to single values (no outer loops, one reduction phase) with long
  reductions is split over the whole grid: per-block partials, then the block that takes
  the last ticket folds them and finishes (``Rendered.scratch``: the buffers it needs). A
  multi-phase full reduction (e.g. ``x / x.sum()`` over all of ``x``) needs a grid-wide
  barrier between phases and stays one block's work.

Scalar operations keep NumPy's semantics (scalar_ops): results are converted to their
dtype (integer arithmetic wraps as NumPy's does), max/min propagate NaN, rounding is to
nearest even; transcendentals call libdevice on the device, NumPy on the simulator
(``SIM_MATH``; Python's ``math`` raises where CUDA returns inf/NaN). Kernels are rendered
in canonical form (kir.canonical), so kernels equal up to renaming share one module and
compile once per process (cached on disk by runtime.kernel_cache)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..ir.scalar_ops import REDUCE_OPS, reduce_identity
from .backend import Unsupported
from .cpu_scalar import int_power, literal
from .kir import (Acc, Assign, Extern, Guard, IExpr, Kernel, Let, Loop, Store, Update, canonical, ieval, iprod, stmts,
                  verify)
from .value_text import value_text

# A reduction over at least this many elements is split over a block's threads.
BLOCK_MIN = 64


@dataclass(frozen=True)
class Config:
    """Launch geometry: ``threads`` per block (a power of two: the tree reductions halve it),
    at most ``max_blocks`` blocks (grid-stride loops cover the rest), ``tile`` the GEMM's
    thread block edge and ``reg`` the outputs each GEMM thread computes per dimension;
    ``sim`` renders for the simulator (NumPy math, small blocks)."""
    threads: int
    max_blocks: int
    tile: int
    reg: int
    sim: bool


DEVICE = Config(threads=256, max_blocks=4096, tile=16, reg=4, sim=False)
SIMULATOR = Config(threads=32, max_blocks=4, tile=4, reg=2, sim=True)


@dataclass
class Rendered:
    """A kernel module's ``source``; ``block``: one block per outer element (see module
    docstring); ``totals``: each top-level nest's element count (over ``syms``, the
    canonical symbol names in parameter order). ``scratch``: the dtypes of the per-block
    partial buffers (``max_blocks`` elements each) a grid-wide reduction takes after the
    kernel's own parameters, followed by its int32 ticket counter (one element, zero
    before the first launch; the kernel leaves it zero)."""
    source: str
    block: bool
    totals: list
    syms: tuple
    scratch: tuple = ()

    def grid(self, cfg: Config, sym_values: list) -> tuple:
        """(blocks, threads) of a launch with these symbol values."""
        env = dict(zip(self.syms, sym_values))
        n = max([ieval(t, env) for t in self.totals] + [1])
        blocks = n if self.block and not self.scratch else -(-n // cfg.threads)
        return max(1, min(blocks, cfg.max_blocks)), cfg.threads


def _errstate(fn: Callable) -> Callable:
    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return quiet


# The simulator's transcendentals: NumPy's (inf/NaN where CUDA gives them), quietly.
SIM_MATH = {name: _errstate(getattr(np, np_name)) for name, np_name in (
    ("exp", "exp"), ("expm1", "expm1"), ("log", "log"), ("log1p", "log1p"), ("sin", "sin"), ("cos", "cos"),
    ("tan", "tan"), ("tanh", "tanh"), ("sqrt", "sqrt"), ("pow", "power"), ("atan2", "arctan2"), ("fmod", "fmod"),
    ("floor", "floor"), ("ceil", "ceil"), ("trunc", "trunc"), ("rint", "rint"))}
SIM_MATH["erf"] = _errstate(lambda x: type(x)(math.erf(x)))


# reduce_precision's formats: (mantissa bits with the implicit one, exponent of the smallest
# normal, first magnitude rounding to inf), the arguments of cuda_half.round_half
HALF_FORMATS = {"float16": (11, -14, 65520.0), "bfloat16": (8, -126, (2.0 - 2.0 ** -8) * 2.0 ** 127)}


# ---------------------------------------------------------------- scalar expressions
class _Scalars:
    """Writes one element of each scalar operation; collects the module-level math names."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.globals: dict = {}

    def math(self, name: str, dt: np.dtype) -> str:
        """The symbol bound to math function ``name`` for float dtype ``dt``."""
        sym = f"_{name}_{dt.name}"
        if self.cfg.sim:
            self.globals[sym] = f"_SIM[{name!r}]"
        else:
            self.globals[sym] = f"libdevice.{name}{'f' if dt == np.float32 else ''}"
        return sym

    def call(self, name: str, args: list, dt: np.dtype) -> str:
        if dt.kind != "f":  # e.g. exp of an int: NumPy computes in float64
            args, dt = [f"np.float64({a})" for a in args], np.dtype(np.float64)
        return f"{self.math(name, dt)}({', '.join(args)})"

    def expr(self, op: str, a: list, dt: np.dtype, out: np.dtype, params: dict) -> str:
        """``op`` on operand expressions ``a`` of dtype ``dt``, as a value of dtype ``out``."""
        dt, out = np.dtype(dt), np.dtype(out)
        if op == "reduce_precision":
            bits, emin, big = HALF_FORMATS[np.dtype(params["dtype"]).name]
            self.globals["_round_half"] = "_cuda_half.round_half"
            return f"np.{out.name}(_round_half(np.float64({a[0]}), {bits}, {emin}, {big!r}))"
        if op == "cast":
            to = np.dtype(params["dtype"])
            return f"({a[0]} != 0)" if to.kind == "b" else f"np.{to.name}({a[0]})"
        e = self._raw(op, a, dt)
        return e if out.kind == "b" else f"np.{out.name}({e})"

    def _raw(self, op: str, a: list, dt: np.dtype) -> str:
        one, zero = literal(1, dt), literal(0, dt)
        if op in _INFIX:
            return _INFIX[op].format(*a)
        if op in ("floor", "ceil", "trunc", "round"):
            return a[0] if dt.kind in "iub" else self.call("rint" if op == "round" else op, a, dt)
        if op in ("exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "sqrt", "erf", "atan2", "fmod"):
            return self.call(op, a, dt)
        if op == "pow":
            return self.call("pow", a, dt) if dt.kind == "f" else int_power(a) if dt.kind == "i" else \
                f"({a[0]} ** {a[1]})"
        if op == "rsqrt":
            return f"({literal(1, dt) if dt.kind == 'f' else '1.0'} / {self.call('sqrt', a, dt)})"
        if op == "sigmoid":
            return f"({one} / ({one} + {self.call('exp', [f'-{a[0]}'], dt)}))"
        if op == "abs":
            return f"abs({a[0]})"
        if op == "relu":
            return f"({zero} if {a[0]} < {zero} else {a[0]})"
        if op == "sign":
            return f"({one} if {a[0]} > {zero} else ({literal(-1, dt)} if {a[0]} < {zero} else {zero}))"
        if op in ("max", "min"):
            cmp = ">" if op == "max" else "<"
            x, y = a
            if dt.kind != "f":
                return f"({x} if {x} {cmp} {y} else {y})"
            return f"({x} if ({x} {cmp} {y} or {x} != {x}) else {y})"  # NaN in either wins, as in NumPy
        raise Unsupported(f"cuda backend: no CUDA lowering of scalar operation {op!r}")


_INFIX = {"copy": "{0}", "second": "{1}", "neg": "(-{0})", "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
          "div": "({0} / {1})", "floordiv": "({0} // {1})", "mod": "({0} % {1})", "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})",
          "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})", "and": "({0} and {1})",
          "or": "({0} or {1})", "xor": "({0} != {1})", "not": "(not {0})", "isnan": "({0} != {0})",
          "where": "({1} if {0} else {2})", "fma": "cuda.fma({0}, {1}, {2})"}


# ---------------------------------------------------------------- loop kernels
def _nest(body: list) -> tuple:
    """(loops, innermost body) of the perfect loop nest ``body`` starts with: loops that
    are the only statement of their enclosing body."""
    loops = []
    while len(body) == 1 and isinstance(body[0], Loop):
        loops.append(body[0])
        body = body[0].body
    return loops, body


def _parts(k: Kernel) -> list:
    """The top-level work items: (outer loops, body) pairs. A body that declares
    accumulators at the top level (a full reduction) is one item without outer loops."""
    if any(isinstance(s, Acc) for s in k.body):
        return [([], k.body)]
    parts, lead = [], []
    for s in k.body:
        if isinstance(s, Loop):
            parts.append(_nest([s]))
        else:
            lead.append(s)
    return ([([], lead)] if lead else []) + parts


def _reduction_extent(body: list) -> Optional[int]:
    """The largest element count of the loop nests in ``body`` (None if one is symbolic)."""
    best = 0
    for s in body:
        if isinstance(s, Loop):
            loops, _ = _nest([s])
            n = iprod([lp.extent for lp in loops])
            if not isinstance(n, int):
                return None
            best = max(best, n)
    return best


def render(k: Kernel, cfg: Config) -> Rendered:
    """The module source of loop kernel ``k`` (verified; see the module docstring)."""
    k = canonical(verify(k))
    parts = _parts(k)
    reds = [_reduction_extent(body) for _, body in parts if any(isinstance(s, Loop) for s in body)]
    block = any(r is None or r >= BLOCK_MIN for r in reds)
    w = _Writer(cfg, block)
    lines = []
    loops_in = [s for s in parts[0][1] if isinstance(s, Loop)] if len(parts) == 1 and not parts[0][0] else []
    if block and len(loops_in) == 1:  # one reduction to single values: split over the grid
        lines += w.grid_reduction(parts[0][1])
        totals = [iprod([lp.extent for lp in _nest(loops_in)[0]])]
    else:
        for loops, body in parts:
            lines += w.part(loops, body)
        totals = [iprod([lp.extent for lp in loops]) for loops, _ in parts]
    if len(k.params()) != len(k.buffers):  # kir_passes' scratch (rerolled chains): the cuda backend does not run them
        raise Unsupported(f"cuda renderer: kernel {k.name} has temp buffers")
    params = [b.name for b in k.params()] + list(k.syms) + [f"part_{a}" for a in w.partials] + \
        (["tickets"] if w.partials else [])
    head = ["# generated by fusegrad's cuda renderer from kernel IR", "import math", "", "import numpy as np",
            "from numba import cuda"]
    if "_round_half" in w.sc.globals:
        head.append("from fusegrad.codegen import cuda_half as _cuda_half")
    head += (["from fusegrad.codegen.cuda_render import SIM_MATH as _SIM"] if cfg.sim
             else ["from numba.cuda import libdevice"])
    head += [f"{s} = {v}" for s, v in sorted(w.sc.globals.items())]
    head += ["", "", "@cuda.jit(cache=True)", f"def kernel({', '.join(params)}):"]
    pre = ["    tid = cuda.threadIdx.x"] + [f"    {n} = cuda.shared.array({cfg.threads}, np.{dt.name})"
                                          for n, dt in w.shared.items()]
    return Rendered("\n".join(head + pre + lines) + "\n", block, totals, k.syms, tuple(w.partials.values()))


class _Writer:
    def __init__(self, cfg: Config, block: bool):
        self.cfg, self.block = cfg, block
        self.sc = _Scalars(cfg)
        self.accs: dict = {}  # accumulator name -> (reduce op, dtype)
        self.shared: dict = {}  # shared array name -> dtype (block mode)
        self.partials: dict = {}  # accumulator -> dtype of its per-block partials (grid reduction)
        self.grid = False  # reduction loops stride over the whole grid (grid_reduction)

    # -- structure
    def part(self, loops: list, body: list) -> list:
        """One top-level item: a grid- (or block-) stride loop over its outer nest."""
        pad = "    "
        if self.block:
            start, step = "cuda.blockIdx.x", "cuda.gridDim.x"
        else:
            start, step = "cuda.blockIdx.x * cuda.blockDim.x + tid", "cuda.gridDim.x * cuda.blockDim.x"
        total = iprod([lp.extent for lp in loops])
        out = [f"{pad}for flat in range({start}, {total}, {step}):"]
        out += _unflatten(loops, "flat", pad * 2)
        out += list(self.body(body, 2, top=True))
        return out

    def grid_reduction(self, body: list) -> list:
        """A full reduction (no outer loops, one reduction loop nest) over every block:
        each block folds its share, thread 0 writes the block's partials and takes a
        ticket; the block that takes the last one folds the partials and runs the rest of
        the body (as the threadFenceReduction sample of the CUDA toolkit does)."""
        k = next(i for i, s in enumerate(body) if isinstance(s, Loop))
        self.grid = True
        out = list(self.body(body[:k], 1, top=True)) + list(self.cooperative(body[k], 1))
        self.grid = False
        accs = list(dict.fromkeys(u.name for u in stmts(body[k].body) if isinstance(u, Update)))
        self.shared["last"] = np.dtype(np.int32)
        out.append("    if tid == 0:")
        for a in accs:
            self.partials[a] = self.accs[a][1]
            out.append(f"        part_{a}[cuda.blockIdx.x] = {a}")
        out += ["        cuda.threadfence()", "        ticket = cuda.atomic.add(tickets, 0, 1)",
                "        last[0] = 1 if ticket == cuda.gridDim.x - 1 else 0", "    cuda.syncthreads()",
                "    if last[0] == 1:"]
        for a in accs:
            op, dt = self.accs[a]
            out += [f"        {a} = {literal(reduce_identity(op, dt), dt)}",
                    "        for blk in range(tid, cuda.gridDim.x, cuda.blockDim.x):",
                    f"            {a} = {self.combine(op, a, f'part_{a}[blk]', dt)}"]
        out += list(self._tree(accs, "        "))
        out += list(self.body(body[k + 1:], 2, top=True))
        out += ["        if tid == 0:", "            tickets[0] = 0"]
        return out

    def body(self, body: list, depth: int, top: bool = False):
        pad = "    " * depth
        for s in body:
            if isinstance(s, Loop):
                if self.block and top:
                    yield from self.cooperative(s, depth)
                else:
                    yield f"{pad}for {s.var} in range({s.extent}):"
                    yield from self.body(s.body, depth + 1) if s.body else iter([f"{pad}    pass"])
            elif isinstance(s, Guard):
                yield f"{pad}if {self.value(s.cond)}:"
                yield from self.body(s.body, depth + 1, top) if s.body else iter([f"{pad}    pass"])
            elif isinstance(s, Assign):
                yield f"{pad}{s.name} = {self.value(s.value)}"
            elif isinstance(s, Store):
                store = f"{s.buf}[{s.index}] = {self.value(s.value)}"
                # a per-block value: one thread stores it
                yield f"{pad}if tid == 0:\n{pad}    {store}" if self.block and top else f"{pad}{store}"
            elif isinstance(s, Acc):
                dt = np.dtype(s.dtype)
                self.accs[s.name] = (s.op, dt)
                yield f"{pad}{s.name} = {literal(reduce_identity(s.op, dt), dt)}"
            elif isinstance(s, Update):
                op, dt = self.accs[s.name]
                v = self.value(s.value)
                if np.dtype(s.value.dtype) != dt:
                    v = f"np.{dt.name}({v})"
                yield f"{pad}{s.name} = {self.combine(op, s.name, v, dt)}"
            elif isinstance(s, Let):
                yield f"{pad}{s.name} = {s.expr}"
            elif isinstance(s, Extern):
                raise Unsupported(f"cuda renderer: library call {s.fn} inside a loop kernel")

    def cooperative(self, s: Loop, depth: int):
        """A reduction loop nest split over the block's threads, then the accumulators it
        updates folded across the block (tree reduction in shared memory)."""
        pad = "    " * depth
        loops, inner = _nest([s])
        total = iprod([lp.extent for lp in loops])
        start, step = ("cuda.blockIdx.x * cuda.blockDim.x + tid", "cuda.gridDim.x * cuda.blockDim.x") if self.grid \
            else ("tid", "cuda.blockDim.x")
        yield f"{pad}for red in range({start}, {total}, {step}):"
        yield from (ln for ln in _unflatten(loops, "red", pad + "    "))
        yield from self.body(inner, depth + 1) if inner else iter([f"{pad}    pass"])
        yield from self._tree(list(dict.fromkeys(u.name for u in stmts(s.body) if isinstance(u, Update))), pad)

    def _tree(self, updated: list, pad: str):
        """Fold accumulators ``updated`` across the block's threads; every thread gets the
        result."""
        if not updated:
            return
        for a in updated:
            self.shared[f"sh_{a}"] = self.accs[a][1]
            yield f"{pad}sh_{a}[tid] = {a}"
        yield f"{pad}cuda.syncthreads()"
        width = self.cfg.threads // 2
        while width:
            yield f"{pad}if tid < {width}:"
            for a in updated:
                op, dt = self.accs[a]
                yield f"{pad}    sh_{a}[tid] = {self.combine(op, f'sh_{a}[tid]', f'sh_{a}[tid + {width}]', dt)}"
            yield f"{pad}cuda.syncthreads()"
            width //= 2
        for a in updated:
            yield f"{pad}{a} = sh_{a}[0]"
        yield f"{pad}cuda.syncthreads()"  # before the shared arrays are written again

    def combine(self, op: str, acc: str, v: str, dt: np.dtype) -> str:
        return self.sc.expr(REDUCE_OPS[op], [acc, v], dt, dt, {})

    # -- values
    def value(self, v) -> str:
        return value_text(v, str, lambda o, args: self.sc.expr(o.op, args, o.operand_dtype(), o.dtype, dict(o.params)))


def _unflatten(loops: list, flat: str, pad: str) -> list:
    """Lines setting each loop's variable from the linear index ``flat`` (row-major)."""
    lines, rest = [], flat
    for k in range(len(loops) - 1, -1, -1):
        lp = loops[k]
        if k == 0:
            lines.append(f"{pad}{lp.var} = {rest}")
        elif lp.extent == 1:
            lines.append(f"{pad}{lp.var} = 0")
        else:
            lines.append(f"{pad}{lp.var} = {rest} % {_paren(lp.extent)}")
            lines.append(f"{pad}q{k} = {rest} // {_paren(lp.extent)}")
            rest = f"q{k}"
    return lines


def _paren(e: IExpr) -> str:
    return str(e) if isinstance(e, int) else f"({e})"


# ---------------------------------------------------------------- matmul
def render_matmul(dtype: np.dtype, ta: bool, tb: bool, alpha: float, beta: Optional[float], cfg: Config) -> str:
    """A tiled shared-memory GEMM ``c = alpha * op(a) @ op(b) (+ beta * x)``:
    ``kernel(a, b, x, c, aoff, boff, m, n, k)`` on (tile, tile) threads, grid (n blocks, m
    blocks, batch) of ``matmul_block(cfg)`` outputs each way; each thread accumulates
    ``cfg.reg`` x ``cfg.reg`` outputs in registers (rows ``ty + i * tile``, columns
    ``tx + j * tile`` of the block, so neighbouring threads load neighbouring elements).
    ``aoff`` and ``boff`` are each batch's element offsets into ``a`` and ``b`` (batch
    broadcasting); ``op(a)`` is ``a`` stored (k, m) when ``ta``, likewise ``b`` stored
    (n, k) when ``tb``. ``beta=None``: no ``x`` term (``x`` is not read)."""
    dt, T, R = np.dtype(dtype).name, cfg.tile, cfg.reg
    a_at = "ao + kk * m + row" if ta else "ao + row * k + kk"
    b_at = "bo + col * k + kk" if tb else "bo + kk * n + col"
    zero = literal(0, dtype)
    res = f"{literal(alpha, dtype)} * acc[i, j]" if alpha != 1 else "acc[i, j]"
    if beta is not None:
        res = f"{res} + {literal(beta, dtype)} * x[o]"
    return "\n".join([
        "# generated by fusegrad's cuda renderer: tiled GEMM", "import numpy as np", "from numba import cuda", "", "",
        "@cuda.jit(cache=True)",
        "def kernel(a, b, x, c, aoff, boff, m, n, k):",
        f"    sa = cuda.shared.array(({T * R}, {T}), np.{dt})",
        f"    sb = cuda.shared.array(({T}, {T * R}), np.{dt})",
        f"    acc = cuda.local.array(({R}, {R}), np.{dt})",
        f"    av = cuda.local.array({R}, np.{dt})",
        "    tx = cuda.threadIdx.x",
        "    ty = cuda.threadIdx.y",
        f"    row0 = cuda.blockIdx.y * {T * R}",
        f"    col0 = cuda.blockIdx.x * {T * R}",
        "    bi = cuda.blockIdx.z",
        "    ao = aoff[bi]",
        "    bo = boff[bi]",
        f"    for i in range({R}):",
        f"        for j in range({R}):",
        f"            acc[i, j] = {zero}",
        f"    for t0 in range(0, k, {T}):",
        "        kk = t0 + tx",
        f"        for i in range({R}):",
        f"            row = row0 + ty + i * {T}",
        f"            sa[ty + i * {T}, tx] = a[{a_at}] if row < m and kk < k else {zero}",
        "        kk = t0 + ty",
        f"        for j in range({R}):",
        f"            col = col0 + tx + j * {T}",
        f"            sb[ty, tx + j * {T}] = b[{b_at}] if kk < k and col < n else {zero}",
        "        cuda.syncthreads()",
        f"        for p in range({T}):",
        f"            for i in range({R}):",
        f"                av[i] = sa[ty + i * {T}, p]",
        f"            for j in range({R}):",
        f"                bv = sb[p, tx + j * {T}]",
        f"                for i in range({R}):",
        "                    acc[i, j] += av[i] * bv",
        "        cuda.syncthreads()",
        f"    for i in range({R}):",
        f"        row = row0 + ty + i * {T}",
        f"        for j in range({R}):",
        f"            col = col0 + tx + j * {T}",
        "            if row < m and col < n:",
        "                o = (bi * m + row) * n + col",
        f"                c[o] = np.{dt}({res})",
    ]) + "\n"


def matmul_block(cfg: Config) -> int:
    """The outputs per block edge of render_matmul's kernel."""
    return cfg.tile * cfg.reg


# ---------------------------------------------------------------- element-parallel calls
def grid_kernel(params: list, total: int, body: list, title: str, imports: tuple = ()) -> str:
    """A kernel running ``body`` (source lines for depth 0, reading the element number
    ``flat``) once per element of ``range(total)``, grid-stride over the threads;
    ``imports``: modules the body uses besides numpy (as np)."""
    return "\n".join([
        f"# generated by fusegrad's cuda renderer: {title}", *(f"import {m}" for m in imports),
        "import numpy as np", "from numba import cuda", "", "",
        "@cuda.jit(cache=True)", f"def kernel({', '.join(params)}):",
        f"    for flat in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, {total}, "
        "cuda.gridDim.x * cuda.blockDim.x):",
        *("        " + ln for ln in body)]) + "\n"


def grid_of(total: int, cfg: Config) -> tuple:
    """(blocks, threads) of a grid_kernel launch over ``total`` elements."""
    return max(1, min(-(-total // cfg.threads), cfg.max_blocks)), cfg.threads


def atomic_add(buf: str, index: str, value: str) -> str:
    """A statement adding ``value`` to ``buf[index]`` atomically (threads may collide)."""
    return f"cuda.atomic.add({buf}, {index}, {value})"
