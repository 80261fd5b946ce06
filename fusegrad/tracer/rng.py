"""Random numbers under tracing: a draw becomes a graph const whose value is a fresh
generator key at every call of the compiled code, so each call draws new numbers and
advances the generator exactly as the eager code would."""
from __future__ import annotations

import numpy as np

from ..runtime.tensor import wrap
from .live import CallTimeConst


class RngKey(CallTimeConst):
    """Stand-in for the [seed, offset] key of ``count`` numbers from ``generator``;
    ``draw()`` takes the real key (advancing the generator), also for a draw the graph
    does not use (``advances``: passes.dce keeps it)."""
    __slots__ = ("generator", "count")
    advances = True

    def draw(self) -> np.ndarray:
        return self.generator.next_key(self.count)._data


def traced_key(generator, count: int) -> RngKey:
    """The key tensor for a random op recorded while tracing."""
    k = wrap(np.zeros(2, dtype=np.int64), RngKey)
    k.generator = generator
    k.count = int(count)
    return k
