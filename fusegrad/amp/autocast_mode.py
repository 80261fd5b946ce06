"""``fusegrad.autocast``: mixed precision regions, as ``torch.autocast``.

Tensors live on the CPU, so a CPU region casts ops by PyTorch's CPU policy (see
``runtime.autocast_state``); a ``"cuda"`` region is disabled with PyTorch's warning, as
PyTorch does on a machine without a GPU. Compiled functions called in a region trace under
it: the low dtype is part of their signature."""
from __future__ import annotations

import functools
import warnings
from typing import Optional

from ..ir import dtypes as D
from ..runtime.autocast_state import STATE

_CPU_DTYPES = ("bfloat16", "float16")
_DEFAULT = {"cpu": D.bfloat16}  # the dtype a region uses when none is given, per device type


class autocast:
    """Run the ops of a region in a lower precision where PyTorch's policy allows.

    ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context
    manager and a decorator. Regions nest; ``enabled=False`` turns autocast off inside."""

    def __init__(self, device_type: str, dtype: Optional[D.dtype] = None, enabled: bool = True,
                 cache_enabled: Optional[bool] = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        self.fast_dtype = D.to_dtype(dtype) if dtype is not None else get_autocast_dtype(device_type)
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled
        if device_type == "cpu":
            if self._enabled and self.fast_dtype.name not in _CPU_DTYPES:
                warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                              "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.")
                self._enabled = False
        elif device_type == "cuda":
            if self._enabled:
                from .. import cuda
                warnings.warn("fusegrad has no CUDA autocast policy yet: autocast('cuda') casts nothing. Disabling"
                              if cuda.is_available() else
                              "User provided device_type of 'cuda', but CUDA is not available. Disabling")
            self._enabled = False
        else:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self._prev: list = []

    def __enter__(self) -> "autocast":
        self._prev.append((STATE.dtype, STATE.cache_enabled))
        if self.device == "cpu":
            STATE.dtype = self.fast_dtype.np if self._enabled else None
        if self._cache_enabled is not None:
            STATE.cache_enabled = bool(self._cache_enabled)
        return self

    def __exit__(self, *exc) -> bool:
        STATE.dtype, STATE.cache_enabled = self._prev.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type: Optional[str] = None) -> bool:
    """Whether autocast is on for ``device_type`` (``None`` asks about CUDA, as PyTorch)."""
    return device_type == "cpu" and STATE.dtype is not None


def get_autocast_dtype(device_type: str) -> D.dtype:
    """The dtype autocast regions on ``device_type`` use (the active one, else the default)."""
    if device_type == "cpu" and STATE.dtype is not None:
        return D.from_numpy_dtype(STATE.dtype)
    return _DEFAULT.get(device_type, D.float16)


def get_autocast_cpu_dtype() -> D.dtype:
    """Deprecated spelling of ``get_autocast_dtype("cpu")`` (with PyTorch's warning)."""
    warnings.warn("torch.get_autocast_cpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cpu') "
                  "instead.", DeprecationWarning, stacklevel=2)
    return get_autocast_dtype("cpu")


def is_autocast_cpu_enabled() -> bool:
    """Deprecated spelling of ``is_autocast_enabled("cpu")`` (with PyTorch's warning)."""
    warnings.warn("torch.is_autocast_cpu_enabled() is deprecated. Please use torch.is_autocast_enabled('cpu') "
                  "instead.", DeprecationWarning, stacklevel=2)
    return is_autocast_enabled("cpu")


def is_autocast_available(device_type: str) -> bool:
    """Autocast works on the CPU here (there is no GPU)."""
    return device_type == "cpu"


def _cast(value, device_type: str, dtype: D.dtype):
    """``value`` with its floating tensors (on ``device_type``) cast to ``dtype``, through
    lists, tuples and dicts, as PyTorch's custom_fwd casts a Function's inputs."""
    from ..runtime.tensor import Tensor
    if isinstance(value, Tensor):
        ok = value.is_floating_point() and value.device.type == device_type and value.dtype != D.float64
        return value.to(dtype) if ok else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs: Optional[D.dtype] = None):
    """Decorator of a custom ``autograd.Function``'s ``forward`` (``torch.amp.custom_fwd``):
    inside an autocast region of ``device_type``, with ``cast_inputs`` the forward runs with
    autocast off on its floating inputs cast to that dtype; without, under the region as it
    is. ``custom_bwd`` runs the backward under the same autocast state."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        on = is_autocast_enabled(device_type)
        ctx._fwd_used_autocast = False
        if not on:
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator of a custom ``autograd.Function``'s ``backward`` (``torch.amp.custom_bwd``):
    it runs under the autocast state its ``custom_fwd`` forward ran under."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


def is_autocast_cache_enabled() -> bool:
    """Whether autocast regions would cache their casts (PyTorch's flag; fusegrad casts per op
    and keeps no cache, so the flag only reports what was set)."""
    return STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Nothing to clear: fusegrad keeps no cache of autocast's casts."""
