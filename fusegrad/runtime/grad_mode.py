"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode.

The flag is thread-local, as in PyTorch; each class works as a context manager and as a
decorator."""
from __future__ import annotations

import functools
import inspect
import threading


class _State(threading.local):
    def __init__(self):
        self.enabled = True
        self.anomaly = False
        self.inference = False  # inside inference_mode (is_inference_mode_enabled)
        # grad mode asked for inside inference_mode: is_grad_enabled() says so, nothing records
        self.shown = False


STATE = _State()


def is_grad_enabled() -> bool:
    """Whether grad mode is on in this thread (inside inference_mode, ops record nothing even so)."""
    return STATE.enabled or STATE.shown


class _GradMode:
    _mode = True
    _inference = None  # inference_mode's flag to set as well

    def __init__(self, mode=None):
        if mode is not None:
            self._mode = bool(mode)
        self._prev = []

    def _set(self) -> tuple:
        prev = (STATE.enabled, STATE.inference, STATE.shown)
        if self._inference is not None:
            STATE.inference = self._inference
        inside = self._mode and STATE.inference  # (enable_grad in inference_mode: PyTorch records nothing)
        STATE.enabled, STATE.shown = self._mode and not inside, inside
        return prev

    @staticmethod
    def _reset(prev: tuple) -> None:
        STATE.enabled, STATE.inference, STATE.shown = prev

    def __enter__(self) -> None:  # (``with no_grad() as x``: x is None, as PyTorch's)
        self._prev.append(self._set())

    def __exit__(self, *exc):
        self._reset(self._prev.pop())
        return False

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):  # the mode holds while the body runs, between yields too
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                gen = fn(*args, **kwargs)
                response = None
                while True:
                    prev = self._set()
                    try:
                        request = gen.send(response)
                    except StopIteration as stop:
                        return stop.value
                    finally:
                        self._reset(prev)
                    response = yield request
            return generator

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = self._set()
            try:
                return fn(*args, **kwargs)
            finally:
                self._reset(prev)
        return wrapper


class _NoParams(_GradMode):
    """A mode without parameters: ``@mode()`` and, as in PyTorch, the bare ``@mode``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func=None):
        super().__init__()


class no_grad(_NoParams):
    """Disable graph recording (context manager or decorator)."""
    _mode = False


class enable_grad(_NoParams):
    """Enable graph recording inside a no_grad region."""
    _mode = True


class set_grad_enabled(_GradMode):
    """Set graph recording on or off; also takes effect when called as a plain function."""

    def __init__(self, mode: bool):
        super().__init__(mode)
        self._prev.append(self._set())  # torch.set_grad_enabled(False) works without `with`

    def __enter__(self) -> None:
        pass

    def __call__(self, fn):  # as a decorator: undo the constructor's switch, apply per call
        if self._prev:
            self._reset(self._prev.pop())
        return super().__call__(fn)


class inference_mode(_GradMode):
    """Like no_grad, and ``is_inference_mode_enabled()`` says so; tensors made inside are
    inference tensors (``Tensor.is_inference()``), which refuse in-place updates and
    ``requires_grad_()`` outside it, and being saved for a backward (by primitives and
    one-node composites; a few layers composed otherwise, layer_norm, accept them)."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # the bare decorator, @inference_mode

    def __init__(self, mode: bool = True):
        super().__init__(not mode)
        self._inference = bool(mode)


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``inference_mode``."""
    return STATE.inference
