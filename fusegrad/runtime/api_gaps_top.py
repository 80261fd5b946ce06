"""Less common parts of the ``torch`` namespace and of ``Tensor``: the factories ``asarray``,
``empty_strided``, ``frombuffer`` and the deprecated inclusive ``range``; ``fill``, ``put``
(``Tensor.put_``), ``as_strided``, ``gradient``, the deprecated ``cholesky`` and ``nuclear_norm``;
process settings (interop threads, flush-denormal, warn-always, the legacy default tensor
type); ``_assert``; and the Tensor's ``pin_memory``/``is_pinned``, ``new_empty_strided``, ``resize_as``,
``output_nr`` and ``name`` (the last two bound as properties at import)."""
from __future__ import annotations

import math
import os
import warnings

import numpy as np

from ..ir import dtypes as D
from .autocast_state import float32_policy
from . import linalg as L
from . import ops as O
from .exports import op
from .grad_mode import is_grad_enabled
from .tensor import Tensor, wrap
from .tensor_queries import storage_view
from ..tracer.trace import user_stacklevel


# ---------------------------------------------------------------- factories
@op(method=False)
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad: bool = False) -> Tensor:
    """``obj`` as a tensor: a tensor or an ndarray shares its memory unless ``copy`` (or a
    dtype or device change) needs a new one; other data is copied. ``copy=False`` where a
    copy is needed raises, as PyTorch."""
    from .factory import as_tensor, tensor
    if isinstance(obj, (Tensor, np.ndarray)):
        t = as_tensor(obj, dtype=dtype, device=device)
        shared = t is obj or (isinstance(obj, np.ndarray) and np.shares_memory(t._data, obj))
        if copy is False and not shared:
            raise ValueError("can't alias tensor from ndarray or tensor: a copy is needed")
        t = O.clone(t) if copy and shared else t
    else:
        if copy is False:
            raise ValueError("can't alias Python data: a copy is needed")
        t = tensor(obj, dtype=dtype, device=device)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _extent(size: tuple, stride: tuple) -> int:
    """The elements of storage a tensor of ``size`` and ``stride`` spans (0 when it is empty)."""
    if any(n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride))


@op(method=False)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """A zero-filled tensor of ``size`` laid out with ``stride`` (in elements) over its own storage."""
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    npdt = D.to_dtype(dtype or D.get_default_dtype()).np
    storage = np.zeros(_extent(size, stride), dtype=npdt)
    t = wrap(np.lib.stride_tricks.as_strided(storage, size, tuple(s * npdt.itemsize for s in stride)))
    if device is not None and str(device) != "cpu":
        t = t.to(device)  # (another device's tensor is made contiguous there)
    return t.requires_grad_(True) if requires_grad else t


@op(function=False)
def new_empty_strided(self: Tensor, size, stride, *, dtype=None, layout=None, device=None,
                      requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """``empty_strided`` with ``self``'s dtype and device unless given."""
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


@op(method=False)
def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D tensor over ``buffer``'s memory (an object of the buffer protocol), from byte ``offset``,
    of ``count`` elements (-1: all that remain)."""
    npdt = D.to_dtype(dtype).np
    nbytes = memoryview(buffer).nbytes
    if nbytes == 0 or count == 0:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if offset < 0 or offset >= nbytes:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length ({nbytes} "
                         f"bytes) minus 1")
    if count == -1 and (nbytes - offset) % npdt.itemsize:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} bytes) must be a multiple "
                         f"of element size ({npdt.itemsize})")
    if count != -1 and count * npdt.itemsize > nbytes - offset:
        raise ValueError(f"requested buffer length ({count} * {npdt.itemsize} bytes) after offset ({offset} bytes) "
                         f"must not be greater than actual buffer length ({nbytes} bytes)")
    arr = np.frombuffer(buffer, dtype=npdt, count=count, offset=offset)
    if not arr.flags.writeable:  # (PyTorch warns and shares a read-only buffer; NumPy refuses to write it)
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. "
                      "This means you can write to the underlying (supposedly non-writable) buffer using the "
                      "tensor.", UserWarning, stacklevel=2)
    t = wrap(arr)
    return t.requires_grad_(True) if requires_grad else t


@op(method=False, name="range")
def range_inclusive(start, end, step=1, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` up to and including ``end`` (deprecated in PyTorch for
    ``arange``); the default float dtype unless ``dtype``, even for integer bounds."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = int(math.floor((end - start) / step)) + 1
    values = start + np.arange(n, dtype=np.float64) * step  # (each element computed from start, as PyTorch)
    from .factory import tensor
    return tensor(values, dtype=dtype or D.get_default_dtype(), device=device, requires_grad=requires_grad)


# ---------------------------------------------------------------- element writes and reads
@op(method=False)
def fill(input: Tensor, value) -> Tensor:  # noqa: A002
    """A new tensor of ``input``'s shape and dtype with every element ``value`` (a number or a
    0-d tensor, whose gradient is the sum of the result's; ``input``'s is zero)."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError(f"fill only supports 0-dimension value tensor but got tensor with {value.ndim} "
                           "dimensions.")
    if isinstance(value, Tensor) and value._rg:
        return O._filled_like(input, value.to(input.dtype), "FillBackward1")
    v = value.item() if isinstance(value, Tensor) else value
    return O._filled_like(input, v, "FillBackward0")


