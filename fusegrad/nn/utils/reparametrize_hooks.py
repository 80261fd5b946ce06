"""The forward pre-hooks that recompute a module's tensor from others before each forward
(pruning, the hook-based weight norm and spectral norm): taking one off."""
from __future__ import annotations


def remove_reparametrization(module, kind: type, name: str, attr: str = "name") -> bool:
    """Fold back (``hook.remove(module)``) and take off ``module``'s forward pre-hook of type
    ``kind`` whose ``attr`` is ``name``; False when it has none."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and getattr(hook, attr) == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return True
    return False
