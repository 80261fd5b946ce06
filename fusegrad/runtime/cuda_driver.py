"""Access to Numba's CUDA target (the ``numba-cuda`` package), in one place.

``FUSEGRAD_CUDA_SIM=1`` selects Numba's CUDA simulator (Python threads per CUDA thread,
for development and CI without a GPU): ``NUMBA_ENABLE_CUDASIM`` is set, and Numba's config
reloaded, before ``numba.cuda`` is first imported, which is the only time it is read."""
from __future__ import annotations

import os
import sys
import types


def sim_requested() -> bool:
    """True if the environment asks for the CUDA simulator (``FUSEGRAD_CUDA_SIM=1``)."""
    return os.environ.get("FUSEGRAD_CUDA_SIM", "").strip().lower() in ("1", "true", "yes", "on")


def numba_cuda() -> types.ModuleType:
    """``numba.cuda``, on the simulator when ``FUSEGRAD_CUDA_SIM=1`` (raises ImportError
    when numba-cuda is not installed)."""
    if sim_requested() and "numba.cuda" not in sys.modules:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        from numba.core import config
        config.reload_config()
    from numba import cuda
    return cuda


def simulated() -> bool:
    """True if ``numba.cuda`` runs on the simulator (imports it as ``numba_cuda`` does)."""
    numba_cuda()
    from numba.core import config
    return bool(config.ENABLE_CUDASIM)
