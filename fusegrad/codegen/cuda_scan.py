"""The cuda backend's sequential calls as kernels: ``cumsum`` and ``argmax``/``argmin``
with one thread per row (the scan or search along the axis runs serially in it, as
cpu_index's loops do, NaN rules included; cuda_solve's sorts, searches and triangular
solves likewise), and the counter-based random draws
``uniform``/``normal`` with one thread per element (the same SplitMix64 stream as
fusegrad.ir.prims.creation and the cpu backend, so draws equal eager's)."""
from __future__ import annotations

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from ..runtime.kernel_cache import load_module
from . import cuda_solve
from .backend import Unsupported
from .cpu_index import _Lines, _splitmix, argext_axis
from .value_text import linear
from .cpu_scalar import literal
from .cuda_index import rows
from .cuda_render import Config, grid_kernel, grid_of



def _cumsum(e: Eqn) -> tuple:
    (x,) = e.inputs
    if x.dtype.kind == "b" or x.dtype != e.out.dtype:
        raise Unsupported(f"cuda backend: cumsum of {x.dtype}")
    axis = e.params["axis"] % x.ndim
    lines, _, n_rows, at = rows(x, axis)
    dt = x.dtype.name
    return lines + [f"acc = {literal(0, x.dtype)}", f"for k in range({x.shape[axis]}):",
                    f"    acc = np.{dt}(acc + x[{at('k')}])", f"    out[{at('k')}] = acc"], n_rows


def _argext(e: Eqn) -> tuple:
    (x,) = e.inputs
    axis = argext_axis(e, "cuda")
    op = ">" if e.prim is P.argmax else "<"
    lines, r, n_rows, at = rows(x, axis)
    lines += [f"best = x[{at('0')}]", "bi = 0", f"for k in range(1, {x.shape[axis]}):", f"    v = x[{at('k')}]"]
    if x.dtype.kind == "f":  # the first NaN wins, as in NumPy
        lines += ["    if best != best:", "        break", f"    if v {op} best or v != v:"]
    else:
        lines += [f"    if v {op} best:"]
    lines += ["        best = v", "        bi = k"]
    keep = [r[d] for d in range(x.ndim) if d != axis or e.params["keepdims"]]
    lines.append(f"out[{linear(keep, e.out.shape) if e.out.shape else '0'}] = np.int64(bi)")
    return lines, n_rows


def _random(e: Eqn) -> tuple:
    (key,) = e.inputs
    out = e.out
    if not isinstance(key, Var) or key.size != 2 or key.dtype.kind not in "iu":
        raise Unsupported("cuda backend: random key is not an int array of 2")
    if out.dtype.kind != "f":
        raise Unsupported(f"cuda backend: random of {out.dtype}")
    L = _Lines("t")
    L("c = np.uint64(np.int64(x[0]))")
    _splitmix(L, "c", "sk")
    L("off = np.uint64(np.int64(x[1]))")
    scale = "np.float64(1.0 / 9007199254740992.0)"
    if e.prim is P.uniform:
        _splitmix(L, "((np.uint64(flat) + off) ^ sk)", "z")
        L(f"out[flat] = np.{out.dtype.name}(np.float64(z >> np.uint64(11)) * {scale})")
    else:
        _splitmix(L, "((np.uint64(2 * flat) + off) ^ sk)", "z")
        L(f"u1 = np.float64(1.0) - np.float64(z >> np.uint64(11)) * {scale}")
        _splitmix(L, "((np.uint64(2 * flat + 1) + off) ^ sk)", "z")
        L(f"u2 = np.float64(z >> np.uint64(11)) * {scale}")
        L(f"out[flat] = np.{out.dtype.name}(math.sqrt(np.float64(-2.0) * math.log(u1)) * "
          "math.cos(np.float64(2.0 * math.pi) * u2))")
    return L.lines, out.size


# primitive -> its plan: (kernel body lines, number of threads)
_PLANS = {P.cumsum: _cumsum, P.argmax: _argext, P.argmin: _argext, P.uniform: _random, P.normal: _random,
          **{p: cuda_solve.plan for p in cuda_solve.PLANS}}
SCANS = tuple(_PLANS)


class Scan:
    """One cumsum, argmax/argmin, random draw, sort, search or triangular solve as a
    kernel over its rows, columns or elements."""

    def __init__(self, e: Eqn, cfg: Config, title: str):
        self.eqn, self.cfg, self.title = e, cfg, title
        if not all(isinstance(v, Var) for v in e.inputs):
            raise Unsupported(f"cuda backend: {e.prim.name} of a constant")
        body, self.total = _PLANS[e.prim](e)
        self.src = grid_kernel(["out", "x", "y"][:1 + len(e.inputs)], self.total, body, f"{e.prim.name} ({title})",
                               imports=["math"] if e.prim in (P.normal, P.cholesky) else ())
        self.fn = load_module(self.src).kernel

    def writes(self) -> list:
        return [self.eqn.out]

    def reads(self) -> list:
        return list(self.eqn.inputs)

    def run(self, env: dict) -> None:
        if self.total and self.eqn.out.size:
            self.fn[grid_of(self.total, self.cfg)](env[self.eqn.out.id], *[env[v.id] for v in self.eqn.inputs])

    def source(self) -> str:
        return f"# {self.title}: {self.eqn.prim.name}\n{self.src}"
