"""Custom autograd functions: ``class F(Function)`` with static ``forward(ctx, ...)`` and
``backward(ctx, ...)``; ``F.apply(...)`` records one node named ``FBackward``. Under forward-mode
AD the output tangents come from the static ``jvp(ctx, *input_tangents)``, as in PyTorch."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from ..ir.dtypes import np_differentiable
from ..ir.graph import Var
from ..runtime import forward_state as FW
from ..runtime.grad_mode import STATE, no_grad
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
        self._dirty = set()
        self.materialize_grads = True
        self._freed = False
        self._saved_forward = ()
        self._in_jvp = False  # while jvp runs, saved_tensors are those of save_for_forward

    def save_for_forward(self, *tensors) -> None:
        """Save tensors for ``jvp``, which reads them back as ``ctx.saved_tensors``."""
        self._saved_forward = tensors

    def save_for_backward(self, *tensors) -> None:
        from ..runtime.saved_hooks import pack
        self._saved = tuple(pack(t) if isinstance(t, Tensor) else t for t in tensors)  # saved-tensor hooks
        self._saved_versions = tuple((t, t._version) if isinstance(t, Tensor) else (None, None) for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._in_jvp:
            return self._saved_forward
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
        """``tensors`` (inputs) were modified in place by ``forward``: returned, they are the
        same objects, their history continued by this function's node."""
        self._dirty.update(id(t) for t in tensors)

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
    def jvp(ctx, *grad_inputs) -> Any:
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it "
                                  "with forward mode AD.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Overridden (as a staticmethod), ``forward`` takes no ctx and this saves what
        ``backward`` needs from the ``inputs`` tuple and ``forward``'s ``output``."""

    @classmethod
    def apply(cls, *args, **kwargs):
        traced = [a._data.trace for a in args if isinstance(a, Tensor) and type(a._data) is Var]
        tr = max(traced, key=lambda t: t.level) if traced else capture_trace()
        if tr is not None:  # its forward and backward are the user's Python: they run eagerly
            with tr.eagerly(f"custom autograd.Function {cls.__name__}.apply at {user_frame()}"):
                return cls.apply(*args, **kwargs)
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        tangents = _input_tangents(args)
        prev, prev_busy = STATE.enabled, FW.STATE.busy
        STATE.enabled = False
        # forward sees no tangents, as in PyTorch: the outputs' tangents come from jvp alone
        FW.STATE.busy = prev_busy or tangents is not None
        try:
            if cls.setup_context is Function.setup_context:
                out = cls.forward(ctx, *args, **kwargs)
            else:  # the torch.func style: forward without ctx, what backward needs saved separately
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
        finally:
            STATE.enabled, FW.STATE.busy = prev, prev_busy
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        record = prev and any(a._rg for a in args if isinstance(a, Tensor))
        if not record and tangents is None:
            return out
        node = cls._node(ctx, args, outs) if record else None
        results, diff_results = [], []
        for i, o in enumerate(outs):
            diff = isinstance(o, Tensor) and id(o) not in ctx._non_diff and np_differentiable(o._data.dtype)
            if isinstance(o, Tensor) and any(o is a for a in args):
                if id(o) in ctx._dirty:  # modified in place: the input itself, its history continued
                    if o._grad_fn is None and o._rg:
                        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
                    if node is not None and diff:
                        o._regraft(node, i)
                        o._rg = True
                    results.append(o)
                    diff_results.append(o if diff else None)
                    continue
                o = o.detach()  # an input returned as is: a fresh alias carries node and tangent
            if node is not None and diff:
                o._grad_fn, o._out_nr, o._rg = node, i, True
            results.append(o)
            diff_results.append(o if diff else None)
        if tangents is not None:
            _set_output_tangents(cls, ctx, tangents, diff_results)
        return results[0] if single else tuple(results)

    @classmethod
    def _node(cls, ctx: FunctionCtx, args: tuple, outs: tuple) -> FunctionNode:
        """The ``FBackward`` node of one ``apply``: its backward is the user's ``backward``."""
        from ..runtime.dispatch import _edge
        node = cls._backward_cls.__new__(cls._backward_cls)
        node._init(tuple(_edge(a) for a in args))
        node.ctx = ctx
        node.n_out = len(outs)
        node.out_meta = tuple((o._data.shape, o._data.dtype) if isinstance(o, Tensor) else ((), None) for o in outs)
        nargs = len(args)
        metas = [(tuple(a._data.shape), a._data.dtype) if isinstance(a, Tensor) else (None, None) for a in args]

        def backward_fn(*grads):
            res = cls.backward(ctx, *grads)
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) < nargs or any(g is not None for g in res[nargs:]):  # (extra Nones are allowed)
                raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect number of gradients "
                                   f"(expected {nargs}, got {len(res)})")
            return tuple(_validated(cls, g, meta, i) for i, (g, meta) in enumerate(zip(res[:nargs], metas)))
        node.backward_fn = backward_fn
        return node


