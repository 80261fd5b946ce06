"""``fusegrad.nn``: modules, parameters, layers, losses, ``functional``, ``init`` and ``utils``."""
from . import functional, grad, init, parallel, utils
from .parallel import DataParallel
from .module import Module
from .modules import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, Dropout, ELU, Embedding, Flatten, GELU,
                      HuberLoss, Identity, L1Loss, LayerNorm, LazyLinear, LeakyReLU, Linear, LogSoftmax, MSELoss,
                      ModuleDict, ModuleList, NLLLoss, ReLU, Sequential, SiLU, Sigmoid, SmoothL1Loss, Softmax, Softplus, Tanh,
                      Unflatten)
from .modules import (GRU, GRUCell, LSTM, LSTMCell, MultiheadAttention, RNN, RNNBase, RNNCell, RNNCellBase,
                      Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                      TransformerEncoderLayer)
from .modules import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
                      AvgPool2d, BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, GroupNorm,
                      InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, MaxPool1d, MaxPool2d, PixelShuffle, PixelUnshuffle, RMSNorm,
                      Upsample, Fold, Unfold)
from .modules import (AlphaDropout, CELU, CosineEmbeddingLoss, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout,
                      GLU, HingeEmbeddingLoss, Hardsigmoid, Hardswish, Hardtanh, KLDivLoss, MarginRankingLoss, Mish,
                      PReLU, ParameterDict, ParameterList, ReLU6, SELU, SoftMarginLoss, Softmin, Softsign,
                      Tanhshrink, TripletMarginLoss, TripletMarginWithDistanceLoss)
from .modules import (Bilinear, ChannelShuffle, CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d,
                      ConstantPad2d, ConstantPad3d, CosineSimilarity, GaussianNLLLoss, Hardshrink, LocalResponseNorm,
                      LogSigmoid, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, PairwiseDistance,
                      PoissonNLLLoss, RReLU, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                      ReplicationPad2d, ReplicationPad3d, Softmax2d, Softshrink, Threshold, UpsamplingBilinear2d,
                      UpsamplingNearest2d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .modules import (AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, Conv3d, ConvTranspose3d, EmbeddingBag,
                      LPPool1d, LPPool2d, LPPool3d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .modules import AdaptiveLogSoftmaxWithLoss, CTCLoss, SyncBatchNorm
from .buffer import Buffer
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter
from .modules import (FractionalMaxPool2d, FractionalMaxPool3d, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,
                      LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,
                      LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d)

__all__ = ["Module", "Parameter", "Buffer", "functional", "init", "parallel", "utils", "DataParallel", "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss",
           "Dropout", "ELU", "Embedding", "Flatten", "GELU", "HuberLoss", "Identity", "L1Loss", "LayerNorm",
           "LazyLinear", "LeakyReLU", "Linear", "LogSoftmax", "MSELoss", "ModuleDict", "ModuleList", "NLLLoss", "ReLU",
           "Sequential", "UninitializedParameter", "SiLU", "Sigmoid", "SmoothL1Loss", "Softmax", "Softplus", "Tanh", "Unflatten"]

# recurrent and attention layers
__all__ += ["GRU", "GRUCell", "LSTM", "LSTMCell", "MultiheadAttention", "RNN", "RNNBase", "RNNCell", "RNNCellBase",
            "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
            "TransformerEncoderLayer"]

# convolution, pooling, resizing and normalization layers
__all__ += ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d",
            "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
            "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "MaxPool1d", "MaxPool2d", "PixelShuffle",
            "PixelUnshuffle", "RMSNorm", "Upsample", "Fold", "Unfold"]
# more activations, dropouts, losses and parameter containers
__all__ += ["AlphaDropout", "CELU", "CosineEmbeddingLoss", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout",
            "GLU",
            "HingeEmbeddingLoss", "Hardsigmoid", "Hardswish", "Hardtanh", "KLDivLoss", "MarginRankingLoss", "Mish",
            "PReLU", "ParameterDict", "ParameterList", "ReLU6", "SELU", "SoftMarginLoss", "Softmin", "Softsign",
            "Tanhshrink", "TripletMarginLoss", "TripletMarginWithDistanceLoss"]
# padding, distance, shuffle and more activation, normalization and loss layers
__all__ += ["Bilinear", "ChannelShuffle", "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d",
            "ConstantPad2d", "ConstantPad3d", "CosineSimilarity", "GaussianNLLLoss", "Hardshrink", "LocalResponseNorm",
            "LogSigmoid", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PairwiseDistance",
            "PoissonNLLLoss", "RReLU", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
            "ReplicationPad2d", "ReplicationPad3d", "Softmax2d", "Softshrink", "Threshold", "UpsamplingBilinear2d",
            "UpsamplingNearest2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]
# 3-d convolution and pooling, power-average pooling, max unpooling and embedding bags
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "AvgPool3d", "Conv3d", "ConvTranspose3d", "EmbeddingBag",
            "LPPool1d", "LPPool2d", "LPPool3d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]
# sequence losses, the adaptive softmax and batch norm across ranks
__all__ += ["AdaptiveLogSoftmaxWithLoss", "CTCLoss", "SyncBatchNorm"]
# lazy layers, the uninitialized buffer and fractional max pooling
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
            "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
            "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
            "UninitializedBuffer"]
