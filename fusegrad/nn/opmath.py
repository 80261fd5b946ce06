"""Low-precision inputs computed in float32 ("opmath"), as PyTorch's CPU kernels do.

A composite op (a norm, GELU, SiLU, ...) is one kernel in PyTorch: a float16 or bfloat16
input is widened to float32, computed, and rounded once to the input's dtype. Composed
from fusegrad's primitives it would round after every step; these helpers widen the
input first and round the result back."""
from __future__ import annotations

from ..ir import dtypes as D
from ..runtime import ops as O
from ..runtime.tensor import Tensor

__all__ = ["upcast", "downcast"]

_LOW = (D.float16, D.bfloat16)


def upcast(input: Tensor) -> Tensor:
    """``input`` in float32 when it is float16 or bfloat16, else ``input`` itself."""
    return O.to(input, D.float32) if input.dtype in _LOW else input


def downcast(out: Tensor, input: Tensor) -> Tensor:
    """``out`` rounded back to a low-precision ``input``'s dtype (a norm with float32
    weights still returns its bfloat16 input's dtype, as in PyTorch)."""
    return O.to(out, input.dtype) if input.dtype in _LOW and out.dtype != input.dtype else out
