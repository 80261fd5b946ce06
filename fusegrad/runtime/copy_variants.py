"""PyTorch's ``*_copy`` functions (``view_copy``, ``permute_copy``, ``select_copy``, ...): the
view op's result in memory of its own (what functionalized programs and exported graphs
call), differentiable as the view and a clone are; and ``nonzero_static``."""
from __future__ import annotations

from . import ops as O
from .exports import op
from .factory import full
from .grad_mode import no_grad
from .tensor import Tensor

#: torch.X_copy -> the Tensor method computing the view it copies
VIEWS = {"alias": "view_as", "as_strided": "as_strided", "detach": "detach", "diagonal": "diagonal",
         "expand": "expand", "permute": "permute", "select": "select", "split": "split",
         "split_with_sizes": "split", "squeeze": "squeeze", "t": "t", "transpose": "transpose",
         "unbind": "unbind", "unfold": "unfold", "unsqueeze": "unsqueeze", "view": "view",
         "view_as_real": "view_as_real", "view_as_complex": "view_as_complex"}


def _own(view: Tensor) -> Tensor:
    """``view``'s values in contiguous memory of their own, as PyTorch's copies are."""
    return O.clone(view, memory_format=O.contiguous_format)


def _copy_of(name: str, method: str):
    def copy(input: Tensor, *args, out=None, **kwargs):  # noqa: A002 - PyTorch's names
        if name == "alias":
            args = (input,)
        view = getattr(input, method)(*args, **kwargs)
        res = tuple(_own(v) for v in view) if isinstance(view, (tuple, list)) else _own(view)
        if out is not None:
            with no_grad():
                out.copy_(res)
            return out
        return res
    copy.__name__ = copy.__qualname__ = f"{name}_copy"
    copy.__doc__ = f"``input.{method}(...)`` copied into memory of its own, as PyTorch's ``{name}_copy``."
    return copy


for _name, _method in VIEWS.items():
    op(_copy_of(_name, _method), method=False)


@op(method=False)
def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:  # noqa: A002
    """``input[start:end:step]`` along ``dim``, copied."""
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    return _own(input[tuple(index)])


@op
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:  # noqa: A002
    """The indices of the non-zero elements, as ``nonzero``, in exactly ``size`` rows: cut
    short, or padded with ``fill_value``."""
    idx = O.nonzero(input)
    n = idx.shape[0]
    if n >= size:
        return idx[:size]
    pad = full((size - n, idx.shape[1]), fill_value, dtype=idx.dtype)
    return O.cat([idx, pad], 0)
