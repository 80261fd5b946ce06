"""Pickling objects the way ``torch.save`` does (tensors as ``_rebuild_tensor_v2`` over
persistent storages, dtypes, ``Size`` and ``device`` as torch globals) and unpickling
PyTorch's checkpoints into fusegrad objects."""
from __future__ import annotations

import importlib
import io
import pickle
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..ir import dtypes as D
from ..runtime.tensor import Size, Tensor, device
from . import names as N


class _StorageRef:
    """A tensor's storage as the pickle refers to it (its key, size in elements and device)."""
    __slots__ = ("key", "dtype", "numel", "location")

    def __init__(self, key: str, dtype: D.dtype, numel: int, location: str) -> None:
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location


class TorchPickler(pickle._Pickler):
    """Pure-Python pickler (it must write torch's globals without importing torch) that
    collects the bytes of every storage in ``storages``. Tensors viewing one array share one
    storage, as in PyTorch."""

    def __init__(self, file: io.BytesIO, protocol: int, legacy: bool = False) -> None:
        super().__init__(file, protocol)
        self.legacy = legacy  # (the legacy format's ids end in a view's metadata: None)
        self.storages: Dict[str, bytes] = {}
        self.counts: Dict[str, int] = {}  # storage key -> its elements
        self._refs: Dict[int, Tuple[_StorageRef, np.ndarray]] = {}  # id(root array) -> (ref, root)

    def persistent_id(self, obj: Any) -> Optional[tuple]:
        if type(obj) is _StorageRef:
            typed = N.STORAGE_NAMES.get(obj.dtype)
            sid = ("storage", typed or N.UNTYPED_STORAGE, obj.key, obj.location,
                   obj.numel if typed else obj.numel * obj.dtype.itemsize)
            return sid + (None,) if self.legacy else sid
        return None

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if isinstance(obj, D.dtype):
            obj = N.DTYPE_NAMES.get(obj) or _unsupported(obj)
        if type(obj) is N.TorchName:  # GLOBAL module\nname\n, memoized like any global
            memo = self.memo.get(id(obj))
            if memo is not None:
                self.write(self.get(memo[0]))
                return
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            self.memoize(obj)
            return
        super().save(obj, save_persistent_id)

    def reducer_override(self, obj: Any):
        if not isinstance(obj, (Tensor, Size, device)):
            return NotImplemented
        if isinstance(obj, Size):
            return N.SIZE, (tuple(obj),)
        if isinstance(obj, device):
            return N.DEVICE, (str(obj),)
        from ..nn.parameter import Parameter
        if isinstance(obj, Parameter):
            return N.REBUILD_PARAMETER, (_as_plain(obj), obj.requires_grad, OrderedDict())
        dev = obj.device
        arr = obj._concrete("fusegrad.save", host=True)  # (a CUDA tensor: a host copy, saved at its device)
        ref, offset, stride = self._storage_of(arr, obj.dtype, str(dev))
        args = (ref, offset, tuple(arr.shape), stride, obj.requires_grad, OrderedDict())
        if obj.dtype not in N.STORAGE_NAMES:  # (bytes of an UntypedStorage, as PyTorch writes these dtypes)
            return N.REBUILD_TENSOR_V3, args + (obj.dtype,)
        return N.REBUILD_TENSOR_V2, args

    def _storage_of(self, arr: np.ndarray, dtype: D.dtype, location: str) -> Tuple[_StorageRef, int, Tuple[int, ...]]:
        """The storage ``arr`` views (its root array when the view is expressible as
        offset and non-negative strides over it, else a copy of its own), the offset and
        strides in elements."""
        if dtype not in N.DTYPE_NAMES:
            _unsupported(dtype)
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        item = arr.itemsize
        offset_bytes = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        shareable = (root.dtype == arr.dtype and root.flags.c_contiguous and offset_bytes >= 0
                     and offset_bytes % item == 0 and all(s >= 0 and s % item == 0 for s in arr.strides))
        if not shareable:
            root = np.ascontiguousarray(arr)
            offset_bytes = 0
        strides = tuple(s // item for s in arr.strides) if shareable else _c_strides(arr.shape)
        known = self._refs.get(id(root))
        if known is None:
            ref = _StorageRef(str(len(self.storages)), dtype, root.size, location)
            self.storages[ref.key] = root.astype(root.dtype.newbyteorder("<"), copy=False).tobytes()
            self.counts[ref.key] = root.size
            self._refs[id(root)] = (ref, root)  # holds root: its id stays unique while pickling
        else:
            ref = known[0]
        return ref, offset_bytes // item, strides


def _c_strides(shape) -> Tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(out))


def _as_plain(t: Tensor) -> Tensor:
    """A plain Tensor over ``t``'s array (what ``_rebuild_parameter`` wraps)."""
    from ..runtime.tensor import wrap
    return wrap(t._data if t.is_cuda else t._concrete("fusegrad.save"))


def _unsupported(dtype) -> None:
    raise RuntimeError(f"fusegrad.save: tensors of dtype {dtype} cannot be saved in PyTorch's format "
                       f"(supported: {', '.join(dt.name for dt in N.DTYPE_NAMES)})")


StorageLoader = Callable[[N.StorageType, str, str, int], np.ndarray]


class StorageReading:
    """Unpickler mixin: persistent ids are storages, read through ``load_storage``."""

    def __init__(self, file, load_storage: StorageLoader, **kwargs) -> None:
        super().__init__(file, **kwargs)
        self._load_storage = load_storage

    def persistent_load(self, pid: Any) -> Any:
        return persistent_storage(pid, self._load_storage)


class TorchUnpickler(StorageReading, pickle.Unpickler):
    """Reads any pickle, PyTorch's globals as fusegrad's (``torch.x.y`` tried as
    ``fusegrad.x.y``), storages through ``load_storage``. Only for trusted files: like any
    unpickler it runs the code the file names."""

    def find_class(self, module: str, name: str) -> Any:
        found = N.torch_global(module, name)
        if found is not None:
            return found
        if module == "torch" or module.startswith("torch."):
            try:
                return getattr(importlib.import_module("fusegrad" + module[len("torch"):]), name)
            except (ImportError, AttributeError):
                raise pickle.UnpicklingError(f"fusegrad.load: the checkpoint names {module}.{name}, which fusegrad "
                                             "does not have") from None
        return super().find_class(module, name)


def persistent_storage(pid: Any, load_storage: StorageLoader) -> np.ndarray:
    """The array for a persistent id ``("storage", type, key, location, numel)``, or the
    legacy format's, which adds a view ``(view key, offset, numel)`` of the storage or None."""
    if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
        raise pickle.UnpicklingError(f"fusegrad.load: unknown persistent id {pid!r} (expected a storage)")
    _, storage_type, key, location, numel = pid[:5]
    if not isinstance(storage_type, N.StorageType):
        raise pickle.UnpicklingError(f"fusegrad.load: a storage of type {storage_type!r} is not supported")
    arr = load_storage(storage_type, str(key), str(location), int(numel))
    view = pid[5] if len(pid) == 6 else None
    if view is not None:
        _, offset, size = view
        arr = arr[int(offset):int(offset) + int(size)]
    return arr
