"""fusegrad: PyTorch-style eager autograd plus a tracing compiler to Numba kernels.

``import fusegrad as torch`` runs autograd code written for PyTorch."""
from __future__ import annotations

import warnings as _warnings

# NumPy's floating-point warnings raised inside fusegrad's own array arithmetic (inf - inf, a
# float16 overflow): PyTorch computes the same IEEE values silently
_warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero|underflow) encountered", RuntimeWarning,
                         r"fusegrad\.")
from .runtime import thread_waits as _thread_waits  # noqa: E402

_thread_waits.wait_passively()  # before NumPy and Numba load their thread pools (runtime/thread_waits.py)
from .codegen import cpu_target as _cpu_target  # noqa: E402

_cpu_target.prefer_full_width_vectors()  # before anything imports Numba (codegen/cpu_target.py)
from .ir import dtypes as _D
from .ir.dtypes import (bfloat16, complex64, complex128, dtype, float16, float32, float64, get_default_dtype, int8,
                        int16, int32, int64, promote_types, set_default_dtype, uint8, uint16, uint32, uint64)
from .ir.dtypes import bool_ as bool  # noqa: A001  (torch.bool)
from .runtime.tensor import Size, Tensor, device
from .runtime import dispatch as _dispatch  # noqa: F401  (installs the primitive dispatcher)
from . import special  # noqa: E402  (declares erfinv, lgamma, ...: before methods binds Tensor methods)
from .runtime import extra_ops as _extra_ops  # noqa: F401,E402  (declares asin, cumprod, quantile, ...: before methods binds)
from .runtime import inplace_variants as _inplace_variants  # noqa: F401,E402  (eq_, erf_, multiply, ...)
from .runtime import bitwise_ops as _bitwise_ops, elementwise_extras as _elementwise_extras  # noqa: F401,E402
from .runtime import scatter_ops as _scatter_ops, linalg_extras as _linalg_extras  # noqa: F401,E402
from .runtime import linalg_packed as _linalg_packed, lowrank as _lowrank  # noqa: F401,E402
from .runtime import quant_ops as _quant_ops, segment_ops as _segment_ops  # noqa: F401,E402
from .runtime import shape_extras as _shape_extras, windows as _windows  # noqa: F401,E402
from .runtime import tensor_queries as _tensor_queries, random_fills as _random_fills  # noqa: F401,E402
from .runtime import complex_ops as _complex_ops, fft_ops as _fft_ops  # noqa: F401,E402  (real, conj, polar, stft, ...)
from .runtime import legacy_methods as _legacy_methods, control_flow as _control_flow  # noqa: F401,E402
from .runtime import api_gaps_top as _api_gaps_top  # noqa: F401,E402  (asarray, put, gradient, ...)
from .runtime import interop as _interop, copy_variants as _copy_variants  # noqa: F401,E402  (from_dlpack, view_copy)
from .runtime import sym_numbers as _sym_numbers  # noqa: F401,E402  (sym_int, sym_max, ...)
from .runtime import methods as _methods  # noqa: F401  (binds Tensor methods)
from .runtime.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                                 set_grad_enabled)
from .runtime.factory import (Generator, arange, as_tensor, default_generator, empty, empty_like, eye,
                              from_numpy, full, full_like, get_rng_state, initial_seed, linspace, logspace, manual_seed,
                              normal, ones, ones_like, rand, rand_like, randint, randn, randn_like, randperm,
                              seed, set_rng_state, tensor, zeros, zeros_like)
from .runtime import exports as _exports

# Every op declared with runtime.exports.op (abs, max, sum, ... shadow builtins, as in torch).
globals().update(_exports.functions(Tensor))
from .runtime import keywords as _keywords  # noqa: E402

_keywords.install(globals(), Tensor)  # PyTorch's keyword names and out= (runtime/keywords.py)
from . import (_dynamo, _inductor, accelerator, amp, autograd, backends, compiler, cpu, cuda,  # noqa: E402
               distributed, distributions, fft, func, hub, jit, linalg, nn, optim, profiler, random, return_types,
               serialization, signal, testing, utils, viz)
