"""The "cuda" backend: a fused Graph run as CUDA kernels through numba-cuda.

Each fused loop group becomes one kernel rendered from its kernel IR (cuda_render); the
library calls become device kernels too: matmul a tiled shared-memory GEMM, concatenate
and pad loop kernels (kir_layout), index/index_put/embed/gather/scatter_add/scatter_reduce
element-parallel kernels (cuda_index), cumsum and argmax/argmin a thread per row and the
random draws a thread per element (cuda_scan), argsort, searchsorted, cholesky and
triangular_solve a thread per row, column or matrix (cuda_solve). One host entry per graph
(``CudaExecutable.__call__``) launches the kernels in order; intermediates come from a
caching pool of device buffers (``POOL``) and go back to it after their last reader;
donated outputs are written into the argument's device array. A half-precision graph is
computed in float32 (passes.upcast), its half arguments and results converted on the
device (cuda_half).

Executables take device arrays (numba-cuda's DeviceNDArray, or NumPy arrays, copied to
the device) ordered graph inputs then consts, and return device arrays; called with NumPy
arrays only (a compiled function on CPU tensors), they return NumPy arrays. Without a
device (and without the simulator) compiling raises Unsupported, so the compiler runs
such graphs eagerly and says why. Kernels equal up
to renaming render to one source, hence one module (runtime.kernel_cache): each compiles
once per process, its source cached on disk. ``FUSEGRAD_CUDA_SIM=1`` runs everything on
Numba's CUDA simulator (runtime.cuda_driver)."""
from __future__ import annotations

import threading
from typing import Optional

import numpy as np

from ..ir import prims as P
from ..ir.graph import Graph, Var
from ..passes.fusion import Fused, LoopGroup, fuse
from ..passes.memory import donations
from ..runtime.cuda_driver import numba_cuda, simulated
from ..runtime.kernel_cache import load_module
from .backend import Unsupported, register_backend
from .cuda_index import INDEXED, Indexed
from .cuda_scan import SCANS, Scan
from .half_boundary import compile_upcast
from .cuda_render import DEVICE, SIMULATOR, Config, Rendered, matmul_block, render, render_matmul
from .kir_layout import lower_layout
from .kir_lower import Listing, LoweredGroup, lower_group

_SUPPORTED_KINDS = "biuf"


def config() -> Config:
    """The launch configuration of this process: the simulator's or a device's."""
    return SIMULATOR if simulated() else DEVICE


class BufferPool:
    """A caching pool of flat device buffers: a small free list per (size, dtype)."""

    def __init__(self, per_size: int = 4):
        self.per_size = per_size
        self._free: dict = {}
        self._lock = threading.Lock()

    def take(self, size: int, dtype: np.dtype):
        with self._lock:
            free = self._free.get((size, np.dtype(dtype)))
            if free:
                return free.pop()
        return numba_cuda().device_array(size, dtype)

    def give(self, buf) -> None:
        with self._lock:
            free = self._free.setdefault((buf.size, np.dtype(buf.dtype)), [])
            if len(free) < self.per_size:
                free.append(buf)

    def held_bytes(self) -> int:
        """Bytes of the buffers kept for reuse."""
        with self._lock:
            return sum(s * dt.itemsize * len(v) for (s, dt), v in self._free.items())

    def clear(self) -> None:
        """Drop every cached buffer (their memory returns to the driver)."""
        with self._lock:
            self._free.clear()


POOL = BufferPool()


def _module(source: str):
    return load_module(source).kernel


class _Loop:
    """One rendered loop kernel: launched over its buffers (in the kernel's order)."""

    def __init__(self, lg: LoweredGroup, syms: list, cfg: Config, title: str):
        self.rendered: Rendered = render(lg.kernel, cfg)
        self.fn = _module(self.rendered.source)
        self.binds, self.syms = lg.binds, syms
        self.roles = [b.role for b in lg.kernel.buffers]
        self.launch = self.rendered.grid(cfg, syms)
        self.title, self.cfg = title, cfg
        self._scratch = None

    def writes(self) -> list:
        return [v for v, r in zip(self.binds, self.roles) if r != "in"]

    def reads(self) -> list:
        return [v for v, r in zip(self.binds, self.roles) if r == "in"]

    def run(self, env: dict) -> None:
        blocks, threads = self.launch
        if self.rendered.scratch and self._scratch is None:  # a grid-wide reduction's partials and ticket counter
            cuda = numba_cuda()
            self._scratch = [cuda.device_array(self.cfg.max_blocks, dt) for dt in self.rendered.scratch] + \
                [cuda.to_device(np.zeros(1, np.int32))]
        self.fn[blocks, threads](*[env[v.id] for v in self.binds], *self.syms, *(self._scratch or ()))

    def source(self) -> str:
        return f"# {self.title}\n{self.rendered.source}"


