"""``LazyModuleMixin``: modules whose parameter and buffer shapes are read from their first
input, and the base of fusegrad's lazy layers, which read one size from it."""
from __future__ import annotations

import contextlib
import itertools
from typing import Any, Dict, Optional

from ...ir.graph import Var
from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor
from ...tracer.trace import user_frame
from ..parameter import UninitializedBuffer, is_lazy


def _outside_trace(module, args: tuple):
    """A context that runs a lazy module's initialization eagerly when its input is a traced
    value: ``fusegrad.compile``'s segmented trace runs what it recorded before and steps off
    for the block (the parameters are new concrete state); other traces break there."""
    for a in args:
        if isinstance(a, Tensor) and type(a._data) is Var:
            return a._data.trace.eagerly(f"{module._get_name()} at {user_frame()} initializes its parameters on "
                                         "its first call, which runs eagerly")
    return contextlib.nullcontext()


class LazyModuleMixin:
    """A mixin for modules whose ``UninitializedParameter``s and ``UninitializedBuffer``s get
    their shapes from the first call: a forward pre-hook calls ``initialize_parameters`` with
    the call's arguments, then the module becomes a ``cls_to_become`` (when set). Loading a
    state dict with initialized tensors materializes the uninitialized ones to their shapes
    first, as PyTorch's."""
    cls_to_become: Optional[type] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination: Dict[str, Tensor], prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        # uninitialized tensors are saved as they are: loading them leaves a lazy module lazy
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            if is_lazy(t) and prefix + name in destination:
                destination[prefix + name] = t

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                        error_msgs) -> None:
        """Materialize each uninitialized tensor that ``state_dict`` holds an initialized value for
        to that value's shape, so that ``load_state_dict`` copies it in."""
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            value = state_dict.get(prefix + name)
            if is_lazy(t) and value is not None and not is_lazy(value):
                with no_grad():
                    t.materialize(value.shape)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialize and initialize the uninitialized tensors for the first call's arguments."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer is still uninitialized."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args: tuple, kwargs: Optional[dict] = None) -> None:
        """The forward pre-hook: initialize, then drop the hooks and become ``cls_to_become``."""
        with _outside_trace(module, args):
            module.initialize_parameters(*args, **(kwargs or {}))
            if module.has_uninitialized_params():
                raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
            module._initialize_hook.remove()
            module._load_hook.remove()
            delattr(module, "_initialize_hook")
            delattr(module, "_load_hook")
            if module.cls_to_become is not None:
                module.__class__ = module.cls_to_become

    def _apply(self, fn, recurse: bool = True):
        lazy = [k for k, b in self._buffers.items() if is_lazy(b)]
        super()._apply(fn, recurse)
        # a module's _apply (.double(), .to()) replaces buffers by fn's result, a plain tensor
        # of no elements: it stays uninitialized, with the new dtype
        for k in lazy:
            b = self._buffers[k]
            if not is_lazy(b):
                self._buffers[k] = UninitializedBuffer(b.requires_grad, b.device, b.dtype)
        return self


class _LazyLayer(LazyModuleMixin):
    """fusegrad's lazy layers: one size read from the input (the attribute ``_inferred``, 0
    until then) gives the shapes of the uninitialized tensors (``_lazy_shapes``), which are
    then initialized as the layer's ``reset_parameters`` does."""
    _inferred = ""

    def _size_from(self, input: Tensor) -> int:
        """The inferred size for ``input``."""
        raise NotImplementedError

    def _lazy_shapes(self) -> Dict[str, tuple]:
        """The shape of each parameter or buffer, by name, once the inferred size is known."""
        raise NotImplementedError

    def reset_parameters(self) -> None:
        # (the constructor's call, and any before the first, have nothing to initialize)
        if not self.has_uninitialized_params() and getattr(self, self._inferred) != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """Read the size from ``input``, materialize the uninitialized tensors and initialize them."""
        if self.has_uninitialized_params():
            setattr(self, self._inferred, self._size_from(input))
            with no_grad():
                for name, shape in self._lazy_shapes().items():
                    t = getattr(self, name)
                    if is_lazy(t):
                        t.materialize(shape)
                self.reset_parameters()
        elif getattr(self, self._inferred) == 0:  # (materialized by load_state_dict)
            setattr(self, self._inferred, self._size_from(input))
