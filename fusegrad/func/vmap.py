"""vmap as a batching pass: trace ``func`` once on per-example inputs, then evaluate the
graph equation by equation on the batched tensors with the primitives' batching rules
(fusegrad.passes.batching). Functions that cannot be traced (data-dependent Python
control flow raises GraphBreak) are mapped by a loop over the batch instead."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import numpy as np

from ..ir import prims as P
from ..ir.graph import Var
from ..ir.prims.batchdims import move_bdim
from ..passes.batching import batch_eqn
from ..runtime import ops as O
from ..runtime.tensor import Tensor, wrap
from ..tracer.capture import capture, in_strict_capture
from ..tracer.guards import _hashable
from ..tracer.trace import GraphBreak
from . import fused
from .pytree import flatten, unflatten

__all__ = ["vmap"]


def _flat_in_dims(in_dims, args: tuple) -> list:
    """One in_dim (int or None) per leaf of ``args``, as torch.func checks them."""
    if isinstance(in_dims, int) or in_dims is None:
        return [in_dims] * len(flatten(list(args))[0])
    if not isinstance(in_dims, tuple):
        raise ValueError(f"vmap(f, in_dims={in_dims!r}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if len(in_dims) != len(args):
        raise ValueError(f"vmap(f, in_dims={in_dims!r}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {len(in_dims)} but inputs has "
                         f"{len(args)} arguments.")
    out = []
    for a, d in zip(args, in_dims):
        leaves = flatten(a)[0]
        if isinstance(d, int) or d is None:
            out += [d] * len(leaves)
            continue
        dl = flatten(d)[0]
        if len(dl) != len(leaves):
            raise ValueError(f"vmap(f, in_dims={in_dims!r}, ...)(<inputs>): in_dims is not compatible with the "
                             f"structure of `inputs`.")
        out += dl
    return out


def _check(leaves: list, dims: list) -> tuple:
    """Normalized dims and the batch size; ValueError as torch.func for bad inputs."""
    norm, sizes = [], set()
    for x, d in zip(leaves, dims):
        if d is None:
            norm.append(None)
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap: Got in_dim={d} for an input but the input is of type {type(x)}. We cannot "
                             f"vmap over non-Tensor arguments, please use None as the respective in_dim")
        nd = x._data.ndim
        if not -nd <= d < nd:
            raise ValueError(f"vmap: Got in_dim={d} for some input, but that input is a Tensor of dimensionality "
                             f"{nd} so expected in_dim to satisfy -{nd} <= in_dim < {nd}.")
        norm.append(d % nd)
        sizes.add(x._data.shape[d % nd])
    if not sizes:
        raise ValueError("vmap(f, in_dims=..., ...)(<inputs>): at least one input must be a Tensor mapped over "
                         "(in_dim not None)")
    if len(sizes) != 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sorted(sizes)} for the mapped dimension")
    return norm, sizes.pop()


def _example(x, d):
    """A stand-in of one example's shape and dtype (its values are never read)."""
    if d is None or not isinstance(x, Tensor):
        return x
    shape = x._data.shape[:d] + x._data.shape[d + 1:]
    return wrap(np.lib.stride_tricks.as_strided(np.zeros(1, x._data.dtype), shape, [0] * len(shape)))


def _evaluate(graph, inputs: list, randomness: str) -> list:
    """Run ``graph`` on batched ``inputs`` ((tensor, bdim) per graph input) with the
    batching rules; returns (tensor, bdim) per graph output."""
    from .transforms import _const_values
    env: dict[int, tuple] = {v.id: tb for v, tb in zip(graph.inputs, inputs)}
    size = next((int(t._data.shape[d]) for t, d in inputs if d is not None), None)
    for (v, _), c in zip(graph.consts, _const_values(graph)):
        env[v.id] = (c, None)
    for e in graph.eqns:
        vals = [env[a.id] if isinstance(a, Var) else (a, None) for a in e.inputs]
        env[e.out.id] = batch_eqn(e.prim, [v for v, _ in vals], [d for _, d in vals], e.params, randomness, size)
    return [env[o.id] for o in graph.outputs]


def _place(t: Tensor, bdim: Optional[int], size: int, out_dim: Optional[int]) -> Tensor:
    """Output ``t`` with its batch axis at ``out_dim`` (broadcast when it is unbatched)."""
    if out_dim is None:
        if bdim is not None:
            raise ValueError("vmap: out_dims=None for an output that depends on the mapped inputs; it must be "
                             "returned along a mapped dimension")
        return t
    rank = t._data.ndim - (bdim is not None)  # (an example's)
    if not -rank - 1 <= out_dim <= rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank - 1}, {rank}], but got "
                         f"{out_dim})")
    if bdim is None:
        shape = t._data.shape
        t, bdim = P.broadcast_to(P.reshape(t, shape=(1,) + shape), shape=(size,) + shape), 0
    return move_bdim(t, bdim, out_dim)


def _write_back(x: Tensor, in_dim: Optional[int], t: Tensor, bdim: Optional[int], size: int) -> None:
    """The in-place update of argument ``x`` that the mapped function made (new value ``t``
    batched at ``bdim``)."""
    if in_dim is None and bdim is not None:
        raise RuntimeError("vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a "
                           "Tensor `other` in extra_args that has more elements than `self`. This happened due to "
                           "`other` being vmapped over but `self` not being vmapped over in a vmap. Please try to "
                           "use out-of-place operators instead of inplace arithmetic.")
    x.copy_(t if in_dim is None else _place(t, bdim, size, in_dim))


