"""Helpers shared by test modules (pytest puts this folder on sys.path)."""
import numpy as np


def tensors(x, lib):
    """``x`` (NumPy arrays nested in dicts, tuples and lists) with every array made a tensor
    of ``lib`` (fusegrad or torch), other leaves kept."""
    if isinstance(x, np.ndarray):
        return lib.tensor(x)
    if isinstance(x, dict):
        return {k: tensors(v, lib) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(tensors(v, lib) for v in x)
    return x


def sgd_update(params, lr: float = 0.1) -> None:
    """``p -= lr * p.grad`` in place under no_grad, then drop the gradients (the update of
    the whole-step training tests, traced through when called inside compiled code)."""
    import fusegrad
    with fusegrad.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None
