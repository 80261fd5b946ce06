"""The optional learned scale (``weight``) and shift (``bias``) that the normalization modules share."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from ...runtime.factory import empty
from .. import init
from ..module import Module
from ..parameter import Parameter


def register_affine(module: Module, shape: Union[int, Sequence[int]], affine: bool, bias: bool,
                    dtype=None) -> None:
    """Registers ``weight`` and ``bias`` of ``shape`` on ``module`` (uninitialized), or ``None`` for either
    when ``affine`` (both) or ``bias`` (the shift) is off, as PyTorch's norm layers do."""
    if affine:
        module.weight = Parameter(empty(shape, dtype=dtype))
        if bias:
            module.bias = Parameter(empty(shape, dtype=dtype))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def reset_affine(module: Module, affine: bool) -> None:
    """Sets ``weight`` to ones and ``bias`` (when present) to zeros: the identity transform."""
    if affine:
        init.ones_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)