def _flat_out_dims(out_dims, ospec, n: int, name: str) -> list:
    if isinstance(out_dims, int) or out_dims is None:
        return [out_dims] * n
    dl = flatten(out_dims if isinstance(out_dims, dict) else list(out_dims))[0] \
        if isinstance(out_dims, (tuple, list, dict)) else [out_dims]
    if any(not (d is None or isinstance(d, int)) for d in dl):
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                         "collection of ints representing where in the outputs the vmapped dimension should "
                         "appear.")
    if len(dl) == n:
        return dl
    if ospec is not None and ospec[0] in (tuple, list) and len(out_dims) == len(ospec[1]):
        return [d for d, (k, _) in zip(out_dims, ospec[1]) for _ in range(k)]
    raise ValueError(f"vmap(f, ..., out_dims={out_dims!r})(<inputs>): out_dims is not compatible with the "
                     f"structure of `outputs`.")


def _plain_outputs(outs: list, ods: list, name: str) -> None:
    """A non-tensor output is returned as it is, with out_dims None for it (torch.func's rule)."""
    for o, od in zip(outs, ods):
        if not isinstance(o, Tensor) and od is not None:
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(o)}. Did you "
                             "mean to set out_dims= to None for output?")


def _loop(func, call_args: list, spec, dims: list, size: int, kwargs: dict, randomness: str):
    """Map by calling ``func`` once per example and stacking (for untraceable functions).
    ``randomness`` as the traced path's: "same" gives every example the first one's draws
    (the default generator restarts from its state before each), "error" raises on a draw."""
    from ..runtime.factory import default_generator
    results = []
    start = default_generator.get_state()
    for b in range(size):
        leaves = [O.select(x, d, b) if d is not None else x for x, d in zip(call_args, dims)]
        if randomness == "same":  # (every example ends where the first did: one draw's state after)
            default_generator.set_state(start)
        results.append(func(*unflatten(spec, leaves), **kwargs))
        if randomness == "error" and not b and not bool((default_generator.get_state() == start).all()):
            raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                               "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                               "operation out of vmap")
    per = [flatten(r)[0] for r in results]
    ospec = flatten(results[0])[1]
    # (a non-tensor output is the first example's: vmap returns it when its out_dims is None)
    return [(O.stack([p[j] for p in per], 0), 0) if isinstance(per[0][j], Tensor) else (per[0][j], None)
            for j in range(len(per[0]))], ospec


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: Optional[int] = None) -> Callable:
    """Map ``func`` over a batch dimension of its inputs, as torch.func.vmap.

    ``in_dims``: int, None or a tuple (one entry per positional argument, nested to match
    pytrees); ``out_dims`` likewise per output. ``randomness``: "error" raises on random
    ops, "same" draws one sample shared by the batch, "different" independent samples per
    example. ``chunk_size`` is accepted for compatibility; the whole batch runs at once.
    Arguments that ``func`` updates in place are updated in place. Outside any trace the
    batched computation is one closed graph per signature, compiled once warm
    (fusegrad.func.fused)."""
    if randomness not in ("error", "same", "different"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    name = getattr(func, "__name__", repr(func))

    def impl(*args, **kwargs):
        leaves, spec = flatten(list(args))
        dims, size = _check(leaves, _flat_in_dims(in_dims, args))
        examples = [_example(x, d) for x, d in zip(leaves, dims)]
        try:
            with capture(func, examples) as (trace, targs):
                before = [t._data if isinstance(t, Tensor) else None for t in targs]
                out = func(*unflatten(spec, targs), **kwargs)
                allouts, ospec = flatten(out)
                ods = _flat_out_dims(out_dims, ospec, len(allouts), name)
                _plain_outputs(allouts, ods, name)
                outs = [o for o in allouts if isinstance(o, Tensor)]
                # arguments updated in place: their final values are extra outputs, copied back
                updated = [i for i, (t, v) in enumerate(zip(targs, before)) if v is not None and t._data is not v]
                # captured tensors updated in place too: unbatched (the function runs once, as
                # torch.func's), so a batched new value raises in _write_back as there
                held = [h for h, d, g, *_ in trace.snaps if h._data is not d]
                if any(h._grad is not g for h, d, g, *_ in trace.snaps):
                    raise GraphBreak("vmap: the function sets a captured tensor's .grad")
                trace.graph.outputs = [trace.lift(o) for o in outs] + [trace.lift(targs[i]) for i in updated] + [
                    trace.lift(h) for h in held]
        except GraphBreak:
            if in_strict_capture():  # a transform's closed graph: it runs directly instead
                raise
            results, ospec = _loop(func, leaves, spec, dims, size, kwargs, randomness)
            ods = _flat_out_dims(out_dims, ospec, len(results), name)
            _plain_outputs([t for t, _ in results], ods, name)
        else:
            batched = [(x, d) for x, d in zip(leaves, dims) if isinstance(x, Tensor)]
            results = _evaluate(trace.graph, batched, randomness)
            for i, (t, d) in zip(updated, results[len(outs):]):
                _write_back(leaves[i], dims[i], t, d, size)
            for h, (t, d) in zip(held, results[len(outs) + len(updated):]):
                _write_back(h, None, t, d, size)
            tensors = iter(results[:len(outs)])
            results = [next(tensors) if isinstance(o, Tensor) else (o, None) for o in allouts]
        return unflatten(ospec, [t if not isinstance(t, Tensor) else _place(t, d, size, od)
                                 for (t, d), od in zip(results, ods)])

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return fused.call(wrapper._fg_chain, impl, args, kwargs)
    return fused.mark(wrapper, func, ("vmap", _key(in_dims), _key(out_dims), randomness, chunk_size))


def _key(dims) -> Any:
    """``in_dims``/``out_dims`` as part of a cache key (lists become tuples)."""
    if isinstance(dims, (tuple, list)):
        return tuple(_key(d) for d in dims)
    return _hashable(dims)
