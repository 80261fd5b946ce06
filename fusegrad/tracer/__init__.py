"""Capturing define-by-run Python into IR."""
from .trace import GraphBreak, Trace, current_traces, trace_function

__all__ = ["GraphBreak", "Trace", "current_traces", "trace_function"]
