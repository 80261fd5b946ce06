"""Process-wide switches of the ``torch`` namespace beyond ``runtime.settings``: the
float32 matmul precision (recorded and reported: fusegrad's CPU matmuls are full float32,
there is no TF32 or bfloat16 pass to choose) and ``set_anomaly_enabled`` (the anomaly
detection flag of ``autograd.detect_anomaly``)."""
from __future__ import annotations

import warnings

from .grad_mode import STATE

_PRECISIONS = ("highest", "high", "medium")
_MATMUL = {"precision": "highest"}


def set_float32_matmul_precision(precision: str) -> None:
    """Record the float32 matmul precision (``"highest"``, ``"high"`` or ``"medium"``; else a warning)."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _MATMUL["precision"] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL["precision"]


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off (``autograd.set_detect_anomaly`` without the context)."""
    STATE.anomaly = bool(enabled)
