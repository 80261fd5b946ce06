"""Tensors shared with other libraries and asked about other devices: DLPack (``from_dlpack``,
``to_dlpack``, ``Tensor.__dlpack__``: the memory itself, no copy, through NumPy's DLPack
support), ``get_device_module``, and the Tensor's predicates for devices and layouts fusegrad
has no tensors on (``is_mps``, ``is_xpu``, ``is_nested``, ``is_quantized``, ...: always False)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .exports import op
from .tensor import Tensor, wrap

#: Tensor predicates PyTorch answers per device or layout; no fusegrad tensor is on one of these.
ABSENT_KINDS = ("is_mps", "is_xpu", "is_ipu", "is_xla", "is_maia", "is_mtia", "is_vulkan", "is_mkldnn",
                "is_nested", "is_quantized", "is_sparse_csr")


@op(method=False)
def from_dlpack(ext_tensor: Any) -> Tensor:
    """A tensor sharing the memory of ``ext_tensor``: an object with ``__dlpack__`` (a NumPy
    array, a JAX or CuPy array on the host, another framework's tensor) or a DLPack capsule."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if not hasattr(ext_tensor, "__dlpack__"):  # a capsule (to_dlpack's): NumPy reads it through a holder
        ext_tensor = _Capsule(ext_tensor)
    return wrap(np.from_dlpack(ext_tensor))


class _Capsule:
    """A DLPack capsule presented as the protocol's object, for ``np.from_dlpack``."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


@op(method=False)
def to_dlpack(tensor: Tensor):
    """A DLPack capsule of ``tensor``'s memory (no copy)."""
    return tensor._concrete("to_dlpack", host=True).__dlpack__()


def _dlpack(self: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    if self.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
              if v is not None}
    return self._concrete("__dlpack__", host=True).__dlpack__(stream=stream, **kwargs)


def _dlpack_device(self: Tensor) -> tuple:
    return self._concrete("__dlpack_device__", host=True).__dlpack_device__()


@op(method=False)
def get_device_module(device=None):
    """The module of ``device``'s type: ``fusegrad.cuda`` or ``fusegrad.cpu``."""
    import fusegrad
    kind = getattr(device, "type", None) or (str(device).split(":")[0] if device is not None else "cuda")
    module = getattr(fusegrad, kind, None) if kind in ("cpu", "cuda", "mps", "xpu") else None
    if module is None:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'torch.{kind}'.")
    return module


def _bind() -> None:
    Tensor.__dlpack__ = _dlpack
    Tensor.__dlpack_device__ = _dlpack_device
    for name in ABSENT_KINDS:
        setattr(Tensor, name, property(lambda self: False, doc="Always False: no fusegrad tensor is one."))


_bind()