@op(inplace="method")
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """``input`` with the elements of ``source`` written at ``index`` into ``input`` read as 1-D
    (negative indices count from the end); ``accumulate`` adds them instead."""
    if index.dtype != D.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {index.dtype}")
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    flat = O.reshape(input, (-1,))
    n = flat.shape[0]
    if type(index._data) is np.ndarray:
        bad = (index._data >= n) | (index._data < -n)
        if bad.any():
            raise IndexError(f"out of range: tried to access index {int(index._data[bad].reshape(-1)[0])} on a "
                             f"tensor of {n} elements.")
    out = O.index_put(flat, (O.reshape(index, (-1,)),), O.reshape(source, (-1,)), accumulate)
    return O.named(O.reshape(out, tuple(input.shape)), "PutBackward0")


def _layout(t: Tensor) -> tuple:
    """``t``'s storage offset and strides in elements (a traced tensor counts as contiguous)."""
    if type(t._data) is np.ndarray:
        from .tensor_queries import storage_offset
        return storage_offset(t), t.stride()
    strides, acc = [], 1
    for n in reversed(tuple(t.shape)):
        strides.append(acc)
        acc *= n
    return 0, tuple(reversed(strides))


def _positions(offset: int, size: tuple, stride: tuple) -> np.ndarray:
    """The storage position of each element of a tensor of ``size``/``stride`` at ``offset``."""
    pos = np.full(size, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        pos += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(size) - d - 1))
    return pos


@op
def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:  # noqa: A002
    """The elements of ``input``'s storage at ``storage_offset + sum(i_k * stride_k)`` in a tensor of
    ``size``: eagerly a view of that memory, as PyTorch's. It is differentiated (and traced) as a
    gather of ``input``'s own elements, so a result that requires grad, or one traced, may only
    read storage that those elements cover (raises otherwise), as the common uses (windows over
    a contiguous tensor) do."""
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{list(stride)}")
    base_offset, base_stride = _layout(input)
    offset = base_offset if storage_offset is None else int(storage_offset)
    view = storage_view(input._data, offset, size, stride) if type(input._data) is np.ndarray else None
    own = _positions(base_offset, tuple(input.shape), base_stride).reshape(-1)
    wanted = _positions(offset, size, stride)
    # storage position -> an index of input read as 1-D (-1: storage outside input's elements)
    lookup = np.full(int(max(own.max(initial=-1), wanted.max(initial=-1))) + 1, -1, dtype=np.int64)
    lookup[own] = np.arange(own.size, dtype=np.int64)
    idx = lookup[wanted]
    if (idx < 0).any():
        if view is not None and not (input.requires_grad and is_grad_enabled()):
            return O.storage_alias(wrap(view), input, view)
        raise RuntimeError(f"as_strided: size {list(size)}, stride {list(stride)} and storage offset {offset} reach "
                           "storage outside the input's elements, which fusegrad differentiates (and traces) as "
                           "a gather of them")
    out = O.named(O.reshape(O.reshape(input, (-1,))[wrap(idx.reshape(-1))], size), "AsStridedBackward0")
    return O.storage_alias(out, input, view)


