"""In-place variants and alias names of ops declared elsewhere, as PyTorch spells them:
``Tensor.eq_`` (and the other comparisons), ``erf_``, ``expm1_``, ``tril_``, ``cumsum_``,
``logical_and_``, ``addmm_``, ...; ``multiply``/``divide``/``subtract`` (with in-place variants),
``fix`` (``trunc``) and ``positive``. The variants come from ``runtime.exports``'
``inplace=`` declarations (``runtime.methods`` binds them); imported by
``fusegrad/__init__.py`` before that."""
from __future__ import annotations

from ..ir import dtypes as D
from . import ops as O
from .exports import EXPORTS, alias, op
from .tensor import Tensor

# PyTorch has Tensor.X_ only
_METHOD_ONLY = ("addmm", "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
                "not_equal",
                "tril", "triu", "cumsum", "fmod", "remainder", "floor_divide", "logical_and", "logical_or",
                "logical_xor", "logical_not")
# PyTorch has Tensor.X_ and torch.X_
_BOTH = ("erf", "erfc", "exp2", "expm1", "log1p", "log2", "log10", "rsqrt", "sinh", "cosh", "tan", "trunc", "ceil",
         "logit", "nan_to_num")

for _kind, _names in (("method", _METHOD_ONLY), ("both", _BOTH)):
    for _n in _names:
        alias(EXPORTS[_n].fn, _n, inplace=_kind)

multiply = alias(O.mul, "multiply")
divide = alias(O.div, "divide")
subtract = alias(O.sub, "subtract")
fix = alias(O.trunc, "fix", inplace="both")


@op
def positive(input: Tensor) -> Tensor:  # noqa: A002
    """``input`` itself (PyTorch's unary plus; an error for bool tensors)."""
    if input.dtype == D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input
