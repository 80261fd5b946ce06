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
           "replace_all_batch_norm_modules_",
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


def replace_all_batch_norm_modules_(root):
    """Make every batch norm under ``root`` use the batch's statistics only (no running
    statistics to update), in place, as ``torch.func.replace_all_batch_norm_modules_``, so
    that ``vmap`` over samples or models never writes shared buffers. Returns ``root``."""
    from ..nn.modules.batchnorm import _BatchNorm
    for m in root.modules():
        if isinstance(m, _BatchNorm):
            m.running_mean = m.running_var = m.num_batches_tracked = None
            m.track_running_stats = False
    return root


def _tied_and_checked(module, values: dict, tie_weights: bool, strict: bool) -> dict:
    """``values`` with each tensor also under the names it is tied to in ``module`` (a
    weight two layers share), and checked against the module's names when ``strict``, as
    PyTorch's functional_call does."""
    names: dict = {}  # id of a parameter or buffer -> every name it has
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        names.setdefault(id(t), []).append(name)
    if tie_weights:
        for tied in names.values():
            given = [n for n in tied if n in values]
            if len(tied) < 2 or not given:
                continue
            if any(values[n] is not values[given[0]] for n in given[1:]):
                raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, which are tied. "
                                 "Consider using tie_weights=False")
            values.update({n: values[given[0]] for n in tied})
    if strict:
        known = {n for tied in names.values() for n in tied}
        missing = [n for tied in names.values() for n in tied if n not in values]
        unexpected = [n for n in values if n not in known]
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(repr(n) for n in unexpected) + ".")
            if missing:
                parts.append("Missing key(s): " + ", ".join(repr(n) for n in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(parts))
    return values


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *, tie_weights=True, strict=False):
    """Call ``module`` with some parameters and buffers replaced by the given tensors."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, (tuple, list)):
        merged = {}
        for d in dicts:
            repeated = [k for k in d if k in merged]
            if repeated:
                raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is "
                                 "ambiguous")
            merged.update(d)
        dicts = merged
    if not isinstance(args, tuple):
        args = (args,)
    if tie_weights or strict:
        dicts = _tied_and_checked(module, dict(dicts), tie_weights, strict)
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
