"""How fusegrad's objects are named in a PyTorch checkpoint's pickle, both ways: storage
classes per dtype, dtypes, ``Size``, ``device``, and the tensor rebuild functions."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Tuple

import numpy as np

from ..ir import dtypes as D
from ..runtime.tensor import Size, Tensor, device, wrap


class TorchName:
    """A global as PyTorch's pickles name it (``module``, ``name``); the pickler writes it
    as a GLOBAL opcode without importing anything."""
    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __repr__(self) -> str:
        return f"{self.module}.{self.name}"

    def __call__(self, *args):  # pickle wants reduce functions callable; this one only names
        raise TypeError(f"{self!r} is PyTorch's; fusegrad only writes its name")


STORAGE_DTYPES: Dict[str, D.dtype] = {
    "FloatStorage": D.float32, "DoubleStorage": D.float64, "HalfStorage": D.float16, "BFloat16Storage": D.bfloat16,
    "LongStorage": D.int64, "IntStorage": D.int32, "ShortStorage": D.int16, "CharStorage": D.int8,
    "ByteStorage": D.uint8, "BoolStorage": D.bool_, "ComplexFloatStorage": D.complex64,
    "ComplexDoubleStorage": D.complex128,
}
STORAGE_NAMES = {dt: TorchName("torch", name) for name, dt in STORAGE_DTYPES.items()}
# dtypes with no typed storage (uint16/32/64): bytes in an UntypedStorage, the dtype given to
# _rebuild_tensor_v3
UNTYPED_STORAGE = TorchName("torch.storage", "UntypedStorage")
_UNTYPED_DTYPES = (D.uint16, D.uint32, D.uint64)

# torch.<name> for every dtype (with PyTorch's aliases when reading)
DTYPE_ALIASES = {"float": D.float32, "double": D.float64, "half": D.float16, "long": D.int64, "int": D.int32,
                 "short": D.int16, "cfloat": D.complex64, "cdouble": D.complex128}
DTYPE_BY_NAME: Dict[str, D.dtype] = {**{dt.name: dt for dt in (*STORAGE_DTYPES.values(), *_UNTYPED_DTYPES)},
                                     **DTYPE_ALIASES}
DTYPE_NAMES = {dt: TorchName("torch", dt.name) for dt in (*STORAGE_DTYPES.values(), *_UNTYPED_DTYPES)}

REBUILD_TENSOR_V2 = TorchName("torch._utils", "_rebuild_tensor_v2")
REBUILD_TENSOR_V3 = TorchName("torch._utils", "_rebuild_tensor_v3")
REBUILD_PARAMETER = TorchName("torch._utils", "_rebuild_parameter")
ORDERED_DICT = OrderedDict
SIZE = TorchName("torch", "Size")
DEVICE = TorchName("torch", "device")


class StorageType:
    """What ``torch.FloatStorage`` and its kin unpickle to: the dtype of a storage."""

    def __init__(self, name: str) -> None:
        if name not in STORAGE_DTYPES and name != "UntypedStorage":
            raise RuntimeError(f"fusegrad.load: tensors stored as torch.{name} are not supported (dtypes: "
                               f"{', '.join(dt.name for dt in STORAGE_DTYPES.values())})")
        # (an UntypedStorage holds bytes: _rebuild_tensor_v3 names their dtype)
        self.name, self.dtype = name, STORAGE_DTYPES.get(name, D.uint8)


class DeviceStorage(np.ndarray):
    """A storage loaded for a CUDA device (``target`` set by ``load``): the tensors rebuilt
    from it are copied there."""
    target: Any = None


def rebuild_tensor_v2(storage: np.ndarray, storage_offset: int, size: Tuple[int, ...], stride: Tuple[int, ...],
                      requires_grad: bool, backward_hooks: Any = None, metadata: Any = None) -> Tensor:
    """A tensor over ``storage`` (a 1-d array shared by every tensor of that storage)."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    needed = storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    if needed > storage.size or storage_offset < 0 or any(s < 0 for s in stride):
        raise RuntimeError(f"fusegrad.load: a tensor of size {list(size)} and stride {list(stride)} at offset "
                           f"{storage_offset} does not fit in its storage of {storage.size} elements")
    item = storage.itemsize
    if needed:  # (an ndarray over the storage: its base, so storage_offset() and untyped_storage() see it)
        arr = np.ndarray(size, storage.dtype, buffer=storage, offset=storage_offset * item,
                         strides=[s * item for s in stride])
    else:
        arr = np.empty(size, storage.dtype)
    if isinstance(storage, DeviceStorage):
        from ..runtime.devices import move
        arr = move(np.array(arr, copy=True), storage.target)
    t = wrap(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def rebuild_tensor_v3(storage: np.ndarray, storage_offset: int, size: Tuple[int, ...], stride: Tuple[int, ...],
                      requires_grad: bool, backward_hooks: Any, dtype: D.dtype, metadata: Any = None) -> Tensor:
    """``rebuild_tensor_v2`` over an UntypedStorage's bytes read as ``dtype``."""
    if not isinstance(dtype, D.dtype):
        raise RuntimeError(f"fusegrad.load: a tensor of dtype {dtype!r} is not supported")
    return rebuild_tensor_v2(storage.view(dtype.np), storage_offset, size, stride, requires_grad)


def rebuild_tensor(storage: np.ndarray, storage_offset: int, size, stride) -> Tensor:
    return rebuild_tensor_v2(storage, storage_offset, size, stride, False)


def rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks: Any = None) -> Tensor:
    from ..nn.parameter import Parameter
    return Parameter(data, requires_grad)


