"""``torch.random``: the default generator's seed and state, and ``fork_rng``."""
from __future__ import annotations

import contextlib
from typing import Iterator

from .runtime.factory import default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str = "cuda") -> Iterator[None]:
    """Run the block with the default generator's state restored afterwards, so its draws
    do not change the random numbers after it (``enabled=False``: no effect)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
