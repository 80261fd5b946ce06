"""torch.library: custom operators people wrap a kernel in (``custom_op`` with
``register_fake`` and ``register_autograd``), callable directly and as
``torch.ops.<namespace>.<name>``.

An operator runs its Python function: eagerly, and inside ``fusegrad.compile``'s trace as
the operations it performs (a function that leaves the tensor world, ``.numpy()`` and
back, breaks the graph there, as any such code does). With ``register_autograd`` it runs
as an ``autograd.Function`` whose backward is the one registered (its forward untracked,
as PyTorch's); without, autograd differentiates the operations it performs. The fake
(meta) implementation is kept (``_fake``) but not needed: shapes come from running it."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Optional, Union

from .autograd.function import Function

__all__ = ["CustomOpDef", "custom_op", "register_autograd", "register_fake", "register_kernel"]

#: the operators defined, by their qualified names ("mylib::scale")
OPERATORS: dict = {}


class CustomOpDef:
    """A custom operator (``torch.library.custom_op``'s result): call it like its function."""

    def __init__(self, qualname: str, fn: Callable, mutates_args: Union[str, Iterable[str]]) -> None:
        if "::" not in qualname:
            raise ValueError(f"custom_op: expected a name 'namespace::op_name', got {qualname!r}")
        self._qualname, self._fn = qualname, fn
        self._namespace, self._name = qualname.split("::", 1)
        self._mutates = mutates_args
        self._signature = inspect.signature(fn)
        self._fake: Optional[Callable] = None
        self._backward: Optional[Callable] = None
        self._setup: Optional[Callable] = None
        self._kernels: dict = {}
        self._functions: dict = {}  # implementation -> its autograd.Function
        self.__name__ = self._name
        self.__doc__ = fn.__doc__
        OPERATORS[qualname] = self

    def __call__(self, *args, **kwargs) -> Any:
        fn = self._kernels.get(_device_of(args, kwargs), self._fn)
        if self._backward is None:
            return fn(*args, **kwargs)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        function = self._functions.get(fn)
        if function is None:
            function = self._functions[fn] = self._function(fn)
        return function.apply(*bound.args)

    def _function(self, fn: Callable) -> type:
        """An autograd.Function running ``fn`` with the registered backward (made once per
        implementation, kept in ``_functions``)."""
        op = self

        class CustomOp(Function):
            @staticmethod
            def forward(*args):
                return fn(*args)

            @staticmethod
            def setup_context(ctx, inputs, output):
                if op._setup is not None:
                    op._setup(ctx, inputs, output)

            @staticmethod
            def backward(ctx, *grads):
                out = op._backward(ctx, *grads)
                return out if isinstance(out, tuple) else (out,)
        CustomOp.__name__ = CustomOp.__qualname__ = self._name
        return CustomOp

    def register_fake(self, fn: Callable) -> Callable:
        """The operator's shape function (kept; fusegrad runs the operator itself)."""
        self._fake = fn
        return fn

    def register_autograd(self, backward: Callable, *, setup_context: Optional[Callable] = None) -> None:
        """``backward(ctx, *grads)`` returns a gradient per input (None where none);
        ``setup_context(ctx, inputs, output)`` saves what it needs."""
        self._backward, self._setup = backward, setup_context

    def register_kernel(self, device_types: Union[str, Iterable[str]], fn: Optional[Callable] = None):
        """An implementation for ``device_types`` ("cpu", "cuda") in place of the function."""
        def register(f: Callable) -> Callable:
            for d in ([device_types] if isinstance(device_types, str) else device_types):
                self._kernels[d] = f
            return f
        return register(fn) if fn is not None else register

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"


def _device_of(args: tuple, kwargs: dict) -> Optional[str]:
    from .runtime.tensor import Tensor
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            return a.device.type
    return None


def custom_op(name: str, fn: Optional[Callable] = None, /, *, mutates_args: Union[str, Iterable[str]],
              device_types: Optional[Union[str, Iterable[str]]] = None, schema: Optional[str] = None):
    """Wrap ``fn`` as the operator ``name`` ("namespace::op_name"); as a decorator too."""
    def wrap(f: Callable) -> CustomOpDef:
        op = CustomOpDef(name, f, mutates_args)
        if device_types is not None:
            op.register_kernel(device_types, f)
        return op
    return wrap(fn) if fn is not None else wrap


def _op(op: Union[str, CustomOpDef]) -> CustomOpDef:
    if isinstance(op, CustomOpDef):
        return op
    if op not in OPERATORS:
        raise RuntimeError(f"torch.library: no operator {op!r} was defined with custom_op")
    return OPERATORS[op]


def register_fake(op: Union[str, CustomOpDef], fn: Optional[Callable] = None, /, **_):
    """``op``'s shape function (see ``CustomOpDef.register_fake``); as a decorator too."""
    return _op(op).register_fake(fn) if fn is not None else _op(op).register_fake


def register_autograd(op: Union[str, CustomOpDef], backward: Callable, /, *,
                      setup_context: Optional[Callable] = None, **_) -> None:
    """``op``'s backward (see ``CustomOpDef.register_autograd``)."""
    _op(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op: Union[str, CustomOpDef], device_types, fn: Optional[Callable] = None, /, **_):
    """``op``'s implementation for ``device_types`` (see ``CustomOpDef.register_kernel``)."""
    return _op(op).register_kernel(device_types, fn)
