"""Custom autograd functions: ``class F(Function)`` with static ``forward(ctx, ...)`` and
``backward(ctx, ...)``; ``F.apply(...)`` records one node named ``FBackward``."""
from __future__ import annotations

from typing import Any

from ..ir.graph import Var
from ..runtime.grad_mode import STATE
from ..runtime.nodes import FunctionNode, node_class
from ..runtime.tensor import Tensor
from ..tracer.trace import capture_trace, user_frame


class FunctionCtx:
    """The ``ctx`` passed to forward and backward."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self.needs_input_grad = ()
        self._non_diff = set()
        self.materialize_grads = True
        self._freed = False

    def save_for_backward(self, *tensors) -> None:
        from ..runtime.saved_hooks import pack
        self._saved = tuple(pack(t) if isinstance(t, Tensor) else t for t in tensors)  # saved-tensor hooks
        self._saved_versions = tuple((t, t._version) if isinstance(t, Tensor) else (None, None) for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            from ..runtime.nodes import _FREED_MSG
            raise RuntimeError(_FREED_MSG)
        for t, v in self._saved_versions:
            if isinstance(t, Tensor) and t._version != v:
                raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                                   f"inplace operation: [{t.dtype} {list(t.shape)}] is at version {t._version}; "
                                   f"expected version {v} instead.")
        from ..runtime.saved_hooks import unpack
        return tuple(unpack(t) for t in self._saved)

    saved_variables = saved_tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value

    def _release(self):
        self._saved = self._saved_versions = ()
        self._freed = True


class _FunctionMeta(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls._backward_cls = node_class(name + "Backward", FunctionNode)


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable functions."""

    @staticmethod
    def forward(ctx, *args, **kwargs) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @classmethod
    def apply(cls, *args, **kwargs):
        traced = [a._data.trace for a in args if isinstance(a, Tensor) and type(a._data) is Var]
        tr = max(traced, key=lambda t: t.level) if traced else capture_trace()
        if tr is not None:  # its forward and backward are the user's Python: they run eagerly
            with tr.eagerly(f"custom autograd.Function {cls.__name__}.apply at {user_frame()}"):
                return cls.apply(*args, **kwargs)
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        prev = STATE.enabled
        STATE.enabled = False
        try:
            out = cls.forward(ctx, *args, **kwargs)
        finally:
            STATE.enabled = prev
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        tensor_ins = [a for a in args if isinstance(a, Tensor)]
        if not (prev and any(t._rg for t in tensor_ins)):
            return out
        from ..runtime.dispatch import _edge
        node = cls._backward_cls.__new__(cls._backward_cls)
        node._init(tuple(_edge(a) for a in args))
        node.ctx = ctx
        node.n_out = len(outs)
        node.out_meta = tuple((o._data.shape, o._data.dtype) if isinstance(o, Tensor) else ((), None) for o in outs)
        nargs = len(args)

        def backward_fn(*grads):
            res = cls.backward(ctx, *grads)
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) < nargs:
                raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients "
                                   f"(expected {nargs}, got {len(res)})")
            return tuple(res[:nargs])
        node.backward_fn = backward_fn
        results = []
        for i, o in enumerate(outs):
            if isinstance(o, Tensor):
                if any(o is a for a in args):  # an input returned as is: a fresh alias carries the node
                    o = o.detach()
                if id(o) not in ctx._non_diff and o._data.dtype.kind == "f":
                    o._grad_fn, o._out_nr, o._rg = node, i, True
            results.append(o)
        return results[0] if single else tuple(results)


class once_differentiable:  # decorator kept for API compatibility
    def __new__(cls, fn):
        return fn
