"""Shape, stacking and index-arithmetic ops of the ``torch`` namespace, composed from
fusegrad's: ``dstack``, ``hsplit``/``vsplit``/``dsplit``, ``split_with_sizes``,
``sum_to_size``, ``diagflat``, ``vander``, ``combinations``, ``unravel_index`` and
``broadcast_shapes``; and the histograms ``histc`` and ``histogram`` (NumPy, eagerly)."""
from __future__ import annotations

import itertools
from typing import Optional, Sequence

import numpy as np

from ..ir import dtypes as D
from ..ir.prims import shapes as S
from . import ops as O
from .exports import alias, op
from .keywords import _type_name
from .tensor import Tensor

_HISTOGRAM = O._return_type("histogram", ("hist", "bin_edges"))


@op(method=False)
def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors (made at least 3-D) concatenated along dim 2."""
    from .extra_ops import atleast_3d
    return O.cat(list(atleast_3d(*tensors)) if len(tensors) > 1 else [atleast_3d(tensors[0])], 2)


def _split_by(name: str, min_dim: int, ax: int):
    def fn(input: Tensor, indices_or_sections):  # noqa: A002
        if input.ndim < min_dim:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dim} dimension, but got a tensor "
                               f"with {input.ndim} dimensions!")
        a = 0 if (ax == 1 and input.ndim == 1) else ax
        if isinstance(indices_or_sections, int) and input.shape[a] % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {a}, but the size of the "
                               f"dimension {input.shape[a]} is not divisible by the split_size "
                               f"{indices_or_sections}!")
        from .extra_ops import tensor_split
        return tensor_split(input, indices_or_sections, a)
    fn.__name__ = name
    fn.__doc__ = f"``tensor_split`` along dim {ax} (``{name}``: NumPy's)."
    return fn


hsplit = op(_split_by("hsplit", 1, 1))
vsplit = op(_split_by("vsplit", 2, 0))
dsplit = op(_split_by("dsplit", 3, 2))


@op
def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0):  # noqa: A002
    """The consecutive pieces of ``input`` along ``dim`` of the given sizes (which must add up to its size)."""
    ax = O._axes(input, dim)[0]
    if sum(split_sizes) != input.shape[ax]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[ax]} (input tensor's "
                           f"size at dimension {dim}), but got split_sizes={list(split_sizes)}")
    return O.split(input, list(split_sizes), ax)


@op
def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:  # noqa: A002
    """A new tensor holding ``input.narrow(dim, start, length)``'s elements."""
    return O.clone(O.narrow(input, dim, start, length))


# PyTorch's "unsafe" splits skip a view check autograd needs for in-place updates of the
# pieces; fusegrad's pieces are views that autograd always tracks, so they are the same ops.
alias(O.split, "unsafe_split")
alias(O.chunk, "unsafe_chunk")
alias(split_with_sizes, "unsafe_split_with_sizes")


