"""``ParameterList`` and ``ParameterDict``: parameters held by position or by name, registered as PyTorch does
(a list's entries are named ``"0"``, ``"1"``, ...), so ``state_dict`` keys match."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Iterator, Optional, Tuple, Union

from ...runtime.tensor import Tensor
from ..module import Module
from ..parameter import Parameter
from .container import _index


def _as_parameter(value: Any) -> Any:
    """A plain tensor becomes a ``Parameter`` (as PyTorch's containers do); anything else is kept."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters."""

    def __init__(self, values: Optional[Iterable[Any]] = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, idx: int) -> Any:
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        return getattr(self, str(_index(idx, self._size)))

    def __setitem__(self, idx: int, param: Any) -> None:
        setattr(self, str(_index(idx, self._size)), _as_parameter(param))

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(self._size))

    def __iadd__(self, parameters: Iterable[Any]) -> "ParameterList":
        return self.extend(parameters)

    def append(self, value: Any) -> "ParameterList":
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:  # (PyTorch's lines: indented once more, by dtype)
        lines = []
        for k, p in enumerate(self):
            if isinstance(p, Tensor):
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({k}): {kind} containing: [{p.dtype} of size {_size(p)}{_on_device(p)}]")
            else:
                lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)


def _size(p: Tensor) -> str:
    return "x".join(str(s) for s in p.shape)


def _on_device(p: Tensor) -> str:
    return f" (GPU {p.get_device()})" if p.is_cuda else ""


class ParameterDict(Module):
    """An ordered dict of parameters."""

    def __init__(self, parameters: Optional[Union[Mapping, Iterable[Tuple[str, Any]]]] = None) -> None:
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def pop(self, key: str) -> Any:
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        for k in list(self._keys):
            del self[k]

    def update(self, parameters: Union[Mapping, Iterable[Tuple[str, Any]]]) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:  # (PyTorch's lines: indented once more, by legacy type name)
        return "\n".join(f"  ({k}): Parameter containing: [{p.type()} of size {_size(p)}{_on_device(p)}]"
                         for k, p in self.items())