class _Matmul:
    """A matmul (with fusion's transposed operands and GEMM epilogue) as the tiled kernel."""

    def __init__(self, e, cfg: Config, title: str):
        a, b = e.inputs[:2]
        out = e.out
        if out.dtype.name not in ("float32", "float64") or a.dtype != b.dtype or a.dtype != out.dtype:
            raise Unsupported(f"cuda backend: matmul of {a.dtype}/{b.dtype} (the GEMM kernel takes float32/float64)")
        ta, tb = e.params.get("transposed", (False, False))
        self.m, self.k = a.shape[::-1] if ta else a.shape[-2:]
        self.n = b.shape[0] if tb else b.shape[-1]
        epilogue = len(e.inputs) == 3
        self.src = render_matmul(out.dtype, ta, tb, float(e.params.get("alpha", 1.0)),
                                 float(e.params["beta"]) if epilogue else None, cfg)
        self.fn = _module(self.src)
        self.eqn, self.out, self.cfg, self.title = e, out, cfg, title
        batch = out.shape[:-2]
        nb = int(np.prod(batch, dtype=np.int64))
        offs = []
        for x, mat in ((a, self.m * self.k), (b, self.k * self.n)):
            xb = x.shape[:-2]
            coords = np.indices(batch).reshape(len(batch), -1) if batch else np.zeros((0, 1), np.int64)
            flat, stride = np.zeros(nb, np.int64), 1
            for d in range(len(xb) - 1, -1, -1):  # right-aligned batch broadcasting
                if xb[d] != 1:
                    flat += coords[d + len(batch) - len(xb)] * stride
                stride *= xb[d]
            offs.append(flat * mat)
        self.nb = nb
        self._offs = offs
        self._dev_offs = None

    def writes(self) -> list:
        return [self.out]

    def reads(self) -> list:
        return [v for v in self.eqn.inputs if isinstance(v, Var)]

    def run(self, env: dict) -> None:
        if self.out.size == 0:
            return
        if self._dev_offs is None:  # per executable, once: each batch's operand offsets
            cuda = numba_cuda()
            self._dev_offs = [cuda.to_device(o) for o in self._offs]
        a, b = (env[v.id] for v in self.eqn.inputs[:2])
        c = env[self.out.id]
        x = env[self.eqn.inputs[2].id] if len(self.eqn.inputs) == 3 else c
        T, edge = self.cfg.tile, matmul_block(self.cfg)
        grid = (-(-self.n // edge), -(-self.m // edge), self.nb)
        self.fn[grid, (T, T)](a, b, x, c, *self._dev_offs, self.m, self.n, self.k)

    def source(self) -> str:
        return f"# {self.title}\n{self.src}"


class CudaExecutable:
    """A compiled graph: ``exe(*arrays)`` with device (or NumPy) arrays ordered graph inputs
    then consts; returns device arrays, one per graph output."""

    def __init__(self, graph: Graph, fused: Fused, steps: list, donated: dict):
        self._args = graph.arguments()
        self._outs = list(fused.outputs)
        self._steps = steps
        self._donated = donated  # output var id -> argument var id written in place
        arg_ids = {v.id for v in self._args}
        out_ids = {v.id for v in self._outs if isinstance(v, Var)}
        # what each step allocates, and the intermediates it is the last reader of
        last: dict = {}
        for si, st in enumerate(steps):
            for v in st.reads():
                last[v.id] = si
        self._alloc = [[v for v in st.writes() if v.id not in donated] for st in steps]
        self._free = [[] for _ in steps]
        for si, st in enumerate(steps):
            for v in st.writes():
                if v.id not in out_ids and v.id not in arg_ids and v.id not in donated:
                    self._free[last.get(v.id, si)].append(v)
        self.stages = {"fused": fused, "kernel": Listing(fused)}

    def __call__(self, *arrays) -> tuple:
        if len(arrays) != len(self._args):
            raise TypeError(f"compiled graph takes {len(self._args)} arrays, got {len(arrays)}")
        cuda = numba_cuda()
        env: dict = {}
        on_host = bool(arrays)
        for k, (x, v) in enumerate(zip(arrays, self._args)):
            if tuple(np.shape(x)) != v.shape or np.dtype(x.dtype) != v.dtype:
                raise ValueError(f"argument {k}: expected {v.dtype}{list(v.shape)}, got {x.dtype}{list(x.shape)}")
            if isinstance(x, (np.ndarray, np.generic)):
                x = cuda.to_device(np.ascontiguousarray(x))
            else:
                on_host = False
            env[v.id] = x.reshape(-1) if x.ndim != 1 else x
        for out, arg in self._donated.items():
            env[out] = env[arg]
        for st, alloc, free in zip(self._steps, self._alloc, self._free):
            for v in alloc:
                env[v.id] = POOL.take(v.size, v.dtype)
            st.run(env)
            for v in free:
                POOL.give(env.pop(v.id))
        res = []
        for v in self._outs:
            if not isinstance(v, Var):
                res.append(cuda.to_device(np.asarray(v)))
                continue
            buf = env[v.id]
            if any(v is a for a in self._args):  # an argument returned: a copy, never the caller's array
                copy = cuda.device_array(v.size, v.dtype)
                copy.copy_to_device(buf)
                buf = copy
            res.append(buf.reshape(v.shape) if v.shape != (buf.size,) else buf)
        if on_host:  # called with host arrays only (a compiled function on CPU tensors): host results
            return tuple(r.copy_to_host() for r in res)
        return tuple(res)

    def kernel_source(self) -> str:
        return "\n\n".join(st.source() for st in self._steps)


def _check_types(graph: Graph) -> None:
    for v in graph.arguments() + [e.out for e in graph.eqns]:
        if v.dtype.kind not in _SUPPORTED_KINDS or (v.dtype.kind == "f" and v.dtype.itemsize < 4):
            raise Unsupported(f"cuda backend: dtype {v.dtype} is not supported")


class CudaBackend:
    """Numba-CUDA code generation (see the module docstring)."""
    name = "cuda"

    def compile(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False,
                blas_nearby: bool = False) -> CudaExecutable:
        """``graph`` as a CudaExecutable; ``donate`` as in backend.py; ``symbolic``: loop
        kernels with runtime extents (shared by graphs that differ only in sizes);
        ``blas_nearby`` concerns host threads only (see passes.fusion.fuse)."""
        try:
            available = numba_cuda().is_available()
        except ImportError as exc:
            raise Unsupported(f"cuda backend: numba-cuda is not installed ({exc})") from exc
        if not available:
            raise Unsupported("cuda backend: no CUDA device (set FUSEGRAD_CUDA_SIM=1 for Numba's simulator)")
        from . import cuda_half  # (imports numba.cuda: after the simulator choice)
        return compile_upcast(lambda g, d: self._compile(g, d, symbolic), graph, donate, device=cuda_half)

    def _compile(self, graph: Graph, donate: Optional[dict], symbolic: bool) -> CudaExecutable:
        _check_types(graph)
        cfg = config()
        fused = fuse(graph)
        donated = donations(fused, donate) if donate else {}
        steps = []
        for gi, g in enumerate(fused.groups):
            title = f"group {gi}"
            if isinstance(g, LoopGroup):
                lg = _lowered(fused, gi, symbolic)
                syms = [lg.sizes[s] for s in lg.kernel.syms]
                steps.append(_Loop(lg, syms, cfg, title))
            elif g.eqn.prim is P.matmul:
                steps.append(_Matmul(g.eqn, cfg, f"{title}: matmul"))
            elif g.eqn.prim in (P.concatenate, P.pad):
                steps.append(_Loop(lower_layout(g.eqn, f"k{gi}"), [], cfg, f"{title}: {g.eqn.prim.name}"))
            elif g.eqn.prim in INDEXED:
                steps.append(Indexed(g.eqn, cfg, title))
            elif g.eqn.prim in SCANS:
                steps.append(Scan(g.eqn, cfg, title))
            else:
                raise Unsupported(f"cuda backend has no lowering for {g.eqn.prim.name}")
        return CudaExecutable(graph, fused, steps, donated)


def _lowered(fused: Fused, gi: int, symbolic: bool) -> LoweredGroup:
    if symbolic:
        try:
            return lower_group(fused, gi, symbolic=True)
        except Unsupported:  # a view that needs concrete sizes
            pass
    return lower_group(fused, gi)


register_backend("cuda", CudaBackend)
