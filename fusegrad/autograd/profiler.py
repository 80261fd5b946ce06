"""``torch.autograd.profiler``: the older spelling of ``fusegrad.profiler``'s profile."""
from __future__ import annotations

from ..profiler import EventList, FunctionEvent, FunctionEventAvg, profile, record_function

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]
