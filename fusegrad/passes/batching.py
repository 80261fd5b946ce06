"""Applying batching rules: vmap's step for one equation. The rules themselves are
registered on each primitive beside its other rules (``prim.batch``, helpers in
``ir/prims/batchdims.py``); a primitive without one is mapped by the generic fallback
(loop over the batch and stack)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..ir.prims.batchdims import batch_size, elementwise_rule

STATS = {"fallback": 0}  # equations batched by the generic loop (read by tests)


# ---------------------------------------------------------------- applying
def fallback(prim, args: Sequence, bdims: Sequence, params: dict) -> tuple:
    """Apply ``prim`` example by example and stack the results along axis 0."""
    from ..runtime import ops as O
    STATS["fallback"] += 1
    n = batch_size(args, bdims)
    outs = [prim(*[O.select(a, d, b) if d is not None else a for a, d in zip(args, bdims)], **params)
            for b in range(n)]
    return O.stack(outs, 0), 0


# odd (so invertible: distinct batch sizes get distinct salts): salts the seed per batch size
_SALT = 0x4F1BBCDCBFA53E0B


def batched_draw(prim, args: Sequence, bdims: Sequence, params: dict, size: int) -> tuple:
    """A random primitive (``prim(key, shape=..., dtype=...)``) under randomness="different":
    one draw of shape ``(size, *shape)``, batched at axis 0, so every example gets its own
    numbers. The key [seed, offset] reserved ``n`` counters from ``offset`` for one example;
    the batched draw reads counters ``[offset * size, (offset + n) * size)`` of a seed salted
    by ``size``, an interval disjoint from every other draw of that batch size (the
    generator's offsets never overlap), and the salted seed keeps it apart from unbatched
    draws and other batch sizes."""
    from ..runtime import ops as O
    from ..runtime.tensor import wrap
    if any(d is not None for d in bdims):
        raise RuntimeError("vmap: randomness='different' got a random key that varies over the batch")
    key = args[0]
    salted = O.add(O.mul(key, wrap(np.array([1, size], dtype=np.int64))),
                   wrap(np.array([(_SALT * size) % (1 << 62), 0], dtype=np.int64)))
    shape = (size,) + tuple(params["shape"])
    return prim(salted, *args[1:], **{**params, "shape": shape}), 0


def batch_eqn(prim, args: Sequence, bdims: Sequence, params: dict, randomness: str = "error",
              size: Optional[int] = None) -> tuple:
    """``(out, out_bdim)`` for ``prim(*args, **params)`` mapped over the batched args
    (``size``: the batch size, needed where no argument is batched)."""
    if prim.effect and randomness == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                           "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                           "out of vmap")
    if prim.effect and randomness == "different":
        return batched_draw(prim, args, bdims, params, batch_size(args, bdims) if size is None else size)
    if all(d is None for d in bdims):
        return prim(*args, **params), None
    if prim.batch is not None:
        res = prim.batch(args, bdims, **params)
    elif prim.kind == "elementwise":
        res = elementwise_rule(prim, args, bdims, params)
    else:
        res = None
    return res if res is not None else fallback(prim, args, bdims, params)
