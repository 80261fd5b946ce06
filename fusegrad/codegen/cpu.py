"""The "cpu" backend: fuse a Graph into loop groups and generate ONE Numba module whose
``@njit`` entry function runs every loop kernel (through its address, cpu_link) and BLAS
call in order (no Python between kernels). Arrays cross the boundary as flat contiguous 1-d arrays whose shapes and dtypes
are checked first, so generated index arithmetic can never leave a buffer."""
from __future__ import annotations

import contextlib
import functools
import warnings
from typing import Callable, Optional

import numpy as np

from ..ir.fingerprint import fingerprint
from ..ir import prims as P
from ..ir.graph import Graph, Var
from ..passes.fusion import CallGroup, Fused, LoopGroup, fuse, reshaped_base
from ..passes.memory import donations, plan
from ..passes.signs import nonpositive
from ..runtime.kernel_cache import generated_key, load_generated, load_module, on_disk, store_generated
from ..runtime.overlap import overlapping
from .backend import Unsupported, register_backend
from .cpu_arrays import IMPORT as ARRAYS
from .cpu_blas import kind as blas_kind, prelude as blas_prelude
from .cpu_calls import emit_call
from .cpu_helpers import compile_kernels
from .cpu_link import address, signature as link_signature
from .cpu_malloc import keep_freed_blocks
from .cpu_render import kernel_head, prepare, render
from .cpu_symbolic import compile_symbolic
from .half_boundary import compile_upcast
from .kir import IBin, structural_hash
from .kir_fastmath import GUARD
from .kir_passes import each_index, optimize as optimize_kernel
from .kir_lower import Listing, LoweredGroup, lower_group
from .kir_views import onto_parts
from .value_text import copy_lines as copy_loop

# reassoc lets LLVM vectorize reductions, contract allows FMA. No nnan/ninf: NaN and inf
# keep NumPy semantics. error_model="numpy": x/0 gives inf instead of raising.
_FASTMATH = '{"reassoc", "contract"}'
# Primitives whose generated code range-checks integer indices computed in the same kernel.
_INDEXING = (P.index, P.index_put, P.gather, P.scatter_add)
_SUPPORTED_KINDS = "biuf"


class CpuExecutable:
    """A compiled graph: ``exe(*arrays)`` with arrays ordered graph inputs then consts."""

    def __init__(self, graph: Graph, fused_of: "_FusedOnce", source: str, fn, kaddr: np.ndarray, exact=None,
                 written=()):
        self._in = [(v.shape, v.dtype) for v in graph.arguments()]
        self._written = tuple(a for _, a in written)  # positions of arguments the kernel overwrites
        self._out_shapes = [v.shape for v in graph.outputs]
        # per output computed into an argument (donated): its argument position; the entry
        # returns only the others (each returned array costs the entry's compile time)
        donated = dict(written)
        self._from = [donated.get(i) for i in range(len(graph.outputs))] if donated else None
        self._fn = fn  # the compiled entry point (see _compile_now)
        self._kaddr = kaddr  # the addresses of the kernels it calls (cpu_link), its last argument
        # () -> (entry point, kernel addresses) for sin/cos arguments past fastmath's range
        # (see cpu._entry), compiled on first use
        self._exact = exact
        self._graph = graph
        self._source = source  # the entry's module, then those of the kernels it calls
        self.kernels: tuple = ()  # sources of the kernel modules the entry calls (see generate)
        # printed on demand (Lowered.ir)
        self.stages = {"fused": _Printed(fused_of), "kernel": _Printed(lambda: Listing(fused_of(), by_rows=True))}

    def __call__(self, *arrays) -> tuple:
        if len(arrays) != len(self._in):
            raise TypeError(f"compiled graph takes {len(self._in)} arrays, got {len(arrays)}")
        flat = []
        for k, (x, (shape, dtype)) in enumerate(zip(arrays, self._in)):
            if type(x) is not np.ndarray:  # per-call cost matters: the common case skips each step
                x = np.asarray(x)
            if x.shape != shape or (x.dtype is not dtype and x.dtype != dtype):
                raise ValueError(f"argument {k}: expected {dtype}{list(shape)}, got {x.dtype}{list(x.shape)}")
            flat.append(x)
        return self.call_guarded(*flat)

    def call_guarded(self, *arrays) -> tuple:
        """``self(*arrays)`` for ndarrays whose count, shapes and dtypes the caller's guard
        already proved (a compiled function's signature): only their layout is checked.
        (Its per-call cost is most of a small graph's: written out, no helpers.)"""
        # the type the entry is compiled for: 1-d and C-contiguous (ravel copies what is not);
        # writable where the kernel writes (a read-only array it only reads is read as is)
        flat = [x.ravel() for x in arrays]
        copied = ()
        if self._written:  # an argument written in place must not be read through another
            copied = set(overlapping(flat, self._written))
            copied.update([k for k in self._written if not flat[k].flags.writeable])
            for k in copied:
                flat[k] = flat[k].copy()
        res = self._fn(*flat, self._kaddr)
        if self._exact is not None:
            if res[-1]:
                exact, kaddr = self._exact()
                res = exact(*flat, kaddr)
            else:
                res = res[:-1]
        if self._from is not None:  # a donated output: its argument's array, the caller's own if written there
            rest = iter(res)
            res = [next(rest) if a is None else flat[a] if a in copied or not arrays[a].flags.c_contiguous
                   else arrays[a] for a in self._from]
        shapes = self._out_shapes
        if len(shapes) == 1:
            return (res[0].reshape(shapes[0]),)
        return tuple([r if r.shape == shape else r.reshape(shape) for r, shape in zip(res, shapes)])

    def kernel_source(self) -> str:
        return self._source


