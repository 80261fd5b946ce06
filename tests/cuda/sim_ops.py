"""A stand-in for ``fusegrad.runtime.cuda_ops`` on Numba's CUDA simulator, for testing the
device runtime before (or apart from) the CUDA code generator: the simulator's device arrays
wrap NumPy arrays, so each primitive's NumPy impl runs on them and the result is wrapped
again (a view stays a view of the same memory). Only meaningful under the simulator."""
from __future__ import annotations

import numpy as np

from fusegrad.cuda import driver

CALLS: list = []


def apply(prim, args: tuple, params: dict):
    cuda = driver.require()  # (imports numba.cuda with the simulator switched on)
    fake = type(cuda.device_array(1))
    CALLS.append(prim.name)
    out = prim.impl(*[a._ary if isinstance(a, fake) else a for a in args], **params)
    return fake(out if isinstance(out, np.ndarray) else np.asarray(out))
