"""A graph's entry as a program: the kernel calls, GEMMs and copies a compiled graph runs,
in order, written as an int64 array that one interpreter (``run``), compiled once per
machine, executes natively.

Numba's compile time grows faster than a function's length, and an entry function that
spelled each call out paid for it: a two-layer LSTM unrolled over 35 steps (thousands of
calls) took minutes to compile. Written as data, a graph's steps cost no compile; what
remains per graph is a small function (``entry_source``) that binds the addresses of its
arguments and outputs, shared by every graph with the same argument and output dtypes.

Memory is a table of pointer slots: the arguments, the outputs, the trig guard's count
(when the graph counts), then regions of blocks that ``run`` allocates per call and frees
after (the memory plan's buffers and concatenations, at offsets fixed when the program is
written: regions used by operations that do not overlap in time share memory, so a call
needs about its peak of live intermediates). A block holds regions up to ``BLOCK`` bytes,
so that glibc serves it from the heap again at the next call (cpu_malloc) rather than with
fresh pages. A kernel takes the
table (``kernel(ptrs, prog, at)``) and binds each buffer as a 1-d array from three words at
``prog[at:]``: slot, byte offset and length (``TABLE_OPERAND``), then its sizes.

``prog``: ``[number of slots, number of blocks, first region slot, number of regions, number
of outputs, start of the code, output lengths..., block sizes..., (block, offset) per
region..., code...]``; the code is a sequence of operations:
- ``0 kaddr-index n-words <operand words>``: call a kernel;
- ``1 float64? transa transb m n k lda ldb ldc alpha beta a b c batches (a b c byte offsets)...``:
  CBLAS gemm, row-major, once per batch at its byte offsets (alpha, beta: float64 bits);
- ``2 dst-slot dst-offset src-slot src-offset bytes``: copy;
- ``3 slot offset bytes``: zero bytes."""
from __future__ import annotations

import functools
import struct
from typing import Optional

import numpy as np

from numba import types

__all__ = ["Program", "TABLE_IMPORT", "TABLE_OPERAND", "blocks_of", "entry_source", "listed", "run_address",
           "run_source"]

TABLE_IMPORT = "from fusegrad.codegen.cpu_link import operand"
TABLE_OPERAND = "operand(ptrs, prog, at + {s}, np.{dtype})"

CALL, GEMM, COPY, ZERO = range(4)
_ALIGN = 64  # bytes: each region starts a cache line (and a vector's alignment)
_HEADER = 6
BLOCK = 8 * 2**20  # bytes of regions per block at most (a larger region has a block of its own)


