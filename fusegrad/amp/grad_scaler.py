"""``GradScaler``: loss scaling for mixed precision training, as ``torch.amp.GradScaler``.

The loss is multiplied by a scale before backward so that small low-precision gradients do
not flush to zero; ``step`` divides the gradients by it, skips the optimizer step when any
gradient is inf or nan, and ``update`` halves the scale after a skipped step and doubles it
after ``growth_interval`` clean ones.

As in PyTorch, the scale, the growth tracker and the inf/nan flags are tensors updated by
tensor ops, and ``step`` reads one flag (``found_inf.item()``): inside ``fusegrad.compile``
the whole step traces into one graph whose only read is that flag (tracer.speculate)."""
from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any, Optional

import numpy as np

from ..ir.dtypes import float32
from ..runtime.grad_mode import no_grad
from ..runtime.ops import where
from ..runtime.tensor import Tensor, wrap


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    """``GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``; ``device="cuda"`` disables it with PyTorch's warning
    (there is no GPU), so pass ``"cpu"``."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from .. import cuda
            warnings.warn("fusegrad's GradScaler runs on the CPU only (no CUDA loss scaling yet).  Disabling."
                          if cuda.is_available() else
                          "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._scale: Optional[Tensor] = None  # float32 0-d, made at the first scale()
        self._growth_tracker: Optional[Tensor] = None  # int32 0-d, made with it
        self._per_optimizer_states: dict = defaultdict(_fresh_state)

    # ------------------------------------------------------------ scaling
    def scale(self, outputs):
        """``outputs`` (a tensor or nested lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:  # (arrays made here, not traced: compiled code updates them in place)
            self._scale = wrap(np.array(self._init_scale, dtype=np.float32))
            self._growth_tracker = wrap(np.array(self._init_growth_tracker, dtype=np.int32))

        def apply(v):
            if isinstance(v, Tensor):
                return v * self._scale
            if isinstance(v, abc.Iterable):
                it = map(apply, v)
                return type(v)(it) if isinstance(v, (list, tuple)) else it
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply(outputs)

    def _check_scale(self, funcname: str) -> None:
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  This may indicate your script did "
                                 f"not use scaler.scale(loss or outputs) earlier in the iteration.")

    def _unscale_grads(self, optimizer, inv_scale: Tensor, allow_fp16: bool) -> Tensor:
        """Multiply every gradient by ``inv_scale`` in place; a float32 flag, 1 if any is inf
        or nan."""
        finite = None
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype.name == "float16":
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    ok = (g._values() if g.is_sparse else g).isfinite().all()
                    finite = ok if finite is None else finite & ok
                    g.mul_(inv_scale)
            return wrap(np.zeros((), np.float32)) if finite is None else (~finite).to(float32)

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale (once per step), noting infs/nans."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # PyTorch takes the reciprocal in float64, then rounds it to float32
        inv_scale = self._scale.double().reciprocal().float()
        state["found_inf"] = self._unscale_grads(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args: Any, **kwargs: Any):
        """Unscale (unless done) and run ``optimizer.step()`` unless a gradient is inf/nan."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        retval = None if state["found_inf"].item() else optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Back off after a skipped step, grow after ``growth_interval`` clean ones (or set ``new_scale``)."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError("new_scale should be a float or a 1-element torch.FloatTensor with "
                                         "requires_grad=False.")
                new_scale = new_scale.item()
            self._scale.fill_(float(new_scale))
        else:
            found = [s["found_inf"] for s in self._per_optimizer_states.values() if s["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            self._update_scale(sum(found[1:], found[0]))
        self._per_optimizer_states = defaultdict(_fresh_state)

    def _update_scale(self, found_inf: Tensor) -> None:
        """PyTorch's ``_amp_update_scale_``: back off after an inf/nan, grow (if the result is
        finite) when the tracker reaches the interval, in float32 arithmetic as its kernel."""
        with no_grad():
            scale, tracker = self._scale, self._growth_tracker
            found = found_inf > 0
            successful = tracker + 1
            due = successful == self._growth_interval
            grown = scale * self._growth_factor
            new_scale = where(found, scale * self._backoff_factor, where(due & grown.isfinite(), grown, scale))
            tracker.copy_(where(found | due, 0, successful))
            scale.copy_(new_scale)

    # ------------------------------------------------------------ accessors and state
    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._scale is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``, ``_growth_tracker``
        (empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._scale is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])


def deprecated_scaler(device: str) -> type:
    """``torch.<device>.amp.GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)``: ``GradScaler(device, ...)`` that warns of its
    deprecation, as PyTorch's."""
    class DeprecatedGradScaler(GradScaler):
        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True):
            warnings.warn(f"`torch.{device}.amp.GradScaler(args...)` is deprecated. Please use "
                          f"`torch.amp.GradScaler('{device}', args...)` instead.", FutureWarning, stacklevel=2)
            super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)
    DeprecatedGradScaler.__name__ = DeprecatedGradScaler.__qualname__ = "GradScaler"
    DeprecatedGradScaler.__module__ = f"fusegrad.{device}.amp"
    return DeprecatedGradScaler
