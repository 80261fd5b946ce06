"""Tensor creation: from data, constant fills, ranges and the seeded random generator.
Fills and random draws on the meta device allocate and draw nothing."""
from __future__ import annotations

import math
from collections import abc
from typing import Optional, Union

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from ..ir.graph import Var
from ..tracer.trace import capture_trace, capturing, user_frame
from ..tracer.live import live_array
from ..tracer.speculate import Speculated
from ..tracer.trace import current_traces as _tracing
from . import devices
from .meta import MetaArray
from .type_info import laid_out, preserve_format
from .tensor import Tensor, wrap


class NoDtype(RuntimeError):
    """PyTorch's error for data of no tensor dtype (``torch.tensor(object())``); an operand
    of a tensor op of that kind raises TypeError instead (``ops.as_t``), as PyTorch's."""


def _infer_np_dtype(data) -> np.dtype:
    """PyTorch's inference: bools stay bool, ints become int64, floats the default dtype."""
    if isinstance(data, np.ndarray):
        return data.dtype
    if isinstance(data, Tensor):
        return data._data.dtype
    if isinstance(data, np.generic):  # NumPy scalars keep their dtype, as in torch.tensor
        return data.dtype
    if type(data) is Speculated:  # (a number item() gave compiled code: converted, it is used as such)
        return _infer_np_dtype(data.value)
    if isinstance(data, bool):
        return np.dtype(np.bool_)
    if isinstance(data, (int, np.integer)):
        return np.dtype(np.int64)
    if isinstance(data, (float, np.floating)):
        return D.get_default_dtype().np
    if isinstance(data, complex):
        return D.get_default_dtype().to_complex().np
    if isinstance(data, str):  # (PyTorch's errors: a string first in a list reads as one more dimension)
        raise TypeError("new(): invalid data type 'str'")
    if isinstance(data, abc.Sequence) and not isinstance(data, bytes):  # a list, tuple, deque...
        if data and isinstance(data[0], str):
            raise ValueError("too many dimensions 'str'")
        kinds = [_infer_np_dtype(x) for x in data]
        if not kinds:
            return D.get_default_dtype().np
        out = kinds[0]
        for k in kinds[1:]:
            out = D.promote_types(D.from_numpy_dtype(out), D.from_numpy_dtype(k)).np
        return out
    if getattr(data, "is_sparse", False):  # a sparse COO tensor given to a dense op
        from .sparse_coo import dense_op_error
        raise dense_op_error()
    raise NoDtype(f"Could not infer dtype of {type(data).__name__}")


def _to_array(data, dtype) -> np.ndarray:
    if isinstance(data, Tensor):
        return np.array(data._concrete("tensor()", host=True), dtype=dtype, copy=True)
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _untensor(data)
    try:
        return np.array(data, dtype=dtype)
    except OverflowError:  # (a Python int beyond int64: PyTorch's ValueError)
        raise ValueError("Overflow when unpacking long long") from None


