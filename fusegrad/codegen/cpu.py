"""The "cpu" backend: fuse a Graph into loop groups, render each as a kernel module, and
write the graph's steps (kernel calls, BLAS gemms, copies) as a program that one native
entry runs in order, with no Python between kernels (cpu_program). Arrays cross the
boundary as flat contiguous 1-d arrays whose shapes and dtypes are checked first, so
generated index arithmetic can never leave a buffer."""
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
from .cpu_arrays import release_blocks
from .cpu_blas import kind as blas_kind
from .cpu_calls import Gemm, emit_call, matmul_plan
from .cpu_helpers import compile_kernels
from .cpu_link import address, signature as link_signature
from .cpu_program import Program, blocks_of, entry_source, listed, run_address
from .cpu_malloc import keep_freed_blocks
from .cpu_render import kernel_head, prepare, render
from .cpu_symbolic import compile_symbolic
from .half_boundary import compile_upcast
from .kir import IBin, structural_hash
from .kir_fastmath import GUARD
from .kir_passes import each_index, optimize as optimize_kernel
from .kir_lower import Listing, LoweredGroup, lower_group
from .kir_views import onto_parts

# reassoc lets LLVM vectorize reductions, contract allows FMA. No nnan/ninf: NaN and inf
# keep NumPy semantics. error_model="numpy": x/0 gives inf instead of raising.
_FASTMATH = '{"reassoc", "contract"}'
# Primitives whose generated code range-checks integer indices computed in the same kernel.
_INDEXING = (P.index, P.index_put, P.gather, P.scatter_add, P.scatter_reduce)
_SUPPORTED_KINDS = "biuf"


class CpuExecutable:
    """A compiled graph: ``exe(*arrays)`` with arrays ordered graph inputs then consts."""

    def __init__(self, graph: Graph, fused_of: "_FusedOnce", source: str, fn, prog: np.ndarray, kaddr: np.ndarray,
                 exact=None, written=(), returns: Optional[list] = None):
        self._in = [(v.shape, v.dtype) for v in graph.arguments()]
        self._written = tuple(a for _, a in written)  # positions of arguments the kernel overwrites
        self._out_shapes = [v.shape for v in graph.outputs]
        # per output computed into an argument (donated): its argument position; the entry
        # returns only the others (each returned array costs the entry's compile time)
        donated = dict(written)
        self._from = [donated.get(i) for i in range(len(graph.outputs))] if donated else None
        self._fn = fn  # the compiled entry point (see _compile_now)
        self._prog = prog  # the program it runs (cpu_program)
        self._n_blocks = blocks_of(prog)  # the blocks it allocates: freed here if a kernel raises
        self._kaddr = kaddr  # the addresses of the interpreter and the kernels (cpu_link), its last argument
        # () -> (entry point, program, addresses) for sin/cos arguments past fastmath's range
        # (see cpu._entry), compiled on first use
        self._exact = exact
        # an entry with many outputs returns them all, in lists (cpu_program.listed): the
        # position of each returned one among them
        self._returns = returns
        # no written arguments, blocks to free, exact rerun, selection or donation to see to
        self._plain = not (self._written or self._n_blocks or exact or returns is not None or donated)
        self._graph = graph
        self._source = source  # the entry's module, its program, then the kernels' modules
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
        if self._plain:  # (most graphs: none of the steps below)
            res = self._fn(*flat, self._prog, self._kaddr, _NO_BLOCKS)
            shapes = self._out_shapes
            if len(shapes) == 1:
                return (res[0].reshape(shapes[0]),)
            return tuple([r if r.shape == shape else r.reshape(shape) for r, shape in zip(res, shapes)])
        copied = ()
        if self._written:  # an argument written in place must not be read through another
            copied = set(overlapping(flat, self._written))
            copied.update([k for k in self._written if not flat[k].flags.writeable])
            for k in copied:
                flat[k] = flat[k].copy()
        res = _run(self._fn, flat, self._prog, self._kaddr, self._n_blocks)
        if self._exact is not None:
            if res[-1]:
                exact, prog, kaddr = self._exact()
                res = _run(exact, flat, prog, kaddr, blocks_of(prog))
            res = res[:-1]
        if self._returns is not None:
            every = [o for part in res for o in part]
            res = [every[i] for i in self._returns]
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


_NO_BLOCKS = np.zeros(0, np.int64)


