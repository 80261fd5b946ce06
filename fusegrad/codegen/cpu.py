"""The "cpu" backend: fuse a Graph into loop groups and generate ONE Numba module whose
``@njit`` entry function runs every loop nest and BLAS call in order (no Python between
kernels). Arrays cross the boundary as flat contiguous 1-d arrays whose shapes and dtypes
are checked first, so generated index arithmetic can never leave a buffer."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Var
from ..passes.fusion import CallGroup, Fused, fuse
from ..passes.memory import plan
from ..runtime.kernel_cache import load_module
from .backend import Unsupported, register_backend
from .cpu_calls import emit_call
from .cpu_loops import emit_loop_group
from .cpu_scalar import Lowering

# reassoc lets LLVM vectorize reductions, contract allows FMA. No nnan/ninf: NaN and inf
# keep NumPy semantics. error_model="numpy": x/0 gives inf instead of raising.
_FASTMATH = '{"reassoc", "contract"}'
_SUPPORTED_KINDS = "biuf"


class CpuExecutable:
    """A compiled graph: ``exe(*arrays)`` with arrays ordered graph inputs then consts."""

    def __init__(self, graph: Graph, fused: Fused, source: str, fn):
        self._in = [(v.shape, v.dtype) for v in graph.inputs] + [(v.shape, v.dtype) for v, _ in graph.consts]
        self._out = [(v.shape, v.dtype) for v in fused.outputs]
        self._fn = fn
        self._source = source
        self.stages = {"fused": str(fused)}

    def __call__(self, *arrays) -> tuple:
        if len(arrays) != len(self._in):
            raise TypeError(f"compiled graph takes {len(self._in)} arrays, got {len(arrays)}")
        flat = []
        for k, (x, (shape, dtype)) in enumerate(zip(arrays, self._in)):
            x = np.asarray(x)
            if x.shape != shape or x.dtype != dtype:
                raise ValueError(f"argument {k}: expected {dtype}{list(shape)}, got {x.dtype}{list(x.shape)}")
            x = np.ascontiguousarray(x).reshape(-1)
            flat.append(x if x.flags.writeable else x.copy())  # one specialization: writable C arrays
        res = self._fn(*flat)
        return tuple(r.reshape(shape) for r, (shape, _) in zip(res, self._out))

    def kernel_source(self) -> str:
        return self._source


class CpuBackend:
    """Numba CPU code generation (see module docstring)."""
    name = "cpu"

    def compile(self, graph: Graph) -> CpuExecutable:
        fused = fuse(graph)
        source = generate(graph, fused)
        mod = load_module(source)
        fn = mod.kernel
        _compile_now(fn, graph)
        return CpuExecutable(graph, fused, source, fn)


def _compile_now(fn, graph: Graph) -> None:
    """Type and compile (or load from Numba's disk cache) for the only signature we call
    with, so failures surface here, where the compiler can still fall back to eager."""
    import numba
    from numba.core.errors import NumbaError
    sig = tuple(numba.types.Array(numba.from_dtype(v.dtype), 1, "C")
                for v in list(graph.inputs) + [v for v, _ in graph.consts])
    try:
        fn.compile(sig)
    except NumbaError as exc:
        raise Unsupported(f"cpu backend: Numba rejected the generated kernel: {str(exc).splitlines()[0]}") from exc


def _check_types(graph: Graph) -> None:
    vs = list(graph.inputs) + [v for v, _ in graph.consts] + [e.out for e in graph.eqns]
    for v in vs:
        if v.dtype.kind not in _SUPPORTED_KINDS or v.dtype.itemsize < 4 and v.dtype.kind == "f":
            raise Unsupported(f"cpu backend: dtype {v.dtype} is not supported")
    for v in graph.outputs:
        if not isinstance(v, Var):
            raise Unsupported("cpu backend: graph output is not a tensor value")


def generate(graph: Graph, fused: Fused) -> str:
    """The kernel module's source for ``graph`` as fused into ``fused``."""
    _check_types(graph)
    args = list(graph.inputs) + [v for v, _ in graph.consts]
    arg_name = {v.id: f"x{k}" for k, v in enumerate(args)}
    slot = plan(fused)
    numbers: dict = {}

    def num(v) -> int:
        """Stable numbering of a var (or buffer) id in order of first use."""
        key = v if isinstance(v, int) else v.id
        return numbers.setdefault(key, len(numbers))

    def buf(v: Var) -> str:
        return arg_name.get(v.id) or f"b{num(slot.get(v.id, v.id))}"

    lw = Lowering()
    body: list = []
    allocated = set(arg_name)
    parallel = False
    for gi, g in enumerate(fused.groups):
        for v in fused.outputs_of(gi):
            b = slot.get(v.id, v.id)
            if b not in allocated:
                allocated.add(b)
                body.append(f"    {buf(v)} = np.empty({v.size}, np.{v.dtype.name})")
        if isinstance(g, CallGroup):
            body.append(f"    # call {g.eqn.prim.name}")
            body.extend("    " + ln for ln in emit_call(g.eqn, buf))
        else:
            parallel |= g.parallel
            body.extend(emit_loop_group(fused, g, fused.outputs_of(gi), buf, lw, num))
    rets = []
    for v in fused.outputs:
        rets.append(f"{buf(v)}.copy()" if v.id in arg_name else buf(v))
    ret = "(" + "".join(r + ", " for r in rets) + ")"
    head = ["# generated by fusegrad's cpu backend", "import math", "", "import numpy as np",
            "from numba import njit, prange", *lw.prelude(), "",
            f"@njit(cache=True, fastmath={_FASTMATH}, error_model=\"numpy\", parallel={parallel})",
            f"def kernel({', '.join(arg_name[v.id] for v in args)}):"]
    return "\n".join(head + body + [f"    return {ret}", ""])


register_backend("cpu", CpuBackend)
