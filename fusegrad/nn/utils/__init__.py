"""``nn.utils``: gradient clipping, flattening parameters to one vector, ``rnn`` (``pad_sequence``,
``PackedSequence``, ``pack_padded_sequence``, ``pad_packed_sequence``, ``pack_sequence`` and the rest),
parametrizations (``parametrize``, ``parametrizations``), the hook-based ``weight_norm`` and
``spectral_norm``, and pruning (``nn.utils.prune``, imported on demand as in PyTorch)."""
from . import parametrizations, parametrize, rnn
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` whose parameters and buffers need not be initialized
    (the caller overwrites them), as ``torch.nn.utils.skip_init``; here they are, at little cost.
    The class must take a ``device`` argument, as PyTorch requires."""
    import inspect
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)

def convert_conv2d_weight_memory_format(module, memory_format):
    """``module`` with the weights of its ``Conv2d`` and ``ConvTranspose2d`` layers (itself
    included) laid out in ``memory_format`` (``fusegrad.channels_last``), in place."""
    return _convert_conv_weights(module, memory_format, 2)


def convert_conv3d_weight_memory_format(module, memory_format):
    """``convert_conv2d_weight_memory_format`` for ``Conv3d`` and ``ConvTranspose3d``."""
    return _convert_conv_weights(module, memory_format, 3)


def _convert_conv_weights(module, memory_format, dims: int):
    from ..modules import conv
    kinds = (getattr(conv, f"Conv{dims}d"), getattr(conv, f"ConvTranspose{dims}d"))
    for m in module.modules():
        if isinstance(m, kinds):
            m.weight.data = m.weight.detach().contiguous(memory_format=memory_format)
    return module


__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "get_total_norm", "parameters_to_vector",
           "parametrizations", "parametrize",
           "remove_spectral_norm", "remove_weight_norm", "rnn", "skip_init", "spectral_norm", "vector_to_parameters",
           "weight_norm"]
