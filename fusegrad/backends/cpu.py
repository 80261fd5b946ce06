"""``torch.backends.cpu``: the vector instruction set PyTorch's CPU kernels would use here."""
from __future__ import annotations

import functools

__all__ = ["get_cpu_capability"]


@functools.cache
def get_cpu_capability() -> str:
    """"AVX512", "AVX2" or "DEFAULT", from the CPU's flags (Linux's /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), ()))
    except OSError:
        return "DEFAULT"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "AVX512"
    return "AVX2" if {"avx2", "fma"} <= flags else "DEFAULT"