def rebuild_parameter_with_state(data: Tensor, requires_grad: bool, backward_hooks: Any, state: Any) -> Tensor:
    param = rebuild_parameter(data, requires_grad)
    if isinstance(state, tuple) and len(state) == 2:  # (dict state, slots state)
        state = {**(state[0] or {}), **(state[1] or {})}
    for k, v in (state or {}).items():
        setattr(param, k, v)
    return param


def rebuild_from_type_v2(func, new_type, args, state) -> Tensor:
    """A tensor subclass or a tensor with Python attributes: ``func(*args)`` retyped."""
    from ..runtime.tensor import _retype
    ret = func(*args)
    if new_type is not type(ret) and isinstance(new_type, type) and issubclass(new_type, Tensor):
        ret = _retype(ret, new_type)
    for k, v in (state or {}).items() if isinstance(state, dict) else ():
        setattr(ret, k, v)
    return ret


def make_size(*args) -> Size:
    return Size(*args)


def make_device(*args) -> device:
    return device(*args)


# torch globals a checkpoint may name, and what fusegrad reads them as (also the weights-only
# allowlist, with OrderedDict, Counter, set, bytearray, complex and _codecs.encode)
TORCH_GLOBALS: Dict[str, Any] = {
    "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
    "torch.storage.UntypedStorage": StorageType("UntypedStorage"),
    "torch._utils._rebuild_tensor": rebuild_tensor,
    "torch._utils._rebuild_parameter": rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": rebuild_parameter_with_state,
    "torch._tensor._rebuild_from_type_v2": rebuild_from_type_v2,
    "torch.Size": make_size,
    "torch.device": make_device,
    "torch.Tensor": Tensor,
    "torch.serialization._get_layout": lambda name: name,
    **{f"torch.{name}": StorageType(name) for name in STORAGE_DTYPES},
    **{f"torch.{name}": dt for name, dt in DTYPE_BY_NAME.items()},
}


def torch_global(module: str, name: str) -> Any:
    """The fusegrad object for PyTorch's global ``module.name``, or None."""
    if module == "torch.nn.parameter" and name == "Parameter":
        from ..nn.parameter import Parameter
        return Parameter
    return TORCH_GLOBALS.get(f"{module}.{name}")
