"""``fusegrad.cuda``: ``torch.cuda``'s device queries and controls over numba-cuda
(``driver.py``; the optional ``cuda`` extra). Without a device (or without numba-cuda) it
answers as PyTorch built without CUDA: ``is_available()`` False, ``device_count()`` 0, zero
memory, and anything that needs a device raises ``AssertionError("Torch not compiled with
CUDA enabled")``, as ``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` do.
``FUSEGRAD_CUDA_SIM=1`` runs everything on Numba's CUDA simulator instead."""
from __future__ import annotations

from typing import Any, Optional

from . import driver
from .driver import NOT_COMPILED


def _lazy_init() -> None:
    """Initialize CUDA; PyTorch's AssertionError when there is no device."""
    driver.require()


def _index(device: Any) -> Optional[int]:
    """The ordinal ``device`` names (an int, "cuda:1", a ``fusegrad.device``; None: current)."""
    if device is None or isinstance(device, int):
        return device
    from ..runtime.devices import device as _device
    d = device if isinstance(device, _device) else _device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return d.index


def is_available() -> bool:
    """Whether a CUDA device (or, with ``FUSEGRAD_CUDA_SIM=1``, Numba's simulator) is usable."""
    return driver.available()


def device_count() -> int:
    return driver.device_count()


def is_initialized() -> bool:
    return driver.STATE.initialized


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def current_device() -> int:
    driver.require()
    return driver.STATE.current


def set_device(device: Any) -> None:
    """Make ``device`` the current CUDA device (a negative index is ignored, as in PyTorch)."""
    idx = _index(device)
    if idx is not None and idx >= 0:
        driver.STATE.current = driver.check_index(idx)


def synchronize(device: Any = None) -> None:
    """Wait for the device's work to finish."""
    driver.synchronize(_index(device))


def get_device_name(device: Any = None) -> str:
    return driver.device_name(driver.check_index(_index(device)))


def get_device_properties(device: Any = None) -> Any:
    cuda = driver.require()
    return cuda.gpus[driver.check_index(_index(device))]


def get_device_capability(device: Any = None) -> Any:
    return tuple(get_device_properties(device).compute_capability)


def manual_seed(seed: int) -> None:
    """Seed the CUDA generators: fusegrad's random numbers come from the one counter-based
    generator of ``fusegrad.manual_seed`` on every device (the same draws on CPU and CUDA),
    so there is no separate state to seed."""


def manual_seed_all(seed: int) -> None:
    """See ``manual_seed``."""


def seed() -> None:
    """See ``manual_seed``."""


def seed_all() -> None:
    """See ``manual_seed``."""


def memory_allocated(device: Any = None) -> int:
    """Bytes of device memory held by tensors (fusegrad's own arrays) on ``device``."""
    if not driver.STATE.initialized:
        return 0
    return driver.STATE.allocated.get(driver.check_index(_index(device)), 0)


def max_memory_allocated(device: Any = None) -> int:
    """The peak of ``memory_allocated`` since the start or ``reset_peak_memory_stats``."""
    if not driver.STATE.initialized:
        return 0
    return driver.STATE.peak.get(driver.check_index(_index(device)), 0)


def memory_reserved(device: Any = None) -> int:
    """Numba allocates and frees device memory itself (no caching pool of fusegrad's): what is
    reserved is what is allocated."""
    return memory_allocated(device)


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def empty_cache() -> None:
    """Release memory held for reuse: Numba's deallocations queued on the context."""
    if driver.STATE.initialized and not driver.STATE.simulator:
        driver.require().current_context().deallocations.clear()


def reset_peak_memory_stats(device: Any = None) -> None:
    idx = driver.check_index(_index(device))
    driver.STATE.peak[idx] = driver.STATE.allocated.get(idx, 0)


class device:
    """Context manager making a CUDA device current inside the block."""

    def __init__(self, device: Any) -> None:
        self.idx = _index(device)
        self.prev: Optional[int] = None

    def __enter__(self) -> None:
        if self.idx not in (-1, None):
            self.prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc: Any) -> None:
        if self.prev is not None:
            set_device(self.prev)


def __getattr__(name: str) -> Any:
    """``fusegrad.cuda.amp`` (torch.cuda.amp's deprecated autocast and GradScaler), imported on
    first use: the runtime imports this package's driver before the amp package can load."""
    if name == "amp":
        import importlib
        return importlib.import_module(".amp", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