# ---------------------------------------------------------------- numerical gradient
def _spacings(input: Tensor, spacing, dims: tuple) -> list:
    """One spacing per dim of ``dims``: a number, or a 1-D tensor of coordinates."""
    if isinstance(spacing, (int, float)) or (isinstance(spacing, Tensor) and spacing.ndim == 0):
        return [float(spacing)] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                           f"equal to 'self.dim() = {input.ndim}', since dim argument was not given, but got a "
                           f"list of length {len(spacing)}" if len(dims) == input.ndim else
                           f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length "
                           f"{len(spacing)} and a dim argument of length {len(dims)}.")
    out = []
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor) and s.ndim == 1:
            if s.shape[0] != input.shape[d]:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and have size "
                                   f"equal to the dimension of input, but got coordinates of size {s.shape[0]} "
                                   f"for dimension {d} of size {input.shape[d]}")
            out.append(s)
        else:
            out.append(float(s.item() if isinstance(s, Tensor) else s))
    return out


def _uniform_gradient(f: Tensor, dim: int, h: float, edge_order: int) -> Tensor:
    """Central differences along ``dim`` at spacing ``h``, one-sided ones of ``edge_order`` at the ends."""
    n = f.shape[dim]
    part = lambda start, length=None: O.narrow(f, dim, start, n - start if length is None else length)  # noqa: E731
    inner = (part(2) - part(0, n - 2)) / (2 * h)
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / h
        last = (part(n - 1, 1) - part(n - 2, 1)) / h
    else:
        first = (part(0, 1) * -1.5 + part(1, 1) * 2 - part(2, 1) * 0.5) / h
        last = (part(n - 3, 1) * 0.5 - part(n - 2, 1) * 2 + part(n - 1, 1) * 1.5) / h
    return O.cat([first, inner, last], dim)


def _coordinate_gradient(f: Tensor, dim: int, x: Tensor, edge_order: int) -> Tensor:
    """Second-order differences along ``dim`` at coordinates ``x`` (unevenly spaced, as NumPy's
    ``gradient``), one-sided ones of ``edge_order`` at the ends."""
    n = f.shape[dim]
    x = O.reshape(x.to(f.dtype), (n,) + (1,) * (f.ndim - dim - 1))
    part = lambda t, start, length: O.narrow(t, dim if t is f else 0, start, length)  # noqa: E731
    dx = part(x, 1, n - 1) - part(x, 0, n - 1)
    d1, d2 = part(dx, 0, n - 2), part(dx, 1, n - 2)
    inner = (part(f, 0, n - 2) * (-d2 / (d1 * (d1 + d2))) + part(f, 1, n - 2) * ((d2 - d1) / (d1 * d2))
             + part(f, 2, n - 2) * (d1 / (d2 * (d1 + d2))))
    if edge_order == 1:
        first = (part(f, 1, 1) - part(f, 0, 1)) / part(dx, 0, 1)
        last = (part(f, n - 1, 1) - part(f, n - 2, 1)) / part(dx, n - 2, 1)
    else:
        a, b = part(dx, 0, 1), part(dx, 1, 1)
        first = (part(f, 0, 1) * (-(2 * a + b) / (a * (a + b))) + part(f, 1, 1) * ((a + b) / (a * b))
                 + part(f, 2, 1) * (-a / (b * (a + b))))
        a, b = part(dx, n - 3, 1), part(dx, n - 2, 1)
        last = (part(f, n - 3, 1) * (b / (a * (a + b))) + part(f, n - 2, 1) * (-(a + b) / (a * b))
                + part(f, n - 1, 1) * ((2 * b + a) / (b * (a + b))))
    return O.cat([first, inner, last], dim)