def _flat(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _untensor(data):
    if isinstance(data, Tensor):
        return data.item() if data.ndim == 0 else data.tolist()
    if isinstance(data, (list, tuple)):
        return [_untensor(x) for x in data]
    return data


def _np_dtype(dtype, default=None) -> np.dtype:
    if dtype is None:
        return default if default is not None else D.get_default_dtype().np
    return D.to_dtype(dtype).np


def _finish(t: Tensor, requires_grad: bool, device=None) -> Tensor:
    """``t`` placed on ``device`` (None: the default device; a traced value stays as it is:
    compile's graph places nothing) and made a leaf that requires grad when asked."""
    dev = devices.resolve(device)
    if dev.type != "cpu" and type(t._data) is not Var:
        t = wrap(devices.move(t._data, dev))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _new(arr: np.ndarray, requires_grad: bool, device=None) -> Tensor:
    """A new tensor over ``arr``, which nothing else holds. Inside compile's trace it is a
    value of the graph (a constant input) rather than a captured tensor: an in-place update
    of it then stays inside one call instead of being written back into ``arr`` and read
    again by the next call."""
    t = wrap(arr)
    if capturing():
        tr = _tracing()[-1]
        t = wrap(tr.lift(t))
        if tr.tracks:  # a segmented trace computes it at a break, as the tensors ops make
            tr.track(t)
    return _finish(t, requires_grad, device)


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``."""
    npdt = _np_dtype(dtype, _infer_np_dtype(data))
    if device is None and isinstance(data, Tensor) and type(data._data) is not np.ndarray:
        device = data.device  # (a CUDA tensor's copy stays there, as in PyTorch)
    arr = _to_array(data, npdt)
    if type(data) is np.ndarray:  # compiled code copies it again at every call
        live = live_array(data, arr)
        if live is not None:
            return _finish(live, requires_grad, device)
    return _new(arr, requires_grad, device)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` as a tensor, sharing memory where it already is one (or an ndarray) on
    ``device``."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if device is not None or dtype is not None else data
    if isinstance(data, np.ndarray) and (dtype is None or D.to_dtype(dtype).np == data.dtype):
        return _finish(wrap(data), False, device)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing ``arr``'s memory."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    D.from_numpy_dtype(arr.dtype)
    if any(s < 0 for s in arr.strides):  # (a tensor's strides are never negative: PyTorch refuses to share it)
        raise ValueError("At least one stride in the given numpy array is negative, and tensors with negative "
                         "strides are not currently supported. (You can probably work around this by making a "
                         "copy of your array  with array.copy().) ")
    return wrap(arr)


def _shape(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    out = tuple(int(s) for s in size)
    if any(s < 0 for s in out):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(out)}")
    return out


def _on_meta(shape, npdt, requires_grad: bool, device) -> Optional[Tensor]:
    """A new meta tensor of ``shape`` when ``device`` (None: the default) is the meta
    device, else None."""
    if devices.resolve(device).type != "meta":
        return None
    return _finish(wrap(MetaArray(shape, npdt)), requires_grad, device)


def _filled(shape, fill, npdt, requires_grad: bool, device=None) -> Tensor:
    meta = _on_meta(shape, npdt, requires_grad, device)
    if meta is not None:
        return meta
    if capturing():  # a fill in compile's graph: a fresh value each call, computed in the kernel
        return _finish(P.full(shape=shape, value=fill, dtype=npdt), requires_grad)
    try:
        arr = np.full(shape, fill, dtype=npdt)
    except (MemoryError, ValueError) as e:
        raise MemoryError(f"cannot allocate a tensor of shape {list(shape)} and dtype {npdt}: {e}") from None
    return _finish(wrap(arr), requires_grad, device)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(_shape(size), 0, _np_dtype(dtype), requires_grad, device)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _filled(_shape(size), 1, _np_dtype(dtype), requires_grad, device)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, memory_format=None) -> Tensor:
    t = zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)
    return _in_format(t, memory_format)


def _in_format(t: Tensor, memory_format) -> Tensor:
    """A new tensor ``t`` laid out in ``memory_format`` (C order as it is made)."""
    order = None if memory_format is None else memory_format.order(t.ndim)
    if order is not None and type(t._data) is np.ndarray:
        t._data = laid_out(t._data, order)
    return t


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    npdt = _np_dtype(dtype, _infer_np_dtype(fill_value))
    from .ops import fits
    fits(fill_value.item() if isinstance(fill_value, Tensor) and fill_value.numel() == 1 else fill_value, npdt)
    return _filled(_shape((size,)), fill_value, npdt, requires_grad, device)


def _like(fn):
    def like(t: Tensor, *args, dtype=None, device=None, requires_grad: bool = False, memory_format=None, **kw):
        """``{name}`` shaped like ``t``, in its dtype and on its device unless given, laid out
        in ``memory_format`` (default: as ``t`` where ``t`` is dense, see ``_preserved``)."""
        out = fn(*args, t.shape, dtype=dtype if dtype is not None else t.dtype,
                 device=device if device is not None else t.device, requires_grad=requires_grad, **kw)
        if memory_format is None or memory_format is preserve_format:
            return _preserved(out, t)
        return _in_format(out, memory_format)
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = like.__doc__.format(name=fn.__name__)
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None) -> Tensor:
    out = full(t.shape, fill_value, dtype=dtype if dtype is not None else t.dtype,
               device=device if device is not None else t.device, requires_grad=requires_grad)
    if memory_format is None or memory_format is preserve_format:
        return _preserved(out, t)
    return _in_format(out, memory_format)


def _preserved(out: Tensor, t: Tensor) -> Tensor:
    """``out``, new, with its dims in memory in the order of ``t``'s strides (PyTorch's
    preserve_format: a transposed weight's optimizer state is transposed too, a channels-last
    image's gradient channels last)."""
    from .ops import laid_out_like
    return laid_out_like(out, t)


def arange(start=None, end=None, step=1, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if end is None:
        if start is None:
            raise TypeError("arange() missing required argument 'end'")
        start, end = 0, start
    elif start is None:  # (arange(end=n), as YOLOv8 writes it)
        start = 0
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if vals[2] == 0:
        raise RuntimeError("step must be nonzero")
    if (vals[1] - vals[0]) * vals[2] < 0:  # (NumPy returns an empty range)
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(v, float) for v in vals) else D.int64
    npdt = D.to_dtype(dtype).np
    return _new(np.arange(*vals).astype(npdt), requires_grad, device)


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _new(_linspace(start, end, int(steps), _np_dtype(dtype)), requires_grad, device)


def _linspace(start, end, n: int, npdt: np.dtype) -> np.ndarray:
    """PyTorch's CPU values, to the last bit: ``start + step * i`` for the first half and
    ``end - step * (n - 1 - i)`` for the rest, with ``step`` in the dtype (a double for
    integers). A float32 or float64 value is rounded once (PyTorch's compiler fuses it into
    an FMA: emulated in a wider type), a half one at each step, an integer one truncated
    from doubles. (A grid's pixel coordinates then floor to the same pixels as PyTorch's.)"""
    if n < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    if n <= 1 or npdt.kind == "c":
        return np.linspace(start, end, n).astype(npdt)
    i = np.arange(n)
    if npdt.kind in "iub":
        return np.trunc(_fused_steps(float(int(start)), float(int(end)), i, np.dtype(np.float64))).astype(npdt)
    if npdt.itemsize < 4:  # (half types: every operation, integers included, rounds to the dtype)
        def r(x):
            return np.asarray(x, np.float32).astype(npdt).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            step = r(r(r(end) - r(start)) / r(n - 1))
            lo = r(r(start) + r(step * r(i)))
            hi = r(r(end) - r(step * r(n - 1 - i)))
        return np.where(i < n // 2, lo, hi).astype(npdt)
    return _fused_steps(npdt.type(start), npdt.type(end), i, npdt).astype(npdt)


def _fused_steps(s, e, i: np.ndarray, dt: np.dtype) -> np.ndarray:
    """linspace's values in ``dt`` (float32 or float64) from its ends ``s``, ``e``, each
    ``s + step * i`` or ``e - step * j`` rounded once, as an FMA rounds it."""
    n = len(i)
    step = dt.type((dt.type(e) - dt.type(s)) / dt.type(n - 1))
    wide = np.longdouble if dt.itemsize == 8 else np.float64
    lo = wide(s) + wide(step) * i.astype(wide)
    hi = wide(e) - wide(step) * (n - 1 - i).astype(wide)
    return np.where(i < n // 2, lo, hi).astype(dt)


def logspace(start, end, steps: int, base: float = 10.0, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in exponent."""
    return _new(np.logspace(float(start), float(end), int(steps), base=base).astype(_np_dtype(dtype)),
                requires_grad, device)


def eye(n: int, m: Optional[int] = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _new(np.eye(n, m, dtype=_np_dtype(dtype)), requires_grad, device)


# ---------------------------------------------------------------- random numbers
def _no_reseed_while_compiling(what: str) -> None:
    """Reseeding inside compiled code would happen once, when traced, while the draws after
    it take fresh numbers on every call: that call runs eagerly instead."""
    if capturing():
        capture_trace().graph_break(f"{what} inside a compiled function at {user_frame()}")


class Generator:
    """Counter-based generator state: a seed and how many numbers have been drawn.
    ``Generator(device="cpu")`` as PyTorch's; the numbers do not depend on the device."""

    def __init__(self, device: Union[str, devices.device, None] = "cpu"):
        self.device = devices.resolve(device if device is not None else "cpu")
        self.seed = 0
        self.offset = 0

    def manual_seed(self, seed: int) -> "Generator":
        _no_reseed_while_compiling("manual_seed")
        self.seed, self.offset = int(seed), 0
        return self

    def initial_seed(self) -> int:
        return self.seed

    def next_key(self, n: int) -> Tensor:
        """The [seed, offset] key for ``n`` fresh numbers; advances the offset."""
        key = wrap(np.array([self.seed, self.offset], dtype=np.int64))
        self.offset += int(n)
        return key

    def get_state(self) -> Tensor:
        return wrap(np.array([self.seed, self.offset], dtype=np.int64))

    def set_state(self, state: Tensor) -> None:
        """Restore a state ``get_state`` gave (seed and offset, int64). A PyTorch generator's
        state (a uint8 tensor, as a torch checkpoint holds) seeds this generator from its
        bytes, with a warning: the streams differ, but a resumed run stays reproducible."""
        _no_reseed_while_compiling("set_rng_state")
        values = state.tolist() if isinstance(state, Tensor) else list(state)
        if isinstance(state, Tensor) and state.dtype == D.uint8 and len(values) != 2:
            import hashlib
            import warnings
            warnings.warn(f"set_rng_state: a PyTorch RNG state ({len(values)} bytes) seeds fusegrad's generator "
                          "from its bytes; fusegrad's random stream is its own", stacklevel=3)
            digest = hashlib.sha256(bytes(int(v) for v in values)).digest()
            self.seed, self.offset = int.from_bytes(digest[:8], "little") >> 1, 0
            return
        if len(values) != 2:
            raise RuntimeError(f"set_rng_state: expected the state get_rng_state() returns (2 int64 values: seed "
                               f"and offset), got {len(values)} values")
        self.seed, self.offset = (int(v) for v in values)


default_generator = Generator()


def numpy_rng(n: int, generator: Optional[Generator] = None) -> np.random.Generator:
    """A NumPy generator keyed by ``generator``'s (the default one's) ``[seed, offset]`` for
    ``n`` draws (the offset advances by ``n``, as for ``n`` uniform draws): for samplers
    fusegrad's random primitives do not have. Inside compiled code a graph break."""
    if capturing():
        capture_trace().graph_break(f"NumPy-backed sampling inside a compiled function at {user_frame()}")
    g = generator if generator is not None else default_generator
    seed, offset = (int(v) for v in g.next_key(max(int(n), 1)).numpy().tolist())
    return np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, offset, 0x9A3D])


def manual_seed(seed: int) -> Generator:
    """Seed the default generator."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    import time
    s = int(time.time_ns() % (2 ** 63))
    default_generator.manual_seed(s)
    return s


def initial_seed() -> int:
    return default_generator.seed


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    default_generator.set_state(state)


def _random(prim, size, dtype, generator, requires_grad, draws=1, device=None):
    shape = _shape(size)
    if _np_dtype(dtype).kind == "c":  # real and imaginary parts drawn apart; a normal's of variance 1/2 each
        part = D.from_numpy_dtype(_np_dtype(dtype)).to_real()
        re, im = (_random(prim, size, part, generator, False, draws, device) for _ in range(2))
        z = P.make_complex(re, im)
        return _finish(z * math.sqrt(0.5) if prim is P.normal else z, requires_grad, device)
    meta = _on_meta(shape, _np_dtype(dtype), requires_grad, device)
    if meta is not None:  # (draws nothing: the generator does not advance, as in PyTorch)
        return meta
    gen = generator or default_generator
    n = math.prod(shape)
    if _tracing():  # compiled code draws a fresh key per call instead of baking this one in
        from ..tracer.rng import traced_key
        key = traced_key(gen, n * draws)
    else:
        key = gen.next_key(n * draws)
    t = prim(key, shape=shape, dtype=_np_dtype(dtype))
    return _finish(t, requires_grad, device)


def rand(*size, dtype=None, generator=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform on [0, 1)."""
    return _random(P.uniform, size, dtype, generator, requires_grad, device=device)


def randn(*size, dtype=None, generator=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal."""
    return _random(P.normal, size, dtype, generator, requires_grad, draws=2, device=device)


rand_like = _like(rand)
randn_like = _like(randn)


def randint(low, high=None, size=None, dtype=None, generator=None, device=None,
            requires_grad: bool = False) -> Tensor:
    if high is None:
        low, high = 0, low
    elif size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    u = _random(P.uniform, (size,), D.float64, generator, False)
    from . import ops
    return _finish(ops.floor(u * (high - low) + low).to(dtype or D.int64), requires_grad, device)


def randperm(n: int, dtype=None, generator=None, device=None, requires_grad: bool = False) -> Tensor:
    u = _random(P.uniform, ((n,),), D.float64, generator, False)
    perm = np.argsort(u._concrete("randperm"), kind="stable").astype(_np_dtype(dtype, np.dtype(np.int64)))
    return _finish(wrap(perm), requires_grad, device)


def normal(mean=0.0, std=1.0, size=None, generator=None, device=None) -> Tensor:
    """Normal draws of mean ``mean`` and deviation ``std`` (numbers or tensors), on their
    device (or ``device``)."""
    from . import ops
    if size is None:
        size = ops.broadcast_shape_of(mean, std)
    if device is None:
        device = next((t.device for t in (mean, std) if isinstance(t, Tensor)), None)
    return randn(size, generator=generator, device=device) * std + mean
