"""Generated kernel modules, cached in memory and on disk.

A module's source is written to ``$FUSEGRAD_CACHE_DIR/kernels/k_<hash>.py`` (default
``~/.cache/fusegrad``), the hash covering the source, Numba's version, the CPU and the
helper code it inlines; it is imported from that file so that Numba's ``cache=True`` keeps
the machine code next to it (``__pycache__``) and a new process skips compilation.

In front of it, ``g_<hash>.json`` records what a backend generated for a graph, the hash
covering the graph's fingerprint (``ir.fingerprint``), the same environment and the text of
the compiler's own code (``ir``, ``passes``, ``codegen``), so a new process that traces the
same graph skips fusion and code generation too.

Writes are atomic (temp file + ``os.replace``); an entry whose text does not match, or that
does not parse, is rebuilt with a warning; an unwritable cache directory falls back to a
temp directory."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
import types
import warnings
from typing import Optional

from .numba_start import load_array_support

_MODULES: dict[str, types.ModuleType] = {}
_LOCK = threading.Lock()
_FALLBACK_DIR: list = []


@functools.lru_cache(maxsize=1)
def _environment_tag() -> str:
    """What else, besides the source, decides the machine code Numba caches: Numba does
    not notice when an inlined callee (fastmath, the array intrinsics) changes, so their
    text is part of the key."""
    import llvmlite.binding as llvm
    import numba
    from ..codegen import cpu_arrays, cpu_malloc, fastmath
    h = hashlib.sha256()
    for mod in (fastmath, cpu_arrays, cpu_malloc):
        with open(mod.__file__, "rb") as fh:
            h.update(fh.read())
    helpers = h.hexdigest()[:16]
    return f"{numba.__version__}|{llvm.get_host_cpu_name()}|{sys.version_info[:2]}|{helpers}"



def cache_base() -> str:
    """``FUSEGRAD_CACHE_DIR``, or its default."""
    return os.environ.get("FUSEGRAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fusegrad")


def cache_dir() -> str:
    """The directory holding kernel modules (created on demand; a temp dir if unwritable)."""
    path = os.path.join(cache_base(), "kernels")
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
    return hashlib.sha256((_environment_tag() + "\n" + source).encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def _compiler_tag() -> str:
    """A digest of the compiler's source (IR rules and lowerings, passes, code generators):
    what a backend generates for a graph changes only when one of these files does."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for sub in ("ir", "passes", "codegen"):
        for dirpath, dirnames, files in sorted(os.walk(os.path.join(root, sub))):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    with open(os.path.join(dirpath, f), "rb") as fh:
                        h.update(f"{dirpath[len(root):]}/{f}\n".encode() + fh.read())
    return h.hexdigest()[:16]



def generated_key(backend: str, fingerprint: str, extra: str = "") -> str:
    """The cache key of what ``backend`` generated for a graph with this fingerprint
    (``extra``: anything else its output depends on, e.g. donations)."""
    text = "\n".join((_environment_tag(), _compiler_tag(), backend, fingerprint, extra))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def load_generated(key: str) -> Optional[dict]:
    """The record stored under ``key`` by ``store_generated``, or None (a corrupt entry is
    a miss, with a warning)."""
    path = os.path.join(cache_dir(), f"g_{key}.json")
    try:
        with open(path) as fh:
            stored = json.load(fh)
        if not isinstance(stored, dict) or not isinstance(stored.get("record"), dict) \
                or stored.get("digest") != _digest(stored["record"]):
            raise ValueError("not a record with a matching digest")
        return stored["record"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        warnings.warn(f"fusegrad: corrupt generated-code cache entry {path} ({exc}); rebuilding it")
        return None


def store_generated(key: str, record: dict) -> None:
    """Keep ``record`` (JSON) under ``key``; an unwritable cache only costs the next process time."""
    try:
        _write_atomic(os.path.join(cache_dir(), f"g_{key}.json"),
                      json.dumps({"record": record, "digest": _digest(record)}))
    except OSError as exc:
        warnings.warn(f"fusegrad: cannot write generated-code cache entry ({exc})")


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


def modules_loaded() -> int:
    """How many distinct generated kernel modules (graph entries and loop kernels) this
    process has imported, each compiled by Numba or loaded from its disk cache: the
    benchmark report counts a first call's kernels with it."""
    return len(_MODULES)


def load_module(source: str) -> types.ModuleType:
    """Import the module with this source, writing it to the cache directory if needed."""
    key = source_key(source)
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    with _LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            load_array_support()
            mod = _MODULES[key] = _import(key, source)
    return mod


def module_path(source: str) -> str:
    """Where the module with this source is kept in the cache directory."""
    return _module_file(source_key(source))


def _module_file(key: str) -> str:
    return os.path.join(cache_dir(), f"k_{key}.py")


def on_disk(source: str) -> bool:
    """Whether the cache directory holds the module with this source already (so an earlier
    compile most likely left its machine code in Numba's cache beside it)."""
    try:
        with open(module_path(source)) as fh:
            return fh.read() == source
    except (OSError, UnicodeDecodeError):
        return False


def _import(key: str, source: str) -> types.ModuleType:
    path = _module_file(key)
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
        # (only the module's own functions: the helpers it imports are shared by every kernel
        # module, and wrapping theirs again at each import nested the wrappers until loading
        # one raised RecursionError)
        if getattr(getattr(disp, "py_func", None), "__module__", None) != spec.name:
            continue
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
