"""The CPU that Numba compiles fusegrad's kernels for: full-width vectors on AVX-512 hosts.

LLVM tunes recent Intel cores (Ice Lake onwards) to prefer 256-bit vectors even where
AVX-512 is present, to spare clock speed in code that vectorizes now and then. Fused
kernels are long vectorizable loops of polynomial math, where 512-bit vectors pay
(docs/fastmath.md, "Vector width"). Numba builds one target machine per process from its
``NUMBA_CPU_FEATURES`` setting when it first compiles, so the preference goes there, and
only where the user has not chosen the target themselves."""
from __future__ import annotations

import os
import sys

_NUMBA_TARGET = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")


def prefer_full_width_vectors() -> None:
    """On a host with AVX-512, let Numba's LLVM use 512-bit vectors: the host's features
    plus ``-prefer-256-bit`` in ``NUMBA_CPU_FEATURES``. No effect when either Numba target
    variable is set, on other hosts, or once Numba has compiled something in this process."""
    if any(name in os.environ for name in _NUMBA_TARGET):
        return
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features()
    if not features.get("avx512f"):
        return
    os.environ["NUMBA_CPU_FEATURES"] = features.flatten() + ",-prefer-256-bit"
    if "numba" in sys.modules:  # imported before fusegrad: its config reads the environment again
        sys.modules["numba"].core.config.reload_config()
