"""``fusegrad.save`` / ``fusegrad.load`` in PyTorch's zip checkpoint format: what one
library saves, the other loads (tensors, parameters, state dicts, optimizer state, nested
containers; ``weights_only`` loads refuse everything else)."""
from __future__ import annotations

import io
import os
import pickle
from typing import Any, Callable, Dict, Optional, Union

import numpy as np

from ..runtime.tensor import device
from . import names as N
from .pickling import TorchPickler, TorchUnpickler
from .restricted import (UNSAFE_MESSAGE, WeightsOnlyUnpickler, add_safe_globals, clear_safe_globals,
                         get_safe_globals, safe_globals, unsafe_globals)
from .legacy import write_legacy
from .zipformat import ArchiveReader, FileLike, is_zip, write_archive

DEFAULT_PROTOCOL = 2

MapLocation = Union[None, str, device, Dict[str, str], Callable[[Any, str], Any]]


def save(obj: Any, f: FileLike, pickle_module: Any = pickle, pickle_protocol: int = DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False) -> None:
    """Save ``obj`` to ``f`` (a path or a binary file object) as ``torch.save`` does: a zip
    archive that ``torch.load`` and ``fusegrad.load`` read, or with
    ``_use_new_zipfile_serialization=False`` PyTorch's legacy format (serialization/legacy.py).
    Tensors that view one array share one storage."""
    if pickle_protocol < 2:
        raise ValueError(f"fusegrad.save: pickle_protocol must be at least 2, got {pickle_protocol}")
    buf = io.BytesIO()
    pickler = TorchPickler(buf, pickle_protocol, legacy=not _use_new_zipfile_serialization)
    pickler.dump(obj)
    if not _use_new_zipfile_serialization:
        data = write_legacy(buf.getvalue(), pickler.storages, pickler.counts, pickle_protocol)
        if isinstance(f, (str, os.PathLike)):
            with open(f, "wb") as out:
                out.write(data)
        else:
            f.write(data)
        return
    if isinstance(f, (str, os.PathLike)):
        archive = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
    else:
        archive = "archive"
    write_archive(f, archive, buf.getvalue(), pickler.storages)


def _target_location(map_location: MapLocation, location: str) -> str:
    """Where a storage saved at ``location`` goes: the CPU, or a CUDA device when one is
    available (PyTorch's error otherwise)."""
    if isinstance(map_location, dict):
        location = map_location.get(location, location)
    elif isinstance(map_location, (str, device)):
        location = str(map_location)
    from .. import cuda
    if not location.startswith("cpu") and not (location.startswith("cuda") and cuda.is_available()):
        raise RuntimeError("Attempting to deserialize object on a CUDA device but fusegrad.cuda.is_available() is "
                           "False. If you are running on a CPU-only machine, please use fusegrad.load with "
                           "map_location=fusegrad.device('cpu') to map your storages to the CPU.")
    return location


def load(f: FileLike, map_location: MapLocation = None, pickle_module: Any = None, *,
         weights_only: Optional[bool] = None, mmap: Optional[bool] = None, **pickle_load_args: Any) -> Any:
    """Load what ``fusegrad.save`` or ``torch.save`` wrote. ``weights_only`` (the default,
    as in PyTorch 2.6 and later) reads only tensors, dtypes, sizes, devices and plain
    containers and raises ``pickle.UnpicklingError`` for any other object, without running
    its code; ``weights_only=False`` unpickles anything (trusted files only).
    ``map_location`` may name the CPU (a string, device, dict or a function of
    ``(storage, location)``); ``mmap`` is accepted (storages are read into memory)."""
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{os.fspath(f)}'")
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("f must be a file path in order to use the mmap argument")
    if not is_zip(f):
        return _load_legacy(f, map_location, pickle_module, weights_only, pickle_load_args)
    reader = ArchiveReader(f)
    try:
        big_endian = reader.has("byteorder") and reader.read("byteorder") == b"big"
        storages: Dict[str, np.ndarray] = {}

        def load_storage(storage_type: N.StorageType, key: str, location: str, numel: int) -> np.ndarray:
            if key not in storages:
                npdt = storage_type.dtype.np
                raw = reader.read(f"data/{key}")
                arr = np.frombuffer(bytearray(raw), dtype=npdt.newbyteorder(">") if big_endian else npdt)
                if big_endian:
                    arr = arr.astype(npdt)
                if arr.size < numel:
                    raise RuntimeError(f"fusegrad.load: storage {key} holds {arr.size} elements, expected {numel}")
                if callable(map_location):
                    mapped = map_location(arr, location)
                    arr = mapped if isinstance(mapped, np.ndarray) else arr
                else:
                    target = _target_location(map_location, location)
                    if target.startswith("cuda"):
                        from ..runtime.devices import resolve
                        arr = arr.view(N.DeviceStorage)
                        arr.target = resolve(target)
                storages[key] = arr
            return storages[key]

        data = io.BytesIO(reader.read("data.pkl"))
        if weights_only:
            return WeightsOnlyUnpickler(data, load_storage, **pickle_load_args).load()
        if pickle_module is not None and pickle_module is not pickle:
            raise NotImplementedError("fusegrad.load supports the standard pickle module only")
        return TorchUnpickler(data, load_storage, **pickle_load_args).load()
    finally:
        reader.close()


def _load_legacy(f: FileLike, map_location: MapLocation, pickle_module: Any, weights_only: bool,
                 pickle_load_args: dict) -> Any:
    """``load`` of PyTorch's legacy (pre-zip) format (serialization.legacy)."""
    from .legacy import load_legacy
    own = isinstance(f, (str, os.PathLike))
    fh = open(f, "rb") if own else f
    try:
        # (anything else fails in load_legacy's first read as in PyTorch: EOFError when empty,
        # pickle's UnpicklingError, "Invalid magic number")
        if not weights_only and pickle_module is not None and pickle_module is not pickle:
            raise NotImplementedError("fusegrad.load supports the standard pickle module only")

        def place(arr: np.ndarray, location: str) -> None:
            if callable(map_location):
                map_location(arr, location)
            else:
                _target_location(map_location, location)  # (PyTorch's error for CUDA without one)

        return load_legacy(fh, WeightsOnlyUnpickler if weights_only else TorchUnpickler, place, pickle_load_args)
    finally:
        if own:
            fh.close()


def get_unsafe_globals_in_checkpoint(f: FileLike) -> list:
    """The globals a checkpoint names that ``load(weights_only=True)`` refuses (read from its
    pickle's opcodes, nothing unpickled), as ``torch.serialization.get_unsafe_globals_in_checkpoint``."""
    if not is_zip(f):
        raise ValueError("Expected input to be a checkpoint returned by torch.save")
    reader = ArchiveReader(f)
    try:
        return unsafe_globals(reader.read("data.pkl"))
    finally:
        reader.close()


__all__ = ["DEFAULT_PROTOCOL", "UNSAFE_MESSAGE", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "get_unsafe_globals_in_checkpoint", "load", "safe_globals", "save"]
