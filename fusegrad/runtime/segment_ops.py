"""``torch.segment_reduce``: reductions over consecutive runs of ``data`` along ``axis``,
composed of ``scatter_reduce`` (so autograd, transforms and compile follow it)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import ops as O
from .exports import op
from .factory import full
from .numeric import diff
from .scatter_ops import _identity, scatter_reduce
from .tensor import Tensor

_SCATTER = {"sum": "sum", "mean": "sum", "prod": "prod", "max": "amax", "min": "amin"}


@op(method=False)
def segment_reduce(data: Tensor, reduce: str, *, lengths: Optional[Tensor] = None, indices=None,
                   offsets: Optional[Tensor] = None, axis: int = 0, unsafe: bool = False,
                   initial: Optional[float] = None) -> Tensor:
    """Reduce (``reduce``: sum, mean, prod, max, min) each segment of ``data`` along ``axis``
    (0: the last dimension of the 1-D ``lengths``), the segments given by their ``lengths``
    (or ``offsets``, one more than segments). An empty segment gives ``initial``, else the
    reduction's identity (NaN for a mean); ``initial`` also takes part in every other
    segment's reduction, as PyTorch's."""
    if reduce not in _SCATTER:
        raise RuntimeError(f"segment_reduce(): unsupported reduction {reduce}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if (lengths is None) == (offsets is None):
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    counts = diff(O.as_t(offsets)) if lengths is None else O.as_t(lengths)
    if counts.ndim != 1:
        raise NotImplementedError("segment_reduce(): lengths or offsets with more than one dimension")
    if O._axes(data, axis)[0] != 0:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}.")
    n = counts._concrete("segment_reduce's lengths").astype(np.int64)
    if not unsafe and (n.min(initial=0) < 0 or int(n.sum()) != data.shape[0]):
        raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                           "data.size(lengths.dim()-1) when !unsafe.")
    ids = np.repeat(np.arange(n.size), n).reshape((-1,) + (1,) * (data.ndim - 1))
    index = O.expand(O.as_t(ids), tuple(data.shape))
    base = full((n.size,) + tuple(data.shape[1:]), _identity(_SCATTER[reduce], data.dtype.np) if initial is None else initial, dtype=data.dtype)
    out = scatter_reduce(base, 0, index, data, _SCATTER[reduce], include_self=True)
    if reduce != "mean":
        return O.named(out, "SegmentReduceBackward0")
    count = O.as_t(n.astype(np.float64)).reshape((-1,) + (1,) * (data.ndim - 1)).to(data.dtype)
    empty = out if initial is not None else float("nan")
    return O.named(O.where(O.gt(count, 0), O.div(out, O.clamp(count, min=1)), empty), "SegmentReduceBackward0")
