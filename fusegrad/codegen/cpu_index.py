"""Emit the data-dependent and sequential equations of the cpu backend as hand-written
loops over flat buffers: advanced indexing (``index``, ``index_put``, ``embed``),
``gather``/``scatter_add``/``scatter_reduce``, ``cumsum``, ``argmax``/``argmin``,
``argsort``/``searchsorted`` (Numba's sort and binary search per row) and the
counter-based random numbers (``uniform``/``normal``, the same SplitMix64 stream as
fusegrad.ir.prims.creation).

Every index read from memory is range-checked in a separate pass *before* any buffer is
read through it (IndexError, as eager raises), then wrapped if negative; so the indexed
loops never leave a buffer. Names of loop variables carry the equation's ``tag`` so that
the calls of one entry function never share a variable (Numba types each name once)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import prims as P
from ..ir.graph import Eqn, Var
from .backend import Unsupported
from .value_text import copy_lines, linear
from .cpu_scalar import literal

_INDENT = "    "


class _Lines:
    def __init__(self, tag: str):
        self.tag = tag
        self.lines: list = []
        self.depth = 0

    def __call__(self, text: str) -> None:
        self.lines.append(_INDENT * self.depth + text)

    def loops(self, shape: tuple, name: str) -> list:
        """Open one loop per dim of ``shape`` (size-1 dims get index "0"); returns index
        expressions. The caller closes them with ``close``."""
        return [self.loop(s, f"{name}{d}") for d, s in enumerate(shape)]

    def loop(self, size: int, name: str) -> str:
        """Open a loop of ``size`` iterations (none for size 1); its index expression."""
        if size == 1:
            return "0"
        v = f"{name}_{self.tag}"
        self(f"for {v} in range({size}):")
        self.depth += 1
        return v

    def close(self, depth: int) -> None:
        self.depth = depth


def _check_index(L: _Lines, ibuf: str, size: int, n: int, what: str) -> None:
    """Raise IndexError unless every element of ``ibuf`` lies in [-n, n)."""
    if size == 0:
        return
    v = f"ck_{L.tag}"
    L(f"for {v} in range({size}):")
    L(f"{_INDENT}if {ibuf}[{v}] < {-n} or {ibuf}[{v}] >= {n}:")
    L(f"{_INDENT * 2}raise IndexError(\"{what}: index out of range for a dimension of size {n}\")")


def _el(buf: str, at: str) -> str:
    """``buf``'s element at linear index ``at`` (never negative here: loop variables and
    wrapped indices): read as unsigned, which spares Numba's negative-index wraparound, a
    compare and select per access that also keeps the loop from vectorizing."""
    return f"{buf}[{at}]" if at.isdigit() else f"{buf}[np.uint64({at})]"


def _fill(L: _Lines, buf: str, value: str, n: int) -> None:
    """Set ``n`` elements of ``buf`` to ``value`` with an explicit loop (see copy_lines)."""
    v = f"fl_{L.tag}"
    L(f"for {v} in range({n}):")
    L(f"{_INDENT}{buf}[{v}] = {value}")


def _wrapped(L: _Lines, var: str, expr: str, n: int) -> str:
    L(f"{var} = np.int64({expr})")
    L(f"{var} = {var} + {n} if {var} < 0 else {var}")
    return var


def _value(a, idx: list, buf: Callable, dt: np.dtype) -> str:
    """Element of operand ``a`` (a Var in memory or a literal) at ``idx`` (right-aligned)."""
    if not isinstance(a, Var):
        return literal(a, dt)
    off = len(idx) - a.ndim
    return _el(buf(a), linear(['0' if s == 1 else idx[d + off] for d, s in enumerate(a.shape)], a.shape))


# ---------------------------------------------------------------- index keys
def _key_plan(key: tuple, x_shape: tuple, idx_shapes: list):
    """Analyse an index key against ``x_shape``. Returns (result shape, per-result-dim role,
    per-x-dim source) where a source is ("slice", start, step, result dim), ("int", k) or
    ("adv", operand number), and the advanced operands index the broadcast block whose
    result dims are listed in ``adv_dims``. Follows NumPy: adjacent advanced indices (ints
    count) keep their place, otherwise the broadcast block comes first."""
    key = list(key)
    n_real = sum(k is not None for k in key)
    key += [(0, s, 1) for s in x_shape[n_real:]]
    if sum(k is not None for k in key) != len(x_shape):
        raise Unsupported("cpu backend: index key does not match the indexed shape")
    has_adv = any(k == "T" for k in key)
    adv_pos = [p for p, k in enumerate(key) if k == "T" or (has_adv and isinstance(k, int))]
    try:
        bshape = tuple(np.broadcast_shapes(*idx_shapes)) if idx_shapes else ()
    except ValueError as exc:
        raise Unsupported(f"cpu backend: index arrays do not broadcast ({exc})") from None
    contiguous = bool(adv_pos) and adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    out_shape, src, adv_dims = [], [], []

    def put_adv():
        adv_dims.extend(range(len(out_shape), len(out_shape) + len(bshape)))
        out_shape.extend(bshape)

    if has_adv and not contiguous:
        put_adv()
    t = 0
    for p, k in enumerate(key):
        if has_adv and contiguous and p == adv_pos[0]:
            put_adv()
        if k is None:
            out_shape.append(1)
        elif k == "T":
            src.append(("adv", t))
            t += 1
        elif isinstance(k, tuple):
            src.append(("slice", k[0], k[2], len(out_shape)))
            out_shape.append(len(range(*k)))
        else:
            src.append(("int", int(k)))
    return tuple(out_shape), src, adv_dims, bshape


def _emit_keyed(L: _Lines, x: Var, key: tuple, idxs: list, buf: Callable, what: str, expect_shape,
                body: Callable[[str, list], None]) -> None:
    """Loops over the indexed region x[key]: ``body(linear index into x, region index)``."""
    shape, src, adv_dims, bshape = _key_plan(key, x.shape, [i.shape for i in idxs])
    if expect_shape is not None and shape != tuple(expect_shape):
        raise Unsupported(f"cpu backend: {what} key {key} gives {shape}, expected {tuple(expect_shape)}")
    for t, (i, s) in enumerate(zip(idxs, [s for s in src if s[0] == "adv"])):
        if i.dtype.kind not in "iu":
            raise Unsupported(f"cpu backend: {what} with {i.dtype} index")
    dims = [d for d, s in enumerate(src)]
    sizes = {}
    for d, s in zip(dims, src):
        if s[0] == "adv":
            sizes[s[1]] = x.shape[d]
    for t, i in enumerate(idxs):
        _check_index(L, buf(i), i.size, sizes[t], what)
    if 0 in shape:
        return
    base = L.depth
    # each index is read (and wrapped) in the innermost loop it depends on, not in the
    # innermost of all: a gather's copy of a contiguous run (im2col's batch) then vectorizes
    adv = {}  # operand number -> (result dims its element depends on)
    for t, i in enumerate(idxs):
        off = len(bshape) - i.ndim
        adv[t] = {adv_dims[k + off] for k, n in enumerate(i.shape) if n != 1}
    ridx, wrapped = [], {}

    def read_ready() -> None:
        for d, s in enumerate(src):
            if s[0] == "adv" and s[1] not in wrapped and all(od < len(ridx) for od in adv[s[1]]):
                i = idxs[s[1]]
                off = len(bshape) - i.ndim
                at = linear(["0" if n == 1 else ridx[adv_dims[k + off]] for k, n in enumerate(i.shape)], i.shape)
                wrapped[s[1]] = _wrapped(L, f"j{s[1]}_{L.tag}", _el(buf(i), at), x.shape[d])
    read_ready()
    for d, n in enumerate(shape):
        ridx.append(L.loop(n, f"o{d}"))
        read_ready()
    xidx = []
    for d, s in enumerate(src):
        if s[0] == "slice":
            _, start, step, od = s
            core = ridx[od] if step == 1 else f"{step} * {ridx[od]}"
            xidx.append(core if start == 0 else f"({start} + {core})")
        elif s[0] == "int":
            xidx.append(str(s[1] % x.shape[d]))
        else:
            xidx.append(wrapped[s[1]])
    body(linear(xidx, x.shape), ridx)
    L.close(base)


def _index(e: Eqn, buf: Callable, tag: str) -> list:
    x, idxs, out = e.inputs[0], list(e.inputs[1:]), e.out
    L = _Lines(tag)
    O = buf(out)
    _emit_keyed(L, x, e.params["key"], idxs, buf, "index", out.shape,
                lambda xl, r: L(f"{_el(O, linear(r, out.shape))} = {_el(buf(x), xl)}"))
    return L.lines


def _put(L: _Lines, e: Eqn, x: Var, v, idxs: list, key: tuple, accumulate: bool, buf: Callable, what: str,
         copy_from) -> list:
    out = e.out
    O = buf(out)
    if not isinstance(copy_from, Var):  # a fill value (fusion's filled base; embed's zeros)
        _fill(L, O, literal(copy_from, out.dtype), out.size)
    elif out.size and buf(copy_from) != O:
        for ln in copy_lines(O, "0", buf(copy_from), "0", out.size, f"cp_{L.tag}"):
            L(ln)
    shape = _key_plan(key, x.shape, [i.shape for i in idxs])[0]
    if isinstance(v, Var):
        if v.ndim > len(shape) or any(s != 1 and s != t for s, t in zip(v.shape[::-1], shape[::-1])):
            raise Unsupported(f"cpu backend: {what} value of shape {v.shape} into region {shape}")
    op = "+=" if accumulate else "="

    def body(xl: str, r: list) -> None:
        val = _value(v, r, buf, out.dtype)
        if isinstance(v, Var) and v.dtype != out.dtype:
            val = f"np.{out.dtype.name}({val})" if out.dtype.kind != "b" else f"({val} != 0)"
        L(f"{_el(O, xl)} {op} {val}")
    _emit_keyed(L, x, key, idxs, buf, what, None, body)
    return L.lines


def _index_put(e: Eqn, buf: Callable, tag: str) -> list:
    x, v, idxs = e.inputs[0], e.inputs[1], list(e.inputs[2:])
    if e.params["accumulate"] and e.out.dtype.kind == "b":
        raise Unsupported("cpu backend: accumulating index_put on bool")
    shell = x if isinstance(x, Var) else Var(e.out.shape, e.out.dtype)  # x: a fill value
    return _put(_Lines(tag), e, shell, v, idxs, e.params["key"], e.params["accumulate"], buf, "index_put", x)


def _embed(e: Eqn, buf: Callable, tag: str) -> list:
    (g,) = e.inputs
    shell = Var(tuple(e.params["shape"]), e.out.dtype)
    return _put(_Lines(tag), e, shell, g, [], e.params["key"], False, buf, "embed", 0)


# ---------------------------------------------------------------- gather / scatter_add / scatter_reduce
def _along_axis(L: _Lines, x: Var, idx: Var, axis: int, buf: Callable, what: str) -> tuple:
    if idx.dtype.kind not in "iu":
        raise Unsupported(f"cpu backend: {what} with {idx.dtype} index")
    if idx.ndim != x.ndim or any(i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != axis):
        raise Unsupported(f"cpu backend: {what} shapes {idx.shape} / {x.shape} (eager raises)")
    n = x.shape[axis]
    _check_index(L, buf(idx), idx.size, n, what)
    if idx.size == 0:
        return None
    base = L.depth
    p = L.loops(idx.shape, "p")
    j = _wrapped(L, f"j_{L.tag}", _el(buf(idx), linear(p, idx.shape)), n)
    xl = linear([j if d == axis else p[d] for d in range(x.ndim)], x.shape)
    return base, p, xl


def _gather(e: Eqn, buf: Callable, tag: str) -> list:
    x, idx = e.inputs
    axis = e.params["axis"] % max(x.ndim, 1)
    L = _Lines(tag)
    r = _along_axis(L, x, idx, axis, buf, "gather")
    if r is not None:
        base, p, xl = r
        L(f"{_el(buf(e.out), linear(p, idx.shape))} = {_el(buf(x), xl)}")
        L.close(base)
    return L.lines


def _scatter(e: Eqn, buf: Callable, tag: str) -> list:
    """scatter_add, and scatter_reduce combining by product, max or min (NaN wins, as in
    eager's np.maximum); the output starts as a copy of the base."""
    base_, idx, src = e.inputs
    what = e.prim.name
    axis = e.params["axis"] % max(e.out.ndim, 1)
    if e.out.dtype.kind == "b":
        raise Unsupported(f"cpu backend: {what} on bool")
    if src.ndim != idx.ndim or any(i > s for i, s in zip(idx.shape, src.shape)):
        raise Unsupported(f"cpu backend: {what} src {src.shape} smaller than index {idx.shape}")
    L = _Lines(tag)
    O = buf(e.out)
    if not isinstance(base_, Var):  # a fill value (fusion's filled base)
        _fill(L, O, literal(base_, e.out.dtype), e.out.size)
    elif e.out.size and buf(base_) != O:
        for ln in copy_lines(O, "0", buf(base_), "0", e.out.size, f"cp_{L.tag}"):
            L(ln)
    shell = Var(e.out.shape, e.out.dtype)
    r = _along_axis(L, shell, idx, axis, buf, what)
    if r is not None:
        b, p, xl = r
        val = _el(buf(src), linear(p, src.shape))
        if src.dtype != e.out.dtype:
            val = f"np.{e.out.dtype.name}({val})"
        for ln in combine(e.params.get("reduce", "sum"), _el(O, xl), val, f"v_{tag}", e.out.dtype):
            L(ln)
        L.close(b)
    return L.lines


def combine(reduce: str, at: str, val: str, v: str, dt: np.dtype) -> list:
    """Lines combining ``val`` into the element ``at`` by ``reduce`` (sum, prod, amax, amin;
    a NaN wins max and min, as in NumPy), ``v`` naming a temporary."""
    if reduce in ("sum", "prod"):
        return [f"{at} {'+=' if reduce == 'sum' else '*='} {val}"]
    nan = f" or {v} != {v}" if dt.kind == "f" else ""
    return [f"{v} = {val}", f"if {v} {'>' if reduce == 'amax' else '<'} {at}{nan}:", f"{_INDENT}{at} = {v}"]


# ---------------------------------------------------------------- scans and arg-reductions
def _cumsum(e: Eqn, buf: Callable, tag: str) -> list:
    (x,) = e.inputs
    if x.dtype.kind == "b" or x.dtype != e.out.dtype:
        raise Unsupported(f"cpu backend: cumsum of {x.dtype}")
    L = _Lines(tag)
    if x.size == 0:
        return []
    axis = e.params["axis"] % x.ndim
    outer = tuple(1 if d == axis else s for d, s in enumerate(x.shape))
    base = L.depth
    p = L.loops(outer, "p")
    acc, k = f"s_{tag}", f"k_{tag}"
    wide = np.dtype(np.float64) if x.dtype == np.float32 else x.dtype  # (PyTorch's CPU accumulation type)
    L(f"{acc} = {literal(0, wide)}")
    L(f"for {k} in range({x.shape[axis]}):")
    at = linear([k if d == axis else p[d] for d in range(x.ndim)], x.shape)
    L(f"{_INDENT}{acc} += {_el(buf(x), at)}")
    L(f"{_INDENT}{_el(buf(e.out), at)} = {acc if wide == x.dtype else f'np.{x.dtype.name}({acc})'}")
    L.close(base)
    return L.lines


def argext_axis(e: Eqn, backend: str) -> int:
    """The axis an argmax/argmin equation searches; Unsupported (naming ``backend``) where
    eager raises or the input is bool."""
    (x,) = e.inputs
    axis = e.params["axis"] % max(x.ndim, 1)
    if x.ndim == 0 or x.shape[axis] == 0:
        raise Unsupported(f"{backend} backend: {e.prim.name} over an empty or 0-d input (eager raises)")
    if x.dtype.kind == "b":
        raise Unsupported(f"{backend} backend: {e.prim.name} of bool")
    return axis


def _argext(op: str) -> Callable:
    def emit(e: Eqn, buf: Callable, tag: str) -> list:
        (x,) = e.inputs
        axis = argext_axis(e, "cpu")
        L = _Lines(tag)
        if x.size == 0:
            return []
        # one loop over the dims before the axis and one over those after it (C order keeps
        # each run contiguous): a pooling's argmax over its windows is then one long loop
        # that vectorizes, where a nest of short ones ran scalar
        n = x.shape[axis]
        pre, post = int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis + 1:], dtype=np.int64))
        base = L.depth
        a, b = L.loop(pre, "p0"), L.loop(post, "p1")
        best, bi, k, v = f"v_{tag}", f"w_{tag}", f"k_{tag}", f"u_{tag}"
        at = lambda kk: linear([a, kk, b], (pre, n, post))  # noqa: E731
        L(f"{best} = {_el(buf(x), at('0'))}")
        L(f"{bi} = 0")
        L(f"for {k} in range(1, {n}):")
        L(f"{_INDENT}{v} = {_el(buf(x), at(k))}")
        if x.dtype.kind == "f":  # the first NaN wins, as in NumPy
            L(f"{_INDENT}if {best} != {best}:")
            L(f"{_INDENT * 2}break")
            L(f"{_INDENT}if {v} {op} {best} or {v} != {v}:")
        else:
            L(f"{_INDENT}if {v} {op} {best}:")
        L(f"{_INDENT * 2}{best} = {v}")
        L(f"{_INDENT * 2}{bi} = {k}")
        L(f"{_el(buf(e.out), linear([a, b], (pre, post)))} = np.int64({bi})")
        L.close(base)
        return L.lines
    return emit


