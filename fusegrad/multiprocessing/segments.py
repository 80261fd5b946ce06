"""Shared-memory segments that hold tensor data.

A segment is an anonymous file (``memfd_create``) mapped ``MAP_SHARED``: another process
maps the same memory from a duplicate of its descriptor (sent over a Unix socket, or passed
to a spawned child), so no name is left in ``/dev/shm``; the kernel frees the memory when the
last process closes its descriptor and mapping. Arrays in a segment are views of one flat
``uint8`` array over the whole mapping, so any of them finds its segment and byte offset."""
from __future__ import annotations

import mmap
import os
import tempfile
import weakref
from typing import Callable, Optional, Tuple

import numpy as np


class Segment(mmap.mmap):
    """A shared mapping of a whole anonymous file; holds the file's descriptor (to send it to
    other processes) and closes it when the mapping is collected."""

    def __new__(cls, fd: int, nbytes: int) -> "Segment":
        seg = super().__new__(cls, fd, nbytes)
        seg.fd = fd
        weakref.finalize(seg, os.close, fd)
        return seg


def _anonymous_file(nbytes: int) -> int:
    """A descriptor of a new unnamed file of ``nbytes`` bytes in memory."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("fusegrad_shared", os.MFD_CLOEXEC)
    else:  # (no memfd: an unlinked temporary file, in RAM where /dev/shm exists)
        with tempfile.TemporaryFile(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as f:
            fd = os.dup(f.fileno())
    os.ftruncate(fd, nbytes)
    return fd


def flat_view(seg: Segment) -> np.ndarray:
    """The whole segment as a flat byte array (every array in it is a view of one)."""
    return np.frombuffer(seg, dtype=np.uint8)


def allocate(nbytes: int) -> np.ndarray:
    """A flat byte array over a new segment of ``nbytes`` bytes (at least one: mmap refuses 0)."""
    n = max(int(nbytes), 1)
    return flat_view(Segment(_anonymous_file(n), n))


def attach(fd: int, nbytes: int) -> np.ndarray:
    """A flat byte array over the segment another process sent as descriptor ``fd`` (owned
    from now on by the mapping)."""
    return flat_view(Segment(fd, nbytes))


def _root(a: np.ndarray) -> np.ndarray:
    """The last ndarray in ``a``'s chain of bases: the one that holds (or wraps) the memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def locate(a: np.ndarray) -> Optional[Tuple[Segment, int]]:
    """``a``'s segment and the byte offset of its first element there, or None if ``a`` is
    not in shared memory."""
    root = _root(a)
    buf = root.base
    seg = buf.obj if isinstance(buf, memoryview) else None
    if not isinstance(seg, Segment):
        return None
    return seg, a.__array_interface__["data"][0] - root.__array_interface__["data"][0]


def view_in(flat: np.ndarray, offset: int, shape: tuple, dtype: np.dtype, strides: tuple,
            writeable: bool = True) -> np.ndarray:
    """The array of ``shape``, ``dtype`` and ``strides`` at byte ``offset`` of ``flat``."""
    out = np.ndarray(shape, dtype, buffer=flat, offset=offset, strides=strides)
    if not writeable:  # (a broadcast view stays read-only)
        out.flags.writeable = False
    return out


def relocate(a: np.ndarray) -> Tuple[np.ndarray, Callable[[np.ndarray], Optional[np.ndarray]]]:
    """Copy ``a``'s memory into a new segment: the whole buffer it views when that is one
    contiguous block (as PyTorch shares a tensor's whole storage), else ``a`` alone. Returns
    ``a``'s replacement and a function that maps another array over the same old buffer to
    its replacement (None for one outside it)."""
    root = _root(a)
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        flat = allocate(a.nbytes)
        out = np.ndarray(a.shape, a.dtype, buffer=flat)
        np.copyto(out, a)
        return out, lambda other: None
    flat = allocate(root.nbytes)
    start = root.__array_interface__["data"][0]
    flat[:root.nbytes] = root.reshape(-1, order="A").view(np.uint8)  # (its memory order: no copy)

    def moved(other: np.ndarray) -> Optional[np.ndarray]:
        if type(other) is not np.ndarray or _root(other) is not root:
            return None
        return view_in(flat, other.__array_interface__["data"][0] - start, other.shape, other.dtype, other.strides,
                       other.flags.writeable)
    return moved(a), moved
