"""``torch._inductor.config``: Inductor's tuning knobs (``coordinate_descent_tuning``,
``fx_graph_cache``, ``triton.unique_kernel_names``, ...). fusegrad's code generator is not
Inductor: settings are accepted, with PyTorch's defaults where programs read them, and change
nothing."""
from __future__ import annotations

from types import SimpleNamespace

coordinate_descent_tuning = False
fx_graph_cache = True
freezing = False
max_autotune = False
max_autotune_gemm = False
epilogue_fusion = True
force_fuse_int_mm_with_mul = False
use_mixed_mm = True
debug = False
triton = SimpleNamespace(unique_kernel_names=True, cudagraphs=False, cudagraph_trees=True)
cpp = SimpleNamespace(threads=-1, simdlen=None)
