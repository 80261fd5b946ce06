"""``fusegrad.cuda``: what ``torch.cuda`` reports on a machine without CUDA. Queries answer
"no GPU" (``is_available()`` False, ``device_count()`` 0, zero memory); anything that needs
a device raises PyTorch's ``AssertionError("Torch not compiled with CUDA enabled")``, as
``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` do. The CUDA backend will grow here."""
from __future__ import annotations

from typing import Any, Optional

NOT_COMPILED = "Torch not compiled with CUDA enabled"


def _lazy_init() -> None:
    """Raise: there is no CUDA device to initialize."""
    raise AssertionError(NOT_COMPILED)


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def current_device() -> int:
    _lazy_init()


def set_device(device: Any) -> None:
    _lazy_init()


def synchronize(device: Any = None) -> None:
    _lazy_init()


def get_device_name(device: Any = None) -> str:
    _lazy_init()


def get_device_properties(device: Any = None) -> Any:
    _lazy_init()


def get_device_capability(device: Any = None) -> Any:
    _lazy_init()


def manual_seed(seed: int) -> None:
    """No device generators to seed (PyTorch defers this call until CUDA starts)."""


def manual_seed_all(seed: int) -> None:
    """See ``manual_seed``."""


def seed() -> None:
    """See ``manual_seed``."""


def seed_all() -> None:
    """See ``manual_seed``."""


def memory_allocated(device: Any = None) -> int:
    return 0


def max_memory_allocated(device: Any = None) -> int:
    return 0


def memory_reserved(device: Any = None) -> int:
    return 0


def max_memory_reserved(device: Any = None) -> int:
    return 0


def empty_cache() -> None:
    """Nothing is cached without a device."""


def reset_peak_memory_stats(device: Any = None) -> None:
    _lazy_init()


class device:
    """Context manager selecting a CUDA device: entering it needs one."""

    def __init__(self, device: Any) -> None:
        self.idx = device

    def __enter__(self) -> None:
        if self.idx not in (-1, None):
            _lazy_init()

    def __exit__(self, *exc: Any) -> None:
        return None


def check_device(dev: Optional[Any]) -> None:
    """Raise PyTorch's error when ``dev`` (a string, ``fusegrad.device`` or, as in PyTorch,
    an int: a CUDA index) names a CUDA device, and a clear error for any other device
    than the CPU."""
    if dev is None:
        return
    if isinstance(dev, int):
        kind = "cuda"
    elif isinstance(dev, str):
        kind = dev.split(":")[0]
    else:
        kind = getattr(dev, "type", None)
    if kind == "cuda":
        _lazy_init()
    if kind not in ("cpu", "meta"):
        raise RuntimeError(f"fusegrad runs on the CPU only: device {dev!r} is not available")

from . import amp  # noqa: E402,F401  (torch.cuda.amp: autocast and GradScaler, disabled without a GPU)
