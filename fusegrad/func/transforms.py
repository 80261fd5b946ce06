"""grad, vjp, jvp, jacrev, jacfwd and hessian as IR transforms.

Each transform traces the function once per input signature into a Graph, applies the
VJP or JVP pass (fusegrad.passes.autodiff: each primitive's vjp/jvp rule), optimizes the
result and evaluates it on the actual argument Tensors through the dispatcher
(``run_tensors``). So the results are differentiable by the eager engine when inputs
require grad, transforms nest (an inner transform evaluated inside an outer trace records
into it) and an outer ``compile``/``vmap`` traces straight through them.

``jacrev`` evaluates the VJP graph once with its cotangent batched over the rows of an
identity (the batching pass of vmap); ``jacfwd`` does the same with the JVP graph's
tangent; ``hessian`` is ``jacfwd(jacrev)``.

Tracing, guards and the cache of variants are compile's (fusegrad.tracer.capture): graphs
are cached per (function, transform chain, input signature) and reused while the captured
tensors keep their shape, dtype and requires_grad and every guarded Python value (globals
and closure values the function names, module training flags, optimizer hyperparameters)
still reads the same. Functions that cannot be traced (GraphBreak:
data-dependent control flow, ``.item()``; in-place updates of arguments or captured
tensors) run with the eager-autograd implementation in ``fusegrad.func.eager``.

What each wrapper below evaluates is one call; called outside any trace, the wrapper runs
it through ``fusegrad.func.fused``: the whole call captured once per signature as a closed
graph, interpreted on its first calls and compiled by the cpu backend once warm (the
warm-up policy is documented there; ``wrapper.cache_info()`` counts)."""
from __future__ import annotations

import functools
import weakref
from typing import Callable, Sequence, Union

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from ..ir.graph import Eqn, Var
from ..passes.autodiff import active, jvp_graph, vjp_graph
from ..passes.dce import dce
from ..runtime import ops as O
from ..runtime.grad_mode import enable_grad
from ..runtime.interpreter import run_tensors
from ..runtime.tensor import Size, Tensor, wrap
from ..tracer.capture import Captured, Variants, capture, in_strict_capture
from ..tracer.guards import flatten_call, signature
from ..tracer.trace import GraphBreak, capturing, current_traces
from . import fused
from . import eager as _eager
from .eager import _argnums_tuple
from .fused import chain_of
from .pytree import children, flatten, unflatten
from .vmap import _evaluate

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "STATS", "cache_clear"]

# counters read by tests: "traces" (functions traced), "hits" (cached graphs reused),
# "evaluations" (transformed graphs run unbatched), "batched_evaluations" (jacrev/jacfwd:
# one batched run each), "fallbacks" (calls run by fusegrad.func.eager) with their reasons
STATS: dict = {"traces": 0, "hits": 0, "evaluations": 0, "batched_evaluations": 0, "fallbacks": 0,
               "fallback_reasons": []}
MAX_SIGNATURES = 8  # cached variants per base function (least recently used evicted)


class _Fallback(Exception):
    """This call runs with the eager-autograd implementation; the message says why."""


# ------------------------------------------------------------------ tracing
class _Entry(Captured):
    """One traced signature: the source graph (outputs: the function's output leaves, then
    aux tensors), where outputs go, and the transformed graphs derived from it."""

    def __init__(self, graph, guards, n_out, out_spec, aux_slots, aux_spec):
        super().__init__(graph, guards)
        self.n_out = n_out
        self.out_spec = out_spec
        self.aux_slots = aux_slots  # per aux leaf: ("t", graph output index) or ("v", value)
        self.aux_spec = aux_spec
        # not reusable when it captured values of an enclosing trace
        self.reusable = not any(type(h._data) is Var for _, h in graph.consts)
        self.derived: dict = {}

    def get(self, key, build: Callable):
        v = self.derived.get(key)
        if v is None:
            v = self.derived[key] = build()
        return v

    def consts(self) -> list:
        return _const_values(self.graph)

    def outs(self, res: list) -> list:
        return list(res[:self.n_out])

    def aux(self, res: list):
        return unflatten(self.aux_spec, [res[s[1]] if s[0] == "t" else s[1] for s in self.aux_slots])


