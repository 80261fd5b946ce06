"""The cuda backend's indexing calls as element-parallel kernels: ``index``,
``index_put`` (accumulating with atomic adds), ``embed``, ``gather``, ``scatter_add`` and
``scatter_reduce`` (atomic add, max or min where numba-cuda has one for the dtype, else a
thread per row of the index). One thread per element of the indexed region; index arrays
are read, wrapped when negative and range-checked in the kernel, which flags an
out-of-range index in a one-element error buffer instead of reading through it; the host
reads the flag after the launch and raises eager's IndexError. The region analysis is the
cpu backend's (cpu_index._key_plan); the kernels are written by cuda_render.grid_kernel."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from ..runtime.cuda_driver import numba_cuda
from ..runtime.kernel_cache import load_module
from .backend import Unsupported
from .cpu_index import _key_plan, _value, combine
from .value_text import linear
from .cuda_render import Config, atomic_add, grid_kernel, grid_of

INDEXED = (P.index, P.index_put, P.embed, P.gather, P.scatter_add, P.scatter_reduce)
# the dtypes numba-cuda's atomic add, max and min take
_ATOMIC = tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64))


def coords(shape: tuple) -> list:
    """Lines setting ``r<d>`` to the coordinates of element ``flat`` of ``shape``; returns
    the coordinate texts."""
    lines, names, stride = [], [], 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] == 1:
            names.append("0")
        else:
            lines.append(f"r{d} = (flat // {stride}) % {shape[d]}" if stride != 1 else f"r{d} = flat % {shape[d]}")
            names.append(f"r{d}")
        stride *= shape[d]
    return lines, names[::-1]


def rows(x: Var, axis: int) -> tuple:
    """(lines setting the row's coordinates from ``flat``, coordinates, number of rows,
    the linear index into x at position ``k`` of the row)."""
    outer = tuple(1 if d == axis else s for d, s in enumerate(x.shape))
    lines, r = coords(outer)
    return lines, r, int(np.prod(outer, dtype=np.int64)), \
        lambda k: linear([k if d == axis else r[d] for d in range(x.ndim)], x.shape)


def _checked(lines: list, var: str, load: str, n: int, code: int) -> str:
    """Lines reading index ``load`` into ``var``, wrapped if negative; an index outside
    [-n, n) sets the error flag to ``code`` and clears ``ok``."""
    lines += [f"{var} = np.int64({load})", f"if {var} < 0:", f"    {var} += {n}",
              f"if {var} < 0 or {var} >= {n}:", f"    err[0] = {code}", "    ok = False"]
    return var


def _cast(val: str, src, dt: np.dtype) -> str:
    if not isinstance(src, Var) or src.dtype == dt:
        return val
    return f"({val} != 0)" if dt.kind == "b" else f"np.{dt.name}({val})"


class Indexed:
    """One indexing call: an optional copy (or zero fill) of the output, then the kernel."""

    def __init__(self, e: Eqn, cfg: Config, title: str):
        self.eqn, self.cfg, self.title = e, cfg, title
        self.prep: Optional[Var] = None  # the operand copied into the output first (None: zeros)
        self.fill = False
        self.sizes: list = []  # per error code - 1: the dimension size it indexes
        body, params, self.operands, total, what = self._plan(e)
        self.what = what
        self.total = total
        self.src = grid_kernel(["out", *params, "err"], total, ["ok = True", *body], f"{what} ({title})")
        self.fn = load_module(self.src).kernel
        if self.fill:
            self.fill_src = grid_kernel(["out"], e.out.size, ["out[flat] = 0"], "zero fill")
            self.fill_fn = load_module(self.fill_src).kernel
        self._err = None

    def _plan(self, e: Eqn) -> tuple:
        prim, out = e.prim, e.out
        if prim in (P.gather, P.scatter_add, P.scatter_reduce):
            return self._along_axis(e)
        if prim is P.index:
            x, idxs = e.inputs[0], list(e.inputs[1:])
            region, lines, xl = self._keyed(x, e.params["key"], idxs, "index")
            if region != out.shape:
                raise Unsupported(f"cuda backend: index key {e.params['key']} gives {region}, expected {out.shape}")
            _, r = coords(region)
            return lines + ["if ok:", f"    out[{linear(r, region)}] = x[{xl}]"], ["x", *self._inames(idxs)], \
                [x, *idxs], int(np.prod(region, dtype=np.int64)), "index"
        if prim is P.index_put:
            x, v, idxs = e.inputs[0], e.inputs[1], list(e.inputs[2:])
            acc = e.params["accumulate"]
            if acc and out.dtype.kind == "b":
                raise Unsupported("cuda backend: accumulating index_put on bool")
            self.prep = x
            return self._put(x, v, idxs, e.params["key"], acc, "index_put")
        if prim is P.embed:
            (g,) = e.inputs
            self.fill = True
            return self._put(Var(tuple(e.params["shape"]), out.dtype), g, [], e.params["key"], False, "embed")
        raise Unsupported(f"cuda backend has no indexing kernel for {prim.name}")

    @staticmethod
    def _inames(idxs: list) -> list:
        return [f"i{t}" for t in range(len(idxs))]

    def _keyed(self, x: Var, key: tuple, idxs: list, what: str) -> tuple:
        """(region shape, lines, linear index into x) of x[key] at element ``flat``."""
        shape, src, adv_dims, bshape = _key_plan(key, x.shape, [i.shape for i in idxs])
        for i in idxs:
            if i.dtype.kind not in "iu":
                raise Unsupported(f"cuda backend: {what} with {i.dtype} index")
        lines, r = coords(shape)
        bidx = [r[d] for d in adv_dims]
        xidx = []
        for d, s in enumerate(src):
            if s[0] == "slice":
                _, start, step, od = s
                xidx.append(f"({start} + {step} * {r[od]})")
            elif s[0] == "int":
                xidx.append(str(s[1] % x.shape[d]))
            else:
                t = s[1]
                i = idxs[t]
                off = len(bshape) - i.ndim
                at = linear(["0" if n == 1 else bidx[k + off] for k, n in enumerate(i.shape)], i.shape)
                self.sizes.append(x.shape[d])
                xidx.append(_checked(lines, f"j{t}", f"i{t}[{at}]", x.shape[d], len(self.sizes)))
        return shape, lines, linear(xidx, x.shape)

    def _put(self, x: Var, v, idxs: list, key: tuple, acc: bool, what: str) -> tuple:
        out = self.eqn.out
        region, lines, xl = self._keyed(x, key, idxs, what)
        if isinstance(v, Var) and (v.ndim > len(region)
                                   or any(s != 1 and s != t for s, t in zip(v.shape[::-1], region[::-1]))):
            raise Unsupported(f"cuda backend: {what} value of shape {v.shape} into region {region}")
        _, r = coords(region)
        val = _cast(_value(v, r, lambda _: "v", out.dtype), v, out.dtype)
        act = atomic_add("out", xl, val) if acc else f"out[{xl}] = {val}"
        vs = [v] if isinstance(v, Var) else []
        return lines + ["if ok:", f"    {act}"], ["v"] * len(vs) + self._inames(idxs), vs + idxs, \
            int(np.prod(region, dtype=np.int64)), what

    def _along_axis(self, e: Eqn) -> tuple:
        scatter = e.prim in (P.scatter_add, P.scatter_reduce)
        x, idx = (e.inputs[0], e.inputs[1])
        what = e.prim.name
        axis = e.params["axis"] % max(x.ndim, 1)
        if idx.dtype.kind not in "iu":
            raise Unsupported(f"cuda backend: {what} with {idx.dtype} index")
        if idx.ndim != x.ndim or any(i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != axis):
            raise Unsupported(f"cuda backend: {what} shapes {idx.shape} / {x.shape} (eager raises)")
        lines, p = coords(idx.shape)
        self.sizes.append(x.shape[axis])
        j = _checked(lines, "j0", f"i0[{linear(p, idx.shape)}]", x.shape[axis], 1)
        xl = linear([j if d == axis else p[d] for d in range(x.ndim)], x.shape)
        total = idx.size
        if not scatter:
            return lines + ["if ok:", f"    out[{linear(p, idx.shape)}] = x[{xl}]"], ["x", "i0"], [x, idx], total, what
        src = e.inputs[2]
        if e.out.dtype.kind == "b":
            raise Unsupported(f"cuda backend: {what} on bool")
        if src.ndim != idx.ndim or any(i > s for i, s in zip(idx.shape, src.shape)):
            raise Unsupported(f"cuda backend: {what} src {src.shape} smaller than index {idx.shape}")
        self.prep = x
        reduce = e.params.get("reduce", "sum")  # (scatter_add has no reduce)
        if reduce == "prod" or e.out.dtype not in _ATOMIC:
            body, total = self._rows(e, axis)
            return body, ["i0", "v"], [idx, src], total, what
        val = _cast(f"v[{linear(p, src.shape)}]", src, e.out.dtype)
        if reduce == "sum":
            act = [atomic_add("out", xl, val)]
        else:  # numba's float atomic max/min skip a NaN value: a NaN is stored instead, and then stays
            act = [f"w = {val}", f"cuda.atomic.{reduce[1:]}(out, {xl}, w)"]
            if e.out.dtype.kind == "f":
                act = [act[0], "if w != w:", f"    out[{xl}] = w", "else:", "    " + act[1]]
        return lines + ["if ok:"] + ["    " + a for a in act], ["i0", "v"], [idx, src], total, what

    def _rows(self, e: Eqn, axis: int) -> tuple:
        """A scatter with no atomic operation for its reduction or dtype: one thread per row
        of the index along ``axis``, which combines that row's elements in order (no two
        rows write the same position)."""
        out, idx, src = e.out, e.inputs[1], e.inputs[2]
        lines, r, n_rows, at = rows(idx, axis)
        body: list = []
        j = _checked(body, "j0", f"i0[{at('k')}]", out.shape[axis], 1)
        xl = linear([j if d == axis else r[d] for d in range(out.ndim)], out.shape)
        val = _cast(f"v[{linear(['k' if d == axis else r[d] for d in range(src.ndim)], src.shape)}]", src, out.dtype)
        body += ["if ok:"] + ["    " + ln for ln in combine(e.params.get("reduce", "sum"), f"out[{xl}]", val, "w",
                                                              out.dtype)]
        return lines + [f"for k in range({idx.shape[axis]}):"] + ["    " + ln for ln in body], \
            n_rows if idx.size else 0

    def writes(self) -> list:
        return [self.eqn.out]

    def reads(self) -> list:
        return [v for v in self.eqn.inputs if isinstance(v, Var)]

    def run(self, env: dict) -> None:
        cuda = numba_cuda()
        out = env[self.eqn.out.id]
        if self.prep is not None and out.size:
            out.copy_to_device(env[self.prep.id])
        if self.fill and out.size:
            self.fill_fn[grid_of(out.size, self.cfg)](out)
        if not self.total:
            return
        if self._err is None:
            self._err = cuda.to_device(np.zeros(1, np.int32))
        self.fn[grid_of(self.total, self.cfg)](out, *[env[v.id] for v in self.operands], self._err)
        code = int(self._err.copy_to_host()[0])  # the one host read: eager raises here too
        if code:
            self._err.copy_to_device(np.zeros(1, np.int32))
            raise IndexError(f"{self.what}: index out of range for a dimension of size {self.sizes[code - 1]}")

    def source(self) -> str:
        fill = f"{self.fill_src}\n" if self.fill else ""
        return f"# {self.title}: {self.what}\n{fill}{self.src}"
