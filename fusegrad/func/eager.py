"""The eager fallback of fusegrad.func: grad_and_value, vjp, jvp, jacrev and jacfwd through
the eager autograd graph (with ``create_graph``), so they nest and work on tensors that
already require grad. fusegrad.func uses these for functions it cannot trace (data-
dependent Python control flow, ``.item()``, in-place updates of captured
tensors...); jvp is the double-VJP construction and jacrev/jacfwd loop over one-hot
vectors here."""
from __future__ import annotations

import functools
from typing import Callable, Sequence, Union

import numpy as np

from ..autograd.functions import grad as _autograd_grad
from ..runtime import ops as O
from ..runtime.factory import tensor, zeros_like
from ..runtime.grad_mode import STATE, enable_grad
from ..runtime.tensor import Tensor
from .pytree import flatten, tree_map, unflatten

__all__ = ["grad_and_value", "vjp", "jvp", "jacrev", "jacfwd"]


def _argnums_tuple(argnums) -> tuple:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _prepare(x):
    """A differentiable stand-in for ``x`` at this level, connected to x's graph."""
    if not isinstance(x, Tensor):
        return x
    if x._rg:
        return O.named(O.P.reshape(x, shape=tuple(x.shape)), "AliasBackward0")
    return x.detach().requires_grad_(True)


def _grad_tree(out, diff_leaves, cotangents=None, create_graph=True):
    outs, _ = flatten(out)
    outs = [o for o in outs if isinstance(o, Tensor)]
    cots = cotangents
    live = [(o, c) for o, c in zip(outs, cots if cots is not None else [None] * len(outs)) if o._rg]
    if not live:
        return [zeros_like(x) for x in diff_leaves]
    gs = _autograd_grad([o for o, _ in live], diff_leaves, [c for _, c in live] if cots is not None else None,
                        create_graph=create_graph, allow_unused=True)
    return [g if g is not None else zeros_like(x) for g, x in zip(gs, diff_leaves)]


def _maybe_detach(tree, was_tracked: bool):
    if was_tracked:
        return tree
    return tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _split(args, argnums):
    """The leaves of args[argnums] prepared for differentiation, and rebuilt args."""
    args = list(args)
    diff, specs = [], []
    for i in argnums:
        leaves, spec = flatten(args[i])
        prepared = [_prepare(x) for x in leaves]
        diff.append(prepared)
        specs.append(spec)
        args[i] = unflatten(spec, prepared)
    return args, diff, specs


def _regroup(flat: list, diff: list, specs: list) -> list:
    """Per-argument pytrees rebuilt from one flat list of their leaves' results."""
    res, k = [], 0
    for group, spec in zip(diff, specs):
        res.append(unflatten(spec, flat[k:k + len(group)]))
        k += len(group)
    return res


def _any_tracked(args) -> bool:
    leaves, _ = flatten(list(args))
    return STATE.enabled and any(isinstance(x, Tensor) and x._rg for x in leaves)


def grad_and_value(func: Callable, argnums: Union[int, Sequence[int]] = 0, has_aux: bool = False) -> Callable:
    """``f -> (grad of f, f)`` for a scalar-valued f."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        tracked = _any_tracked(args)
        nums = _argnums_tuple(argnums)
        for n in nums:
            if not -len(args) <= n < len(args):
                raise RuntimeError(f"Got argnum={n}, but only {len(args)} positional inputs")
        with enable_grad():
            new_args, diff, specs = _split(args, nums)
            out = func(*new_args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                       "(output, aux) if has_aux is True")
                out, aux = out
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"{'shape ' + str(list(out.shape)) if isinstance(out, Tensor) else type(out).__name__}")
            flat = [x for group in diff for x in group]
            gs = _grad_tree(out, flat)
        res = _regroup(gs, diff, specs)
        g = res[0] if isinstance(argnums, int) else tuple(res)
        g = _maybe_detach(g, tracked)
        out = _maybe_detach(out, tracked)
        if has_aux:
            return g, (out, _maybe_detach(aux, tracked))
        return g, out
    return wrapper


def _forward(func: Callable, primals: tuple, has_aux: bool) -> tuple:
    """Run ``func`` on differentiable stand-ins of every primal (grad mode on):
    (stand-in leaves per primal, their pytree specs, output, aux)."""
    new_args, diff, specs = _split(primals, tuple(range(len(primals))))
    out = func(*new_args)
    aux = None
    if has_aux:
        out, aux = out
    return diff, specs, out, aux


def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` returns one gradient per primal."""
    tracked = _any_tracked(primals)
    with enable_grad():
        diff, specs, out, aux = _forward(func, primals, has_aux)

    def vjp_fn(cotangents, retain_graph=True):
        cots, _ = flatten(cotangents)
        with enable_grad():
            flat = [x for group in diff for x in group]
            gs = _grad_tree(out, flat, cots)
        return tuple(_maybe_detach(r, tracked) for r in _regroup(gs, diff, specs))
    res_out = _maybe_detach(out, tracked)
    return (res_out, vjp_fn, _maybe_detach(aux, tracked)) if has_aux else (res_out, vjp_fn)


JVP_STRICT = ("jvp(f, primals, tangents, strict=True): The output of f is independent of the inputs. "
              "This is not allowed with strict=True.")


