"""``nn.utils.prune``: masking a module's tensor, as ``torch.nn.utils.prune``.

Pruning ``module.weight`` moves the parameter to ``weight_orig``, adds a ``weight_mask``
buffer and a forward pre-hook (the pruning method itself) that recomputes
``weight = weight_orig * weight_mask`` before every call. Pruning the same tensor again
wraps the methods in a ``PruningContainer`` that prunes only what is still unpruned.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from ...runtime.factory import ones_like, rand, rand_like, zeros_like
from ...runtime.tensor import Tensor
from .convert_parameters import parameters_to_vector
from .reparametrize_hooks import remove_reparametrization

Amount = Union[int, float]


class BasePruningMethod(ABC):
    """A pruning technique: ``compute_mask`` decides the mask; ``apply`` installs it on a
    module as ``<name>_orig`` + ``<name>_mask`` + this object as forward pre-hook."""

    _tensor_name: Optional[str] = None
    PRUNING_TYPE: str

    def __call__(self, module, inputs) -> None:
        # the forward pre-hook: refresh the masked tensor from the current ``_orig``
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask for ``t``, given the mask of earlier prunings ``default_mask``."""

    def apply_mask(self, module) -> Tensor:
        """``module.<name>_orig`` times ``module.<name>_mask``."""
        assert self._tensor_name is not None, f"Module {module} has to be pruned"
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name: str, *args, importance_scores: Optional[Tensor] = None,
              **kwargs) -> "BasePruningMethod":
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, combining with earlier
        prunings of the same tensor; returns the hook installed on the module."""
        method = _composite_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            assert importance_scores.shape == orig.shape, \
                f"importance_scores should have the same shape as parameter {name} of {module}"
        else:
            importance_scores = orig
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
        except Exception:
            if first:  # put the parameter back where it was
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        module.register_buffer(name + "_mask", mask)
        if hasattr(module, name):
            delattr(module, name)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t: Tensor, default_mask: Optional[Tensor] = None,
              importance_scores: Optional[Tensor] = None) -> Tensor:
        """``t`` times the mask this method computes for it (nothing is installed)."""
        if importance_scores is not None:
            assert importance_scores.shape == t.shape, "importance_scores should have the same shape as tensor t"
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module) -> None:
        """Make the pruning permanent: ``<name>`` becomes a parameter again holding the
        masked values; ``<name>_orig`` and ``<name>_mask`` go."""
        assert self._tensor_name is not None, \
            f"Module {module} has to be pruned before pruning can be removed"
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _composite_method(cls, module, name: str, *args, **kwargs) -> BasePruningMethod:
    """A new ``cls`` instance for ``name``, merged into a PruningContainer with the
    module's existing pruning hook of ``name`` (which is taken off the module)."""
    old_keys = [k for k, hook in module._forward_pre_hooks.items()
                if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    assert len(old_keys) <= 1, \
        f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. Use a PruningContainer."
    old_method = module._forward_pre_hooks.pop(old_keys[0]) if old_keys else None
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old_method is None:
        return method
    container = old_method if isinstance(old_method, PruningContainer) else PruningContainer(old_method)
    container.add_pruning_method(method)
    return container


class PruningContainer(BasePruningMethod):
    """A sequence of pruning methods applied one after the other to one tensor: each new
    method computes its mask only over the entries (or channels) still kept."""

    def __init__(self, *args: BasePruningMethod) -> None:
        self._pruning_methods: Tuple[BasePruningMethod, ...] = tuple()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: Optional[BasePruningMethod]) -> None:
        """Append ``method`` (it must act on the same tensor name)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Iterator[BasePruningMethod]:
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The last method's mask computed on the still-unpruned part of ``t``, written
        into (a ``t.dtype`` copy of) ``default_mask``."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            slc: Any = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                                     "`dim` defined.")
            n_dims = t.dim()
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of dimension {n_dims}")
            keep_channel = mask.sum(dim=[d for d in range(n_dims) if d != dim]) != 0
            slc = tuple(keep_channel if d == dim else slice(None) for d in range(n_dims))
        elif kind == "global":
            slc = tuple(slice(None) for _ in range(t.dim()))
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial_mask = method.compute_mask(t[slc], default_mask=mask[slc])
        mask[slc] = partial_mask.to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (adds the ``_orig``/``_mask`` machinery only)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module, name: str) -> "Identity":  # type: ignore[override]
        return super().apply(module, name)


class RandomUnstructured(BasePruningMethod):
    """Prunes ``amount`` entries (a count, or a fraction of the tensor) chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: Amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return _unstructured_mask(rand_like(t), self.amount, default_mask)

    @classmethod
    def apply(cls, module, name: str, amount: Amount) -> "RandomUnstructured":  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the ``amount`` entries of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: Amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        # pruning the smallest |t| is pruning the largest -|t|
        return _unstructured_mask(-t.abs(), self.amount, default_mask)

    @classmethod
    def apply(cls, module, name: str, amount: Amount,  # type: ignore[override]
              importance_scores: Optional[Tensor] = None) -> "L1Unstructured":
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Amount, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        nchannels, ntoprune = _structured_counts(t, self.amount, self.dim)
        if ntoprune == 0:
            return default_mask
        prob = rand(nchannels)
        threshold = prob.sort().values[ntoprune - 1]  # the k-th smallest draw
        return _channel_mask(t, self.dim, prob > threshold, default_mask)

    @classmethod
    def apply(cls, module, name: str, amount: Amount, dim: int = -1) -> "RandomStructured":  # type: ignore[override]
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest ``n``-norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Amount, n: Union[int, float, str], dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        nchannels, ntoprune = _structured_counts(t, self.amount, self.dim)
        if ntoprune == 0:
            return default_mask
        dim = self.dim % t.dim()
        norm = t.norm(p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        keep = norm.topk(nchannels - ntoprune, largest=True).indices
        return _channel_mask(t, self.dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name: str, amount: Amount, n: Union[int, float, str],  # type: ignore[override]
              dim: int, importance_scores: Optional[Tensor] = None) -> "LnStructured":
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        assert default_mask.shape == self.mask.shape
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name: str, mask: Tensor) -> "CustomFromMask":  # type: ignore[override]
        return super().apply(module, name, mask=mask)


