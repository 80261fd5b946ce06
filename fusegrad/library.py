"""torch.library: custom operators people wrap a kernel in (``custom_op`` with
``register_fake`` and ``register_autograd``), callable directly and as
``torch.ops.<namespace>.<name>``.

An operator runs its Python function: eagerly, and inside ``fusegrad.compile``'s trace as
the operations it performs (a function that leaves the tensor world, ``.numpy()`` and
back, breaks the graph there, as any such code does). With ``register_autograd`` it runs
as an ``autograd.Function`` whose backward is the one registered (its forward untracked,
as PyTorch's); without, autograd differentiates the operations it performs. The fake
(meta) implementation is kept (``_fake``) but not needed: shapes come from running it;
``opcheck`` checks it against the operator's real outputs."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Optional, Union

from .autograd.function import Function

__all__ = ["CustomOpDef", "OpCheckError", "custom_op", "opcheck", "register_autograd", "register_fake",
           "register_kernel"]

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


class OpCheckError(Exception):
    """A check of ``opcheck`` failed (its cause is the check's own exception)."""


#: opcheck's checks, in the order they run
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static",
                 "test_aot_dispatch_dynamic")
DEFAULT_OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def opcheck(op: Any, args: tuple, kwargs: Optional[dict] = None, *,
            test_utils: Union[str, Iterable[str]] = DEFAULT_OPCHECK_TESTS, raise_exception: bool = True,
            rtol: Optional[float] = None, atol: Optional[float] = None) -> dict:
    """Check a custom operator as ``torch.library.opcheck`` does, on copies of ``args``:
    that it mutates only the arguments it declares and returns no view of an input
    (test_schema), that it runs with inputs requiring grad (test_autograd_registration),
    that its fake implementation gives its outputs' shapes and dtypes (test_faketensor),
    and that compiled (static or dynamic sizes) it gives eager's values and gradients
    (test_aot_dispatch_*). Returns ``{check: "SUCCESS"}``; a failure raises ``OpCheckError``,
    or with ``raise_exception=False`` stands in the dict as its exception."""
    tests = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    if not set(tests) <= set(OPCHECK_TESTS):
        raise ValueError(f"opcheck(op, ..., test_utils={test_utils!r}), expected test_utils to be subset of "
                         f"{OPCHECK_TESTS} but it was not")
    custom = _custom_of(op)
    kwargs = kwargs or {}
    results: dict = {}
    for name in OPCHECK_TESTS:
        if name not in tests:
            continue
        try:
            _CHECKS[name](custom, args, kwargs, rtol, atol)
            results[name] = "SUCCESS"
        except Exception as exc:  # every failure of the operator is the check's finding
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {exc} (scroll up for stack trace)") from exc
            results[name] = exc
    return results


def _custom_of(op: Any) -> CustomOpDef:
    if isinstance(op, CustomOpDef):
        return op
    qualname = f"{getattr(op, 'namespace', '')}::{getattr(op, 'op', '')}"
    if qualname in OPERATORS:  # torch.ops.<ns>.<name>(.default)
        return OPERATORS[qualname]
    raise NotImplementedError(f"opcheck: {op!r} is not an operator made with torch.library.custom_op; "
                              "fusegrad checks those only")


def _copies(args: tuple, kwargs: dict) -> tuple:
    """Fresh leaf copies of the tensors in ``args``/``kwargs`` (same values and requires_grad)."""
    from .utils._pytree import tree_map
    from .runtime.tensor import Tensor

    def copy(a):
        return a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
    return tree_map(copy, (args, kwargs))


def _tensors(value: Any) -> list:
    from .utils._pytree import tree_leaves
    from .runtime.tensor import Tensor
    return [t for t in tree_leaves(value) if isinstance(t, Tensor)]