def _const_values(graph) -> list:
    """The values of ``graph``'s consts now; inside a capturing trace a value read at call time
    (a random key, a live number) stays its holder, which that trace captures as such."""
    from ..tracer.live import CallTimeConst
    if capturing():
        return [h for _, h in graph.consts]
    return [wrap(h.draw()) if isinstance(h, CallTimeConst) else h for _, h in graph.consts]


def _trace(func: Callable, leaves: list, spec, has_aux: bool) -> _Entry:
    with capture(func, leaves) as (tr, tleaves), enable_grad():
        inputs = [(t, t._data) for t in tleaves if isinstance(t, Tensor)]
        args, kwargs = unflatten(spec, tleaves)
        out = func(*args, **kwargs)
        STATS["traces"] += 1
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise _Fallback("has_aux=True but the function did not return a pair")
            out, aux = out
        out_leaves, out_spec = flatten(out)
        if not all(isinstance(o, Tensor) for o in out_leaves):
            raise _Fallback("the function returned a non-Tensor output")
        g = tr.graph
        g.outputs = [tr.lift(o) for o in out_leaves]
        aux_leaves, aux_spec = flatten(aux)
        slots = []
        for a in aux_leaves:
            if isinstance(a, Tensor):
                slots.append(("t", len(g.outputs)))
                g.outputs.append(tr.lift(a))
            else:
                slots.append(("v", a))
        if any(t._data is not v for t, v in inputs):
            raise _Fallback("in-place update of an argument inside the function")
        if tr.mutated():
            raise _Fallback("in-place update of a captured tensor inside the function")
    return _Entry(g, tr.guards, len(out_leaves), out_spec, slots, aux_spec).seal()


def _optimized(graph):
    """The pipeline's cleanup (CSE, folding, DCE) of a transformed graph; unchanged if a
    pass cannot handle it. An output that the cleanup makes alias what it did not alias in
    ``graph`` is computed as a copy: one reduced to an argument or a view of one (``y * 1``
    into ``y``: the gradient of ``(x * y).sum()`` with respect to x), or one merged with
    another output's value (CSE of two equal expressions, one of them sliced). So a result
    shares memory with a tensor the caller passed, or with another result, only where the
    function's own did (an identity's tangent, a returned value and a view of it), as in
    PyTorch."""
    from ..passes.pipeline import optimize
    was = _output_roots(graph)
    try:
        opt = optimize(graph)
    except Exception:  # noqa: BLE001 - an optimization is never required for correctness
        return graph
    first: dict = {}  # root of an output now -> the root that output had in ``graph``
    for k, (o, before, now) in enumerate(zip(opt.outputs, was, _output_roots(opt))):
        if before is None or now is None:
            continue
        if (now[1] and not before[1]) or first.setdefault(now[0], before[0]) != before[0]:
            out = Var(o.shape, o.dtype, o.trace)
            opt.eqns.append(_copy(o, out))
            opt.outputs[k] = out
    return opt


def _inlined() -> bool:
    """Whether a transform runs right inside compile's trace (not inside another transform's,
    whose rules, vmap's batching and the pipeline's factoring after it, want optimized graphs)."""
    traces = current_traces()
    return bool(traces) and traces[-1].captures_state


def _output_roots(graph) -> list:
    """Per output of ``graph``: (id of the value it is or views through aliasing primitives,
    whether that value is an argument), or None for a literal."""
    roots, args = graph.view_roots(), {v.id for v in graph.arguments()}
    return [(roots.get(o.id, o.id), roots.get(o.id, o.id) in args) if type(o) is Var else None
            for o in graph.outputs]


def _copy(v: Var, out: Var) -> Eqn:
    """``out = v`` as an equation that computes a new value (exact for every value)."""
    if v.dtype.kind == "b":
        return Eqn(P.logical_or, (v, False), {}, out)
    return Eqn(P.mul, (v, 1.0 if v.dtype.kind in "fc" else 1), {}, out)


# ------------------------------------------------------------------ cache
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # base function -> Variants


