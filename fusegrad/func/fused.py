"""Each transform's whole computation per input signature as one graph, reused and run fused.

A transform (``grad``, ``jacrev``, ``vmap``, ... and compositions of them) called outside any
trace captures what it computes for the call's signature (the function's trace, the VJP/JVP
pass, the batching pass, the layout of the result) as one closed graph through the capture
layer that ``compile`` uses (``tracer.capture``): the same guards (globals and closure values
the function names, module training flags), captured tensors read at every call, and a cache
of variants per base function, transform chain and signature (``MAX_VARIANTS``, least
recently used evicted). A later call with an equal signature whose guards hold does not
trace again.

When compiling pays (a JIT's warm-up counter): the first two calls of a signature interpret
its graph op by op (the first costs what an uncached call costs, plus a trace that computes
nothing; the second no trace); the ``FUSE_AFTER``-th call (the third) compiles it with the cpu
backend, as ``compile`` does (optimization, fusion, Numba kernels, cached on disk), and every
later call runs the compiled executable. A signature called once or twice (a program that
transforms a function at two inputs of one shape, then stops) never pays a compile. A graph
the backend rejects keeps being interpreted.

Run directly, as before (traced through, or evaluated op by op on the dispatcher): calls
inside a trace (a transform nested in another, or in ``compile``: the outer capture records
them), calls with tensor arguments that require grad or carry forward-mode tangents (the
results must be differentiable by eager autograd), and functions that cannot be captured (a
graph break, an in-place update of a captured tensor: the transform's eager fallback). A
graph whose results require grad through a captured tensor (a parameter with
``requires_grad``) is reused but always interpreted, so autograd records it."""
from __future__ import annotations

import weakref
from typing import Any, Callable

from ..runtime import forward_state
from ..runtime.grad_mode import STATE
from ..runtime.tensor import Tensor, wrap
from ..tracer.capture import Captured, Variants, capture
from ..tracer.guards import flatten_call, signature
from ..tracer.trace import GraphBreak, current_traces
from .pytree import unflatten

__all__ = ["FUSE_AFTER", "MAX_VARIANTS", "GraphRunner", "call", "cache_info", "cache_clear", "chain_of", "mark"]

FUSE_AFTER = 3  # the call of one signature that compiles its graph
MAX_VARIANTS = 8  # closed graphs kept per base function (least recently used evicted)


def chain_of(func) -> tuple:
    """(base function, transform chain) of a transform's wrapper: ``hessian(f)`` built anew
    at each call still finds the graphs captured for ``jacfwd(jacrev(f))``."""
    return getattr(func, "_fg_chain", (func, ()))


def mark(wrapper, func, kind: tuple):
    """Record on ``wrapper`` that it is transform ``kind`` of ``func``; gives it ``cache_info``."""
    base, chain = chain_of(func)
    wrapper._fg_chain = key = (base, chain + (kind,))
    wrapper.cache_info = lambda: cache_info(key)
    return wrapper


class _Direct:
    """A cached decision to run a signature's transform directly; ``reason`` says why."""

    def __init__(self, reason: str):
        self.reason = reason


class _Closed:
    """One signature's closed graph (a ``compiled._Traced``: graph, output slots, guards), its
    call count and, once warm, its compiled plan."""

    def __init__(self, traced):
        self.traced = traced
        self.calls = 0
        self.plan = None
        self.interpret_only = bool(traced.diff_outputs)  # results need eager autograd's nodes

    def holds(self) -> bool:
        return self.traced.holds()

    def run(self, leaves: list, counts: dict) -> Any:
        from ..runtime.compiled import _call_plan
        self.calls += 1
        if self.plan is None and not self.interpret_only and self.calls >= FUSE_AFTER:
            self._compile(leaves, counts)
        if self.plan is not None:
            counts["fused_calls"] += 1
            return _call_plan(self.plan, leaves)
        counts["interpreted_calls"] += 1
        return self._interpret(leaves)

    def _compile(self, leaves: list, counts: dict) -> None:
        from ..codegen.backend import Unsupported
        from ..runtime.compiled import plan_of
        try:
            self.plan = plan_of(self.traced, [False] * sum(isinstance(x, Tensor) for x in leaves),
                                "cpu", "none", "transform")
            counts["compiles"] += 1
        except Unsupported as e:
            self.interpret_only = True
            counts["notes"].append(f"interpreted: {e.reason}")

    def _interpret(self, leaves: list) -> Any:
        from ..runtime.interpreter import run_tensors
        from ..tracer.live import CallTimeConst
        g = self.traced.graph
        consts = [wrap(h.draw()) if isinstance(h, CallTimeConst) else h for _, h in g.consts]
        tensors = [x for x in leaves if isinstance(x, Tensor)]
        res = run_tensors(g, tensors + consts)
        tr = self.traced
        return unflatten(tr.out_spec, [res[s[1]] if s[0] == "t" else tensors[s[1]] if s[0] == "a" else s[1]
                                       for s in tr.out_slots])