def _run(entry, flat: list, prog: np.ndarray, kaddr: np.ndarray, n_blocks: int) -> tuple:
    """``entry``'s outputs for ``flat`` running ``prog``, which allocates ``n_blocks``
    blocks: those a kernel's error left allocated are freed before it propagates."""
    blocks = np.zeros(n_blocks, np.int64) if n_blocks else _NO_BLOCKS
    try:
        return entry(*flat, prog, kaddr, blocks)
    except BaseException:
        if n_blocks:
            release_blocks(blocks)
        raise


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
            record = generate(graph, fused, donated)
            args = [v.id for v in graph.arguments()]
            donated = record.pop("donated")
            record["written"] = [[i, args.index(donated[v.id])] for i, v in enumerate(fused.outputs)
                                 if v.id in donated]
            if key:
                store_generated(key, record)
        fresh = {m for m, src in enumerate(record["kernels"]) if not on_disk(src)}
        mods = [load_module(src) for src in record["kernels"]]
        entry = load_module(record["entry"]).kernel

        def linked(name: str) -> tuple:
            """Program ``name``'s entry point, program and the addresses it calls."""
            with _kernel_errors():
                kaddr = np.array([run_address()] + [address(mods[m].kernel) for m in record["links"][name]], np.uint64)
            return _compile_now(entry, graph), np.array(record["progs"][name], np.int64), kaddr

        # the kernels no process compiled before, in helpers while this one compiles the entry
        new = [record["kernels"][m] for m in dict.fromkeys(record["links"]["kernel"]) if m in fresh]
        by_source = dict(zip(record["kernels"], mods))
        with _kernel_errors():
            compile_kernels(new, lambda src: address(by_source[src].kernel), lambda: _compile_now(entry, graph))
        exact = functools.cache(lambda: linked("kernel_exact")) if "kernel_exact" in record["progs"] else None
        exe = CpuExecutable(graph, _FusedOnce(graph, fused, blas_nearby),
                            "\n\n".join([record["entry"], record["listing"]] + record["kernels"]), *linked("kernel"),
                            exact, tuple(record["written"]), record.get("returns"))
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
    kernels, links, progs = record.get("kernels"), record.get("links"), record.get("progs")
    if isinstance(record.get("entry"), str) and isinstance(record.get("listing"), str) \
            and isinstance(written, list) \
            and all(isinstance(w, list) and len(w) == 2 and type(w[0]) is int and 0 <= w[0] < n_out
                    and type(w[1]) is int and 0 <= w[1] < n for w in written) \
            and isinstance(kernels, list) and all(isinstance(k, str) for k in kernels) \
            and isinstance(links, dict) and isinstance(progs, dict) and "kernel" in links \
            and set(links) == set(progs) \
            and (record.get("returns") is None or isinstance(record["returns"], list)
                 and all(type(i) is int and i >= 0 for i in record["returns"])) \
            and all(isinstance(ms, list) and all(type(m) is int and 0 <= m < len(kernels) for m in ms)
                    for ms in links.values()) \
            and all(isinstance(p, list) and all(type(w) is int for w in p) for p in progs.values()):
        return record
    warnings.warn("fusegrad: malformed generated-code cache entry; rebuilding it")
    return None


def _compile_now(fn, graph: Graph) -> Callable:
    """Type and compile (or load from Numba's disk cache) for the only signature we call
    with, so failures surface here, where the compiler can still fall back to eager.

    Returns that signature's entry point, which skips the dispatcher's typing of the
    arguments: the caller passes only arrays of exactly that type (1-d, C-contiguous,
    writable, aligned, of the graph's dtypes, then the program and the uint64 addresses)."""
    from numba.core.errors import NumbaError
    sig = link_signature([v.dtype for v in graph.arguments()] + [np.int64, np.uint64, np.int64])
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