def _entry(func, chain_key: tuple, a: "_Args", has_aux: bool) -> _Entry:
    """The traced entry for this call: a cached one while it holds (its captured tensors and
    guarded Python values unchanged), else a fresh trace, cached when reusable."""
    base, chain = chain_of(func)
    sig = (chain + chain_key, has_aux, signature(a.leaves, a.spec_key))
    try:
        variants = _CACHE.get(base)
        if variants is None:
            variants = _CACHE[base] = Variants(MAX_SIGNATURES, _Entry.holds, evict=True)
    except TypeError:  # not weak-referenceable or not hashable: no cache
        variants = None
    if variants is not None:
        e = variants.find(sig)
        if e is not None:
            STATS["hits"] += 1
            e.reguard()
            return e
    e = _trace(func, a.leaves, a.spec, has_aux)
    if variants is not None and e.reusable:
        variants.add(sig, e)
    return e


def cache_clear() -> None:
    """Drop every cached transformed graph."""
    _CACHE.clear()


# ------------------------------------------------------------------ argument bookkeeping
class _Args:
    """The flattened call: leaves, the spec and its cache key, the graph-input position of
    each tensor leaf, and per positional argument its leaf range and pytree spec."""

    def __init__(self, args: tuple, kwargs: dict):
        self.leaves, self.spec, self.spec_key = flatten_call(args, kwargs)
        self.tensors = [x for x in self.leaves if isinstance(x, Tensor)]
        self.input_pos, k = [], 0
        for x in self.leaves:
            self.input_pos.append(k if isinstance(x, Tensor) else None)
            k += isinstance(x, Tensor)
        # per positional argument: its leaf count and spec, read off the call's spec (the
        # first child of the (args list, kwargs dict) pair) instead of flattening it again
        self.ranges, self.specs, k = [], [], 0
        for n, s in children(children(self.spec)[0][1]):
            self.ranges.append((k, k + n))
            self.specs.append(s)
            k += n

    def wrt(self, nums: Sequence[int]) -> list:
        """Graph-input positions of the leaves of ``args[nums]``; every one must be a
        floating Tensor."""
        out = []
        for i in nums:
            if not -len(self.ranges) <= i < len(self.ranges):
                raise _Fallback(f"argnums {i} out of range")
            lo, hi = self.ranges[i]
            for j in range(lo, hi):
                x = self.leaves[j]
                if not isinstance(x, Tensor) or not D.np_differentiable(x._data.dtype):
                    raise _Fallback("differentiating with respect to a non-floating or non-Tensor input")
                out.append(self.input_pos[j])
        return out

    def group(self, nums: Sequence[int], flat: list, argnums):
        """``flat`` (one per leaf of args[nums]) rebuilt per argument, as torch.func."""
        res, k = [], 0
        for i in nums:
            lo, hi = self.ranges[i]
            res.append(unflatten(self.specs[i], flat[k:k + hi - lo]))
            k += hi - lo
        return res[0] if isinstance(argnums, int) else tuple(res)


def _fallback(reason: str) -> None:
    """Count a call run by the eager implementation; inside a transform's closed-graph capture
    the capture is abandoned instead (the call then runs directly and is counted there)."""
    if in_strict_capture():
        raise GraphBreak(reason)
    STATS["fallbacks"] += 1
    if len(STATS["fallback_reasons"]) < 100:
        STATS["fallback_reasons"].append(reason)


def _run(graph, values: list, runner: "fused.GraphRunner" = None) -> list:
    """``graph`` evaluated on ``values``; by ``runner`` (interpreted, then compiled) where
    the call allows it."""
    STATS["evaluations"] += 1
    res = runner(values) if runner is not None else None
    return res if res is not None else run_tensors(graph, values + _const_values(graph))


def _batched(graph, values: list, randomness: str) -> list:
    """One evaluation of ``graph`` with the batching pass; ``values``: (tensor, bdim) per
    graph input. Returns (tensor, bdim) per output."""
    STATS["batched_evaluations"] += 1
    return _evaluate(graph, values, randomness)


def _front(t: Tensor, bdim, size: int) -> Tensor:
    """``t`` with its batch axis first (broadcast when unbatched)."""
    if bdim is None:
        shape = tuple(t._data.shape)
        return O.broadcast_to(O.reshape(t, (1,) + shape), (size,) + shape)
    return t if bdim == 0 else O.movedim(t, bdim, 0)


