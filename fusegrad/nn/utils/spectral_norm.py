"""Hook-based spectral normalization (``torch.nn.utils.spectral_norm``), and the pieces
``parametrizations.spectral_norm`` shares: ``w / sigma(w)`` with ``sigma`` the largest
singular value of ``w`` viewed as a matrix, estimated by power iteration on buffers
``u``/``v`` that persist between calls."""
from __future__ import annotations

from typing import Optional

from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor
from ..functional import normalize
from ..module import Module
from ..modules.conv import _ConvTranspose
from ..parameter import Parameter
from .reparametrize_hooks import remove_reparametrization

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


def weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` as a matrix with dimension ``dim`` as rows and the rest flattened."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.dim()) if d != dim])
    return weight.reshape(weight.shape[0], -1)


def default_dim(module: Module) -> int:
    """The output dimension of ``module``'s weight: 1 for transposed convolutions, else 0."""
    return 1 if isinstance(module, _ConvTranspose) else 0


def random_unit(weight: Tensor, n: int, eps: float) -> Tensor:
    """A random unit vector of length ``n`` (the start of the power iteration)."""
    return normalize(weight.new_empty(n).normal_(0, 1), dim=0, eps=eps)


class SpectralNorm:
    """The forward pre-hook recomputing ``module.<name>`` from ``<name>_orig``, after
    ``n_power_iterations`` updates of buffers ``<name>_u``/``<name>_v`` in training mode."""

    _version: int = 1

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return weight_to_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():  # this form updates v first, then u (the parametrization: u, then v)
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(weight_mat.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(normalize(weight_mat.mv(v), dim=0, eps=self.eps))
            # clones, so that later in-place updates do not touch what autograd saved
            u, v = u.clone(), v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u, v = random_unit(weight, h, fn.eps), random_unit(weight, w, fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # until the first forward, module.<name> is the raw weight, as in PyTorch
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: Optional[int] = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm before every forward (hook-based)."""
    SpectralNorm.apply(module, name, n_power_iterations, default_dim(module) if dim is None else dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Fold ``spectral_norm`` back into one parameter ``module.<name>``."""
    if remove_reparametrization(module, SpectralNorm, name):
        return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
