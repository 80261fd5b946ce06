"""``torch.ops``: operators named as PyTorch's dispatcher names them (``torch.ops.aten.mm.default``),
which programs pass around as keys (selective checkpointing policies) or call. An
overload calls fusegrad's op of the same name (``aten.add.Tensor(a, b)`` is ``fusegrad.add(a, b)``;
a trailing underscore names the in-place method)."""
from __future__ import annotations

from typing import Any


class OpOverload:
    """One overload of an operator (``aten.mm.default``): hashable, comparable, callable."""
    __slots__ = ("namespace", "op", "overload")

    def __init__(self, namespace: str, op: str, overload: str) -> None:
        self.namespace, self.op, self.overload = namespace, op, overload

    def name(self) -> str:
        return f"{self.namespace}::{self.op}" + ("" if self.overload == "default" else f".{self.overload}")

    @property
    def overloadpacket(self) -> "OpOverloadPacket":
        return OpOverloadPacket(self.namespace, self.op)

    def __call__(self, *args, **kwargs) -> Any:
        """fusegrad's op of this name: a top-level function, else ``nn.functional``'s, else
        the first argument's method (``view``, ``expand``, in-place ``add_``)."""
        import fusegrad
        from .library import OPERATORS
        custom = OPERATORS.get(f"{self.namespace}::{self.op}")
        if custom is not None:  # (torch.library.custom_op's)
            return custom(*args, **kwargs)
        fn = getattr(fusegrad, self.op, None) if not self.op.endswith("_") else None
        if not callable(fn):
            fn = getattr(fusegrad.nn.functional, self.op, None)
        if not callable(fn) and args and callable(getattr(args[0], self.op, None)):
            return getattr(args[0], self.op)(*args[1:], **kwargs)
        if not callable(fn):
            raise NotImplementedError(f"torch.ops.{self.namespace}.{self.op}: fusegrad has no op named {self.op!r}")
        return fn(*args, **kwargs)

    def __eq__(self, other) -> bool:
        return isinstance(other, OpOverload) and (self.namespace, self.op, self.overload) == \
            (other.namespace, other.op, other.overload)

    def __hash__(self) -> int:
        return hash((self.namespace, self.op, self.overload))

    def __repr__(self) -> str:
        return f"{self.namespace}.{self.op}.{self.overload}"


class OpOverloadPacket:
    """An operator with its overloads as attributes (``.default``, ``.Tensor``, ``.Scalar``);
    calling it calls the default one."""
    __slots__ = ("namespace", "op")

    def __init__(self, namespace: str, op: str) -> None:
        self.namespace, self.op = namespace, op

    @property
    def __name__(self) -> str:  # noqa: A003 - PyTorch's packets are named by their op
        return self.op

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        return OpOverload(self.namespace, self.op, overload)

    def __call__(self, *args, **kwargs) -> Any:
        return OpOverload(self.namespace, self.op, "default")(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self.namespace}.{self.op}')>"


class _Namespace:
    """``torch.ops.<namespace>``: any attribute is an operator of that namespace."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, op: str) -> OpOverloadPacket:
        if op.startswith("__"):
            raise AttributeError(op)
        return OpOverloadPacket(self._name, op)


class _Ops:
    """``torch.ops``: its attributes are namespaces (``aten``, ``prims``, a library's own)."""

    def __getattr__(self, namespace: str) -> _Namespace:
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _Namespace(namespace)


ops = _Ops()
