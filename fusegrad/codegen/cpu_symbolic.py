"""Shape-symbolic compilation for the cpu backend: ``CpuBackend().compile(graph,
symbolic=True)``.

Every loop group is lowered to a shape-symbolic kernel (kir_lower, ``symbolic=True``:
extents and strides are runtime arguments) and rendered by cpu_render, one module per
distinct kernel. Graphs that differ only in sizes (the same rank, dtypes and broadcast
pattern: a front end tracing one function at several batch sizes) therefore share their
compiled kernels: each kernel compiles once per process and once on disk, and compiling
another size's graph costs lowering and a module lookup, no Numba compile. A group whose
views need concrete sizes (slice, flip, a reshape that merges dims) gets a kernel with its
sizes baked in. Library calls (matmul, concatenate, ...) run as NumPy calls, and the
kernels are called in order from Python (the default, concrete path generates one Numba
entry calling them instead, with sizes baked in: use that when sizes are fixed)."""
from __future__ import annotations

from typing import Optional

from ..ir.graph import Graph
from ..passes.fusion import Fused, LoopGroup, fuse
from .backend import Unsupported
from .cpu_render import compiled, prepare, render
from .kir_lower import Listing, LoweredGroup, lower_group
from .sequence import Sequence


class SymbolicExecutable:
    """A graph run as a sequence of shape-symbolic kernels (see the module docstring);
    ``kernels`` are their compiled functions, one per loop group."""

    def __init__(self, graph: Graph, fused: Fused):
        self._in = [(v.shape, v.dtype) for v in graph.arguments()]
        self.lowered: dict = {}
        for gi, g in enumerate(fused.groups):
            if isinstance(g, LoopGroup):
                try:
                    self.lowered[gi] = lower_group(fused, gi, symbolic=True)
                except Unsupported:  # a view that needs concrete sizes
                    self.lowered[gi] = lower_group(fused, gi)
        # each a Numba dispatcher whose one signature (flat arrays, int symbols) compiles on
        # its first call and serves every graph that uses the kernel
        self.kernels = {gi: compiled(lg.kernel) for gi, lg in self.lowered.items()}
        self._seq = Sequence(fused, self.lowered, self._run)
        self.stages = {"fused": fused, "kernel": Listing(fused, symbolic=True, by_rows=True)}

    def _run(self, gi: int, lg: LoweredGroup, bufs: dict, syms: dict) -> None:
        self.kernels[gi](*[bufs[b.name] for b in lg.kernel.buffers], *[syms[s] for s in lg.kernel.syms])

    def __call__(self, *arrays) -> tuple:
        if len(arrays) != len(self._in):
            raise TypeError(f"compiled graph takes {len(self._in)} arrays, got {len(arrays)}")
        for k, (x, (shape, dtype)) in enumerate(zip(arrays, self._in)):
            if x.shape != shape or x.dtype != dtype:
                raise ValueError(f"argument {k}: expected {dtype}{list(shape)}, got {x.dtype}{list(x.shape)}")
        return self._seq(arrays)

    def kernel_source(self) -> str:
        return "\n\n".join(render(prepare(lg.kernel), from_python=True) for lg in self.lowered.values())


def compile_symbolic(graph: Graph, donate: Optional[dict] = None) -> SymbolicExecutable:
    """``graph`` compiled with shape-symbolic kernels (donations are not used)."""
    return SymbolicExecutable(graph, fuse(graph, read_reshapes=True))