class _Family:
    """The closed graphs of one base function under every transform chain, and per chain
    its counters."""

    def __init__(self):
        self.variants = Variants(MAX_VARIANTS, lambda e: type(e) is _Direct or e.holds(), evict=True)
        self.counts: dict = {}

    def counters(self, chain: tuple) -> dict:
        c = self.counts.get(chain)
        if c is None:
            c = self.counts[chain] = _counters()
        return c


def _counters() -> dict:
    return {"captures": 0, "hits": 0, "compiles": 0, "fused_calls": 0, "interpreted_calls": 0,
            "direct_calls": 0, "notes": []}


class GraphRunner:
    """One fixed graph (inputs then consts, like ``run_tensors``'s) run with the same warm-up
    policy, for a graph whose owner checks that it still holds (``vjp``'s forward and
    backward graphs belong to their traced entry). ``counts`` as ``cache_info``'s."""

    def __init__(self, graph):
        from ..runtime.compiled import _Traced
        from .pytree import flatten
        n = len(graph.outputs)
        self._closed = _Closed(_Traced(graph, flatten(list(range(n)))[1], [("t", i) for i in range(n)], [], []).seal())
        self.counts = _counters()
        self._n_in = len(graph.inputs)

    def __call__(self, values: list):
        """The outputs (a list), or None when this call must be evaluated directly (inside a
        trace, or on values that require grad)."""
        if _direct_call(tuple(values), {}):
            return None
        return self._closed.run(values[:self._n_in], self.counts)  # the plan reads the consts itself


_FAMILIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # base function -> _Family


def _family(base):
    try:
        f = _FAMILIES.get(base)
        if f is None:
            f = _FAMILIES[base] = _Family()
        return f
    except TypeError:  # not weak-referenceable or not hashable: no cache
        return None


def _direct_call(args: tuple, kwargs: dict) -> bool:
    """Whether this call must run the transform directly (see the module docstring)."""
    if current_traces():
        return True
    tensors = [x for x in list(args) + list(kwargs.values()) if isinstance(x, Tensor)]
    if len(tensors) != len(args) + len(kwargs):  # pytrees: look at every leaf
        tensors = [x for x in flatten_call(args, kwargs)[0] if isinstance(x, Tensor)]
    if STATE.enabled and any(t._rg for t in tensors):
        return True
    return forward_state.STATE.level is not None and any(forward_state.get_tangent(t) is not None
                                                          for t in tensors)


def call(key: tuple, impl: Callable, args: tuple, kwargs: dict) -> Any:
    """``impl(*args, **kwargs)``, one call of the transform chain ``key`` ((base function,
    chain), see ``mark``), through its closed graph for this signature (captured on the first
    call, compiled on the ``FUSE_AFTER``-th)."""
    if _direct_call(args, kwargs):
        return impl(*args, **kwargs)
    base, chain = key
    fam = _family(base)
    if fam is None:
        return impl(*args, **kwargs)
    counts = fam.counters(chain)
    leaves, spec, spec_key = flatten_call(args, kwargs)
    key = (chain, signature(leaves, spec_key))
    entry = fam.variants.find(key)
    if entry is None:
        counts["captures"] += 1
        entry = _capture(impl, leaves, spec)
        fam.variants.add(key, entry)
        if type(entry) is _Direct and entry.reason not in counts["notes"]:
            counts["notes"].append(entry.reason)
    else:
        counts["hits"] += 1
    if type(entry) is _Direct:
        counts["direct_calls"] += 1
        return impl(*args, **kwargs)
    return entry.run(leaves, counts)


def _capture(impl: Callable, leaves: list, spec):
    """The closed graph of ``impl`` on stand-ins of ``leaves``, or a decision to run directly."""
    from ..runtime.compiled import _finish_trace
    try:
        with capture(impl, leaves, breaks_on_print=True, strict=True) as (tr, tleaves):
            args, kwargs = unflatten(spec, tleaves)
            inputs = [(t, t._data) for t in tleaves if isinstance(t, Tensor)]
            traced = _finish_trace(tr, impl(*args, **kwargs), inputs)
    except GraphBreak as e:
        return _Direct(e.reason)
    if traced.writebacks:
        return _Direct("the function updates a tensor in place")
    return _Closed(traced.seal())


def cache_info(key: tuple) -> dict:
    """Counters of the transform chain ``key`` ((base function, chain)) on its base function: captures (closed graphs
    traced), hits (calls that reused one), compiles, fused_calls, interpreted_calls,
    direct_calls (run without a closed graph), notes (why), entries (cached variants of the
    base function under every chain)."""
    base, chain = key
    fam = _family(base)
    if fam is None:
        return {}
    info = {k: (list(v) if isinstance(v, list) else v) for k, v in fam.counters(chain).items()}
    info["entries"] = len(fam.variants)
    return info


def cache_clear() -> None:
    """Drop every cached closed graph."""
    _FAMILIES.clear()
