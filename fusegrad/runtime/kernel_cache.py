"""Generated kernel modules, cached in memory and on disk.

A module's source is written to ``$FUSEGRAD_CACHE_DIR/kernels/k_<hash>.py`` (default
``~/.cache/fusegrad``), the hash covering the source, Numba's version, the CPU and the
helper code it inlines; it is imported from that file so that Numba's ``cache=True`` keeps
the machine code next to it (``__pycache__``) and a new process skips compilation.
Writes are atomic (temp file + ``os.replace``); an entry whose text does not match is
rebuilt with a warning; an unwritable cache directory falls back to a temp directory."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import types
import warnings

_MODULES: dict[str, types.ModuleType] = {}
_LOCK = threading.Lock()
_FALLBACK_DIR: list = []


def _environment_tag() -> str:
    """What else, besides the source, decides the machine code Numba caches: Numba does
    not notice when an inlined callee (fastmath) changes, so its text is part of the key."""
    import llvmlite.binding as llvm
    import numba
    from ..codegen import fastmath
    with open(fastmath.__file__, "rb") as fh:
        helpers = hashlib.sha256(fh.read()).hexdigest()[:16]
    return f"{numba.__version__}|{llvm.get_host_cpu_name()}|{sys.version_info[:2]}|{helpers}"


_TAG: list = []


def cache_dir() -> str:
    """The directory holding kernel modules (created on demand; a temp dir if unwritable)."""
    base = os.environ.get("FUSEGRAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fusegrad")
    path = os.path.join(base, "kernels")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    return _fallback_dir(path)


def _fallback_dir(path: str) -> str:
    if not _FALLBACK_DIR:
        _FALLBACK_DIR.append(tempfile.mkdtemp(prefix="fusegrad-kernels-"))
        warnings.warn(f"fusegrad: kernel cache directory {path!r} is not writable; using {_FALLBACK_DIR[0]}")
    return _FALLBACK_DIR[0]


def source_key(source: str) -> str:
    if not _TAG:
        _TAG.append(_environment_tag())
    return hashlib.sha256((_TAG[0] + "\n" + source).encode()).hexdigest()[:32]


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_module(source: str) -> types.ModuleType:
    """Import the module with this source, writing it to the cache directory if needed."""
    key = source_key(source)
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    with _LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            mod = _MODULES[key] = _import(key, source)
    return mod


def _import(key: str, source: str) -> types.ModuleType:
    path = os.path.join(cache_dir(), f"k_{key}.py")
    try:
        with open(path) as fh:
            ok = fh.read() == source
        if not ok:
            warnings.warn(f"fusegrad: corrupt kernel cache entry {path}; rebuilding it")
    except FileNotFoundError:
        ok = False
    except (OSError, UnicodeDecodeError) as exc:
        warnings.warn(f"fusegrad: unreadable kernel cache entry {path} ({exc}); rebuilding it")
        ok = False
    if not ok:
        try:
            _write_atomic(path, source)
        except OSError as exc:  # ENOSPC, quota, a read-only mount os.access did not report
            warnings.warn(f"fusegrad: cannot write kernel cache entry {path} ({exc})")
            path = os.path.join(_fallback_dir(os.path.dirname(path)), f"k_{key}.py")
            _write_atomic(path, source)
    spec = importlib.util.spec_from_file_location(f"fusegrad_kernel_{key}", path)
    mod = importlib.util.module_from_spec(spec)
    # Numba's on-disk cache re-imports a function's module by name when it loads code.
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[spec.name]
        raise
    for disp in vars(mod).values():  # corrupt Numba cache data (__pycache__) is a miss, not an error
        cache = getattr(disp, "_cache", None)
        if hasattr(cache, "load_overload") and hasattr(cache, "flush"):
            cache.load_overload = functools.partial(_load_or_flush, cache, cache.load_overload, path)
    return mod


def _load_or_flush(cache, load, path, sig, target_context):
    try:
        return load(sig, target_context)
    except Exception as exc:  # noqa: BLE001 - truncated or garbage .nbi/.nbc: recompile
        warnings.warn(f"fusegrad: corrupt Numba cache data for {path} ({exc!r}); rebuilding it")
        cache.flush()  # empty index, so the recompiled code is saved over it
        return None
