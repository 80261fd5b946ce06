"""The ``weights_only=True`` unpickler: tensors (sparse COO ones too), PyTorch's dtypes, ``Size`` and ``device``,
plain containers (dict, list, tuple, set, OrderedDict, Counter, bytearray: PyTorch's
allowlist), numbers, strings and bytes; any other global is refused before it is looked
up, so no code a file names runs. It is the pure-Python unpickler, so that its
object-building opcode (BUILD) can be limited too: only an OrderedDict's attributes (a
state dict's ``_metadata``) may be set."""
from __future__ import annotations

import _codecs
import _compat_pickle
import pickle
from collections import Counter, OrderedDict
from typing import Any, Dict

from ..runtime.sparse_coo import _rebuild as _rebuild_sparse_coo
from . import names as N
from .pickling import StorageReading

_PLAIN: Dict[str, Any] = {
    "collections.OrderedDict": OrderedDict, "collections.Counter": Counter, "builtins.set": set,
    "builtins.bytearray": bytearray, "builtins.complex": complex,
    "_codecs.encode": _codecs.encode,  # (bytes, in protocol 2)
    # a sparse COO tensor as fusegrad pickles it (its indices checked, as torch's _rebuild_sparse_tensor)
    "fusegrad.runtime.sparse_coo._rebuild": _rebuild_sparse_coo,
}

UNSAFE_MESSAGE = ("Re-running `fusegrad.load` with `weights_only` set to `False` will likely succeed, but it can "
                  "result in arbitrary code execution. Do it only if you got the file from a trusted source.")

_user_safe: Dict[str, Any] = {}  # add_safe_globals: the one registry, as torch.serialization keeps


def _qualified(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes or functions (or ``(obj, "module.name")`` pairs) in
    ``weights_only`` loads."""
    for g in safe_globals:
        obj, name = (g if isinstance(g, tuple) else (g, _qualified(g)))
        _user_safe[name] = obj


def get_safe_globals() -> list:
    return list(_user_safe.values())


def clear_safe_globals() -> None:
    _user_safe.clear()


class safe_globals:
    """Context manager: ``add_safe_globals`` for the duration of a ``with`` block."""

    def __init__(self, safe_globals: list) -> None:
        self.globals = safe_globals

    def __enter__(self) -> None:
        self.saved = dict(_user_safe)
        add_safe_globals(self.globals)

    def __exit__(self, *exc) -> None:
        _user_safe.clear()
        _user_safe.update(self.saved)


def _safe_global(module: str, name: str) -> Any:
    """What a ``weights_only`` load reads the global ``module.name`` as, or None (refused)."""
    full = f"{module}.{name}"
    if full in _PLAIN:
        return _PLAIN[full]
    found = N.torch_global(module, name) if module == "torch" or module.startswith("torch.") else None
    return found if found is not None else _user_safe.get(full)


def unsafe_globals(data: bytes) -> list:
    """The globals a pickle names that a ``weights_only`` load refuses, in order, once each
    (read from its opcodes: nothing is unpickled)."""
    import pickletools
    names, strings = [], []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
            strings.append(arg)
        elif op.name == "GLOBAL":
            names.append(tuple(arg.split(" ", 1)))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            names.append((strings[-2], strings[-1]))
    return list(dict.fromkeys(f"{m}.{n}" for m, n in names if _safe_global(m, n) is None))


def _refuse(message: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(f"Weights only load failed. {UNSAFE_MESSAGE}\nWeightsUnpickler error: {message}")


class WeightsOnlyUnpickler(StorageReading, pickle._Unpickler):
    """See the module docstring."""

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3:  # Python 2 names, as pickle's own find_class maps them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        full = f"{module}.{name}"
        found = _safe_global(module, name)
        if found is not None:
            return found
        raise _refuse(f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
                      f"`fusegrad.serialization.add_safe_globals([{name}])` or the "
                      f"`fusegrad.serialization.safe_globals([{name}])` context manager to allowlist this "
                      "global if you trust this class/function.")

    def _load_build(self) -> None:
        inst = self.stack[-2]  # (the state is on top)
        if type(inst) is OrderedDict or type(inst) in {v for v in _user_safe.values() if isinstance(v, type)}:
            return pickle._Unpickler.load_build(self)
        raise _refuse(f"Can only build Tensor, Parameter, OrderedDict or types allowlisted via "
                      f"add_safe_globals, but got {type(inst)}")

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = _load_build
