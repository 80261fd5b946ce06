"""Applying batching rules: vmap's step for one equation. The rules themselves are
registered on each primitive beside its other rules (``prim.batch``, helpers in
``ir/prims/batchdims.py``); a primitive without one is mapped by the generic fallback
(loop over the batch and stack)."""
from __future__ import annotations

from typing import Sequence

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


def batch_eqn(prim, args: Sequence, bdims: Sequence, params: dict, randomness: str = "error") -> tuple:
    """``(out, out_bdim)`` for ``prim(*args, **params)`` mapped over the batched args."""
    if prim.effect and randomness == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                           "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                           "out of vmap")
    if prim.effect and randomness == "different":
        raise NotImplementedError("vmap: randomness='different' is not supported yet; use 'same'")
    if all(d is None for d in bdims):
        return prim(*args, **params), None
    if prim.batch is not None:
        res = prim.batch(args, bdims, **params)
    elif prim.kind == "elementwise":
        res = elementwise_rule(prim, args, bdims, params)
    else:
        res = None
    return res if res is not None else fallback(prim, args, bdims, params)