def _check_schema(op: CustomOpDef, args: tuple, kwargs: dict, rtol, atol) -> None:
    import numpy as np
    args, kwargs = _copies(args, kwargs)
    bound = op._signature.bind(*args, **kwargs)
    before = {k: [t.detach().numpy().copy() for t in _tensors(v)] for k, v in bound.arguments.items()}
    out = op(*args, **kwargs)
    declared = () if op._mutates == "unknown" else ((op._mutates,) if isinstance(op._mutates, str) else op._mutates)
    for k, v in bound.arguments.items():
        now = _tensors(v)
        if op._mutates != "unknown" and k not in declared and any(
                not np.array_equal(b, t.detach().numpy(), equal_nan=True) for b, t in zip(before[k], now)):
            raise RuntimeError(f"Argument {k} is not defined as mutable but was mutated")
        for i, o in enumerate(_tensors(out)):
            if any(np.shares_memory(o.detach().numpy(), t.detach().numpy()) for t in now):
                raise RuntimeError(f"{op._qualname}: output {i} aliases the input {k}; a custom op may not return "
                                   "a view of its inputs (return a clone)")


def _check_autograd_registration(op: CustomOpDef, args: tuple, kwargs: dict, rtol, atol) -> None:
    args, kwargs = _copies(args, kwargs)
    op(*args, **kwargs)


def _overload_name(op: CustomOpDef) -> str:
    return f"{op._namespace}.{op._name}.default"


def _require_fake(op: CustomOpDef) -> bool:
    """Whether ``op`` has a fake impl to check; an operator that returns nothing (it only
    mutates its arguments) needs none, as PyTorch makes it one; others raise PyTorch's error."""
    if op._fake is None and op._signature.return_annotation not in (None, "None", type(None)):
        raise RuntimeError(f"There was no fake impl registered for {op!r}. This is necessary for torch.compile/"
                           f"export/fx tracing to work. Please use `{op._fn.__name__}.register_fake` to add an "
                           "fake impl.")
    return op._fake is not None


def _check_faketensor(op: CustomOpDef, args: tuple, kwargs: dict, rtol, atol) -> None:
    from .runtime.grad_mode import no_grad
    if not _require_fake(op):
        return
    (fa, fk), (ra, rk) = _copies(args, kwargs), _copies(args, kwargs)
    with no_grad():
        fake, real = _tensors(op._fake(*fa, **fk)), _tensors(op(*ra, **rk))
    if len(fake) != len(real):
        raise RuntimeError(f"When comparing the output of {_overload_name(op)} on FakeTensor and concrete Tensors, "
                           f"found {len(fake)} tensors from the fake impl and {len(real)} from the operator")
    for f, r in zip(fake, real):
        for what, a, b in (("Shapes", r.shape, f.shape), ("Dtypes", r.dtype, f.dtype)):
            if a != b:
                raise RuntimeError(f"When comparing the output of {_overload_name(op)} on FakeTensor and concrete "
                                   f"Tensors, found mismatched tensor metadata: {what} {a} and {b} are not equal!")


def _check_aot_dispatch(dynamic: bool) -> Callable:
    def check(op: CustomOpDef, args: tuple, kwargs: dict, rtol, atol) -> None:
        from . import compile as compile_
        from .autograd import grad
        from .testing import assert_close
        _require_fake(op)
        results = []
        for run in (op, compile_(lambda *a, **k: op(*a, **k), dynamic=dynamic)):
            a, k = _copies(args, kwargs)
            out = run(*a, **k)
            inputs = [t for t in _tensors((a, k)) if t.requires_grad]
            outs = [o for o in _tensors(out) if o.requires_grad]
            grads = []
            if inputs:
                if op._backward is None:
                    raise RuntimeError(f"Trying to backward through {_overload_name(op)} but no autograd formula "
                                       "was registered. Please use register_autograd to add one.")
                if outs:
                    total = sum((o * (1.0 + i)).sum() for i, o in enumerate(outs))
                    grads = grad(total, inputs, allow_unused=True)
            results.append(([o.detach() for o in _tensors(out)], [g for g in grads if g is not None],
                            [t.detach() for t in _tensors((a, k))]))  # (and the arguments it mutated)
        assert_close(results[1], results[0], rtol=rtol, atol=atol)
    return check


_CHECKS = {"test_schema": _check_schema, "test_autograd_registration": _check_autograd_registration,
           "test_faketensor": _check_faketensor, "test_aot_dispatch_static": _check_aot_dispatch(False),
           "test_aot_dispatch_dynamic": _check_aot_dispatch(True)}
