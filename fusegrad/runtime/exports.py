"""What fusegrad exports as ops: each public op declares, beside its definition, whether
it is a top-level function (``fusegrad.X``), a Tensor method (``Tensor.X``) and whether
it has an in-place variant (``Tensor.X_``, and ``fusegrad.X_`` where PyTorch has one).
``fusegrad/__init__.py`` and ``runtime/methods.py`` build the namespace and the Tensor
class from these declarations; there is no other list to keep in sync.

Adding an op::

    @op                            # fusegrad.sinh and Tensor.sinh (PyTorch has both)
    def sinh(x): ...

    @op(method=False)              # fusegrad.stack only
    @op(function=False)            # Tensor.view only
    @op(inplace="method")          # also Tensor.add_ (PyTorch has no torch.add_)
    @op(inplace="both")            # also Tensor.exp_ and fusegrad.exp_
    swapaxes = swapdims = alias(transpose, "swapaxes", "swapdims")

Follow PyTorch on which of function and method exist: ``tests/test_exports.py`` checks
it. A module declaring ops outside ``runtime/ops.py`` is imported by
``fusegrad/__init__.py`` before the namespace is built (that test catches one that is
not)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional

INPLACE_KINDS = (None, "method", "both")


@dataclass(frozen=True)
class Export:
    """How one public name is exposed."""
    fn: Callable
    function: bool
    method: bool
    inplace: Optional[str]  # None, "method" (Tensor.X_) or "both" (also fusegrad.X_)


EXPORTS: dict[str, Export] = {}


def op(fn: Optional[Callable] = None, *, name: Optional[str] = None, function: bool = True,
       method: bool = True, inplace: Optional[str] = None):
    """Declare ``fn`` as a public op (see the module docstring); returns ``fn``.
    Usable as ``@op``, ``@op(...)`` and ``op(fn, ...)``."""
    if inplace not in INPLACE_KINDS:
        raise ValueError(f"op: inplace must be one of {INPLACE_KINDS}, got {inplace!r}")

    def declare(f: Callable) -> Callable:
        n = name or f.__name__
        if n in EXPORTS and EXPORTS[n].fn is not f:
            raise ValueError(f"op: {n!r} is declared twice ({EXPORTS[n].fn!r} and {f!r})")
        EXPORTS[n] = Export(f, function, method, inplace)
        return f
    return declare(fn) if fn is not None else declare


def alias(fn: Callable, *names: str, **overrides) -> Callable:
    """Declare ``names`` as further names of the already declared ``fn``, exposed the
    same way (function, method, in-place variant) unless ``overrides`` (``Export``'s
    fields) say otherwise; returns ``fn``."""
    target = next((e for e in EXPORTS.values() if e.fn is fn), None)
    if target is None:
        raise ValueError(f"alias: {fn!r} is not a declared op")
    for n in names:
        EXPORTS[n] = replace(target, **overrides)
    return fn


def functions(tensor_cls: type) -> dict[str, Callable]:
    """The top-level functions: declared ops, and the in-place variants declared
    ``inplace="both"`` (the Tensor's bound method, called with the tensor first)."""
    out = {n: e.fn for n, e in EXPORTS.items() if e.function}
    out.update({n + "_": getattr(tensor_cls, n + "_") for n, e in EXPORTS.items() if e.inplace == "both"})
    return out
