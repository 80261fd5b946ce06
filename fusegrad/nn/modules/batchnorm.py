"""BatchNorm1d/2d/3d, SyncBatchNorm and InstanceNorm1d/2d/3d: per-channel normalization with
optional affine parameters and running statistics (buffers ``running_mean``, ``running_var``,
``num_batches_tracked``); and their lazy forms, which read the number of channels from the input."""
from __future__ import annotations

import math
from typing import Dict, Optional

from ...runtime.factory import full_like, ones, tensor, zeros
from ...ir import dtypes as D
from ...runtime import ops as O
from ...runtime.ops import unsqueeze, squeeze
from ...runtime.tensor import Tensor
from .. import functional_norm as FN
from ..module import Module
from ..parameter import UninitializedBuffer, UninitializedParameter
from .affine import register_affine, reset_affine
from .lazy import _LazyLayer


class _NormBase(Module):
    """Parameters, buffers, their reset and the printed form shared by batch and instance norm."""
    _version = 2  # PyTorch's (num_batches_tracked); state_dict's _metadata carries it

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        register_affine(self, num_features, affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=D.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        # a state dict from before version 2 (or built without metadata: a comprehension, another
        # framework's weights) has no counter: it keeps this module's, as PyTorch's
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else tensor(0, dtype=D.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        reset_affine(self, self.affine)

    def _factor(self):
        """The running-average factor of this step, counting the step when training: a
        float, or for a cumulative average (momentum None) a tensor computed from the
        counter, which compiled code reads at each call (a float would be a graph break)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = self.num_batches_tracked.to(self.running_mean.dtype).reciprocal()
        return factor

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims: tuple = ()

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._dims)} input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = self._factor()
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return FN.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                             self.weight, self.bias, use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) over N (and L)."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) over N, H and W."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) over N, D, H and W."""
    _dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose training statistics are those of the whole batch across the
    ranks of ``process_group`` (all of them by default), as if one process normalized the
    concatenated batch: the per-rank means and variances are combined by all-reduces that
    autograd differentiates. Outside training, or without a process group of more than one
    rank, it is a BatchNorm."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        from ... import distributed as dist
        if not (self.training and dist.is_initialized() and dist.get_world_size(self.process_group) > 1):
            return super().forward(input)
        return self._synced(input, self._factor())

    def _synced(self, input: Tensor, factor) -> Tensor:
        from ...distributed.nn import all_reduce
        shape = FN._channel_shape(input)
        axes = (0,) + tuple(range(2, input.ndim))
        low, x = input, FN.upcast(input)
        n = float(math.prod(x.shape[a] for a in axes))
        mean_r = O.mean(x, axes)
        var_r = O.mean(O.square(O.sub(x, O.reshape(mean_r, shape))), axes)
        # the count-weighted combination of the ranks' means and variances (Chan et al.),
        # each rank's computed stably by two passes over its own batch
        sums = all_reduce(O.cat([O.mul(mean_r, n), full_like(mean_r[:1], n)]), group=self.process_group)
        total = sums[-1]
        mean = O.div(sums[:-1], total)
        spread = O.add(var_r, O.square(O.sub(mean_r, mean)))
        var = O.div(all_reduce(O.mul(spread, n), group=self.process_group), total)
        if self.track_running_stats and self.running_mean is not None:
            FN._update_running(self.running_mean, mean, factor)
            FN._update_running(self.running_var, O.mul(var, O.div(total, O.sub(total, 1.0))), factor)
        out = O.mul(O.sub(x, O.reshape(mean, shape)), O.reshape(O.rsqrt(O.add(var, self.eps)), shape))
        return FN.downcast(FN._affine(out, self.weight, self.bias, shape), low)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm*d in it replaced by a SyncBatchNorm that holds the
        same parameters and running statistics (the module itself if it is one)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class _InstanceNorm(_NormBase):
    _n = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        n = self._n
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.ndim}D input)")
        if input.ndim == n + 1:
            return squeeze(self.forward(unsqueeze(input, 0)), 0)
        if self.affine and input.shape[1] != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), but got: "
                             f"{input.shape[1]}.")
        factor = 0.0 if self.momentum is None else self.momentum
        return FN.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                self.training or not self.track_running_stats, factor, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Normalizes each (sample, channel) of (N, C, L) over L."""
    _n = 1


class InstanceNorm2d(_InstanceNorm):
    """Normalizes each (sample, channel) of (N, C, H, W) over H and W."""
    _n = 2


class InstanceNorm3d(_InstanceNorm):
    """Normalizes each (sample, channel) of (N, C, D, H, W) over D, H and W."""
    _n = 3


class _LazyNormBase(_LazyLayer):
    """A batch or instance norm whose ``num_features`` is read from its first input (dim 1, as
    PyTorch's); its affine parameters and running statistics are uninitialized until then."""
    _inferred = "num_features"

    def __init__(self, eps: float = 1e-5, momentum: Optional[float] = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        # no affine parameters and no statistics: none made just to be replaced
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=D.int64)

    def _size_from(self, input: Tensor) -> int:
        return int(input.shape[1])

    def _lazy_shapes(self) -> Dict[str, tuple]:
        n = (self.num_features,)
        return {"weight": n, "bias": n, "running_mean": n, "running_var": n}


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A ``BatchNorm1d`` whose ``num_features`` is read from its first input."""
    cls_to_become = BatchNorm1d
    _dims = BatchNorm1d._dims


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """A ``BatchNorm2d`` whose ``num_features`` is read from its first input."""
    cls_to_become = BatchNorm2d
    _dims = BatchNorm2d._dims


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """A ``BatchNorm3d`` whose ``num_features`` is read from its first input."""
    cls_to_become = BatchNorm3d
    _dims = BatchNorm3d._dims


class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    """An ``InstanceNorm1d`` whose ``num_features`` is read from its first input."""
    cls_to_become = InstanceNorm1d
    _n = 1


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    """An ``InstanceNorm2d`` whose ``num_features`` is read from its first input."""
    cls_to_become = InstanceNorm2d
    _n = 2


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    """An ``InstanceNorm3d`` whose ``num_features`` is read from its first input."""
    cls_to_become = InstanceNorm3d
    _n = 3