# ---------------------------------------------------------------- argsort / searchsorted
def _sortable(v: Var, what: str) -> None:
    if v.dtype.kind not in "biuf" or (v.dtype.kind == "f" and v.dtype.itemsize < 4):
        raise Unsupported(f"cpu backend: {what} of {v.dtype}")


def _argsort(e: Eqn, buf: Callable, tag: str) -> list:
    """Each row along the axis copied out and sorted by Numba's stable mergesort (NaN last,
    as eager); descending sorts the reversed row ascending and maps the positions back, so
    ties keep their order in both directions (prims.sorting._argsort_impl)."""
    (x,) = e.inputs
    _sortable(x, "argsort")
    if x.size == 0:
        return []
    L = _Lines(tag)
    axis = e.params["axis"] % x.ndim
    n, last = x.shape[axis], x.shape[axis] - 1
    pre, post = int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    row, r, k = f"row_{tag}", f"r_{tag}", f"k_{tag}"
    L(f"{row} = np.empty({n}, np.{'uint8' if x.dtype.kind == 'b' else x.dtype.name})")
    base = L.depth
    a, b = L.loop(pre, "p0"), L.loop(post, "p1")
    at = lambda kk: linear([a, kk, b], (pre, n, post))  # noqa: E731
    down = e.params["descending"]
    L(f"for {k} in range({n}):")
    L(f"{_INDENT}{row}[{k}] = {_el(buf(x), at(f'{last} - {k}' if down else k))}")
    L(f"{r} = np.argsort({row}, kind=\"mergesort\")")
    L(f"for {k} in range({n}):")
    picked = f"{last} - {r}[{last} - {k}]" if down else f"{r}[{k}]"
    L(f"{_INDENT}{_el(buf(e.out), at(k))} = np.int64({picked})")
    L.close(base)
    return L.lines


