"""PyTorch's checkpoint container: a zip archive (entries stored, not compressed) whose
records sit under one folder: ``data.pkl`` (the pickled object), ``data/<key>`` (the raw
bytes of each storage, aligned to 64 bytes as PyTorch aligns them so they can be memory
mapped), ``byteorder``, ``version``, ``.format_version``, ``.storage_alignment`` and
``.data/serialization_id``."""
from __future__ import annotations

import os
import secrets
import struct
import zipfile
from typing import IO, Dict, Union

ALIGNMENT = 64
_PAD_FIELD_ID = 0x4246  # the "FB" extra field PyTorch's writer pads with

FileLike = Union[str, os.PathLike, IO[bytes]]


def _aligned_info(name: str, offset: int) -> zipfile.ZipInfo:
    """A stored entry whose data starts on an ALIGNMENT boundary when its local header is
    written at ``offset`` (the header is 30 bytes, the name, then the padding field)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    start = offset + 30 + len(name.encode()) + 4
    pad = (-start) % ALIGNMENT
    info.extra = struct.pack("<HH", _PAD_FIELD_ID, pad) + b"Z" * pad
    return info


def write_archive(f: FileLike, archive: str, data_pkl: bytes, storages: Dict[str, bytes]) -> None:
    """Write the records of one checkpoint under folder ``archive``."""
    records = [("data.pkl", data_pkl), (".format_version", b"1"), (".storage_alignment", str(ALIGNMENT).encode()),
               ("byteorder", b"little")]
    records += [(f"data/{key}", payload) for key, payload in storages.items()]
    records += [("version", b"3\n"), (".data/serialization_id", str(secrets.randbits(128)).zfill(40).encode())]
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, payload in records:
            info = _aligned_info(f"{archive}/{name}", zf.fp.tell())
            zf.writestr(info, payload)


class ArchiveReader:
    """The records of a checkpoint, found under whatever folder name it was written with."""

    def __init__(self, f: FileLike) -> None:
        try:
            self.zf = zipfile.ZipFile(f, "r")
        except zipfile.BadZipFile:  # (a zip's first header but no central directory: cut short)
            raise RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory. "
                               "The checkpoint file is likely corrupted or was not saved or copied completely"
                               ) from None
        names = self.zf.namelist()
        pkl = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
        if not pkl:
            raise RuntimeError("PytorchStreamReader failed locating file data.pkl: file not found (not a "
                               "PyTorch zip checkpoint)")
        self.prefix = pkl[0][:-len("data.pkl")]

    def has(self, name: str) -> bool:
        return self.prefix + name in self.zf.NameToInfo

    def read(self, name: str) -> bytes:
        return self.zf.read(self.prefix + name)

    def close(self) -> None:
        self.zf.close()


def is_zip(f: FileLike) -> bool:
    """Whether ``f`` starts as a zip archive does (PyTorch's test: a checkpoint cut short is
    still one, and fails as one); a file object keeps its position."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read(4) == _ZIP_MAGIC
    pos = f.tell()
    try:
        return f.read(4) == _ZIP_MAGIC
    finally:
        f.seek(pos)


_ZIP_MAGIC = b"PK\x03\x04"