from . import multiprocessing  # noqa: E402  (torch.multiprocessing: after nn, whose Module it extends)
from . import fx  # noqa: E402  (after nn: its GraphModule is a Module)
from .func import vmap  # noqa: E402  (torch.vmap)
from .torch_ops import ops  # noqa: E402  (torch.ops.aten.mm.default, ...)
from . import library  # noqa: E402  (torch.library.custom_op)
from . import overrides  # noqa: E402  (torch.overrides: the __torch_function__ helpers)
from . import quasirandom  # noqa: E402  (torch.quasirandom.SobolEngine)
from . import sparse  # noqa: E402  (torch.sparse; binds Tensor.to_sparse, is_sparse, layout: runtime/sparse_bindings.py)
from .runtime.layouts import layout, sparse_coo, strided  # noqa: E402
from .runtime.sparse_coo import sparse_coo_tensor  # noqa: E402
from .runtime.sparse_ops import spmm  # noqa: E402
from .nn.functional_torch_level import FUNCTIONS as _NN_FUNCTIONS  # noqa: E402

globals().update({n: f for n, f in _NN_FUNCTIONS.items() if n not in globals()})  # torch.conv2d, torch.dropout, ...
from .runtime.foreach import *  # noqa: E402,F401,F403  (torch._foreach_add_ and the rest)
from .absent_devices import mps, xpu  # noqa: E402
from .runtime.settings import (are_deterministic_algorithms_enabled, get_default_device,  # noqa: E402
                               is_deterministic_algorithms_warn_only_enabled, set_default_device,
                               use_deterministic_algorithms)
from .amp import (autocast, get_autocast_cpu_dtype, get_autocast_dtype, is_autocast_cpu_enabled,  # noqa: E402
                  is_autocast_enabled)
from .amp.autocast_mode import (clear_autocast_cache, is_autocast_cache_enabled,  # noqa: E402
                                set_autocast_cache_enabled)
from .serialization import load, save  # noqa: E402
from .autograd.anomaly import is_anomaly_enabled  # noqa: E402
from .runtime.torch_switches import (get_float32_matmul_precision, set_anomaly_enabled,  # noqa: E402
                                     set_float32_matmul_precision)
from math import e, inf, nan, pi  # noqa: E402  (torch.pi, ...)
from .runtime.printing import set_printoptions  # noqa: E402  (get_printoptions, printoptions: runtime.printing)
from .runtime.legacy_types import STORAGES as _LEGACY_STORAGES, TYPES as _LEGACY_TYPES  # noqa: E402
from .runtime.tensor_queries import TypedStorage, UntypedStorage  # noqa: E402,F401
from .runtime.type_info import (channels_last, channels_last_3d, contiguous_format, finfo, iinfo,  # noqa: E402
                                legacy_contiguous_format, memory_format, preserve_format)

globals().update(_LEGACY_TYPES)  # torch.FloatTensor, torch.LongTensor, ...
globals().update(_LEGACY_STORAGES)  # torch.FloatStorage, torch.ByteStorage, ...

double = float64
cfloat = complex64
cdouble = complex128
float = float32  # noqa: A001
half = float16
long = int64
int = int32  # noqa: A001
short = int16
newaxis = None


def is_floating_point(t: Tensor) -> bool:
    return t.dtype.is_floating_point


def get_device(t: Tensor) -> int:
    """The CUDA device index of ``t``, -1 for a CPU tensor."""
    return t.get_device()


def numel(t: Tensor) -> int:
    return t.numel()


def result_type(a, b) -> dtype:
    return _D.result_type(a, b)


def can_cast(from_: dtype, to: dtype) -> bool:
    return from_.category <= to.category


def get_num_threads() -> int:
    """Threads that compiled kernels use (Numba's pool)."""
    import numba
    return numba.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set the threads compiled kernels use (at most NUMBA_NUM_THREADS, the core count)."""
    import numba
    numba.set_num_threads(n)


__version__ = "0.1.0"

from .runtime.compiled import compile, make_ir  # noqa: E402,A004  (torch.compile)
