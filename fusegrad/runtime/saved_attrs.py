"""``grad_fn._saved_<name>`` and ``grad_fn._raw_saved_<name>``: what a node saved for its
backward, under PyTorch's names for the common ops.

Each entry names where the value lives on the node: an operand (``0``, ``1``), the output
(``"result"``), or a function of the node (shapes, params, constants)."""
from __future__ import annotations

from typing import Callable, Union

_UNARY_SELF = ["LogBackward0", "SinBackward0", "CosBackward0", "AbsBackward0", "Log1PBackward0", "ErfBackward0",
               "Log2Backward0", "Log10Backward0", "AtanBackward0", "SinhBackward0", "CoshBackward0"]
_UNARY_RESULT = ["ExpBackward0", "TanhBackward0", "SigmoidBackward0", "ReluBackward0", "SqrtBackward0",
                 "RsqrtBackward0", "Expm1Backward0", "TanBackward0", "SoftmaxBackward0", "LogSoftmaxBackward0"]


def _sizes(i: int) -> Callable:
    return lambda node: tuple(node.ins[i].shape)


def _param(name: str, conv=lambda v: v) -> Callable:
    return lambda node: conv(node.params[name])


#: node class name -> saved attribute name -> operand index, "result", or a getter of the node
SAVED: dict[str, dict[str, Union[int, str, Callable]]] = {
    **{n: {"self": 0} for n in _UNARY_SELF},
    **{n: {"result": "result"} for n in _UNARY_RESULT},
    "MulBackward0": {"self": 0, "other": 1},
    "DivBackward0": {"self": 0, "other": 1},
    "MmBackward0": {"self": 0, "mat2": 1, "self_sym_sizes": _sizes(0), "mat2_sym_sizes": _sizes(1)},
    "BmmBackward0": {"self": 0, "mat2": 1},
    "PowBackward0": {"self": 0, "exponent": lambda node: node.ins[1]},  # a Python number, as PyTorch
    "PowBackward1": {"self": 0, "exponent": 1, "result": "result"},
    "AddBackward0": {"alpha": lambda node: 1},
    "SubBackward0": {"alpha": lambda node: 1},
    "SumBackward0": {"self_sym_sizes": _sizes(0)},
    "SumBackward1": {"self_sym_sizes": _sizes(0), "dim": _param("axes", tuple), "keepdim": _param("keepdims")},
    "ViewBackward0": {"self_sym_sizes": _sizes(0)},
    "ExpandBackward0": {"self_sym_sizes": _sizes(0)},
    "PermuteBackward0": {"dims": _param("perm", tuple)},
}


class SavedTensor:
    """``grad_fn._raw_saved_<name>``: ``register_hooks(pack_hook, unpack_hook)`` packs the saved
    tensor now and unpacks it whenever backward (or ``_saved_<name>``) reads it."""
    __slots__ = ("_node", "_where")

    def __init__(self, node, where):
        self._node = node
        self._where = where

    def register_hooks(self, pack_hook: Callable, unpack_hook: Callable) -> None:
        from .saved_hooks import Packed, PackedArgs
        node, where = self._node, self._where
        current = node.out_data if where == "result" else node.ins[where]
        if type(current) is Packed:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. "
                               "Hint: only one pair of hooks is allowed at a time.")
        packed = Packed(pack_hook(_value(node, where)), unpack_hook)
        if where == "result":
            node.out_data = packed
        else:
            ins = list(node.ins)
            ins[where] = packed
            node.ins = PackedArgs(ins)


def _value(node, where):
    from .factory import tensor
    from .saved_hooks import Packed
    from .tensor import Tensor, wrap
    if where == "result":
        od = node.out_data
        if type(od) is Packed:
            return od.unpack()
        if od is None:  # a prim that does not keep its output: recompute it from the operands
            return wrap(node.prim.impl(*[_value(node, i)._data if isinstance(a, Tensor) or type(a) is Packed
                                         else a for i, a in enumerate(node.ins)], **node.params))
        return wrap(od)
    v = node.ins[where]
    if type(v) is Packed:
        return v.unpack()
    return v if isinstance(v, Tensor) else tensor(v)


def saved_names(node) -> list:
    """The ``_saved_``/``_raw_saved_`` attribute names ``node`` has (listed by ``dir``)."""
    out = []
    for k, where in SAVED.get(type(node).__name__, {}).items():
        out.append("_saved_" + k)
        if not callable(where):
            out.append("_raw_saved_" + k)
    return out


def saved_attribute(node, name: str):
    """The value of ``node.<name>`` for a ``_saved_``/``_raw_saved_`` name, else AttributeError."""
    raw = name.startswith("_raw_saved_")
    key = name[len("_raw_saved_"):] if raw else name[len("_saved_"):] if name.startswith("_saved_") else None
    where = SAVED.get(type(node).__name__, {}).get(key) if key is not None else None
    if where is None or (raw and callable(where)):
        raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")
    if callable(where):
        return where(node)
    if node.freed:
        from .nodes import _FREED_MSG
        raise RuntimeError(_FREED_MSG)
    return SavedTensor(node, where) if raw else _value(node, where)
