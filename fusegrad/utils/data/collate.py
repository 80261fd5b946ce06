"""Turning a list of samples into a batch: ``default_collate`` and ``default_convert``."""
from __future__ import annotations

import collections.abc
from typing import Any, List

import numpy as np

from ...ir import dtypes as D
from ...runtime import ops as O
from ...runtime.factory import as_tensor, tensor
from ...runtime.tensor import Tensor

_ELEM_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def default_convert(data: Any) -> Any:
    """NumPy arrays and scalars to tensors, inside lists, tuples and dicts; the rest as is
    (what ``DataLoader`` applies to samples when batching is off)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SaUO":
        return as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "SaUO":
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch: List[Any]) -> Any:
    """Stack a batch the way PyTorch does: tensors and NumPy arrays along a new dimension 0,
    Python floats to a float64 tensor, ints to int64, bools to bool, strings kept as a list;
    dicts, named tuples, tuples and lists collated field by field (a tuple of samples
    becomes a list of batched fields)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {tuple(t.shape) for t in batch}
        if len(shapes) != 1:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {sorted(shapes)} in the batch")
        return O.stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ELEM_ERROR.format(elem.dtype))
        return default_collate([as_tensor(b) for b in batch]) if isinstance(elem, np.ndarray) \
            else tensor(np.stack(batch))
    if isinstance(elem, bool):
        return tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=D.float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        if isinstance(elem, dict) and type(elem) is dict:
            return collated
        try:
            return type(elem)(collated)
        except TypeError:  # a mapping type whose constructor takes something else
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(_ELEM_ERROR.format(type(elem)))