@op(function=False)
def sum_to_size(self: Tensor, *size) -> Tensor:
    """``self`` summed down to ``size`` (which it must be expandable from)."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    if S.broadcast_shapes(size, tuple(self.shape)) != tuple(self.shape):
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(self.shape)}}}.")
    lead = self.ndim - len(size)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1 and self.shape[lead + i] != 1)
    r = O.sum(self, axes, keepdim=True) if axes else self
    return O.reshape(r, size)


@op
def diagflat(input: Tensor, offset: int = 0) -> Tensor:  # noqa: A002
    """The flattened ``input`` as the ``offset``-th diagonal of a square matrix."""
    return O.diag(O.reshape(input, (-1,)), offset)


@op(method=False)
def vander(x: Tensor, N: Optional[int] = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of the 1-D ``x``: columns ``x ** (N - 1), ..., x ** 0`` (reversed when ``increasing``)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if n == 0:
        from .factory import empty
        return empty((x.shape[0], 0), dtype=x.dtype if x.dtype != D.bool_ else D.int64, device=x.device)
    xs = x if x.dtype != D.bool_ else O.to(x, D.int64)
    if not xs.dtype.is_floating_point:
        xs = O.to(xs, D.int64)
    # cumulative products (not pow: exact for integers, and a defined gradient at 0)
    cols = [O.add(O.mul(xs, 0), 1)]
    for _ in range(n - 1):
        cols.append(O.mul(cols[-1], xs))
    m = O.stack(cols, 1)
    return m if increasing else O.flip(m, (1,))


@op(method=False)
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """The length-``r`` combinations of the 1-D ``input``'s elements, one per row (as ``itertools``)."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        from .factory import empty
        return empty((0,), dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return O.reshape(O.index_select(input, 0, O._const(idx.reshape(-1), input)), (idx.shape[0], r))


@op(method=False)
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates in ``shape`` of the flat ``indices``, one tensor per dim."""
    indices = O.as_t(indices)
    if indices.dtype.is_floating_point or indices.dtype == D.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(shape))
    out, rest = [], O.to(indices, D.int64)
    for s in reversed(shape):
        out.append(O.remainder(rest, s))
        rest = O.floor_divide(rest, s)
    return tuple(reversed(out))


@op(method=False)
def broadcast_shapes(*shapes):
    """The shape that the ``shapes`` broadcast to (a ``RuntimeError`` when they do not)."""
    from .tensor import Size
    tuples = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return Size(S.broadcast_shapes(*tuples))
    except (ValueError, RuntimeError):
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is between "
                           f"{list(tuples[0])} and {list(tuples[-1])}.") from None


def _histogram_input(name: str, input: Tensor) -> np.ndarray:  # noqa: A002
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{_type_name(input.dtype)}'")
    return input._concrete(name)


@op
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """Counts of ``input``'s elements in ``bins`` equal bins over ``[min, max]`` (their own range when both are 0;
    elements outside are ignored)."""
    x = _histogram_input("histogram_cpu", input)
    if int(bins) <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {int(bins)} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    counts = _bin_counts(x, np.linspace(lo, hi, bins + 1).astype(x.dtype), None, "linear")
    from .factory import tensor
    return tensor(counts.astype(x.dtype), dtype=input.dtype, device=input.device)


def _bin_counts(x: np.ndarray, edges: np.ndarray, weights: Optional[np.ndarray], how: str) -> np.ndarray:
    """The (weighted) counts of ``x`` in the bins between ``edges`` (the last bin closed), bins
    chosen as PyTorch's kernel chooses them in ``x``'s dtype: "linear" interpolates between
    the outer edges (histc), "local" then corrects by the neighbouring edges (histogram with a
    bin count), "binary" searches the edges (histogram with given edges). (NumPy's float64
    arithmetic put values on an edge of float32 bins into the other bin.)"""
    x = x.reshape(-1)
    w = None if weights is None else weights.reshape(-1)
    n = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    keep = (x >= lo) & (x <= hi)
    xs, w = x[keep], (None if w is None else w[keep])
    if how == "binary":
        pos = np.searchsorted(edges, xs, side="right") - 1
    else:
        with np.errstate(all="ignore"):
            pos = ((xs - lo) * x.dtype.type(n) / (hi - lo)).astype(np.int64)
        if how == "local":  # upper_bound among edges pos - 1 .. pos + 1
            count = np.zeros_like(pos)
            for off in (-1, 0, 1):
                k = pos + off
                count += (k >= 0) & (k <= n) & (edges[np.clip(k, 0, n)] <= xs)
            pos = np.maximum(pos - 1, 0) + count - 1
    pos = np.minimum(pos, n - 1)  # (the last bin includes its right edge)
    return np.bincount(pos, weights=w, minlength=n)[:n]


@op
def histogram(input: Tensor, bins=100, *, range=None, weight=None, density: bool = False):  # noqa: A002
    """The histogram of ``input`` and its bin edges (``bins``: a count or a tensor of edges)."""
    x = _histogram_input("histogram_cpu", input)
    edges = bins._concrete("histogram") if isinstance(bins, Tensor) else int(bins)
    w = None if weight is None else weight._concrete("histogram")
    rng = None if range is None or isinstance(bins, Tensor) else tuple(float(v) for v in range)
    if rng is None and not isinstance(bins, Tensor) and x.size == 0:
        rng = (0.0, 1.0)
    if isinstance(bins, Tensor):
        e, how = np.asarray(edges, x.dtype), "binary"
    else:
        lo, hi = rng if rng is not None else (float(x.min()), float(x.max()))
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        from .factory import linspace
        e, how = linspace(lo, hi, edges + 1, dtype=input.dtype)._data, "local"
    hist = _bin_counts(x, e, w, how).astype(x.dtype)
    if density:
        hist = hist / (hist.sum() * np.diff(e))
    from .factory import tensor
    return _HISTOGRAM(tensor(hist.astype(x.dtype), dtype=input.dtype, device=input.device),
                      tensor(e.astype(x.dtype), dtype=input.dtype, device=input.device))
