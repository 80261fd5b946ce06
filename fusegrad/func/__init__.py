"""fusegrad.func: composable function transforms, as torch.func.

grad, vjp, jvp, jacrev, jacfwd and hessian are IR transforms (fusegrad.func.transforms):
the function is traced once per input signature, differentiated by the VJP/JVP graph
passes and the result evaluated on the argument tensors, so the transforms nest, work on
tensors that already require grad and trace into an outer compile or vmap. Functions that
cannot be traced run with the eager-autograd versions in fusegrad.func.eager. vmap maps
over a batch dimension with the batching pass. Called outside any trace, every transform
(and composition) runs one closed graph per signature, interpreted on the first two calls
and compiled by the cpu backend from the third (fusegrad.func.fused)."""
from __future__ import annotations

from . import eager
from .functionalize import functionalize
from .linearize import linearize
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian", "vmap",
           "functionalize", "functional_call", "stack_module_state"]


def stack_module_state(models):
    """The parameters and buffers of same-structured ``models`` stacked along a new
    dimension 0, as two dicts by name (for ``vmap`` over ``functional_call``); the stacked
    parameters are new leaves that require grad where the originals do."""
    from ..runtime import ops as O
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kinds = {type(m) for m in models}
    if len(kinds) != 1:
        raise RuntimeError(f"stack_module_state: Expected all models to be of the same class, got {kinds}")

    def stacked(named):
        first = dict(named(models[0]))
        out = {}
        for name, t in first.items():
            s = O.stack([dict(named(m))[name].detach() for m in models], 0)
            out[name] = s.requires_grad_(t.requires_grad) if t.is_floating_point() else s
        return out
    return (stacked(lambda m: m.named_parameters()), stacked(lambda m: m.named_buffers()))


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
