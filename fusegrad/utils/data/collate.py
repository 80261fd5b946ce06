"""Turning a list of samples into a batch: ``default_collate``, the ``collate`` it is made
of (with ``default_collate_fn_map``, the per-type rules programs extend) and ``default_convert``."""
from __future__ import annotations

import collections.abc
from typing import Any, Callable, Dict, List, Optional

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


def collate_tensor_fn(batch: List[Tensor], *, collate_fn_map: Optional[dict] = None) -> Tensor:
    """Tensors stacked along a new dimension 0."""
    shapes = {tuple(t.shape) for t in batch}
    if len(shapes) != 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got {sorted(shapes)} in the batch")
    return O.stack(list(batch), 0)


def collate_numpy_array_fn(batch: List[np.ndarray], *, collate_fn_map: Optional[dict] = None) -> Any:
    """NumPy arrays as tensors, collated (through ``collate_fn_map``'s tensor rule)."""
    if batch[0].dtype.kind in "SaUO":
        raise TypeError(_ELEM_ERROR.format(batch[0].dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch: List[np.generic], *, collate_fn_map: Optional[dict] = None) -> Tensor:
    if batch[0].dtype.kind in "SaUO":
        raise TypeError(_ELEM_ERROR.format(batch[0].dtype))
    return tensor(np.stack(batch))


def collate_float_fn(batch: List[float], *, collate_fn_map: Optional[dict] = None) -> Tensor:
    return tensor(batch, dtype=D.float64)


def collate_int_fn(batch: List[int], *, collate_fn_map: Optional[dict] = None) -> Tensor:
    return tensor(batch)  # (bools, an int subclass, make a bool tensor)


def collate_str_fn(batch: List[Any], *, collate_fn_map: Optional[dict] = None) -> List[Any]:
    return batch


#: the leaf rules of ``default_collate``, by element type (extend a copy for ``collate``)
default_collate_fn_map: Dict[Any, Callable] = {
    Tensor: collate_tensor_fn, np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn, float: collate_float_fn, int: collate_int_fn,
    str: collate_str_fn, bytes: collate_str_fn}


def collate(batch: List[Any], *, collate_fn_map: Optional[Dict[Any, Callable]] = None) -> Any:
    """A batch from a list of samples: the first element's type names its rule in
    ``collate_fn_map`` (its exact type, else the first type it is an instance of); dicts,
    named tuples, tuples and lists are collated field by field (a tuple of samples becomes
    a list of batched fields), as ``torch.utils.data._utils.collate.collate``."""
    elem = batch[0]
    if collate_fn_map is not None:
        rule = collate_fn_map.get(type(elem))
        if rule is None:
            rule = next((f for t, f in collate_fn_map.items() if isinstance(elem, t)), None)
        if rule is not None:
            return rule(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        if isinstance(elem, dict) and type(elem) is dict:
            return collated
        try:
            return type(elem)(collated)
        except TypeError:  # a mapping type whose constructor takes something else
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(collate(list(samples), collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(list(samples), collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(_ELEM_ERROR.format(type(elem)))


def default_collate(batch: List[Any]) -> Any:
    """Stack a batch the way PyTorch does: tensors and NumPy arrays along a new dimension 0,
    Python floats to a float64 tensor, ints to int64, bools to bool, strings kept as a list;
    dicts, named tuples, tuples and lists collated field by field."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