def check_jvp_arguments(primals, tangents) -> None:
    """torch.func.jvp's refusal of primals or tangents that are not tuples."""
    for name, given in (("primals", primals), ("tangents", tangents)):
        if not isinstance(given, tuple):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {name} to be a tuple. E.g. it should be valid "
                               "to call f(*primals).")


def jvp(func: Callable, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J·tangents)`` by the double-VJP construction: the VJP is linear
    in its cotangent u, so differentiating <vjp(u), t> with respect to u gives J·t
    (``strict``: an output independent of the primals raises)."""
    check_jvp_arguments(primals, tangents)
    tracked = _any_tracked(primals) or _any_tracked(tangents)
    with enable_grad():
        diff, specs, out, aux = _forward(func, primals, has_aux)
        outs, ospec = flatten(out)
        floats = [o for o in outs if o.is_floating_point()]  # (integer outputs have no tangent)
        us = [zeros_like(o).requires_grad_(True) for o in floats]
        flat = [x for group in diff for x in group]
        gs = _grad_tree(floats, flat, us, create_graph=True)
        tl, _ = flatten(list(tangents))
        live = [(g, t) for g, t in zip(gs, tl) if g._rg]
        if live:
            ts = _autograd_grad([g for g, _ in live], us, [t for _, t in live], create_graph=True, allow_unused=True)
        else:
            ts = [None] * len(us)
        found = dict(zip(map(id, floats), ts))
        ts = [found.get(id(o)) for o in outs]
        if strict and any(t is None for t in ts):
            raise RuntimeError(JVP_STRICT)
        ts = [t if t is not None else zeros_like(o) for t, o in zip(ts, outs)]
    res = (_maybe_detach(out, tracked), _maybe_detach(unflatten(ospec, ts), tracked))
    return res + (_maybe_detach(aux, tracked),) if has_aux else res


def _jac_wrap(func, argnums, has_aux, build):
    @functools.wraps(func)
    def wrapper(*args):
        nums = _argnums_tuple(argnums)
        tracked = _any_tracked(args)
        with enable_grad():
            new_args, diff, specs = _split(args, nums)
            out = func(*new_args)
            aux = None
            if has_aux:
                out, aux = out
            outs, ospec = flatten(out)
            flat = [x for group in diff for x in group]
            blocks = build(outs, flat)  # blocks[o][i]: Jacobian of output o w.r.t. flat input i
        per_out = []
        for o_blocks in blocks:
            res = _regroup(o_blocks, diff, specs)
            per_out.append(res[0] if isinstance(argnums, int) else tuple(res))
        jac = unflatten(ospec, per_out)
        jac = _maybe_detach(jac, tracked)
        return (jac, _maybe_detach(aux, tracked)) if has_aux else jac
    return wrapper


def _onehot(like: Tensor, k: int) -> Tensor:
    """A tensor like ``like`` (shape, dtype, device) with 1 at flat position ``k``, else 0: a
    constant, also where ``like`` is a traced value (a compiled function's segment)."""
    a = np.zeros(int(np.prod(tuple(like.shape), dtype=np.int64)), dtype=np.float64)
    a[k] = 1
    return tensor(a.reshape(tuple(like.shape)), dtype=like.dtype, device=like.device)


def jacrev(func: Callable, argnums: Union[int, Sequence[int]] = 0, *, has_aux: bool = False,
           chunk_size=None) -> Callable:
    """The Jacobian by reverse mode: one VJP per output element."""
    def build(outs, flat):
        blocks = []
        for o in outs:
            rows = [[] for _ in flat]
            n = o.numel()
            for k in range(n):
                onehot = _onehot(o, k)
                gs = _grad_tree([o], flat, [onehot]) if o._rg else [zeros_like(x) for x in flat]
                for i, g in enumerate(gs):
                    rows[i].append(g)
            blocks.append([O.reshape(O.stack(r, 0), tuple(o.shape) + tuple(x.shape)) if r else
                           zeros_like(x) for r, x in zip(rows, flat)])
        return blocks
    return _jac_wrap(func, argnums, has_aux, build)


def jacfwd(func: Callable, argnums: Union[int, Sequence[int]] = 0, *, has_aux: bool = False,
           randomness: str = "error") -> Callable:
    """The Jacobian by forward mode: one JVP per input element."""
    def build(outs, flat):
        us = [zeros_like(o).requires_grad_(True) for o in outs]
        gs = _grad_tree(outs, flat, us, create_graph=True)
        blocks = [[None] * len(flat) for _ in outs]
        for i, x in enumerate(flat):
            cols = [[] for _ in outs]
            n = x.numel()
            for k in range(n):
                t = _onehot(x, k)
                if gs[i]._rg:
                    ts = _autograd_grad([gs[i]], us, [t], create_graph=True, allow_unused=True)
                else:
                    ts = [None] * len(us)
                for j, (tt, o) in enumerate(zip(ts, outs)):
                    cols[j].append(tt if tt is not None else zeros_like(o))
            for j, o in enumerate(outs):
                # stack over input elements last: [out..., in...]
                st = O.stack(cols[j], -1) if cols[j] else zeros_like(o)
                blocks[j][i] = O.reshape(st, tuple(o.shape) + tuple(x.shape))
        return blocks
    return _jac_wrap(func, argnums, has_aux, build)
