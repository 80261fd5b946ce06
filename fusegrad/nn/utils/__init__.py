"""``nn.utils``: gradient clipping, flattening parameters to one vector, ``rnn`` (``pad_sequence``,
``PackedSequence``, ``pack_padded_sequence``, ``pad_packed_sequence``, ``pack_sequence`` and the rest),
parametrizations (``parametrize``, ``parametrizations``), the hook-based ``weight_norm`` and
``spectral_norm``, and pruning (``nn.utils.prune``, imported on demand as in PyTorch)."""
from . import parametrizations, parametrize, rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "get_total_norm", "parameters_to_vector",
           "parametrizations", "parametrize",
           "remove_spectral_norm", "remove_weight_norm", "rnn", "spectral_norm", "vector_to_parameters",
           "weight_norm"]
