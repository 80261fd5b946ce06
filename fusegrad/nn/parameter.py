"""``nn.Parameter``: a leaf tensor that a Module registers as one of its parameters."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import dtypes as D
from ..ir.graph import Var
from ..runtime.tensor import Tensor, wrap


def alias_as(cls, data: Optional[Tensor]) -> Tensor:
    """A ``cls`` tensor over ``data``'s memory, sharing its version counter so that in-place
    writes show in both (an empty float32 tensor when ``data`` is None)."""
    array = np.empty((0,), dtype=np.float32) if data is None else data._data
    t = wrap(array, cls=cls)
    if data is not None:
        if data._vbox is None:
            data._vbox = [0]
        t._vbox = data._vbox
    return t


class Parameter(Tensor):
    """A Tensor that is a module parameter: assigning one to a Module attribute registers
    it. Shares memory with ``data``; requires grad unless told otherwise."""
    __slots__ = ()

    def __new__(cls, data: Optional[Tensor] = None, requires_grad: bool = True) -> "Parameter":
        d = None if data is None else data._data
        if type(d) is Var and d.trace.tracks and d.trace.active:
            # compiled code's segment computes ``data`` first: a parameter is a new leaf over
            # its value (the VQ-VAE notebook's EMA codebook, re-created at each step)
            from ..tracer.trace import user_frame
            with d.trace.eagerly(f"nn.Parameter() of a traced value at {user_frame()}"):
                return cls.__new__(cls, data, requires_grad)
        p = alias_as(cls, data)
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data: Optional[Tensor] = None, requires_grad: bool = True):
        # Tensor.__init__ would rebuild the payload that __new__ already set
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        """A new parameter over a copy of the data, without the ``.grad`` (as PyTorch's: a
        copied module, an EMA or a surrogate model, starts with no gradients)."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(wrap(np.array(self._concrete("deepcopy"), copy=True)), self._rg)
        return memo[id(self)]

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (np.array(self._concrete("pickling")), self._rg))


def _rebuild_parameter(array: np.ndarray, requires_grad: bool) -> Parameter:
    return Parameter(wrap(array), requires_grad)


def _np_dtype(dtype) -> np.dtype:
    return (D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()).np


class UninitializedTensorMixin:
    """A tensor whose shape is not known yet (a lazy module's, until its first call or a
    ``load_state_dict``); ``materialize(shape)`` gives it data in place, so optimizers and
    modules holding it keep the materialized tensor, and makes it a ``cls_to_become``."""
    __slots__ = ()
    cls_to_become: type = Tensor

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give this tensor uninitialized data of ``shape`` and ``dtype`` (its own when None);
        ``device`` is PyTorch's argument (fusegrad's lazy tensors are on the CPU)."""
        # an array, not a factory tensor (inside compile's trace that is a traced value); zeros,
        # as fusegrad's empty(): garbage (NaN) would warn in the initialization that follows
        self._data = np.zeros(tuple(shape), dtype=self._data.dtype if dtype is None else _np_dtype(dtype))
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        # (Parameter's pickles the data: it would come back as a Parameter of no elements)
        return (type(self), (self.requires_grad, None, self.dtype))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, None, self.dtype)
        return memo[id(self)]


def is_lazy(tensor) -> bool:
    """Whether ``tensor`` is an ``UninitializedParameter`` or ``UninitializedBuffer``."""
    return isinstance(tensor, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet; it becomes a ``Parameter`` when materialized."""
    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> "UninitializedParameter":
        return super().__new__(cls, wrap(np.empty((0,), dtype=_np_dtype(dtype))), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (registered under a name the module declared as a
    buffer: a lazy norm layer's running statistics); it becomes a ``Tensor`` when materialized."""
    __slots__ = ()

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None) -> "UninitializedBuffer":
        b = wrap(np.empty((0,), dtype=_np_dtype(dtype)), cls)
        b.requires_grad_(requires_grad)
        return b

    def __init__(self, requires_grad: bool = False, device=None, dtype=None) -> None:
        # Tensor.__init__ would rebuild the payload that __new__ already set
        pass
