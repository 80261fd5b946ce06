"""Which arguments of a compiled call may share memory with another: NumPy's bounds test
(``np.may_share_memory``), asked only of pairs that could overlap. Arrays whose chains of
``base`` end in different arrays that own their memory never do, so a call whose tensors
are distinct allocations (a training step's parameters) asks nothing; an array over
memory NumPy does not own (a buffer, a mapping) is compared with every other."""
from __future__ import annotations

import numpy as np


def overlapping(arrays: list, positions) -> list:
    """The positions among ``positions`` whose array in ``arrays`` may share memory with
    another array of ``arrays``."""
    owners = [a if type(a) is np.ndarray and a.base is None else _owner(a) for a in arrays]
    if len({id(o) for o in owners}) == len(owners) and all(o is not None for o in owners):
        return []  # distinct allocations (the common case, asked on every call)
    unknown = [j for j, o in enumerate(owners) if o is None]
    sharing: dict = {}  # id of an owner -> the positions of the arrays it owns
    for j, o in enumerate(owners):
        if o is not None:
            sharing.setdefault(id(o), []).append(j)
    found = []
    for k in positions:
        others = range(len(arrays)) if owners[k] is None else unknown + sharing[id(owners[k])]
        if any(j != k and np.may_share_memory(arrays[k], arrays[j]) for j in others):
            found.append(k)
    return found


def _owner(a):
    """The ndarray that owns ``a``'s memory; None when no ndarray does."""
    while type(a) is np.ndarray:
        if a.base is None:
            return a
        a = a.base
    return None