@op(method=False)
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:  # noqa: A002
    """The derivative of ``input`` along each of ``dim`` (all dims by default) by finite
    differences: one tensor per dim. ``spacing`` is a number, one per dim, or one 1-D tensor of
    coordinates per dim; ``edge_order`` (1 or 2) is the accuracy of the one-sided ends."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(d % input.ndim for d in dims)
    for d in set(dims):
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    if any(input.shape[d] < edge_order + 1 for d in dims):
        raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    f = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    return tuple(_coordinate_gradient(f, d, s, edge_order) if isinstance(s, Tensor) else
                 _uniform_gradient(f, d, s, edge_order)
                 for d, s in zip(dims, _spacings(input, spacing, dims)))


# ---------------------------------------------------------------- deprecated linear algebra
@op
@float32_policy
def cholesky(input: Tensor, upper: bool = False) -> Tensor:  # noqa: A002
    """The Cholesky factor of ``input`` (deprecated in PyTorch for ``linalg.cholesky``)."""
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                  "PyTorch release.", UserWarning, stacklevel=user_stacklevel())
    return O.named(L.cholesky(input, upper=upper), "CholeskyBackward0")


@op(method=False)
def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The sum of the singular values of each matrix (``nuclear_norm(input, keepdim)`` or
    ``nuclear_norm(input, dim, keepdim)``; deprecated in PyTorch for ``linalg.matrix_norm``)."""
    warnings.warn("at::nuclear_norm is deprecated and it is just left for JIT compatibility. It will be removed in a "
                  "future PyTorch release. Please use `linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead",
                  UserWarning, stacklevel=2)
    if isinstance(dim, bool):  # the (input, keepdim) overload
        dim, keepdim = None, dim
    if dim is None and input.ndim != 2:
        raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with {input.ndim} dimensions "
                           "instead.")
    return L.matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)


# ---------------------------------------------------------------- checks
@op(name="_assert", method=False)
def assert_(condition, message: str) -> None:
    """``torch._assert``: AssertionError(``message``) unless ``condition`` (a bool or a
    one-element tensor) holds (torchvision's and DETR's shape checks call it)."""
    if not condition:
        raise AssertionError(message)


# ---------------------------------------------------------------- process settings
_INTEROP = {"threads": os.cpu_count() or 1, "set": False}
_WARN_ALWAYS = [False]


@op(method=False)
def get_num_interop_threads() -> int:
    """The inter-op thread count PyTorch would use (fusegrad records it; its kernels use Numba's pool)."""
    return _INTEROP["threads"]


@op(method=False)
def set_num_interop_threads(n: int) -> None:
    """Record the inter-op thread count: once, as PyTorch allows."""
    if n < 1:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _INTEROP["set"]:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _INTEROP.update(threads=int(n), set=True)


@op(method=False)
def set_flush_denormal(mode: bool) -> bool:
    """Whether flushing denormals is supported: False, PyTorch's answer on a CPU that cannot (fusegrad's
    NumPy and Numba kernels keep denormal numbers), so ``mode`` changes nothing."""
    return False


@op(method=False)
def set_warn_always(b: bool) -> None:
    """Whether warnings PyTorch gives once should be given every time (recorded)."""
    _WARN_ALWAYS[0] = bool(b)


@op(method=False)
def is_warn_always_enabled() -> bool:
    """The flag ``set_warn_always`` records."""
    return _WARN_ALWAYS[0]


@op(method=False)
def set_default_tensor_type(t) -> None:
    """Set the default dtype from a legacy floating tensor type (``torch.DoubleTensor``) or its
    name (deprecated in PyTorch for ``set_default_dtype``)."""
    from .legacy_types import TYPES
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    if isinstance(t, str):
        name = t[len("torch."):] if t.startswith("torch.") else t
        if name not in TYPES:
            raise TypeError(f"invalid type: '{t}'")
        t = TYPES[name]
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    D.set_default_dtype(t.dtype)


@op(method=False)
def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage (what ``Tensor.storage()`` and ``untyped_storage()`` give)."""
    from .tensor_queries import UntypedStorage  # (TypedStorage is one too)
    return isinstance(obj, UntypedStorage)


# ---------------------------------------------------------------- Tensor-only methods
@op(function=False)
def pin_memory(self: Tensor, device=None) -> Tensor:
    """A copy of ``self`` (fusegrad has no page-locked memory; PyTorch raises without an accelerator)."""
    return O.clone(self)


@op(function=False)
def is_pinned(self: Tensor, device=None) -> bool:
    """Whether ``self`` is in page-locked memory: never in fusegrad."""
    return False


@op(function=False)
def resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """``self`` reshaped to ``tensor``'s size (deprecated in PyTorch for ``resize_as_`` and reshapes)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return O.reshape(self, tuple(tensor.shape))


def _bind() -> None:
    """The properties PyTorch's Tensor has besides methods."""
    Tensor.output_nr = property(lambda self: self._out_nr, doc="Which output of its grad_fn the tensor is.")
    Tensor.name = property(lambda self: None, doc="The dimension name: fusegrad has no named tensors.")


_bind()
