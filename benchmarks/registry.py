"""The workloads by id, in BENCHMARKS.md's order."""
from __future__ import annotations

from types import ModuleType

from . import (w1_elementwise, w2_mlp, w3_chain, w4_transforms, w5_remat, w6_first_call, w7_lenet, w8_gpt, w9_dynamic,
               w10_break, w11_ntk)

WORKLOADS: dict[str, ModuleType] = {
    "W1": w1_elementwise,
    "W2": w2_mlp,
    "W3": w3_chain,
    "W4": w4_transforms,
    "W5": w5_remat,
    "W6": w6_first_call,
    "W7": w7_lenet,
    "W8": w8_gpt,
    "W9": w9_dynamic,
    "W10": w10_break,
    "W11": w11_ntk,
}