class _FusedOnce:
    """The fused graph of an executable, fused again (once) only when asked for if the
    kernel's source came from the cache (see CpuBackend.compile)."""

    def __init__(self, graph: Graph, fused: Optional[Fused], blas_nearby: bool):
        self._graph, self._fused, self._blas_nearby = graph, fused, blas_nearby

    def __call__(self) -> Fused:
        if self._fused is None:
            self._fused = _fuse(self._graph, self._blas_nearby)
        return self._fused


def _fuse(graph: Graph, blas_nearby: bool) -> Fused:
    return fuse(graph, read_reshapes=True, read_strided=True, fill_bases=True, blas_nearby=blas_nearby)


class _Printed:
    """A stage built when printed: ``str()`` of what ``make()`` returns."""

    def __init__(self, make: Callable):
        self.make = make

    def __str__(self) -> str:
        return str(self.make())


class CpuBackend:
    """Numba CPU code generation (see module docstring)."""
    name = "cpu"

    def compile(self, graph: Graph, donate: Optional[dict] = None, symbolic: bool = False,
                blas_nearby: bool = False):
        """``graph`` compiled: by default one Numba entry with sizes baked in (a
        CpuExecutable); with ``symbolic=True`` shape-symbolic kernels that graphs of other
        sizes share (a cpu_symbolic.SymbolicExecutable; ``donate`` is then unused).
        ``blas_nearby``: BLAS runs between calls of it (see passes.fusion.fuse).
        bfloat16/float16 values are computed in float32 (passes.upcast)."""
        keep_freed_blocks()
        return compile_upcast(lambda g, d: self._compile(g, d, symbolic, blas_nearby), graph, donate)

    def _compile(self, graph: Graph, donate: Optional[dict], symbolic: bool, blas_nearby: bool):
        if symbolic:
            _check_types(graph)
            return compile_symbolic(graph)
        # What a graph generates depends on the graph, the donations asked for and the BLAS
        # the kernels link against; a process that traces the same graph again reads the
        # source back instead of fusing and generating it anew (W3's gradient: ~0.1 s).
        try:
            key = generated_key(self.name, fingerprint(graph),
                                f"{sorted((donate or {}).items())}|{blas_kind()}|{blas_nearby}")
        except TypeError:  # a param the fingerprint cannot spell exactly: no caching
            key = None
        record = _valid(load_generated(key), graph) if key else None
        fused = None
        if record is None:
            fused = _fuse(graph, blas_nearby)
            donated = donations(fused, donate) if donate else {}
            source, donated, kernels, links = generate(graph, fused, donated)
            args = [v.id for v in graph.arguments()]
            written = [[i, args.index(donated[v.id])] for i, v in enumerate(fused.outputs) if v.id in donated]
            record = {"source": source, "written": written, "kernels": kernels, "links": links}
            if key:
                store_generated(key, record)
        fresh = {m for m, src in enumerate(record["kernels"]) if not on_disk(src)}
        mods = [load_module(src) for src in record["kernels"]]
        mod = load_module(record["source"])

        def linked(name: str) -> tuple:
            """Entry ``name``'s entry point and the addresses of the kernels it calls."""
            with _kernel_errors():
                kaddr = np.array([address(mods[m].kernel, dtypes, n) for m, dtypes, n in record["links"][name]],
                                 np.uint64)
            return _compile_now(getattr(mod, name), graph), kaddr

        # the kernels no process compiled before, in helpers while this one compiles the entry
        by_source = dict(zip(record["kernels"], mods))
        new = dict.fromkeys((record["kernels"][m], tuple(dtypes), n) for m, dtypes, n in record["links"]["kernel"]
                            if m in fresh)
        with _kernel_errors():
            compile_kernels(list(new), lambda k: address(by_source[k[0]].kernel, k[1], k[2]),
                            lambda: _compile_now(mod.kernel, graph))
        exact = functools.cache(lambda: linked("kernel_exact")) if hasattr(mod, "kernel_exact") else None
        exe = CpuExecutable(graph, _FusedOnce(graph, fused, blas_nearby),
                            "\n\n".join([record["source"]] + record["kernels"]), *linked("kernel"), exact,
                            tuple(record["written"]))
        exe.kernels = tuple(record["kernels"])
        return exe