def _searchsorted(e: Eqn, buf: Callable, tag: str) -> list:
    """Per value, PyTorch's binary search in its row of the sorted sequence (one row for all
    values when the sequence is 1-D): move right while ``!(mid >= v)`` (``right``: ``!(mid >
    v)``), which also places values against a sequence that holds NaN as PyTorch does."""
    seq, v = e.inputs
    _sortable(seq, "searchsorted")
    _sortable(v, "searchsorted")
    if v.size == 0:
        return []
    L = _Lines(tag)
    m = seq.shape[-1]
    per = v.size if seq.ndim == 1 else v.shape[-1]
    rows = v.size // per
    ahead = ">" if e.params["right"] else ">="
    i, j, lo, hi, mid, x = (f"{n}_{tag}" for n in ("i", "j", "lo", "hi", "mid", "x"))
    base = "0" if seq.ndim == 1 else f"{i} * {m}"
    L(f"for {i} in range({rows}):")
    L(f"{_INDENT}for {j} in range({per}):")
    L(f"{_INDENT * 2}{x} = {buf(v)}[{i} * {per} + {j}]")
    L(f"{_INDENT * 2}{lo}, {hi} = 0, {m}")
    L(f"{_INDENT * 2}while {lo} < {hi}:")
    L(f"{_INDENT * 3}{mid} = {lo} + (({hi} - {lo}) >> 1)")
    L(f"{_INDENT * 3}if not ({buf(seq)}[{base} + {mid}] {ahead} {x}):")
    L(f"{_INDENT * 4}{lo} = {mid} + 1")
    L(f"{_INDENT * 3}else:")
    L(f"{_INDENT * 4}{hi} = {mid}")
    L(f"{_INDENT * 2}{buf(e.out)}[{i} * {per} + {j}] = np.{e.out.dtype.name}({lo})")
    return L.lines


