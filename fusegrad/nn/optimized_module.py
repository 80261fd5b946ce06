"""``OptimizedModule``: what ``fusegrad.compile`` returns for an nn.Module, as torch.compile
does. It is a Module holding the original as ``_orig_mod`` (so its ``state_dict`` keys carry
the ``_orig_mod.`` prefix, ``isinstance(m, nn.Module)`` holds and ``train``/``eval``/``to``
reach the original), and its call is the compiled call of the original module."""
from __future__ import annotations

from typing import Any

from .module import Module


class OptimizedModule(Module):
    """A compiled module: ``_orig_mod`` is the module, ``cache_info()`` and ``lower()``
    are the compiled function's; other attributes are the original module's."""

    def __init__(self, mod: Module, compiled) -> None:
        super().__init__()
        self._orig_mod = mod
        self.training = mod.training  # (the wrapper's own flag, as PyTorch's copies it)
        self.__dict__["_compiled"] = compiled  # (not a submodule)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        if d.get("_forward_hooks") or d.get("_forward_pre_hooks") or d.get("_backward_hooks") \
                or d.get("_backward_pre_hooks"):  # hooks of the wrapper itself: Module's call runs them
            return super().__call__(*args, **kwargs)
        return d["_compiled"](*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_compiled"](*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_compiled" not in self.__dict__:
            return super().__getattr__(name)
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        try:
            return getattr(self._modules["_orig_mod"], name)
        except AttributeError:
            return getattr(self.__dict__["_compiled"], name)  # cache_info, lower, fn, ...
