"""The argument checks PyTorch's optimizers share (same messages, ValueError)."""
from __future__ import annotations

from typing import Any, Tuple


def check_hyper(lr: Any = 0.0, eps: float = 0.0, weight_decay: float = 0.0,
                betas: Tuple[float, float] = (0.0, 0.0), **named: float) -> None:
    """Raise PyTorch's ValueError for a negative learning rate, epsilon, weight decay or
    other ``named`` value, or a beta outside [0, 1)."""
    if not 0.0 <= float(lr):
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")
    for name, v in named.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {name} value: {v}")