def _unbatched(t: Tensor, bdim) -> Tensor:
    return t if bdim is None else O.select(t, bdim, 0)


# ------------------------------------------------------------------ transforms
def _closed(impl: Callable, func: Callable, kind: tuple) -> Callable:
    """The transform's wrapper: ``impl`` (one call, evaluated directly) through its closed
    graph per signature (fusegrad.func.fused)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return fused.call(wrapper._fg_chain, impl, args, kwargs)
    return fused.mark(wrapper, func, kind)


def grad_and_value(func: Callable, argnums: Union[int, Sequence[int]] = 0, has_aux: bool = False) -> Callable:
    """``f -> (grad of f, f)`` for a scalar-valued f (with aux: ``(grad, (value, aux))``)."""
    nums = _argnums_tuple(argnums)

    def impl(*args, **kwargs):
        try:
            a = _Args(args, kwargs)
            wrt = a.wrt(nums)
            e = _entry(func, ("grad", nums), a, has_aux)
            o = e.graph.outputs[0] if e.n_out == 1 else None
            if o is None or o.size != 1 or not D.np_differentiable(o.dtype) or o.dtype.kind == "c":
                raise _Fallback("the output is not one real floating scalar")
            inlined = _inlined()  # (then compile's pipeline optimizes the gradient with the rest of its graph)
            g = e.get(("vjp", tuple(wrt), inlined), lambda: (lambda j: j if inlined else _optimized(j))(
                vjp_graph(e.graph, wrt, [0], unit_cotangents=True)))
        except (GraphBreak, _Fallback) as ex:
            _fallback(getattr(ex, "reason", str(ex)))
            return _eager.grad_and_value(func, argnums, has_aux)(*args, **kwargs)
        res = _run(g, a.tensors + e.consts())
        n = len(e.graph.outputs)
        gr = a.group(nums, res[n:], argnums)
        value = unflatten(e.out_spec, e.outs(res))
        return (gr, (value, e.aux(res))) if has_aux else (gr, value)
    return _closed(impl, func, ("grad", nums, has_aux))


def grad(func: Callable, argnums: Union[int, Sequence[int]] = 0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar-valued ``func`` with respect to ``args[argnums]``."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g
    # its own chain: a transform of grad(f) (vmap, jacrev, grad) must not find the graphs
    # captured for the same transform of grad_and_value(f), whose outputs differ
    base, chain = gv._fg_chain
    wrapper._fg_chain, wrapper.cache_info = (base, chain + (("gradient only",),)), gv.cache_info
    return wrapper


def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` returns one gradient per primal.
    The traced function and its VJP graph are reused per signature; each is interpreted
    until warm, then compiled (``fused.GraphRunner``)."""
    try:
        a = _Args(primals, {})
        wrt = a.wrt(range(len(primals)))
        e = _entry(func, ("vjp",), a, has_aux)
    except (GraphBreak, _Fallback) as ex:
        _fallback(getattr(ex, "reason", str(ex)))
        return _eager.vjp(func, *primals, has_aux=has_aux)
    values = a.tensors + e.consts()
    res = _run(e.graph, values, e.get("forward runner", lambda: fused.GraphRunner(e.graph)))
    outs = e.outs(res)
    diff = [i for i in range(e.n_out) if D.np_differentiable(e.graph.outputs[i].dtype)]
    if len(diff) != e.n_out:
        bad = next(o for o in outs if not D.np_differentiable(o._data.dtype))
        raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor "
                           f"with dtype {bad.dtype}")

    def build():
        j = vjp_graph(e.graph, wrt, diff)
        j.outputs = j.outputs[len(e.graph.outputs):]
        return _optimized(dce(j))
    g = e.get(("vjp", tuple(wrt), tuple(diff)), build)
    runner = e.get(("vjp runner", tuple(wrt), tuple(diff)), lambda: fused.GraphRunner(g))

    def vjp_fn(cotangents, retain_graph=True):
        cots, _ = flatten(cotangents)
        if len(cots) != e.n_out:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function: {len(cots)} cotangents for {e.n_out} outputs")
        cs = [cots[i] if isinstance(cots[i], Tensor) else O.as_t(cots[i]) for i in diff]
        for k, (c, i) in enumerate(zip(cs, diff)):
            if tuple(c.shape) != tuple(e.graph.outputs[i].shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of {c.shape} and output[{k}] "
                                   f"has a shape of {Size(e.graph.outputs[i].shape)}.")
        grads = _run(g, values + cs, runner)
        return tuple(a.group([i], grads[a.ranges[i][0]:a.ranges[i][1]], i) for i in range(len(primals)))
    out = unflatten(e.out_spec, outs)
    return (out, vjp_fn, e.aux(res)) if has_aux else (out, vjp_fn)


