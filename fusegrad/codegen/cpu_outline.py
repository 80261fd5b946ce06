"""Outlined parallel loops, for the Numba CPU renderer (cpu_render): a kernel whose parallel
loops all sit at its top level becomes a serial kernel that launches each of them as a
*chunk* function over iterations ``[lo, hi)`` through cpu_link's launcher, instead of a
``prange`` kernel (Numba's parfor passes cost more than the rest of a kernel: cpu_link).

A chunk function receives its buffers' addresses and sizes, then the kernel's symbols, in
one uint64 array, and recomputes the integer and scalar locals of the kernel's top level
that precede its loop (index arithmetic and loads of buffers no statement stores to). An
accumulator of the kernel's top level that the loop folds into (the trig guard's count,
kir_fastmath) gets a partial per chunk, combined in chunk order after the launch.
``outlinable`` says which kernels qualify; the others keep ``prange``."""
from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from .kir import Acc, Assign, Kernel, Let, Load, Loop, Ref, Scratch, Store, Sym, Update, stmt_values, stmts, values

IMPORTS = ["from fusegrad.codegen.cpu_link import LAUNCH, call_symbol, raw_array, symbol_address, thread_count"]
_ARGS = "argv, lo, hi, c"


def outlinable(k: Kernel) -> bool:
    """Whether every parallel loop of ``k`` can run outlined: each at the top level, reading
    the top level's accumulators only by folding into them, and the top level's scalar
    locals computed from buffers that no statement of ``k`` stores to."""
    loops = [s for s in k.body if isinstance(s, Loop) and s.kind == "parallel"]
    if not loops or len(loops) != sum(isinstance(s, Loop) and s.kind == "parallel" for s in stmts(k.body)):
        return False
    stored = {s.buf for s in stmts(k.body) if isinstance(s, Store)}
    accs = {s.name for s in k.body if isinstance(s, Acc)}
    for s in k.body:
        if isinstance(s, Assign) and any(isinstance(v, Load) and v.buf in stored or isinstance(v, Ref) and v.name in accs
                                         for v in values(s.value)):
            return False
    return not any(isinstance(v, Ref) and v.name in accs
                   for loop in loops for s in stmts(loop.body) for x in stmt_values(s) for v in values(x))


class Outliner:
    """Writes the launch of each top-level parallel loop of kernel ``k`` (``launch``) and
    collects the chunk functions' sources (``chunks``) and symbols. ``writer`` makes a fresh
    cpu_render writer for ``k``; ``decorator`` is the renderer's serial @njit line."""

    def __init__(self, k: Kernel, writer: Callable, decorator: str):
        self.k, self.writer, self.decorator = k, writer, decorator
        self.chunks: list = []  # (source, symbol)
        self.prior: list = []  # the top level's Let/Assign statements written so far

    def see(self, s) -> None:
        """Note top-level statement ``s`` of the kernel as written."""
        if isinstance(s, (Let, Assign)):
            self.prior.append(s)

    def launch(self, loop: Loop, driver, pad: str) -> list:
        """The kernel's lines launching ``loop``; ``driver`` is the kernel's writer (it knows
        the top level's accumulators)."""
        j = len(self.chunks)
        inner = {s.buf for s in stmts(loop.body) if isinstance(s, Scratch)}
        bufs = list(dict.fromkeys(
            name for s in stmts(self.prior + [loop]) for name in _buffers(s) if name not in inner))
        folds = list(dict.fromkeys(s.name for s in stmts(loop.body) if isinstance(s, Update) and s.name in driver.accs))
        argv, n = f"_ol{j}_argv", f"_ol{j}_n"
        syms = list(self.k.syms)
        parts = [(f"_ol{j}_p{i}", name) for i, name in enumerate(folds)]
        # argv: each buffer's address and size, the symbols, each partials buffer's address and size
        entries = [e for b in bufs for e in (f"{b}.ctypes.data", f"{b}.size")] + syms + \
            [e for p, _ in parts for e in (f"{p}.ctypes.data", n)]
        # a conditional, not min(): min is an overload Numba compiles per module
        lines = [f"{n} = thread_count()", f"{n} = ({loop.extent}) if ({loop.extent}) < {n} else {n}"] + \
            [f"{p} = empty({n}, np.{driver.accs[name][1].name})" for p, name in parts] + \
            [f"{argv} = empty({len(entries)}, np.uint64)"] + [f"{argv}[{i}] = {e}" for i, e in enumerate(entries)]
        source, symbol = self._chunk(j, loop, bufs, syms, parts, driver)
        lines.append(f'call_symbol(LAUNCH, (symbol_address("{symbol}"), {argv}, np.int64({loop.extent}), np.int64({n})))')
        if parts:
            lines.append(f"for _ol{j}_c in range({n}):")
            lines += ["    " + driver.update(Update(name, Load(p, Sym(f"_ol{j}_c"), driver.accs[name][1])))
                      for p, name in parts]
        self.chunks.append((source, symbol))
        return [pad + line for line in lines]

    def _chunk(self, j: int, loop: Loop, bufs: list, syms: list, parts: list, driver) -> tuple:
        w = self.writer()
        lines = [f"    {b} = raw_array(argv[{2 * i}], np.int64(argv[{2 * i + 1}]), np.{_dtype(self.k, b)})"
                 for i, b in enumerate(bufs)]
        lines += [f"    {s} = np.int64(argv[{2 * len(bufs) + i}])" for i, s in enumerate(syms)]
        accs = [Acc(name, *driver.accs[name]) for _, name in parts]
        lines += list(w.body(self.prior + accs, 1))
        lines += list(w.loop(loop, "    ", "range(lo, hi)"))
        at = 2 * len(bufs) + len(syms)
        for i, (p, name) in enumerate(parts):
            dt = driver.accs[name][1].name
            lines += [f"    {p} = raw_array(argv[{at + 2 * i}], np.int64(argv[{at + 2 * i + 1}]), np.{dt})",
                      f"    {p}[c] = {name}"]
        body = "\n".join(lines)
        symbol = "fusegrad_chunk_" + hashlib.sha256(body.encode()).hexdigest()[:20]
        return "\n".join([self.decorator, f"def chunk{j}({_ARGS}):", body]), symbol

    def link_line(self) -> str:
        """The module-level line listing the chunk functions and their symbols, which
        cpu_link.link_chunks registers before the kernel compiles."""
        return f"CHUNKS = ({''.join(f'(chunk{j}, {s!r}), ' for j, (_, s) in enumerate(self.chunks))})"


def _buffers(s) -> list:
    names = [s.buf] if isinstance(s, Store) else []
    return names + [v.buf for x in stmt_values(s) for v in values(x) if isinstance(v, Load)]


def _dtype(k: Kernel, name: str) -> str:
    return np.dtype(k.buffer(name).dtype).name
