"""Flattening parameters into one vector and back."""
from __future__ import annotations

from typing import Iterable

from ...runtime import ops as O
from ...runtime.tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters, flattened and concatenated into one 1-D tensor."""
    return O.cat([O.reshape(p, -1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter's data the matching slice of ``vec`` (shared, not copied)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for p in parameters:
        n = p.numel()
        p.data = O.reshape(vec[offset:offset + n], p.shape).data
        offset += n
