"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode.

The flag is thread-local, as in PyTorch; each class works as a context manager and as a
decorator."""
from __future__ import annotations

import functools
import threading


class _State(threading.local):
    def __init__(self):
        self.enabled = True
        self.anomaly = False


STATE = _State()


def is_grad_enabled() -> bool:
    """Whether ops record the autograd graph in this thread."""
    return STATE.enabled


class _GradMode:
    _mode = True

    def __init__(self, mode=None):
        if mode is not None:
            self._mode = bool(mode)
        self._prev = []

    def __enter__(self):
        self._prev.append(STATE.enabled)
        STATE.enabled = self._mode
        return self

    def __exit__(self, *exc):
        STATE.enabled = self._prev.pop()
        return False

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = STATE.enabled
            STATE.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                STATE.enabled = prev
        return wrapper


class no_grad(_GradMode):
    """Disable graph recording (context manager or decorator)."""
    _mode = False

    def __init__(self):
        super().__init__()


class enable_grad(_GradMode):
    """Enable graph recording inside a no_grad region."""
    _mode = True

    def __init__(self):
        super().__init__()


class set_grad_enabled(_GradMode):
    """Set graph recording on or off; also takes effect when called as a plain function."""

    def __init__(self, mode: bool):
        super().__init__(mode)
        self._prev.append(STATE.enabled)
        STATE.enabled = self._mode  # torch.set_grad_enabled(False) works without `with`

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.enabled = self._prev.pop()
        return False

    def __call__(self, fn):  # as a decorator: undo the constructor's switch, apply per call
        if self._prev:
            STATE.enabled = self._prev.pop()
        return super().__call__(fn)


class inference_mode(_GradMode):
    """Like no_grad (fusegrad keeps no separate inference tensors)."""

    def __init__(self, mode: bool = True):
        super().__init__(not mode)
