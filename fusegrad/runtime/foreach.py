"""``torch._foreach_*``: an op applied to each tensor of a list (or pairwise over two lists),
as user-written optimizers and EMA updates call them. Each is a loop over the list calling
the one-tensor op, so autograd, compile and the in-place checks are that op's."""
from __future__ import annotations

from typing import Callable

from . import ops as O

__all__: list = []


def _operands(tensors: list, other) -> list:
    """``other`` per tensor: a list or tuple pairs up, anything else (a number, one tensor) is shared."""
    if isinstance(other, (list, tuple)):
        if len(other) != len(tensors):
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(tensors)} and "
                               f"{len(other)}")
        return list(other)
    return [other] * len(tensors)


def _declare(name: str, fn: Callable) -> None:
    fn.__name__ = fn.__qualname__ = name
    globals()[name] = fn
    __all__.append(name)


def _binary(name: str, op: Callable, inplace_method: str) -> None:
    def out_of_place(self, other, *, alpha=None):
        return tuple(op(t, o) if alpha is None else op(t, O.mul(o, alpha)) for t, o in zip(self, _operands(self, other)))

    def in_place(self, other, *, alpha=None):
        for t, o in zip(self, _operands(self, other)):
            if alpha is None:
                getattr(t, inplace_method)(o)
            else:
                getattr(t, inplace_method)(o, alpha=alpha)
    _declare(f"_foreach_{name}", out_of_place)
    _declare(f"_foreach_{name}_", in_place)


def _unary(name: str) -> None:
    def out_of_place(self):
        return tuple(getattr(t, name)() for t in self)

    def in_place(self):
        for t in self:
            getattr(t, name + "_")()
    _declare(f"_foreach_{name}", out_of_place)
    _declare(f"_foreach_{name}_", in_place)


_binary("add", O.add, "add_")
_binary("sub", O.sub, "sub_")
_binary("mul", O.mul, "mul_")
_binary("div", O.div, "div_")
_binary("maximum", O.maximum, "clamp_min_")
_binary("minimum", O.minimum, "clamp_max_")
_binary("pow", O.pow, "pow_")
_binary("clamp_min", O.maximum, "clamp_min_")
_binary("clamp_max", O.minimum, "clamp_max_")
for _name in ("sqrt", "exp", "log", "abs", "neg", "sign", "sigmoid", "reciprocal", "tanh", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "erf", "erfc", "expm1", "log1p", "log2", "log10", "lgamma",
              "rsqrt", "ceil", "floor", "round", "trunc", "frac"):
    _unary(_name)


def _foreach_zero_(self: list) -> None:
    for t in self:
        t.zero_()


def _foreach_copy_(self: list, src: list, non_blocking: bool = False) -> None:
    for t, s in zip(self, _operands(self, src)):
        t.copy_(s)


def _foreach_lerp(self: list, tensors1: list, weight) -> tuple:
    return tuple(O.lerp(t, e, w) for t, e, w in zip(self, tensors1, _operands(self, weight)))


def _foreach_lerp_(self: list, tensors1: list, weight) -> None:
    for t, e, w in zip(self, tensors1, _operands(self, weight)):
        t.lerp_(e, w)


def _foreach_clone(self: list, memory_format=None) -> tuple:
    return tuple(t.clone() for t in self)


def _foreach_max(self: list) -> tuple:
    return tuple(O.amax(t) for t in self)


def _foreach_addcmul(self: list, tensor1: list, tensor2: list, value=1) -> tuple:
    return tuple(O.add(t, O.mul(O.mul(a, b), v)) for t, a, b, v in zip(self, tensor1, tensor2, _operands(self, value)))


def _foreach_addcdiv(self: list, tensor1: list, tensor2: list, value=1) -> tuple:
    return tuple(O.add(t, O.mul(O.div(a, b), v)) for t, a, b, v in zip(self, tensor1, tensor2, _operands(self, value)))


def _foreach_addcmul_(self: list, tensor1: list, tensor2: list, value=1) -> None:
    for t, a, b, v in zip(self, tensor1, tensor2, _operands(self, value)):
        t.addcmul_(a, b, value=v)


def _foreach_addcdiv_(self: list, tensor1: list, tensor2: list, value=1) -> None:
    for t, a, b, v in zip(self, tensor1, tensor2, _operands(self, value)):
        t.addcdiv_(a, b, value=v)


def _foreach_norm(self: list, ord=2, dtype=None) -> tuple:
    from .linalg import vector_norm
    return tuple(vector_norm(t, ord, dtype=dtype) for t in self)


__all__ += ["_foreach_zero_", "_foreach_copy_", "_foreach_lerp", "_foreach_lerp_", "_foreach_addcmul_",
            "_foreach_addcdiv_", "_foreach_norm", "_foreach_clone", "_foreach_max", "_foreach_addcmul",
            "_foreach_addcdiv"]