# ---------------------------------------------------------------- random numbers
_MIX = ("u64(0x9E3779B97F4A7C15)", "u64(30)", "u64(0xBF58476D1CE4E5B9)", "u64(27)", "u64(0x94D049BB133111EB)",
        "u64(31)")


def _splitmix(L: _Lines, z: str, out: str) -> None:
    g, s30, m1, s27, m2, s31 = (c.replace("u64", "np.uint64") for c in _MIX)
    L(f"{out} = {z} + {g}")
    L(f"{out} = ({out} ^ ({out} >> {s30})) * {m1}")
    L(f"{out} = ({out} ^ ({out} >> {s27})) * {m2}")
    L(f"{out} = {out} ^ ({out} >> {s31})")


def _random(e: Eqn, buf: Callable, tag: str) -> list:
    """SplitMix64 of (counter + offset) ^ SplitMix64(seed), as creation._bits; uniform in
    [0, 1) from the top 53 bits; normal by Box-Muller on counters 2i and 2i+1, in float64."""
    (key,) = e.inputs
    if not isinstance(key, Var) or key.size != 2 or key.dtype.kind not in "iu":
        raise Unsupported("cpu backend: random key is not an int array of 2")
    out = e.out
    if out.dtype.kind != "f":
        raise Unsupported(f"cpu backend: random of {out.dtype}")
    n = out.size
    if n == 0:
        return []
    L = _Lines(tag)
    K = buf(key)
    sk, off, i, c, z = f"sk_{tag}", f"of_{tag}", f"i_{tag}", f"c_{tag}", f"z_{tag}"
    L(f"{c} = np.uint64(np.int64({K}[0]))")
    _splitmix(L, c, sk)
    L(f"{off} = np.uint64(np.int64({K}[1]))")
    scale = "np.float64(1.0 / 9007199254740992.0)"
    L(f"for {i} in range({n}):")
    L.depth += 1
    if e.prim is P.uniform:
        _splitmix(L, f"((np.uint64({i}) + {off}) ^ {sk})", z)
        L(f"{buf(out)}[{i}] = np.{out.dtype.name}(np.float64({z} >> np.uint64(11)) * {scale})")
    else:
        _splitmix(L, f"((np.uint64(2 * {i}) + {off}) ^ {sk})", z)
        L(f"u1_{tag} = np.float64(1.0) - np.float64({z} >> np.uint64(11)) * {scale}")
        _splitmix(L, f"((np.uint64(2 * {i} + 1) + {off}) ^ {sk})", z)
        L(f"u2_{tag} = np.float64({z} >> np.uint64(11)) * {scale}")
        L(f"{buf(out)}[{i}] = np.{out.dtype.name}(np.sqrt(np.float64(-2.0) * np.log(u1_{tag})) * "
          f"np.cos(np.float64(2.0 * np.pi) * u2_{tag}))")
    L.depth -= 1
    return L.lines


CALLS = {P.index: _index, P.index_put: _index_put, P.embed: _embed, P.gather: _gather, P.scatter_add: _scatter,
         P.scatter_reduce: _scatter, P.cumsum: _cumsum, P.argmax: _argext(">"), P.argmin: _argext("<"),
         P.uniform: _random, P.normal: _random, P.argsort: _argsort, P.searchsorted: _searchsorted}
