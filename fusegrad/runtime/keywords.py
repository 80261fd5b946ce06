"""PyTorch's keyword names on fusegrad's ops: ``torch.matmul(input=a, other=b)``,
``x.sum(axis=0, keepdims=True)``, ``x.view(size=(2, 3))`` and ``out=`` where PyTorch's
function has it. Each op keeps its own parameter names; an op whose names differ from
PyTorch's (``runtime/torch_keywords.py``) is wrapped once, at import, by an adapter that
renames keywords. The adapter returns at once when a call passes no keywords; the ops on
the eager hot path (add, sub, mul, div, the unary math functions) take PyTorch's names and
``out=`` themselves (``write_out``), so their calls pass through no adapter."""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from ..ir import dtypes as D
from .grad_mode import STATE, no_grad
from .tensor import Tensor
from . import torch_keywords as K

# NumPy's spellings that PyTorch's argument parser also accepts
_NUMPY_ALIASES = {"axis": "dim", "keepdims": "keepdim"}
_SIZE_KEYWORDS = ("size", "shape", "dims")


def _renames(fn: Callable, torch_names: Sequence[Optional[str]], skip: int) -> Tuple[Dict[str, str], bool]:
    """PyTorch's keyword -> ``fn``'s parameter, and whether ``fn`` takes sizes as ``*args``
    (then ``size=``/``shape=``/``dims=`` are passed positionally). ``skip``: leading
    parameters PyTorch does not name (a method's self)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}, False
    own = {p.name for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][skip:]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    out: Dict[str, str] = {}
    for tname, p in zip(torch_names, positional):
        if tname is not None and tname != p.name and tname not in own and p.kind is p.POSITIONAL_OR_KEYWORD:
            out[tname] = p.name
    for alias, name in _NUMPY_ALIASES.items():
        if name in own and alias not in own:
            out[alias] = name
    return out, varargs


def write_out(name: str, result: Any, out: Any) -> Any:
    """Copy ``result`` into ``out`` (resized if its shape differs, as PyTorch does, with
    its warning when ``out`` was not empty) and return ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): out= expects a tuple of {len(result)} tensors")
        return type(result)(*(write_out(name, r, o) for r, o in zip(result, out))) \
            if hasattr(result, "_fields") else tuple(write_out(name, r, o) for r, o in zip(result, out))
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if STATE.enabled and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")
    if result.dtype.category > out.dtype.category:
        raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the desired output type "
                           f"{_type_name(out.dtype)}")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() > 0:
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(result.shape)}. This behavior is "
                          "deprecated, and in a future PyTorch release outputs will not be resized unless they have "
                          "zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                          "elements with t.resize_(0).", UserWarning, stacklevel=3)
        out._data = np.empty(tuple(result.shape), dtype=out._data.dtype)
    with no_grad():
        out.copy_(result)
    return out


def _type_name(dt) -> str:
    return D.SCALAR_NAMES.get(dt.name, dt.name)


def _has_out(fn: Callable) -> bool:
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def adapt(name: str, fn: Callable, torch_names: Sequence[Optional[str]], takes_out: bool, method: bool) -> Callable:
    """``fn`` itself when it already accepts PyTorch's keywords, else a wrapper that does.
    A method refuses ``out=`` even when its function takes it (``x.add(y, out=o)`` is a
    TypeError in PyTorch; ``torch.add(x, y, out=o)`` is not)."""
    renames, varargs = _renames(fn, torch_names, 1 if method else 0)
    own_out = _has_out(fn)
    handle_out = takes_out and not own_out
    refuse_out = method and own_out
    if not renames and not varargs and not handle_out and not refuse_out:
        return fn

    @functools.wraps(fn)
    def with_torch_keywords(*args, **kwargs):
        if not kwargs:
            return fn(*args, **kwargs)
        if refuse_out and "out" in kwargs:
            raise TypeError(f"{name}() got an unexpected keyword argument 'out'")
        for k in [k for k in kwargs if k in renames]:
            kwargs[renames[k]] = kwargs.pop(k)
        if varargs:
            for k in _SIZE_KEYWORDS:
                if k in kwargs and k not in renames:
                    args = args + (tuple(kwargs.pop(k)) if not isinstance(kwargs[k], int) else (kwargs.pop(k),))
        out = kwargs.pop("out", None) if handle_out else None
        result = fn(*args, **kwargs)
        return result if out is None else write_out(name, result, out)
    with_torch_keywords.torch_keywords = True  # (tests/test_exports.py looks through it)
    return with_torch_keywords


# factories (sizes as *args, so size= too) and whether PyTorch's takes out= (each places its
# result on its device=, runtime/factory.py)
_FACTORIES = {"zeros": True, "ones": True, "empty": True, "rand": True, "randn": True, "randint": True,
              "full": True, "arange": True, "linspace": True, "eye": True, "randperm": True, "tensor": False,
              "as_tensor": False, "zeros_like": False, "ones_like": False, "empty_like": False,
              "full_like": False, "rand_like": False, "randn_like": False}


def install(namespace: dict, tensor_cls: type) -> None:
    """Wrap the top-level functions in ``namespace`` and the Tensor methods that need it."""
    for name, takes_out in _FACTORIES.items():
        namespace[name] = adapt(name, namespace[name], (), takes_out, method=False)
    for name, names in K.FUNCTIONS.items():
        if callable(namespace.get(name)):
            namespace[name] = adapt(name, namespace[name], names, name in K.OUT, method=False)
    for name, fn in list(vars(tensor_cls).items()):
        if callable(fn) and (name in K.METHODS or (not name.startswith("_") and _has_out(fn))):
            setattr(tensor_cls, name, adapt(name, fn, K.METHODS.get(name, ()), False, method=True))
