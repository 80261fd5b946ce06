"""Devices as PyTorch names them (``fusegrad.device``), where a tensor's payload lives, the
default device of the factories, and moving payloads between host and device.

A CPU tensor's payload is a NumPy array; a CUDA tensor's is a device array
(``fusegrad.cuda.driver``); a meta tensor's a ``meta.MetaArray`` (a shape and dtype, no
data). Nothing here imports numba-cuda until a CUDA device is used."""
from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from ..cuda import driver
from ..ir.prims.elementwise import preserved_order
from .meta import NO_DATA, MetaArray

_KNOWN = ("cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, "
          "meta, hpu, mtia, privateuseone")
_SPEC = re.compile(r"^([a-z_]+)(?::(.*))?$")


class device:
    """``device("cuda:0")``, ``device("cuda", 0)``, ``device("cpu")``, ``device(0)`` (CUDA
    device 0), as ``torch.device``. Used as a context manager it is the factories' default
    device inside the block, as in PyTorch."""
    __slots__ = ("type", "index")

    def __init__(self, type: Any = "cpu", index: Optional[int] = None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        elif isinstance(type, str):
            m = _SPEC.match(type)
            kind = m.group(1) if m else type
            if kind not in _KNOWN.split(", "):
                raise RuntimeError(f"Expected one of {_KNOWN} device type at start of device string: {type}")
            if m.group(2) is not None:
                if index is not None or not m.group(2).isdigit():
                    raise RuntimeError(f"Invalid device string: '{type}'")
                index = int(m.group(2))
            type = kind
        else:
            raise TypeError(f"device() received an invalid combination of arguments - got ({type!r})")
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self.type = type
        self.index = index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self) -> "device":
        DEFAULT.append(resolve(self))
        return self

    def __exit__(self, *exc: Any) -> None:
        DEFAULT.pop()


CPU = device("cpu")
META = device("meta")

#: the factories' default device (``set_default_device``) at the bottom, ``with device:`` blocks
#: above it: the last is in force. Primitives with no tensor operand (fills in VJP rules) run
#: on it too.
DEFAULT: list = [CPU]


def resolve(dev: Any) -> device:
    """The concrete device ``dev`` (a string, int, ``device``; None: the default) names: a
    CUDA device gets its index (the current one when none is given). CUDA without a device
    raises PyTorch's AssertionError; devices other than the CPU, CUDA and meta are not
    supported."""
    if dev is None:
        d = DEFAULT[-1]
        return d if d.type == "cpu" else resolve(d)
    d = dev if isinstance(dev, device) else device(dev)
    if d.type == "cpu":
        return CPU
    if d.type == "cuda":
        return device("cuda", driver.check_index(d.index))
    if d.type == "meta":
        return META
    raise RuntimeError(f"fusegrad runs on the CPU, CUDA and meta devices only: device {str(d)!r} is not supported")


def set_default(dev: Any) -> None:
    """Make ``dev`` the factories' default device; as in PyTorch, a CUDA device is checked
    when a factory uses it, not here."""
    DEFAULT[0] = dev if isinstance(dev, device) else device(dev)


class creating_on:
    """``with creating_on(dev):`` primitives without tensor operands (a fill in a VJP rule, in
    ``zero_``) make their results on ``dev``: the device of the tensors they will meet."""
    __slots__ = ("dev",)

    def __init__(self, dev: device) -> None:
        self.dev = dev

    def __enter__(self) -> None:
        DEFAULT.append(self.dev)

    def __exit__(self, *exc: Any) -> None:
        DEFAULT.pop()


def write(dst: Any, src: Any) -> None:
    """Write device array ``src`` (broadcast, cast) into device array ``dst`` in place (on
    the meta device: nothing to write)."""
    if type(dst) is not MetaArray:
        driver.write(dst, src)


def of(data: Any) -> device:
    """The device holding payload ``data``."""
    if type(data) is np.ndarray:
        return CPU
    if type(data) is MetaArray:
        return META
    if not driver.is_device_array(data):
        return CPU
    return device("cuda", driver.array_device(data))


def move(data: Any, dev: device) -> Any:
    """``data`` (a NumPy, device or meta array) on ``dev``: itself when already there, else
    a copy (to the meta device: its shape and dtype; from there PyTorch's error)."""
    src = of(data)
    if src == dev:
        return data
    if dev.type == "meta":
        return MetaArray(data.shape, data.dtype)
    if src.type == "meta":
        raise NotImplementedError(NO_DATA)
    if dev.type == "cpu":
        return driver.to_host(data)
    host = data if src.type == "cpu" else driver.to_host(data)
    return driver.to_device(host, dev.index)


def is_contiguous(data: Any) -> bool:
    """Whether payload ``data`` (NumPy, device or meta array) is C-contiguous."""
    return data.flags.c_contiguous if type(data) is np.ndarray else data.is_c_contiguous()


def copy(data: Any, keep_layout: bool = False) -> Any:
    """A new copy of payload ``data`` on its device: C-contiguous, or with ``keep_layout``
    a host array's dims in the order of its strides (PyTorch's ``preserve_format``)."""
    if type(data) is MetaArray:
        return MetaArray(data.shape, data.dtype, data.strides if keep_layout else None)
    if type(data) is np.ndarray or not driver.is_device_array(data):
        return np.array(data, copy=True, order=preserved_order(data) if keep_layout else "C")
    return driver.copy(data)


def data_pointer(data: Any) -> int:
    """The address of payload ``data``'s first element, host or device (0 on the meta
    device, as in PyTorch)."""
    if type(data) is np.ndarray:
        return data.__array_interface__["data"][0]
    if type(data) is MetaArray:
        return 0
    return driver.data_pointer(data)


def mixed_error(a: device, b: device) -> RuntimeError:
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                        f"{a} and {b}!")
