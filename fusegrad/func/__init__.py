"""fusegrad.func: composable function transforms, as torch.func.

grad, vjp, jvp, jacrev, jacfwd and hessian are IR transforms (fusegrad.func.transforms):
the function is traced once per input signature, differentiated by the VJP/JVP graph
passes and the result evaluated on the argument tensors, so the transforms nest, work on
tensors that already require grad and trace into an outer compile or vmap. Functions that
cannot be traced run with the eager-autograd versions in fusegrad.func.eager. vmap maps
over a batch dimension with the batching pass."""
from __future__ import annotations

from . import eager
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "functional_call"]


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *, tie_weights=True, strict=False):
    """Call ``module`` with some parameters and buffers replaced by the given tensors."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, (tuple, list)):
        merged = {}
        for d in dicts:
            merged.update(d)
        dicts = merged
    if not isinstance(args, tuple):
        args = (args,)
    saved = {}
    try:
        for name, value in dicts.items():
            mod, attr = module._locate(name)
            saved[name] = mod._swap(attr, value)
        return module(*args, **(kwargs or {}))
    finally:
        for name, old in saved.items():
            mod, attr = module._locate(name)
            mod._swap(attr, old)