def jvp(func: Callable, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J·tangents)`` by the JVP pass: one evaluation of the forward-mode
    graph (a closed graph per signature: see fusegrad.func.fused). ``strict``: an output
    that does not depend on the primals raises, as torch.func's, instead of a zero tangent."""
    _eager.check_jvp_arguments(primals, tangents)
    if isinstance(primals, (tuple, list)) and isinstance(tangents, (tuple, list)):
        base, chain = chain_of(func)
        return fused.call((base, chain + (("jvp", has_aux, strict),)),
                          lambda p, t: _jvp(func, p, t, has_aux, strict), (tuple(primals), tuple(tangents)), {})
    return _jvp(func, primals, tangents, has_aux, strict)


def _jvp(func: Callable, primals, tangents, has_aux: bool, strict: bool):
    try:
        if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
            raise _Fallback("primals and tangents must be tuples")
        a = _Args(tuple(primals), {})
        wrt = a.wrt(range(len(primals)))
        tl, _ = flatten(list(tangents))
        if len(tl) != len(wrt) or not all(isinstance(t, Tensor) for t in tl):
            raise _Fallback("tangents do not match the primals")
        for p, t in zip([a.tensors[i] for i in wrt], tl):
            if tuple(t.shape) != tuple(p.shape):
                raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the "
                                   f"original Tensor, this is not supported. Tensor is of size {list(p.shape)} "
                                   f"while the given forward gradient is of size {list(t.shape)}.")
        e = _entry(func, ("jvp",), a, has_aux)
    except (GraphBreak, _Fallback) as ex:
        _fallback(getattr(ex, "reason", str(ex)))
        return _eager.jvp(func, primals, tangents, strict=strict, has_aux=has_aux)
    if strict:
        pv = e.graph.arguments()
        act = active(e.graph, {pv[i].id for i in wrt})
        if any(o.id not in act for o in e.graph.outputs[:e.n_out]):
            raise RuntimeError(_eager.JVP_STRICT)
    g = e.get(("jvp", tuple(wrt)), lambda: _optimized(jvp_graph(e.graph, wrt)))
    res = _run(g, a.tensors + e.consts() + tl)
    n = len(e.graph.outputs)
    out = unflatten(e.out_spec, e.outs(res))
    tout = unflatten(e.out_spec, res[n:n + e.n_out])
    return (out, tout, e.aux(res)) if has_aux else (out, tout)


def _eye_blocks(sizes: list, shapes: list, dtypes: list) -> list:
    """Rows of an identity of order sum(sizes), split into one block per piece and
    reshaped to (N, *shape): the batched one-hot cotangents/tangents."""
    n = sum(sizes)
    eye = np.eye(n)
    out, k = [], 0
    for s, shp, dt in zip(sizes, shapes, dtypes):
        out.append(wrap(np.ascontiguousarray(eye[:, k:k + s], dtype=dt).reshape((n,) + tuple(shp))))
        k += s
    return out