class Program:
    """One entry's program being written (see the module docstring). Slots: ``n_args``
    arguments, then one per output length of ``out_sizes``, then the guard's count when
    ``counted``, then the arena's regions. A reference to memory is ``(slot, byte offset)``."""

    def __init__(self, n_args: int, out_sizes: list, counted: bool):
        self.out_sizes = list(out_sizes)
        self.guard: Optional[int] = n_args + len(out_sizes) if counted else None
        self._first = n_args + len(out_sizes) + counted
        self._names = [f"x{k}" for k in range(n_args)] + [f"o{j}" for j in range(len(out_sizes))] \
            + (["guard"] if counted else [])
        self._sizes: list = []  # bytes per region
        self._life: list = []  # [first, last] operation using it, per region
        self._ops = 0
        self._code: list = []
        self._text: list = []

    def region(self, nbytes: int) -> int:
        """The slot of a new region of ``nbytes``. Where it lies is decided at ``encode``,
        from the operations that use it: regions whose uses do not overlap share memory."""
        self._sizes.append(-(-max(nbytes, 1) // _ALIGN) * _ALIGN)
        self._life.append(None)
        self._names.append(f"b{len(self._sizes) - 1}")
        return self._first + len(self._sizes) - 1

    def _uses(self, *slots: int) -> None:
        """The operation being written uses ``slots``; then the next operation begins."""
        op = self._ops
        for s in slots:
            r = s - self._first
            if r >= 0:
                life = self._life[r]
                if life is None:
                    self._life[r] = [op, op]
                else:
                    life[1] = op
        self._ops += 1

    @functools.cached_property
    def _layout(self) -> tuple:
        """(bytes per block, (block, byte offset) per region): each region placed, in the
        order the operations first use it, at the lowest free offset of a block
        (first fit), and freed after its last use. A block holds up to ``BLOCK`` bytes
        (a larger region has a block of its own, which later regions may share)."""
        life = [span or (-1, -1) for span in self._life]
        order = sorted(range(len(self._sizes)), key=lambda r: life[r][0])
        ends = sorted((life[r][1], r) for r in order)
        free: list = []  # per block: its free holes, [offset, bytes] in offset order
        high: list = []  # per block: the bytes it needs
        place: list = [None] * len(self._sizes)
        k = 0
        for r in order:
            while k < len(ends) and ends[k][0] < life[r][0]:  # free what died before this region's first use
                dead = ends[k][1]
                _free(free[place[dead][0]], place[dead][1], self._sizes[dead])
                k += 1
            n = self._sizes[r]
            for b, holes in enumerate(free):
                at = next((i for i, (_, m) in enumerate(holes) if m >= n), None)
                if at is not None:
                    break
            else:
                b, at = len(free), 0
                holes = [[0, max(BLOCK, n)]]
                free.append(holes)
                high.append(0)
            off = holes[at][0]
            holes[at][0] += n
            holes[at][1] -= n
            if not holes[at][1]:
                del holes[at]
            place[r] = (b, off)
            high[b] = max(high[b], off + n)
        return high, place

    def name(self, ref: tuple) -> str:
        slot, off = ref
        return self._names[slot] + (f"+{off}" if off else "")

    def call(self, k: int, operands: list, sizes: list, note: str) -> None:
        """Call kernel ``kaddr[k]`` on ``operands`` ((ref, length) each) and ``sizes``."""
        words = [w for (slot, off), n in operands for w in (slot, off, n)] + [int(s) for s in sizes]
        self._uses(*[slot for (slot, _), _ in operands])
        self._code += [CALL, k, len(words), *words]
        args = [self.name(r) for r, _ in operands] + [str(s) for s in sizes]
        self._text.append(f"call {note}({', '.join(args)})")

    def gemm(self, dtype: str, ta: bool, tb: bool, m: int, n: int, k: int, lda: int, ldb: int, ldc: int,
             alpha: float, beta: float, a: tuple, b: tuple, c: tuple, batches: list) -> None:
        """``c = alpha * op(a) @ op(b) + beta * c`` once per batch, at the batch's element
        offsets ``(a, b, c)`` from the references ``a``, ``b``, ``c``."""
        from .cpu_blas import NO_TRANS, TRANS
        size = 8 if dtype == "float64" else 4
        self._uses(a[0], b[0], c[0])
        self._code += [GEMM, int(dtype == "float64"), TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS,
                       m, n, k, lda, ldb, ldc, _bits(alpha), _bits(beta), a[0], b[0], c[0], len(batches)]
        self._code += [w for oa, ob, oc in batches for w in (a[1] + oa * size, b[1] + ob * size, c[1] + oc * size)]
        self._text.append(f"{'dgemm' if size == 8 else 'sgemm'}({'T' if ta else 'N'}{'T' if tb else 'N'}, m={m}, "
                          f"n={n}, k={k}, alpha={alpha!r}, {self.name(a)}, lda={lda}, {self.name(b)}, ldb={ldb}, "
                          f"beta={beta!r}, {self.name(c)}, ldc={ldc})" + (f" x{len(batches)} batches"
                                                                           if len(batches) > 1 else ""))

    def copy(self, dst: tuple, src: tuple, nbytes: int) -> None:
        if nbytes:
            self._uses(dst[0], src[0])
            self._code += [COPY, dst[0], dst[1], src[0], src[1], nbytes]
            self._text.append(f"copy {self.name(dst)} <- {self.name(src)} ({nbytes} bytes)")

    def zero(self, dst: tuple, nbytes: int) -> None:
        if nbytes:
            self._uses(dst[0])
            self._code += [ZERO, dst[0], dst[1], nbytes]
            self._text.append(f"zero {self.name(dst)} ({nbytes} bytes)")

    def encode(self) -> list:
        """The program as the int64 words ``run`` reads."""
        blocks, place = self._layout
        n_slots = self._first + len(place)
        start = _HEADER + len(self.out_sizes) + len(blocks) + 2 * len(place)
        return [n_slots, len(blocks), self._first, len(place), len(self.out_sizes), start,
                *self.out_sizes, *blocks, *[w for r in place for w in r], *self._code]

    def listing(self) -> str:
        """The program as readable lines (``kernel_source``)."""
        blocks = self._layout[0]
        head = (f"# program: {len(self._sizes)} buffers of {sum(self._sizes)} bytes in {len(blocks)} blocks of "
                f"{sum(blocks)} bytes")
        return "\n".join([head] + ["#   " + t for t in self._text])


def _free(holes: list, off: int, n: int) -> None:
    """Return ``[off, off + n)`` to a block's ``holes`` (kept in offset order, merged)."""
    at = next((i for i, (o, _) in enumerate(holes) if o > off), len(holes))
    holes.insert(at, [off, n])
    if at + 1 < len(holes) and off + n == holes[at + 1][0]:
        holes[at][1] += holes.pop(at + 1)[1]
    if at and holes[at - 1][0] + holes[at - 1][1] == off:
        holes[at - 1][1] += holes.pop(at)[1]


def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


#: an entry with at least this many outputs allocates each dtype's in a loop and returns them
#: as one list per dtype: spelled out, Numba's typing of each allocation and its boxing of a
#: tuple of arrays cost seconds per hundred outputs (a CNN's saved activations)
LISTED = 8


def listed(out_dtypes: list) -> bool:
    """Whether the entry of a program with outputs of ``out_dtypes`` returns lists (``LISTED``)."""
    return len(out_dtypes) >= LISTED


def entry_source(arg_dtypes: list, out_dtypes: list, returns: list, counted: bool) -> str:
    """The module source of the entry of every program whose arguments have ``arg_dtypes``
    and outputs ``out_dtypes``: ``kernel(*arrays, prog, kaddr, blocks)`` allocates the
    outputs, binds the slots of arguments and outputs, runs ``prog`` (``kaddr[0]`` is
    ``run``'s address) and returns the outputs at positions ``returns``, then the guard's
    count when ``counted``. ``blocks`` (one int64 per block of the program, from the caller)
    holds the addresses of the blocks ``run`` allocated until it frees them: a kernel that
    raises leaves them there for the caller to free (``release_blocks``).

    With many outputs (``listed``) it returns instead one list per run of equal dtypes in
    ``out_dtypes``, every output in order, for the caller to pick ``returns`` from."""
    n = len(arg_dtypes)
    lines = ["# generated by fusegrad's cpu backend: a program's entry (cpu_program)", "import numpy as np",
             "from numba import njit", "from fusegrad.codegen.cpu_arrays import empty, zeros",
             "from fusegrad.codegen.cpu_link import address_of, call_at", "", "@njit(cache=True)",
             f"def kernel({''.join(f'x{k}, ' for k in range(n))}prog, kaddr, blocks):",
             "    ptrs = empty(prog[0], np.int64)"]
    lines += [f"    ptrs[{k}] = address_of(x{k})" for k in range(n)]
    if listed(out_dtypes):
        rets = []
        for start, dt, count in _runs(out_dtypes):
            r = f"r{len(rets)}"
            rets.append(r)
            lines += [f"    {r} = [empty(prog[{_HEADER + start}], np.{dt})]", f"    ptrs[{n + start}] = address_of({r}[0])",
                      f"    for j in range({start + 1}, {start + count}):",
                      f"        o = empty(prog[{_HEADER} + j], np.{dt})", f"        ptrs[{n} + j] = address_of(o)",
                      f"        {r}.append(o)"]
    else:
        for j, dt in enumerate(out_dtypes):
            lines += [f"    o{j} = empty(prog[{_HEADER + j}], np.{dt})", f"    ptrs[{n + j}] = address_of(o{j})"]
        rets = [f"o{j}" for j in returns]
    if counted:
        lines += ["    guard = zeros(1, np.float32)", f"    ptrs[{n + len(out_dtypes)}] = address_of(guard)"]
    lines.append("    call_at(kaddr[0], (ptrs, prog, kaddr, blocks))")
    rets += ["guard[0]"] if counted else []
    return "\n".join(lines + [f"    return ({''.join(r + ', ' for r in rets)})"]) + "\n"


def _runs(dtypes: list) -> list:
    """(start, dtype, length) of each run of equal neighbours in ``dtypes``."""
    runs: list = []
    for j, dt in enumerate(dtypes):
        if runs and runs[-1][1] == dt:
            runs[-1][2] += 1
        else:
            runs.append([j, dt, 1])
    return [tuple(r) for r in runs]


@functools.cache
def run_address() -> int:
    """The native entry of ``run`` for this process's BLAS, compiled once per machine."""
    from ..runtime.kernel_cache import load_module
    from .cpu_blas import kind, prelude
    from .cpu_link import address
    run = load_module(run_source(None if kind() == "none" else prelude())).run
    vector = types.Array(types.int64, 1, "C")
    return address(run, (vector, vector, types.Array(types.uint64, 1, "C"), vector))


_GEMM_BRANCH = f"""        elif op == {GEMM}:
            a, b, c = ptrs[prog[i + 12]], ptrs[prog[i + 13]], ptrs[prog[i + 14]]
            for j in range(prog[i + 15]):
                o = i + 16 + 3 * j
                if prog[i + 1]:
                    _fg_dgemm(101, prog[i + 2], prog[i + 3], prog[i + 4], prog[i + 5], prog[i + 6], real[i + 10],
                              pointer(a + prog[o]), prog[i + 7], pointer(b + prog[o + 1]), prog[i + 8], real[i + 11],
                              pointer(c + prog[o + 2]), prog[i + 9])
                else:
                    _fg_sgemm(101, prog[i + 2], prog[i + 3], prog[i + 4], prog[i + 5], prog[i + 6],
                              np.float32(real[i + 10]), pointer(a + prog[o]), prog[i + 7], pointer(b + prog[o + 1]),
                              prog[i + 8], np.float32(real[i + 11]), pointer(c + prog[o + 2]), prog[i + 9])
            i += 16 + 3 * prog[i + 15]
"""


def blocks_of(prog: np.ndarray) -> int:
    """How many blocks a program's ``run`` allocates (the length of its ``blocks`` record)."""
    return int(prog[1])


def run_source(blas_prelude: Optional[str]) -> str:
    """The module source of the interpreter, importing the gemm entries ``blas_prelude``
    names (None: a program has no gemm)."""
    gemm = _GEMM_BRANCH if blas_prelude else ""
    blas_prelude = blas_prelude or ""
    return f'''# generated by fusegrad's cpu backend: the interpreter of entry programs (cpu_program)
import numpy as np
from numba import carray, njit
from fusegrad.codegen.cpu_arrays import allocate, release
from fusegrad.codegen.cpu_link import call_at, pointer
{blas_prelude}


@njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def run(ptrs, prog, kaddr, blocks):
    first, n_blocks, n_out = prog[2], prog[1], prog[4]
    for j in range(n_blocks):
        blocks[j] = allocate(prog[{_HEADER} + n_out + j] + {_ALIGN})
    at = {_HEADER} + n_out + n_blocks
    for j in range(prog[3]):
        ptrs[first + j] = ((blocks[prog[at + 2 * j]] + {_ALIGN - 1}) & -{_ALIGN}) + prog[at + 2 * j + 1]
    real = prog.view(np.float64)
    i = prog[5]
    while i < len(prog):
        op = prog[i]
        if op == {CALL}:
            call_at(kaddr[prog[i + 1]], (ptrs, prog, i + 3))
            i += 3 + prog[i + 2]
{gemm}        elif op == {COPY}:
            n = prog[i + 5]
            dst = carray(pointer(ptrs[prog[i + 1]] + prog[i + 2]), n, np.uint8)
            src = carray(pointer(ptrs[prog[i + 3]] + prog[i + 4]), n, np.uint8)
            for j in range(n):
                dst[j] = src[j]
            i += 6
        else:
            n = prog[i + 3]
            dst = carray(pointer(ptrs[prog[i + 1]] + prog[i + 2]), n, np.uint8)
            for j in range(n):
                dst[j] = 0
            i += 4
    for j in range(n_blocks):
        release(blocks[j])
        blocks[j] = 0
'''