def _validated(cls, g, meta: tuple, i: int):
    """Gradient ``i`` as PyTorch's ``validate_outputs`` takes it: in its input's dtype
    (``meta``: shape, NumPy dtype), summed down to its input's shape when it broadcasts to it
    (a backward that kept a size-1 dimension), an error naming the Function when it does not."""
    shape, dtype = meta
    if not isinstance(g, Tensor) or shape is None:
        return g
    if g._data.dtype != dtype:  # (a float32 gradient for a bfloat16 input is rounded, as PyTorch's)
        g = g.real.to(dtype) if g._data.dtype.kind == "c" and dtype.kind != "c" else g.to(dtype)
    if tuple(g._data.shape) == shape:
        return g
    from ..ir.prims.shapes import broadcast_shapes
    try:
        fits = broadcast_shapes(shape, tuple(g._data.shape)) == tuple(g._data.shape)
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"Function {cls.__name__}Backward returned an invalid gradient at index {i} - got "
                           f"{list(g._data.shape)} but expected shape compatible with {list(shape)}")
    return g.sum_to_size(shape)


def _input_tangents(args: tuple) -> Optional[tuple]:
    """The tangent of each argument for ``jvp`` (zeros for a floating tensor without one, None for
    the rest, as PyTorch passes them), or None when no argument carries a tangent."""
    if FW.STATE.level is None or FW.STATE.busy:
        return None
    ts = tuple(FW.get_tangent(a) if isinstance(a, Tensor) else None for a in args)
    if all(t is None for t in ts):
        return None
    from ..runtime.factory import zeros_like
    return tuple(zeros_like(a) if t is None and isinstance(a, Tensor) and a.dtype.is_floating_point else t
                 for a, t in zip(args, ts))


def _set_output_tangents(cls, ctx: FunctionCtx, tangents: tuple, outputs: list) -> None:
    """Give the differentiable ``outputs`` (None in place of the others) the tangents ``cls.jvp``
    computes from the inputs' ``tangents``."""
    # jvp's own ops compute tangents: they carry none (busy was off, or there would be no tangents)
    FW.STATE.busy = ctx._in_jvp = True
    try:
        res = cls.jvp(ctx, *tangents)
    finally:
        FW.STATE.busy = ctx._in_jvp = False
    res = res if isinstance(res, tuple) else (res,)
    for o, t in zip(outputs, res):
        if o is None or t is None:
            continue
        if tuple(t.shape) != tuple(o.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the "
                               f"original Tensor, this is not supported. Tensor is of size {list(o.shape)} while "
                               f"the given forward gradient is of size {list(t.shape)}.")
        FW.set_tangent(o, t if t.dtype == o.dtype else t.to(o.dtype))


_ONCE_MSG = "trying to differentiate twice a function that was marked with @once_differentiable"


class _DelayedError(Function):
    """Aliases of its inputs whose backward raises: marks gradients that must not be differentiated."""

    @staticmethod
    def forward(ctx, *tensors):
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_ONCE_MSG)


# PyTorch names this node ``Error``
_DelayedError._backward_cls = node_class("Error", FunctionNode)


def once_differentiable(fn: Callable) -> Callable:
    """Decorate a custom Function's ``backward`` that cannot itself be differentiated, as PyTorch's.

    The backward runs under no_grad. When the gradient is being recorded (``create_graph=True``)
    and an incoming gradient requires grad, the returned gradients require grad through a node
    that raises ``RuntimeError`` if a second backward reaches it."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not STATE.enabled or not any(isinstance(a, Tensor) and a._rg for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        res = list(outs)
        float_idx = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.dtype.is_floating_point]
        # fresh leaves requiring grad, so that the error node records (PyTorch's approximation too)
        errs = _DelayedError.apply(*[outs[k].detach().requires_grad_(True) for k in float_idx])
        for k, e in zip(float_idx, errs):
            res[k] = e
        return res[0] if single else tuple(res)
    return wrapper