def generate(graph: Graph, fused: Fused, donated: Optional[dict] = None) -> dict:
    """What the cpu backend generates for ``graph`` as fused into ``fused``, as stored in the
    generated-code cache: ``entry``, the source of its entry module (cpu_program.entry_source);
    ``progs``, its programs: ``kernel`` and, when a kernel calls fastmath's sin/cos,
    ``kernel_exact`` (see ``_entry``); ``listing``, the programs as text; ``kernels``, the
    sources of the kernel modules; ``links``, per program the module index of each kernel
    it calls, in the order of their addresses after the interpreter's; ``donated``, the
    donations used. ``donated`` maps output var ids to the argument var ids whose arrays they
    are computed into (see passes.memory.donations); a graph that may rerun (the exact
    program) writes no argument."""
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
    donated = {} if guarded else {o: a for o, a in (donated or {}).items()
                                  if o not in concats.part and o not in concats.wholes}
    progs, links, listing = {}, {}, []
    for name in ["kernel", "kernel_exact"] if guarded else ["kernel"]:
        prog, calls, outs, returns = _entry(graph, fused, donated, shared, concats, modules, guarded,
                                            name == "kernel_exact")
        progs[name] = prog.encode()
        links[name] = [modules.module[sym] for sym in calls]
        listing.append(f"# {name}\n" + prog.listing())
    out_dtypes = [v.dtype.name for v in outs]
    entry = entry_source([v.dtype.name for v in graph.arguments()], out_dtypes, returns, guarded)
    record = {"entry": entry, "progs": progs, "listing": "\n".join(listing), "kernels": list(modules.sources),
              "links": links, "donated": donated}
    if listed(out_dtypes):  # the entry returns every output, in lists: the caller picks these
        record["returns"] = returns
    return record