@contextlib.contextmanager
def _kernel_errors():
    """Numba's rejection of a generated kernel as Unsupported (the caller runs eagerly)."""
    from numba.core.errors import NumbaError
    try:
        yield
    except NumbaError as exc:
        raise Unsupported(f"cpu backend: Numba rejected a generated kernel: {str(exc).splitlines()[0]}") from exc


def _valid(record: Optional[dict], graph: Graph) -> Optional[dict]:
    """``record`` if it has the shape CpuBackend.compile stores, else None with a warning
    (its digest matched, so only a hand-made entry gets here)."""
    if record is None:
        return None
    written = record.get("written")
    n, n_out = len(graph.arguments()), len(graph.outputs)
    kernels = record.get("kernels")
    links = record.get("links")
    if isinstance(record.get("source"), str) and isinstance(written, list) \
            and all(isinstance(w, list) and len(w) == 2 and type(w[0]) is int and 0 <= w[0] < n_out
                    and type(w[1]) is int and 0 <= w[1] < n for w in written) \
            and isinstance(kernels, list) and all(isinstance(k, str) for k in kernels) \
            and isinstance(links, dict) and "kernel" in links \
            and all(isinstance(calls, list) and all(isinstance(c, list) and len(c) == 3 and type(c[0]) is int
                                                    and 0 <= c[0] < len(kernels) and type(c[2]) is int for c in calls)
                    for calls in links.values()):
        return record
    warnings.warn("fusegrad: malformed generated-code cache entry; rebuilding it")
    return None


def _compile_now(fn, graph: Graph) -> Callable:
    """Type and compile (or load from Numba's disk cache) for the only signature we call
    with, so failures surface here, where the compiler can still fall back to eager.

    Returns that signature's entry point, which skips the dispatcher's typing of the
    arguments: the caller passes only arrays of exactly that type (1-d, C-contiguous,
    writable, aligned, of the graph's dtypes, then the kernels' uint64 addresses)."""
    from numba.core.errors import NumbaError
    sig = link_signature([v.dtype for v in graph.arguments()] + [np.uint64])
    try:
        fn.compile(sig)
    except NumbaError as exc:
        raise Unsupported(f"cpu backend: Numba rejected the generated kernel: {str(exc).splitlines()[0]}") from exc
    return fn.overloads[sig].entry_point


