"""In-place layout changes: ``Tensor.t_``, ``transpose_``, ``swapdims_``, ``swapaxes_``,
``unsqueeze_``, ``squeeze_`` and ``as_strided_``. The tensor takes the layout of the view the out-of-place
op makes of it, on the same memory (views made before keep seeing its writes), as
PyTorch's does. Autograd nodes hold their inputs as tensors, whose layout they read at
backward, so a tensor that requires grad is refused (PyTorch refuses its leaves too; use
``y = y.t()``), and the version counter is bumped: a node that saved the tensor's values
before the change raises at backward instead of reading them in the new layout."""
from __future__ import annotations

from typing import Callable

from ..ir.graph import Var
from . import ops as O
from .api_gaps_top import as_strided
from .exports import op
from .grad_mode import STATE
from .tensor import Tensor


def _restride(self: Tensor, make: Callable[[Tensor], Tensor], what: str) -> Tensor:
    from ..tracer.trace import current_traces, user_frame
    if STATE.enabled and self._rg:
        if self._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        raise RuntimeError(f"Tensor.{what} of a tensor that requires grad is not supported by fusegrad (its autograd "
                           f"nodes read its layout at backward): use the out-of-place op, e.g. y = y.t()")
    trs = current_traces()
    if trs and (type(self._data) is Var or trs[-1].captures_state):
        # (a traced tensor's layout is part of its value: the change runs on the concrete one)
        with trs[-1].eagerly(f"Tensor.{what} (an in-place layout change) while tracing at {user_frame()}"):
            return _restride(self, make, what)
    new = make(self)
    self._data = new._data
    if self._base is not None:
        self._view_fn = new._view_fn
    self._bump()
    return self


@op(function=False)
def t_(self):
    return _restride(self, O.t, "t_()")


@op(function=False)
def transpose_(self, dim0, dim1):
    return _restride(self, lambda x: O.transpose(x, dim0, dim1), "transpose_()")


@op(function=False)
def swapdims_(self, dim0, dim1):
    return _restride(self, lambda x: O.transpose(x, dim0, dim1), "swapdims_()")


@op(function=False)
def swapaxes_(self, axis0, axis1):
    return _restride(self, lambda x: O.transpose(x, axis0, axis1), "swapaxes_()")


@op(function=False)
def unsqueeze_(self, dim):
    return _restride(self, lambda x: O.unsqueeze(x, dim), "unsqueeze_()")


@op(function=False)
def squeeze_(self, dim=None):
    return _restride(self, lambda x: O.squeeze(x, dim), "squeeze_()")


@op
def as_strided_(self, size, stride, storage_offset=None):
    return _restride(self, lambda x: as_strided(x, size, stride, storage_offset), "as_strided_()")