class _Modules:
    """The kernel modules an entry calls: ``sources`` (module source -> its index; equal
    sources are one module, compiled once per process and cached once on disk) and
    ``module`` (symbol -> module index)."""

    def __init__(self):
        self.sources: dict = {}
        self.module: dict = {}

    def add(self, source: str) -> str:
        """The symbol of the module ``source``."""
        m = self.sources.setdefault(source, len(self.sources))
        sym = f"_kr{m}"
        self.module[sym] = m
        return sym

    def call(self, e, ref: Callable[[Var], tuple]) -> tuple:
        """(symbol, operands as (reference, length)) of library-call equation ``e`` as a
        kernel of its own."""
        names: dict = {}  # reference -> [parameter name, dtype name, length]

        def param(v: Var) -> str:
            p = names.setdefault(ref(v), [f"p{len(names)}", v.dtype.name, v.size])
            p[2] = max(p[2], v.size)  # a view at the start of a larger buffer shares its parameter
            return p[0]
        lines = emit_call(e, param)
        head = kernel_head(f"backend: {e.prim.name}", [p for p, _, _ in names.values()],
                           table=[dt for _, dt, _ in names.values()])
        source = "\n".join(head + ["    " + ln for ln in lines or ["pass"]]) + "\n"
        return self.add(source), [(r, n) for r, (_, _, n) in names.items()]


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
        return modules.add(render(k, table=True))

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

    A concatenated buffer is a region of its own (never a planned slot, which earlier values
    may occupy) and each part computed by an earlier loop group is written into its rows by
    that group's kernel, which addresses the buffer at the part's offset
    (kir_views.onto_parts), so W3's gradient (hundreds of rows, see passes.embeds) costs no
    copies. Other parts are copied in.

    ``wholes``: the var ids of those concatenations; ``part``: var id -> (concatenation Var,
    element offset); ``copies``: group index -> [(element offset, part)] to copy."""

    def __init__(self, fused: Fused, args: set):
        self.wholes: set = set()
        self.part: dict = {}
        self.copies: dict = {}
        outs = {v.id for v in fused.outputs if isinstance(v, Var)}
        for gi, g in enumerate(fused.groups):
            if not (isinstance(g, CallGroup) and g.eqn.prim is P.concatenate
                    and g.eqn.params["axis"] % g.eqn.out.ndim == 0 and g.eqn.out.id not in self.wholes):
                continue
            e, off, copies = g.eqn, 0, []
            self.wholes.add(e.out.id)
            for x in e.inputs:
                own = fused.owner.get(x.id)
                if (own is not None and own < gi and isinstance(fused.groups[own], LoopGroup) and x.id not in args
                        and x.id not in self.wholes and x.id not in self.part and x.id not in fused.aliases
                        and x.id not in outs and x.size):
                    self.part[x.id] = (e.out, off)
                elif x.size:
                    copies.append((off, x))
                off += x.size
            self.copies[gi] = copies


def _entry(graph: Graph, fused: Fused, donated: dict, shared: dict, concats: _Concats, modules: _Modules,
           counted: bool, exact: bool) -> tuple:
    """(Program, symbols of the kernels it calls in the order of their addresses after the
    interpreter's, the distinct output vars it returns, the position among those of each
    output returned) of one entry (cpu_program). With ``counted`` the entry also returns a
    count that is non-zero when some sin/cos argument lies beyond fastmath's exact range
    (the fast kernels add to the count buffer ``GUARD``); then the caller reruns the graph
    with the ``exact`` program, whose kernels select libm for them (a graph that may rerun
    writes no argument: see ``generate``). The common path keeps vectorizable trig; the
    exact one compiles on demand. ``donated`` outputs are computed into their argument's
    array; loop groups are calls of their ``shared`` kernels (see ``_shared_kernels``),
    library calls other than BLAS's kernels of their own (``modules.call``); ``concats``
    places the parts of concatenations."""
    args = graph.arguments()
    arg_slot = {v.id: k for k, v in enumerate(args)}
    ret = [v for v in fused.outputs if v.id not in donated]  # the caller has the others: its arguments
    outs = list({v.id: v for v in ret}.values())
    kinds = list(dict.fromkeys(v.dtype for v in outs))  # (a listed entry allocates one run per dtype)
    outs.sort(key=lambda v: kinds.index(v.dtype))
    prog = Program(len(args), [v.size for v in outs], counted)
    out_slot = {v.id: len(args) + j for j, v in enumerate(outs)}
    slot = plan(fused, concats.wholes)  # (a whole holds its parts, read later: laid out by its uses)
    regions: dict = {}  # buffer id -> its slot

    def ref(v: Var) -> tuple:
        """(slot, byte offset) of var ``v``'s memory."""
        base = reshaped_base(fused.aliases, v)
        if base is not None:  # a call operand reshaping stored memory (fuse with read_reshapes)
            return ref(base)
        if v.id in donated:
            return arg_slot[donated[v.id]], 0
        if v.id in concats.part:
            whole, off = concats.part[v.id]
            s, at = ref(whole)
            return s, at + off * v.dtype.itemsize
        if v.id in arg_slot:
            return arg_slot[v.id], 0
        if v.id in out_slot:
            return out_slot[v.id], 0
        b = v.id if v.id in concats.wholes else slot.get(v.id, v.id)
        if b not in regions:
            regions[b] = prog.region(v.size * v.dtype.itemsize)
        return regions[b], 0

    calls: list = []

    def kernel(sym: str) -> int:
        """The index in ``kaddr`` of kernel module ``sym``."""
        if sym not in calls:
            calls.append(sym)
        return calls.index(sym) + 1

    for gi, g in enumerate(fused.groups):
        if gi in concats.copies:
            whole = ref(g.eqn.out)
            for off, x in concats.copies[gi]:
                size = x.dtype.itemsize
                prog.copy((whole[0], whole[1] + off * size), ref(x), x.size * size)
        elif isinstance(g, CallGroup) and g.eqn.prim is P.matmul:
            _gemm(prog, matmul_plan(g.eqn), ref)
        elif isinstance(g, CallGroup):
            sym, operands = modules.call(g.eqn, ref)
            prog.call(kernel(sym), operands, [], f"{sym} {g.eqn.prim.name}")
        else:
            lg, sym, exact_sym = shared[gi]
            operands = [(ref(v), v.size) for v in lg.binds]
            if exact_sym and exact:
                sym = exact_sym
            elif exact_sym:
                operands.append(((prog.guard, 0), 1))
            prog.call(kernel(sym), operands, [lg.sizes[n] for n in lg.kernel.syms], sym)
    for v in outs:  # an output that is an argument or a view of another value: a copy of its own
        if ref(v) != (out_slot[v.id], 0):
            prog.copy((out_slot[v.id], 0), ref(v), v.size * v.dtype.itemsize)
    return prog, calls, outs, [out_slot[v.id] - len(args) for v in ret]


def _gemm(prog: Program, g: Optional[Gemm], ref: Callable[[Var], tuple]) -> None:
    """Program ``prog`` runs matmul plan ``g`` (cpu_calls.matmul_plan) on the memory ``ref`` gives."""
    if g is None:
        return
    c, size = ref(g.c), g.c.dtype.itemsize
    if g.epilogue is not None and ref(g.epilogue) != c:
        prog.copy(c, ref(g.epilogue), g.c.size * size)
    if not g.batches:
        prog.zero(c, g.c.size * size)
        return
    prog.gemm(g.dtype, g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.n, g.alpha, g.beta, ref(g.a), ref(g.b), c,
              g.batches)


register_backend("cpu", CpuBackend)