def _check_types(graph: Graph) -> None:
    vs = graph.arguments() + [e.out for e in graph.eqns]
    for v in vs:
        if v.dtype.kind not in _SUPPORTED_KINDS or v.dtype.itemsize < 4 and v.dtype.kind == "f":
            raise Unsupported(f"cpu backend: dtype {v.dtype} is not supported")
    for v in graph.outputs:
        if not isinstance(v, Var):
            raise Unsupported("cpu backend: graph output is not a tensor value")


def generate(graph: Graph, fused: Fused, donated: Optional[dict] = None) -> tuple:
    """(source, donations used, kernel module sources, links): the entry module's source
    for ``graph`` as fused into ``fused``: ``kernel`` and, when a kernel calls fastmath's
    sin/cos, ``kernel_exact`` (see ``_entry``); ``links`` maps each entry's name to the
    kernels it calls, in the order of its address argument: [module index, [buffer dtype
    names], number of int64 size arguments] (cpu_link). ``donated`` maps output var ids to the
    argument var ids whose arrays they are computed into (see passes.memory.donations); a
    graph that may rerun (the exact entry) writes no argument."""
    _check_types(graph)
    # every loop group has a kernel (else Unsupported, with the reason)
    lowered = {gi: lower_group(fused, gi, by_rows=True) for gi, g in enumerate(fused.groups)
               if isinstance(g, LoopGroup)}
    facts = dict(nonpositive=frozenset(nonpositive(graph)), bounded_trig=any(e.prim in _INDEXING for e in graph.eqns))
    concats = _Concats(fused, {v.id for v in graph.arguments()})
    sized = _sized_alike(fused, lowered, concats)
    lowered.update(sized)
    lowered.update(_offset_alike(fused, {gi: lg for gi, lg in lowered.items() if gi not in sized}, concats))
    modules = _Modules()
    shared = _shared_kernels(lowered, facts, concats, modules)
    # a graph that may rerun exactly writes no argument: the rerun reads the arguments again
    guarded = any(exact for _, _, exact in shared.values())
    donated = {} if guarded else dict(donated or {})
    names = ["kernel", "kernel_exact"] if guarded else ["kernel"]
    parts, calls = [], {}
    for name in names:
        lines, calls[name] = _entry(graph, fused, name, donated, shared, concats, modules,
                                    guarded and name == "kernel")
        parts.append(lines)
    links = {name: [list(modules.params[sym]) for sym in syms] for name, syms in calls.items()}
    body = [ln for lines in parts for ln in lines + [""]]
    gemm = [blas_prelude()] if any(isinstance(g, CallGroup) and g.eqn.prim is P.matmul for g in fused.groups) else []
    link = ["from fusegrad.codegen.cpu_link import call_at"] if modules.sources else []
    head = ["# generated by fusegrad's cpu backend", "import math", "", "import numpy as np",
            "from numba import njit, prange", ARRAYS, *gemm, *link, ""]
    return "\n".join(head + body), donated, list(modules.sources), links


class _Modules:
    """The kernel modules an entry calls: ``sources`` (module source -> its index; equal
    sources are one module, compiled once per process and cached once on disk) and
    ``params`` (symbol -> (module index, its buffers' dtype names, its number of size
    arguments)): one symbol per signature, since one source may serve buffers of several
    dtypes (a gather of floats and one of indices), each compiled for its own."""

    def __init__(self):
        self.sources: dict = {}
        self.params: dict = {}
        self._symbol: dict = {}  # (source, dtypes, number of sizes) -> symbol

    def add(self, source: str, dtypes: list, n_sizes: int = 0) -> str:
        """The symbol of the module ``source`` called with buffers of ``dtypes``."""
        key = (source, tuple(dtypes), n_sizes)
        sym = self._symbol.get(key)
        if sym is None:
            sym = self._symbol[key] = f"_kr{len(self._symbol)}"
            self.params[sym] = (self.sources.setdefault(source, len(self.sources)), list(dtypes), n_sizes)
        return sym

    def call(self, e, buf: Callable[[Var], str]) -> tuple:
        """(symbol, operand names) of library-call equation ``e`` as a kernel of its own:
        the entry stays small (Numba's compile time grows faster than a function's length)."""
        names: dict = {}  # the entry's buffer name -> (parameter name, dtype name)

        def param(v: Var) -> str:
            return names.setdefault(buf(v), (f"p{len(names)}", v.dtype.name))[0]
        lines = emit_call(e, param)
        head = kernel_head(f"backend: {e.prim.name}", [p for p, _ in names.values()])
        source = "\n".join(head + ["    " + ln for ln in lines or ["pass"]]) + "\n"
        return self.add(source, [dt for _, dt in names.values()]), list(names)