def _jac_call(func, argnums, has_aux, kind: str, randomness: str):
    nums = _argnums_tuple(argnums)

    def impl(*args, **kwargs):
        try:
            a = _Args(args, kwargs)
            wrt = a.wrt(nums)
            e = _entry(func, (kind, nums), a, has_aux)
            outs = e.graph.outputs[:e.n_out]
            cx = next((i for i, o in enumerate(outs) if o.dtype.kind == "c"), None)
            if cx is not None:  # (PyTorch's Jacobians are of real outputs only)
                raise RuntimeError(f"{kind}: Expected all outputs to be real but received complex tensor at flattened "
                                   f"input idx: {cx}")
            bad = next((o for o in outs if not D.np_differentiable(o.dtype)), None)
            if bad is not None and kind == "jacrev":
                raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got "
                                   f"Tensor with dtype {D.from_numpy_dtype(bad.dtype)}")
            if bad is not None:
                raise _Fallback("a non-floating output")
            ins = [a.tensors[i] for i in wrt]
            if kind == "jacrev":
                g = e.get(("vjp", tuple(wrt), e.n_out), lambda: _optimized(
                    vjp_graph(e.graph, wrt, list(range(e.n_out)))))
                seeds = e.get(("eye", tuple(wrt)), lambda: _eye_blocks(
                    [o.size for o in outs], [o.shape for o in outs], [o.dtype for o in outs]))
            else:
                g = e.get(("jvp", tuple(wrt)), lambda: _optimized(jvp_graph(e.graph, wrt)))
                seeds = e.get(("eye", tuple(wrt)), lambda: _eye_blocks(
                    [int(np.prod(x._data.shape, dtype=np.int64)) for x in ins],
                    [x._data.shape for x in ins], [x._data.dtype for x in ins]))
            size = int(seeds[0]._data.shape[0]) if seeds else 0
            if size == 0:
                raise _Fallback("an empty Jacobian")
        except (GraphBreak, _Fallback) as ex:
            _fallback(getattr(ex, "reason", str(ex)))
            fn = _eager.jacrev if kind == "jacrev" else _eager.jacfwd
            return fn(func, argnums, has_aux=has_aux)(*args, **kwargs)
        n = len(e.graph.outputs)
        vals = [(x, None) for x in a.tensors] + [(c, None) for c in e.consts()] + [(s, 0) for s in seeds]
        res = _batched(g, vals, randomness)
        fwd = [_unbatched(t, d) for t, d in res[:n]]
        if kind == "jacrev":
            # res[n + i]: (N, *x_i.shape), row r = d out_flat[r] / d x_i
            grads = [_front(t, d, size) for t, d in res[n:]]
            blocks, off = [], 0
            for o in outs:
                m = o.size
                blocks.append([O.reshape(gi if m == size else gi[off:off + m], o.shape + tuple(x._data.shape))
                               for gi, x in zip(grads, ins)])
                off += m
        else:
            # res[n + j]: (N, *o_j.shape), row r = d o_j / d x_flat[r]
            touts = [_front(t, d, size) for t, d in res[n:n + e.n_out]]
            blocks = []
            for o, t in zip(outs, touts):
                row, off = [], 0
                for x in ins:
                    k = int(np.prod(x._data.shape, dtype=np.int64))
                    piece = t if k == size else t[off:off + k]
                    piece = O.reshape(piece, (k, o.size)).T
                    row.append(O.reshape(piece, o.shape + tuple(x._data.shape)))
                    off += k
                blocks.append(row)
        jac = unflatten(e.out_spec, [a.group(nums, b, argnums) for b in blocks])
        if has_aux:
            return jac, e.aux(fwd)
        return jac
    return impl


def jacrev(func: Callable, argnums: Union[int, Sequence[int]] = 0, *, has_aux: bool = False,
           chunk_size=None, _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian by reverse mode: the VJP graph evaluated once with its cotangent
    batched over the rows of an identity. ``chunk_size`` and ``_preallocate_and_copy`` are
    accepted for compatibility (all rows run at once)."""
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _closed(_jac_call(func, argnums, has_aux, "jacrev", "same"), func,
                   ("jacrev", _argnums_tuple(argnums), has_aux))


def jacfwd(func: Callable, argnums: Union[int, Sequence[int]] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """The Jacobian by forward mode: the JVP graph evaluated once with its tangent batched
    over the rows of an identity."""
    return _closed(_jac_call(func, argnums, has_aux, "jacfwd", randomness), func,
                   ("jacfwd", _argnums_tuple(argnums), has_aux, randomness))


def hessian(func: Callable, argnums: Union[int, Sequence[int]] = 0) -> Callable:
    """The Hessian: jacfwd of jacrev."""
    return jacfwd(jacrev(func, argnums), argnums)
