"""PyTorch's legacy checkpoint format (``torch.save`` before PyTorch 1.6, or with
``_use_new_zipfile_serialization=False``): pickles in a row, a magic number, the protocol
version and the writer's system information, then the object (its storages persistent ids
``("storage", type, key, location, numel, view)``), then the keys of the storages, then
each storage's element count (int64) and bytes in that order. (The older tar format of
PyTorch 0.x is not read.)"""
from __future__ import annotations

import io
import pickle
import struct
from typing import Any, Callable, Dict

import numpy as np

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001


def write_legacy(data_pkl: bytes, storages: Dict[str, bytes], counts: Dict[str, int], protocol: int) -> bytes:
    """A legacy checkpoint of the pickled object ``data_pkl`` (storage ids with a view slot,
    see ``TorchPickler``) and its ``storages`` (key -> little-endian bytes, ``counts[key]``
    elements)."""
    out = io.BytesIO()
    info = {"protocol_version": PROTOCOL_VERSION, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    for head in (MAGIC_NUMBER, PROTOCOL_VERSION, info):
        pickle.dump(head, out, protocol)
    out.write(data_pkl)
    keys = sorted(storages)
    pickle.dump(keys, out, protocol)
    for key in keys:
        out.write(struct.pack("<q", counts[key]))
        out.write(storages[key])
    return out.getvalue()


def load_legacy(f, unpickler: Callable, place: Callable[[np.ndarray, str], np.ndarray],
                pickle_load_args: Dict[str, Any]) -> Any:
    """The object of a legacy checkpoint in ``f``: ``unpickler(file, load_storage)`` reads
    it, ``place(array, location)`` puts each storage where ``map_location`` says."""
    if pickle.load(f) != MAGIC_NUMBER:
        raise RuntimeError("Invalid magic number; corrupt file?")
    version = pickle.load(f)
    if version != PROTOCOL_VERSION:
        raise RuntimeError(f"Invalid protocol version: {version}")
    info = pickle.load(f)
    if isinstance(info, dict) and not info.get("little_endian", True):
        raise RuntimeError("fusegrad.load: a legacy checkpoint written on a big-endian machine is not supported")
    storages: Dict[str, tuple] = {}  # key -> (host array filled below, location)

    def load_storage(storage_type, key: str, location: str, numel: int) -> np.ndarray:
        if key not in storages:
            storages[key] = (np.empty(numel, storage_type.dtype.np), location)
        return storages[key][0]

    result = unpickler(f, load_storage, **pickle_load_args).load()
    for key in pickle.load(f):
        arr, _ = storages[str(key)]
        (count,) = struct.unpack("<q", f.read(8))
        data = f.read(count * arr.itemsize)
        if count != arr.size or len(data) != arr.nbytes:
            raise RuntimeError(f"fusegrad.load: storage {key} of the legacy checkpoint is truncated or corrupt")
        arr[...] = np.frombuffer(data, arr.dtype)
    for arr, location in storages.values():
        place(arr, location)
    return result