def _shared_kernels(lowered: dict, facts: dict, concats: "_Concats", modules: _Modules) -> dict:
    """{group index: (LoweredGroup, symbol, exact symbol or None)}, the symbols of ``modules``:
    every loop group is a kernel rendered from kernel IR (cpu_render.prepare),
    parts of a concatenation addressed in its buffer (kir_views). A kernel with fastmath
    sin/cos counts their arguments beyond its exact range into the entry's count buffer
    (kir_fastmath.trig_guard, its last argument), and its exact twin (the exact symbol)
    serves the rerun. ``facts``: the var ids passes.signs proves <= 0 (their exp calls
    fastmath's "nonpositive" variant) and whether the graph range-checks computed indices
    (``bounded_trig``). Groups of the same structure share one kernel, hence one module:
    compiled once per process and cached once on disk, whatever graph or layer they come
    from."""
    shared = {}

    def symbol(k) -> str:
        return modules.add(render(k), [np.dtype(b.dtype).name for b in k.params()], len(k.syms))

    known = facts["nonpositive"]
    for gi, lg in lowered.items():
        lg = onto_parts(lg, lambda v: concats.part.get(v.id))
        nonpos = frozenset([n for n, vid in lg.locals.items() if vid in known]
                           + [b.name for b, v in zip(lg.kernel.params(), lg.binds) if v.id in known])
        fast = prepare(lg.kernel, "fast", nonpos, facts["bounded_trig"])
        counts = GUARD in {b.name for b in fast.params()}
        exact = symbol(prepare(lg.kernel, "exact", nonpos, facts["bounded_trig"])) if counts else None
        shared[gi] = (lg, symbol(fast), exact)
    return shared


def _sized_alike(fused: Fused, lowered: dict, concats: "_Concats") -> dict:
    """{group index: its shape-symbolic LoweredGroup} for the loop groups that differ from
    another group of the graph only in sizes (an optimizer's update of each parameter, the
    bias and activation of each layer): one kernel taking its sizes as arguments serves them
    all, so the graph compiles one kernel where it compiled one per size (see ``_alike``)."""
    def symbolic(gi: int) -> Optional[LoweredGroup]:
        try:
            return lower_group(fused, gi, symbolic=True, by_rows=True)
        except Unsupported:  # a view needing concrete sizes
            return None
    return _alike(lowered, concats, symbolic)


def _offset_alike(fused: Fused, lowered: dict, concats: "_Concats") -> dict:
    """{group index: its LoweredGroup with slice starts as arguments} for the loop groups that
    differ from another group of the graph only in where their slices start (an unrolled
    recurrence reading ``x[:, t]`` at each step): one kernel serves them all, where each
    compiled a kernel of its own (see ``_alike``)."""
    return _alike(lowered, concats, lambda gi: lower_group(fused, gi, by_rows=True, offsets=True)
                  if _reads_slices(fused, fused.groups[gi]) else None)


def _alike(lowered: dict, concats: "_Concats", relower: Callable[[int], Optional[LoweredGroup]]) -> dict:
    """{group index: ``relower(group)``} for the groups whose kernels, lowered again with some
    constants as arguments, are one structure where their own kernels are several. A group
    whose relowered index arithmetic keeps a division or remainder (a view the ranges of
    concrete values simplify, kir_index) keeps its own kernel, as do parts of concatenations."""
    classes: dict = {}  # relowered structure -> {own structure}, [(group, relowered LoweredGroup)]
    for gi, lg in lowered.items():
        if any(v.id in concats.part for v in lg.binds):
            continue
        alt = relower(gi)
        if alt is not None and alt.kernel.syms:
            statics, members = classes.setdefault(structural_hash(alt.kernel), (set(), []))
            statics.add(structural_hash(lg.kernel))
            members.append((gi, alt))
    return {gi: alt for statics, members in classes.values()
            if len(statics) > 1 and not _divides(optimize_kernel(members[0][1].kernel)) for gi, alt in members}


