"""The CUDA device behind ``fusegrad.cuda``: numba-cuda loaded on first use, transfers between
host and device, and the bookkeeping of what fusegrad holds on each device.

numba-cuda (the optional ``cuda`` extra) is imported only when a program first asks for a
device, so ``import fusegrad`` works without it. ``FUSEGRAD_CUDA_SIM=1`` runs the CUDA path on
Numba's CUDA simulator (NumPy underneath; slow, for tests at small sizes):
``runtime.cuda_driver`` is the one place that switches it on.

A CUDA tensor's payload is a device array (numba-cuda's ``DeviceNDArray``, or the
simulator's ``FakeCUDAArray``); ``is_device_array`` tells one from a NumPy array without
importing numba-cuda."""
from __future__ import annotations

import weakref
from typing import Any, Optional

import numpy as np

from ..ir.dtypes import _BF16
from ..runtime.cuda_driver import numba_cuda as _import_numba_cuda
from ..runtime.cuda_driver import simulated as _on_simulator

NOT_COMPILED = "Torch not compiled with CUDA enabled"


class _State:
    """What was learnt when the driver was first loaded (an explicit cache: loading happens once).
    ``initialized`` is PyTorch's ``torch.cuda.is_initialized()``: no device array can exist before it.
    ``simulator``: the loaded ``numba.cuda`` is Numba's simulator (its arrays wrap NumPy arrays)."""
    __slots__ = ("loaded", "cuda", "simulator", "initialized", "current", "allocated", "peak")

    def __init__(self) -> None:
        self.loaded = False
        self.cuda: Any = None  # the numba.cuda module, or None when there is no usable device
        self.simulator = False
        self.initialized = False
        self.current = 0
        self.allocated: dict[int, int] = {}
        self.peak: dict[int, int] = {}


STATE = _State()


def numba_cuda() -> Optional[Any]:
    """The ``numba.cuda`` module when numba-cuda is installed and a device (or the simulator)
    is usable, else None. Imported once (``runtime.cuda_driver`` switches the simulator on)."""
    if not STATE.loaded:
        STATE.loaded = True
        try:
            cuda = _import_numba_cuda()
            ok = bool(cuda.is_available())
        except Exception:  # numba-cuda missing, or no driver: no device, as torch without CUDA
            cuda, ok = None, False
        STATE.simulator = ok and _on_simulator()
        if STATE.simulator:
            _as_real_arrays(cuda)
        STATE.cuda = cuda if ok else None
    return STATE.cuda


def _as_real_arrays(cuda: Any) -> None:
    """The simulator's device array answers ``shape`` with a tuple that refuses negative
    indices (to catch them inside kernels); a real ``DeviceNDArray``'s is a plain tuple, which
    host code (``x.shape[-1]``) relies on: give the simulated one the real one's."""
    fake = type(cuda.device_array(1))
    fake.shape = property(lambda self: self._ary.shape)


def available() -> bool:
    return numba_cuda() is not None


def device_count() -> int:
    cuda = numba_cuda()
    return len(cuda.gpus) if cuda is not None else 0


def require() -> Any:
    """``numba.cuda``, initializing the device; PyTorch's AssertionError when there is none."""
    cuda = numba_cuda()
    if cuda is None:
        raise AssertionError(NOT_COMPILED)
    STATE.initialized = True
    return cuda


def check_index(index: Optional[int]) -> int:
    """A valid device ordinal for ``index`` (None: the current device), else PyTorch's error."""
    require()
    if index is None:
        return STATE.current
    n = device_count()
    if not 0 <= index < n:
        raise RuntimeError(f"CUDA error: invalid device ordinal (device {index} requested, {n} available)")
    return index


def is_device_array(x: Any) -> bool:
    """Whether ``x`` is a CUDA device array (real or simulated), not a NumPy array."""
    return getattr(type(x), "__cuda_ndarray__", False) is True


