"""linearize: a function's value at some primals and its Jacobian-vector product there,
as torch.func.linearize."""
from __future__ import annotations

from typing import Callable

from ..passes.autodiff import jvp_graph
from ..runtime.tensor import Tensor
from ..tracer.trace import GraphBreak
from . import eager as _eager
from .pytree import flatten, unflatten
from .transforms import _Args, _entry, _Fallback, _fallback, _optimized, _run

__all__ = ["linearize"]


def linearize(func: Callable, *primals) -> tuple:
    """``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` is ``J·tangents`` at
    ``primals`` (tangents shaped as the primals), as torch.func.linearize.

    The function is traced once and its JVP graph reused by every ``jvp_fn`` call; the
    graph's consts (random draws included) are read once, so every tangent is pushed
    through the same computation that gave the output. Untraceable functions run jvp
    eagerly at each call instead."""
    try:
        a = _Args(primals, {})
        wrt = a.wrt(range(len(primals)))
        e = _entry(func, ("linearize",), a, False)
    except (GraphBreak, _Fallback) as ex:
        _fallback(getattr(ex, "reason", str(ex)))
        return _eager_linearize(func, primals)
    values = a.tensors + e.consts()
    out = unflatten(e.out_spec, e.outs(_run(e.graph, values)))
    g = e.get(("jvp", tuple(wrt)), lambda: _optimized(jvp_graph(e.graph, wrt)))
    n = len(e.graph.outputs)

    def jvp_fn(*tangents):
        tl = _tangents(primals, tangents)
        res = _run(g, values + tl)
        return unflatten(e.out_spec, res[n:n + e.n_out])
    return out, jvp_fn


def _tangents(primals: tuple, tangents: tuple) -> list:
    """The tangent leaves, checked against the primals as torch.func.linearize does."""
    pl, pspec = flatten(list(primals))
    tl, tspec = flatten(list(tangents))
    if tspec != pspec:
        raise RuntimeError(f"Expected the tangents {tspec} to have the same argspec as the primals {pspec}")
    for i, (p, t) in enumerate(zip(pl, tl)):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"jvp_fn: expected each tangent to be a Tensor, got {type(t)}")
        if tuple(t.shape) != tuple(p.shape):
            raise RuntimeError(f"tangent:{i} with shape {t.shape} in flattened pytree doesn't match the shape "
                               f"{p.shape} of the corresponding primal.")
        if t.dtype != p.dtype:
            raise RuntimeError(f"tangent:{i} with dtype {t.dtype} in flattened pytree doesn't match the dtype "
                               f"{p.dtype} of the corresponding primal.")
    return tl


def _eager_linearize(func: Callable, primals: tuple) -> tuple:
    out = func(*primals)

    def jvp_fn(*tangents):
        _tangents(primals, tangents)
        return _eager.jvp(func, primals, tangents)[1]
    return out, jvp_fn