def _reads_slices(fused: Fused, g: LoopGroup) -> bool:
    """Whether loop group ``g`` reads a value through a slice (its chain of views has one)."""
    for e in g.eqns:
        for v in e.inputs:
            while isinstance(v, Var) and v.id in fused.aliases:
                view = fused.aliases[v.id]
                if view.prim is P.slice_:
                    return True
                v = view.inputs[0]
    return False


def _divides(k) -> bool:
    """Whether an index expression of kernel ``k`` divides or takes a remainder."""
    found = []
    each_index(k.body, lambda e: found.append(_has_divmod(e)))
    return any(found)


def _has_divmod(e) -> bool:
    return isinstance(e, IBin) and (e.op in ("//", "%") or _has_divmod(e.a) or _has_divmod(e.b))


class _Concats:
    """Concatenates along axis 0 whose parts the kernels before them write in place.

    A concatenated buffer ``bk<group>`` is allocated fresh (never a planned slot, which
    earlier values may occupy) and each part computed by an earlier loop group is written
    into its rows by that group's kernel, which addresses the buffer at the part's offset
    (kir_views.onto_parts), so W3's gradient (hundreds of rows, see passes.embeds) costs no
    copies and no view per part (each costs Numba's array analysis milliseconds). Other
    parts are copied in (``copy_lines``); code that reads a part by name (a library call)
    gets a view of its rows, declared only then (``declared``).

    ``views``: var id -> buffer name (concatenations and parts); ``part``: var id ->
    (concatenation Var, offset); ``allocs``: the entry's lines allocating the buffers;
    ``copies``: group index -> [(offset, part)] to copy."""

    def __init__(self, fused: Fused, args: set):
        self.views: dict = {}
        self.part: dict = {}
        self.allocs: list = []
        self.copies: dict = {}
        self._size: dict = {}  # part var id -> its number of elements
        outs = {v.id for v in fused.outputs if isinstance(v, Var)}
        for gi, g in enumerate(fused.groups):
            if not (isinstance(g, CallGroup) and g.eqn.prim is P.concatenate
                    and g.eqn.params["axis"] % g.eqn.out.ndim == 0 and g.eqn.out.id not in self.views):
                continue
            e, name, off, copies = g.eqn, f"bk{gi}", 0, []
            self.allocs.append(f"    {name} = empty({e.out.size}, np.{e.out.dtype.name})")
            self.views[e.out.id] = name
            for x in e.inputs:
                own = fused.owner.get(x.id)
                if (own is not None and own < gi and isinstance(fused.groups[own], LoopGroup) and x.id not in args
                        and x.id not in self.views and x.id not in fused.aliases
                        and x.id not in outs and x.size):
                    self.part[x.id] = (e.out, off)
                    self.views[x.id] = f"{name}_{len(self.views)}"
                    self._size[x.id] = x.size
                elif x.size:
                    copies.append((off, x))
                off += x.size
            self.copies[gi] = copies

    def declared(self, used: set) -> list:
        """The entry's lines declaring the views of the parts (var ids) ``used`` by name."""
        return [f"    {self.views[vid]} = {self.views[whole.id]}[{off}:{off + self._size[vid]}]"
                for vid, (whole, off) in self.part.items() if vid in used]

    def copy_lines(self, gi: int, whole: Var, buf: Callable[[Var], str]) -> list:
        """The entry's lines copying the parts of concatenation ``whole`` (group ``gi``)
        that no kernel wrote in place (a one-element part as an element)."""
        name = self.views[whole.id]
        return ["    " + ln for off, x in self.copies[gi]
                for ln in ([f"{name}[{off}] = {buf(x)}[0]"] if x.size == 1
                           else copy_loop(name, str(off), buf(x), "0", x.size))]


