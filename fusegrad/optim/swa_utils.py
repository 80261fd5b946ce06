"""``optim.swa_utils``: Stochastic Weight Averaging and exponential moving averages of a
model's weights (``AveragedModel`` and its averaging functions), the SWA learning-rate
schedule (``SWALR``), and recomputing batch-norm statistics for the averaged weights
(``update_bn``), as ``torch.optim.swa_utils``."""
from __future__ import annotations

import itertools
import math
from copy import deepcopy
from typing import Any, Callable, Iterable, List, Optional, Union

from ..nn.module import Module
from ..nn.modules.batchnorm import _BatchNorm
from ..runtime.factory import tensor
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .lr_scheduler import LRScheduler, _format_param, _warn_get_lr_called_within_step
from .optimizer import Optimizer

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]

ParamList = List[Tensor]
AvgFn = Callable[[Tensor, Tensor, Union[Tensor, int]], Tensor]
MultiAvgFn = Callable[[ParamList, ParamList, Union[Tensor, int]], None]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def get_ema_avg_fn(decay: float = 0.999) -> AvgFn:
    """``avg_fn`` for an exponential moving average: ``decay * avg + (1 - decay) * current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> AvgFn:
    """``avg_fn`` for an equal-weight running average of all snapshots."""

    @no_grad()
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAvgFn:
    """``multi_avg_fn`` for an exponential moving average, updating the averages in place."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list: ParamList, current_param_list: ParamList, _) -> None:
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            if p_ema.is_floating_point():
                p_ema.lerp_(p_model, 1 - decay)
            else:
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> MultiAvgFn:
    """``multi_avg_fn`` for an equal-weight running average, updating in place."""
    swa = get_swa_avg_fn()

    @no_grad()
    def swa_update(averaged_param_list: ParamList, current_param_list: ParamList, num_averaged) -> None:
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            p_avg.copy_(swa(p_avg, p_model, num_averaged))

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers, with ``use_buffers``) are a running
    average of ``model``'s, updated by ``update_parameters(model)``; SWA's equal-weight
    average unless ``avg_fn`` (per tensor) or ``multi_avg_fn`` (per list) is given.
    Without ``use_buffers`` the buffers are copied from ``model`` at every update."""

    n_averaged: Tensor

    def __init__(self, model: Module, device=None, avg_fn: Optional[AvgFn] = None,
                 multi_avg_fn: Optional[MultiAvgFn] = None, use_buffers: bool = False) -> None:
        super().__init__()
        assert avg_fn is None or multi_avg_fn is None, "Only one of avg_fn and multi_avg_fn should be provided"
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype="int64", device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current weights into the average (the first call copies them)."""
        if self.use_buffers:
            self_params = itertools.chain(self.module.parameters(), self.module.buffers())
            model_params = itertools.chain(model.parameters(), model.buffers())
        else:
            self_params, model_params = self.parameters(), model.parameters()
        averaged, current = [], []
        first = int(self.n_averaged) == 0
        with no_grad():
            for p_averaged, p_model in zip(self_params, model_params):
                p_model_ = p_model.detach().to(p_averaged.device)
                averaged.append(p_averaged.detach())
                current.append(p_model_)
                if first:
                    p_averaged.detach().copy_(p_model_)
            if not first:
                if self.avg_fn is not None:
                    for p_averaged, p_model in zip(averaged, current):
                        p_averaged.copy_(self.avg_fn(p_averaged, p_model, self.n_averaged))
                else:
                    (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current, self.n_averaged)
            if not self.use_buffers:  # the buffers are not averaged: keep them in sync with the model
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged += 1


@no_grad()
def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recompute the running statistics of ``model``'s batch-norm layers as the plain
    average over one pass through ``loader`` (batches, or tuples whose first item is the
    input), in training mode; the layers' momentum and the model's mode are restored."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None  # a cumulative average over the batches
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's rate from its current value to ``swa_lr`` over
    ``anneal_epochs`` steps (``cos`` or ``linear``), then holds it there."""

    def __init__(self, optimizer: Optimizer, swa_lr: Union[float, List[float]], anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    def anneal_func(self, t: float) -> float:
        """The fraction of the way to ``swa_lr`` at annealing progress ``t`` in [0, 1]."""
        return self._cosine_anneal(t) if self._anneal_strategy == "cos" else self._linear_anneal(t)

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        # the rate annealing started from, recovered from the current one (so hand edits carry on)
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> List[float]:
        _warn_get_lr_called_within_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        groups = self.optimizer.param_groups
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]
