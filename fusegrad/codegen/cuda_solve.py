"""The cuda backend's sorting and triangular linear algebra as kernels, one thread per
row, column or matrix, each running the serial algorithm: ``argsort`` (a stable insertion
sort of the row's indices, NaN above every number as in PyTorch), ``searchsorted`` (a
binary search per value, PyTorch's, which places NaN), ``cholesky`` (the lower factor; a
non-positive pivot leaves NaN, which ``linalg.cholesky`` reports as eager does) and
``triangular_solve`` (substitution per right-hand column, batch axes broadcasting).
Each plan gives the body of a cuda_render.grid_kernel over ``out`` and the inputs
``x``, ``y`` and the number of threads."""
from __future__ import annotations

from ..ir import prims as P
from ..ir.graph import Eqn
from .backend import Unsupported
from .cpu_index import _Lines
from .cuda_index import coords, rows
from .value_text import linear


def _above(a: str, b: str) -> str:
    """``a`` sorts strictly after ``b`` (NaN after every number)."""
    return f"({a} > {b} or ({a} != {a} and {b} == {b}))"


def _argsort(e: Eqn) -> tuple:
    (x,) = e.inputs
    axis = e.params["axis"] % x.ndim
    lines, _, total, at = rows(x, axis)
    n = x.shape[axis]
    L = _Lines("s")
    for ln in lines:
        L(ln)
    L(f"for k in range({n}):")
    L(f"    out[{at('k')}] = np.int64(k)")
    L(f"for k in range(1, {n}):")
    L(f"    key = out[{at('k')}]")
    L(f"    kv = x[{at('key')}]")
    L("    j = k - 1")
    L("    while j >= 0:")
    L(f"        ji = out[{at('j')}]")
    L(f"        jv = x[{at('ji')}]")
    # stable: an element moves past earlier ones only when strictly out of order
    L(f"        if not {_above('kv', 'jv') if e.params['descending'] else _above('jv', 'kv')}:")
    L("            break")
    L(f"        out[{at('j + 1')}] = ji")
    L("        j -= 1")
    L(f"    out[{at('j + 1')}] = key")
    return L.lines, total


def _searchsorted(e: Eqn) -> tuple:
    seq, v = e.inputs
    n, m = seq.shape[-1], v.shape[-1] if v.ndim else 1
    base = "0" if seq.ndim == 1 else f"(flat // {m}) * {n}"
    # PyTorch's search: move right while !(s >= val) (right: !(s > val)), which places NaN
    # values last and decides where the sequence holds NaN
    go_right = f"not (s {'>' if e.params['right'] else '>='} val)"
    return ["val = y[flat]", f"b = {base}", "lo = 0", f"hi = {n}", "while lo < hi:", "    mid = (lo + hi) // 2",
            "    s = x[b + mid]", f"    if {go_right}:", "        lo = mid + 1", "    else:", "        hi = mid",
            f"out[flat] = np.{e.out.dtype.name}(lo)"], v.size


def _cholesky(e: Eqn) -> tuple:
    (a,) = e.inputs
    n = a.shape[-1]
    dt = f"np.{e.out.dtype.name}"
    L = _Lines("c")
    L(f"b = flat * {n * n}")
    L(f"for j in range({n}):")
    L(f"    s = x[b + j * {n} + j]")
    L("    for k in range(j):")
    L(f"        s -= out[b + j * {n} + k] * out[b + j * {n} + k]")
    L(f"    d = math.sqrt(s) if s > 0 else {dt}(np.nan)")  # not positive-definite: NaN from here on
    L(f"    out[b + j * {n} + j] = d")
    L(f"    for i in range(j + 1, {n}):")
    L(f"        t = x[b + i * {n} + j]")
    L("        for k in range(j):")
    L(f"            t -= out[b + i * {n} + k] * out[b + j * {n} + k]")
    L(f"        out[b + i * {n} + j] = t / d")
    L("    for i in range(j):")
    L(f"        out[b + i * {n} + j] = {dt}(0)")
    return L.lines, a.size // (n * n) if n else 0


def _batch_index(shape: tuple, batch: tuple, names: list) -> str:
    """The batch number, in an operand with batch axes ``shape``, of the output batch
    element at coordinates ``names`` (over ``batch``), its size-1 axes broadcasting."""
    lead = len(batch) - len(shape)
    return linear([names[lead + d] if s != 1 else "0" for d, s in enumerate(shape)], shape) if shape else "0"


def _triangular_solve(e: Eqn) -> tuple:
    a, b = e.inputs
    out = e.out
    n, r = out.shape[-2], out.shape[-1]
    batch = out.shape[:-2]
    lines, names = coords(batch + (r,))
    c, names = names[-1], names[:-1]
    ab = f"({_batch_index(a.shape[:-2], batch, names)}) * {n * n}"
    bb = f"({_batch_index(b.shape[:-2], batch, names)}) * {n * r}"
    ob = f"({linear(names, batch) if batch else '0'}) * {n * r}"
    L = _Lines("t")
    for ln in lines + [f"ab = {ab}", f"bb = {bb}", f"ob = {ob}"]:
        L(ln)
    if e.params["upper"]:  # back substitution from the last row
        L(f"for i in range({n - 1}, -1, -1):")
        L(f"    t = y[bb + i * {r} + {c}]")
        L(f"    for k in range(i + 1, {n}):")
    else:
        L(f"for i in range({n}):")
        L(f"    t = y[bb + i * {r} + {c}]")
        L("    for k in range(i):")
    L(f"        t -= x[ab + i * {n} + k] * out[ob + k * {r} + {c}]")
    L(f"    out[ob + i * {r} + {c}] = t / x[ab + i * {n} + i]")
    return L.lines, out.size // n if n else 0


PLANS = {P.argsort: _argsort, P.searchsorted: _searchsorted, P.cholesky: _cholesky,
         P.triangular_solve: _triangular_solve}


def plan(e: Eqn) -> tuple:
    """(kernel body lines, number of threads) of ``e``."""
    if any(v.dtype.kind == "c" for v in e.inputs) or (e.prim in (P.cholesky, P.triangular_solve)
                                                       and e.out.dtype.kind != "f"):
        raise Unsupported(f"cuda backend: {e.prim.name} of {e.out.dtype}")
    return PLANS[e.prim](e)