def array_device(arr: Any) -> int:
    """The ordinal of the device holding ``arr`` (the simulator has one device)."""
    data = getattr(arr, "gpu_data", None)
    ctx = getattr(data, "context", None)
    return int(ctx.device.id) if ctx is not None else 0


def data_pointer(arr: Any) -> int:
    """The device address of ``arr``'s first element (the simulator's: its NumPy array's)."""
    if STATE.simulator:
        return arr._ary.__array_interface__["data"][0]
    return arr.__cuda_array_interface__["data"][0]


def _selected(index: int):
    cuda = require()
    return cuda.gpus[index] if device_count() > 1 else _NoSwitch()


class _NoSwitch:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def track(arr: Any, index: int = 0) -> Any:
    """Count ``arr``'s bytes in ``memory_allocated`` while it lives (views are not passed here)."""
    n = int(arr.nbytes)
    alloc = STATE.allocated
    alloc[index] = alloc.get(index, 0) + n
    if alloc[index] > STATE.peak.get(index, 0):
        STATE.peak[index] = alloc[index]
    weakref.finalize(arr, _release, index, n)
    return arr


def _release(index: int, n: int) -> None:
    STATE.allocated[index] -= n


def to_device(host: np.ndarray, index: int) -> Any:
    """A new device array on device ``index`` holding a copy of ``host``."""
    cuda = require()
    with _selected(index):
        # (np.ascontiguousarray would make a 0-d array 1-d)
        return track(cuda.to_device(host if host.flags.c_contiguous else np.ascontiguousarray(host)), index)


def contiguous(arr: Any) -> Any:
    """``arr`` itself when C-contiguous, else a C-contiguous copy made on its device."""
    if arr.is_c_contiguous():
        return arr
    cuda = require()
    index = array_device(arr)
    with _selected(index):
        out = track(cuda.device_array(tuple(arr.shape), dtype=arr.dtype), index)
        _assign(out, arr)
    return out


def _assign(dst: Any, src: Any) -> None:
    """``dst[...] = src`` on the device. Numba's assignment kernel has no bfloat16: into or
    from one, values are converted by codegen.cuda_half and copied as bit patterns."""
    if dst.dtype != _BF16 and getattr(src, "dtype", None) != _BF16:
        dst[...] = src
        return
    if not is_device_array(src):  # a scalar or host value: its bfloat16 bits
        dst.view(np.uint16)[...] = np.asarray(src).astype(dst.dtype).view(np.uint16)
        return
    from ..codegen import cuda_half
    if src.dtype == _BF16:
        if dst.dtype != _BF16:
            dst[...] = cuda_half.widen(contiguous(src))
            return
    else:
        src = cuda_half.narrow(contiguous(src), _BF16)
    dst.view(np.uint16)[...] = src.view(np.uint16)


def to_host(arr: Any) -> np.ndarray:
    """A NumPy copy of device array ``arr`` (waits for the device)."""
    return contiguous(arr).copy_to_host()


def empty(shape: tuple, dtype: np.dtype, index: int) -> Any:
    cuda = require()
    with _selected(index):
        return track(cuda.device_array(tuple(shape), dtype=dtype), index)


def copy(arr: Any) -> Any:
    """A new contiguous device array with ``arr``'s values, on its device."""
    out = empty(tuple(arr.shape), arr.dtype, array_device(arr))
    _assign(out, arr)
    return out


def write(dst: Any, src: Any) -> None:
    """Write ``src`` (a device array or a scalar, broadcast and cast to ``dst``) into device
    array ``dst`` in place, on the device (numba-cuda's assignment kernel casts as it copies,
    and reshapes a lower-rank source to broadcast it, which needs it contiguous)."""
    if is_device_array(src) and src.ndim != dst.ndim:
        src = contiguous(src)
    _assign(dst, src)


def synchronize(index: Optional[int] = None) -> None:
    cuda = require()
    with _selected(check_index(index)):
        cuda.synchronize()


def device_name(index: int) -> str:
    name = getattr(require().gpus[index], "name", b"CUDA simulator")
    return name.decode() if isinstance(name, bytes) else str(name)