# ------------------------------------------------------------------ mask helpers
def _unstructured_mask(score: Tensor, amount: Amount, default_mask: Tensor) -> Tensor:
    """``default_mask`` with the ``amount`` entries of largest ``score`` set to 0."""
    size = score.nelement()
    ntoprune = _compute_nparams_toprune(amount, size)
    _validate_pruning_amount(ntoprune, size)
    mask = default_mask.clone()
    if ntoprune != 0:
        mask.view(-1)[score.view(-1).topk(ntoprune).indices] = 0
    return mask


def _structured_counts(t: Tensor, amount: Amount, dim: int) -> Tuple[int, int]:
    """(channels along ``dim``, channels to prune), after validating ``t`` and ``dim``."""
    if t.dim() <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {t.dim()} dims")
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")
    nchannels = t.shape[dim]
    ntoprune = _compute_nparams_toprune(amount, nchannels)
    _validate_pruning_amount(ntoprune, nchannels)
    return nchannels, ntoprune


def _channel_mask(t: Tensor, dim: int, keep, default_mask: Tensor) -> Tensor:
    """Ones on the channels ``keep`` (indices or booleans) along ``dim``, times ``default_mask``."""
    mask = zeros_like(t)
    mask[tuple(keep if d == dim % t.dim() else slice(None) for d in range(t.dim()))] = 1
    return mask * default_mask.to(dtype=mask.dtype)


def _validate_pruning_amount_init(amount: Any) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount: Amount, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _compute_nparams_toprune(amount: Amount, tensor_size: int) -> int:
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


# ------------------------------------------------------------------ functional interface
def identity(module, name: str):
    """Install pruning machinery on ``module.<name>`` without pruning anything."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name: str, amount: Amount):
    """Prune ``amount`` random entries of ``module.<name>``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name: str, amount: Amount, importance_scores: Optional[Tensor] = None):
    """Prune the ``amount`` entries of ``module.<name>`` with the smallest absolute value
    (of ``importance_scores`` when given)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name: str, amount: Amount, dim: int):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name: str, amount: Amount, n, dim: int, importance_scores: Optional[Tensor] = None):
    """Prune the ``amount`` channels along ``dim`` of smallest ``n``-norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores: Optional[Dict] = None, **kwargs) -> None:
    """Prune the ``(module, name)`` tensors of ``parameters`` together, as one vector, with
    the unstructured ``pruning_method(**kwargs)``; ``importance_scores`` maps
    ``(module, name)`` to the scores used instead of the tensor."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = parameters_to_vector([getattr(m, n + "_mask", ones_like(getattr(m, n))) for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        num = param.numel()
        custom_from_mask(module, name, mask=final_mask[pointer:pointer + num].view_as(param))
        pointer += num


def custom_from_mask(module, name: str, mask: Tensor):
    """Prune ``module.<name>`` with the given ``mask``."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name: str):
    """Make the pruning of ``module.<name>`` permanent and take off its hook."""
    if remove_reparametrization(module, BasePruningMethod, name, "_tensor_name"):
        return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module) -> bool:
    """Whether ``module`` or any submodule carries a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for _, sub in module.named_modules() for hook in sub._forward_pre_hooks.values())
