"""Hook-based weight normalization (``torch.nn.utils.weight_norm``, deprecated in PyTorch
in favour of ``parametrizations.weight_norm``), and the math both forms share:
``w = g * v / ||v||`` with the norm taken over every dimension but ``dim``."""
from __future__ import annotations

import warnings
from typing import Optional

from ...runtime.tensor import Tensor
from ..module import Module
from ..parameter import Parameter
from .reparametrize_hooks import remove_reparametrization

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm", "norm_except_dim"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm of ``v`` over all dimensions but ``dim``, kept as size-1 dimensions
    (``dim == -1``: the norm of the whole tensor, a scalar, as in PyTorch)."""
    if dim == -1:
        return v.norm(pow)
    return v.norm(p=pow, dim=[d for d in range(v.dim()) if d != dim], keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """``v * g / norm_except_dim(v, 2, dim)``."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook recomputing ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    name: str
    dim: int

    def __init__(self, name: str, dim: Optional[int]) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: Optional[int]) -> "WeightNorm":
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: Optional[int] = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (parameters ``<name>_g``,
    ``<name>_v``), recomputed by a forward pre-hook; deprecated (FutureWarning)."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Fold ``weight_norm`` back into one parameter ``module.<name>``."""
    if remove_reparametrization(module, WeightNorm, name):
        return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
