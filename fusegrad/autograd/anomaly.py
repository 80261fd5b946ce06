"""Anomaly detection: nodes remember their forward stack, and a NaN produced in backward
raises naming the node and the forward line that created it."""
from __future__ import annotations

from ..runtime.grad_mode import STATE


def _eager_in_compile(what: str) -> None:
    """Anomaly detection checks every backward node as it runs, which a compiled graph has
    no place for: compiled code that turns it on runs eagerly."""
    from ..tracer.trace import GraphBreak, capture_trace, user_frame
    if capture_trace() is not None:
        raise GraphBreak(f"{what} at {user_frame()}: anomaly detection checks each backward node eagerly")


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.prev = False

    def __enter__(self):
        _eager_in_compile("autograd.detect_anomaly()")
        self.prev = STATE.anomaly
        STATE.anomaly = self.check_nan
        return self

    def __exit__(self, *exc):
        STATE.anomaly = self.prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off (also as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True):
        if mode:
            _eager_in_compile("autograd.set_detect_anomaly(True)")
        self.prev = STATE.anomaly
        STATE.anomaly = bool(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly = self.prev
        return False


def is_anomaly_enabled() -> bool:
    return STATE.anomaly