def _entry(graph: Graph, fused: Fused, name: str, donated: dict, shared: dict, concats: _Concats,
           modules: _Modules, counted: bool) -> tuple:
    """(source lines, symbols of the kernels it calls in the order of its address
    argument ``kaddr``) of one entry function. With ``counted`` the function also returns
    a count that is non-zero when some sin/cos argument lies beyond fastmath's exact range
    (its kernels add to the count buffer ``GUARD``); then the caller reruns the graph with
    the "exact" entry, whose kernels select libm for them (a graph that may rerun writes no
    argument: see ``generate``). The common path keeps vectorizable trig; the exact one
    compiles on demand. ``donated`` outputs are computed into their argument's array; loop
    groups are calls of their ``shared`` kernels (see ``_shared_kernels``), library calls
    other than BLAS's kernels of their own (``modules.call``); ``concats`` places the parts
    of concatenations."""
    args = graph.arguments()
    arg_name = {v.id: f"x{k}" for k, v in enumerate(args)}
    slot = plan(fused)
    numbers: dict = {}

    def num(v) -> int:
        """Stable numbering of a var (or buffer) id in order of first use."""
        key = v if isinstance(v, int) else v.id
        return numbers.setdefault(key, len(numbers))

    views, body, calls = concats.views, [], []
    for o in [o for o in donated if o in views]:  # a part of a concatenation has its buffer
        del donated[o]
    named: set = set()  # parts whose view some code names

    def buf(v: Var) -> str:
        base = reshaped_base(fused.aliases, v)
        if base is not None:  # a call operand reshaping stored memory (fuse with read_reshapes)
            return buf(base)
        if v.id in donated:
            return arg_name[donated[v.id]]
        if v.id in concats.part:
            named.add(v.id)
        return views.get(v.id) or arg_name.get(v.id) or f"b{num(slot.get(v.id, v.id))}"

    def call(sym: str, operands: list) -> str:
        """The line calling kernel module ``sym`` through its address."""
        if sym not in calls:
            calls.append(sym)
        return f"    call_at(kaddr[{calls.index(sym)}], ({''.join(o + ', ' for o in operands)}))"

    allocated = set(arg_name)
    for gi, g in enumerate(fused.groups):
        for v in fused.outputs_of(gi):
            b = slot.get(v.id, v.id)
            if v.id not in views and v.id not in donated and b not in allocated:
                allocated.add(b)
                body.append(f"    {buf(v)} = empty({v.size}, np.{v.dtype.name})")
        if gi in concats.copies:
            body.append(f"    # concatenate into {views[g.eqn.out.id]}")
            body.extend(concats.copy_lines(gi, g.eqn.out, buf))
        elif isinstance(g, CallGroup) and g.eqn.prim is P.matmul:
            body.append("    # call matmul")
            body.extend("    " + ln for ln in emit_call(g.eqn, buf, str(gi)))
        elif isinstance(g, CallGroup):
            body.append(call(*modules.call(g.eqn, buf)) + f"  # {g.eqn.prim.name}")
        else:
            lg, sym, exact = shared[gi]
            operands = [buf(v) for v in lg.binds]
            if exact and name == "kernel_exact":
                sym = exact
            elif exact:
                operands.append(GUARD)
            body.append(call(sym, operands + [f"np.int64({lg.sizes[n]})" for n in lg.kernel.syms]))
    rets = []
    for v in fused.outputs:
        if v.id not in donated:  # the caller has those: its arguments (CpuExecutable._from)
            rets.append(f"{buf(v)}.copy()" if v.id in arg_name else buf(v))
    if counted:
        body.insert(0, f"    {GUARD} = zeros(1, np.float32)")
        rets.append(f"{GUARD}[0]")
    body = concats.allocs + concats.declared(named) + body
    ret = "(" + "".join(r + ", " for r in rets) + ")"
    head = [f"@njit(cache=True, fastmath={_FASTMATH}, error_model=\"numpy\", parallel=False)",
            f"def {name}({''.join(arg_name[v.id] + ', ' for v in args)}kaddr):"]
    return head + body + [f"    return {ret}"], calls


register_backend("cpu", CpuBackend)
