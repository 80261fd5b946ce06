"""The layer classes of ``fusegrad.nn``."""
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Softplus, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, LazyLinear, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .batchnorm import (BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
                        SyncBatchNorm)
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
                      AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool1d,
                      MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .fold import Fold, Unfold
from .resizing import PixelShuffle, PixelUnshuffle, Upsample
from .sparse import Embedding, EmbeddingBag
from .attention import MultiheadAttention
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .activation import (CELU, GLU, Hardsigmoid, Hardswish, Hardtanh, Mish, PReLU, ReLU6, SELU, Softmin, Softsign,
                         Tanhshrink)
from .dropout import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from .loss import (CosineEmbeddingLoss, HingeEmbeddingLoss, KLDivLoss, MarginRankingLoss, SoftMarginLoss,
                   TripletMarginLoss, TripletMarginWithDistanceLoss)
from .parameter_containers import ParameterDict, ParameterList
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "ReLU", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh",
           "ModuleDict", "ModuleList", "Sequential", "Dropout", "Flatten", "Unflatten", "Identity", "LazyLinear", "Linear",
           "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "L1Loss", "MSELoss", "NLLLoss",
           "SmoothL1Loss", "LayerNorm", "Embedding"]

# recurrent and attention layers
__all__ += ["MultiheadAttention", "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase",
            "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
            "TransformerEncoderLayer"]

# convolution, pooling, resizing and normalization layers
__all__ += ["GroupNorm", "RMSNorm", "SyncBatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "Conv1d",
            "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
            "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d", "MaxPool2d",
            "PixelShuffle", "PixelUnshuffle", "Upsample", "Fold", "Unfold"]
# more activations, dropouts, losses and parameter containers
__all__ += ["CELU", "GLU", "Hardsigmoid", "Hardswish", "Hardtanh", "Mish", "PReLU", "ReLU6", "SELU", "Softmin",
            "Softsign", "Tanhshrink", "AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout",
            "CosineEmbeddingLoss", "HingeEmbeddingLoss", "KLDivLoss", "MarginRankingLoss", "SoftMarginLoss",
            "TripletMarginLoss", "TripletMarginWithDistanceLoss", "ParameterDict", "ParameterList"]

# padding, distance, shuffle and more activation, normalization and loss layers
from .activation import Hardshrink, LogSigmoid, RReLU, Softmax2d, Softshrink, Threshold  # noqa: E402
from .distance import CosineSimilarity, PairwiseDistance  # noqa: E402
from .linear import Bilinear  # noqa: E402
from .loss import (GaussianNLLLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss,  # noqa: E402
                   PoissonNLLLoss)
from .normalization import LocalResponseNorm  # noqa: E402
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,  # noqa: E402
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                      ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .resizing import ChannelShuffle, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: E402

__all__ += ["Hardshrink", "LogSigmoid", "RReLU", "Softmax2d", "Softshrink", "Threshold", "CosineSimilarity",
            "PairwiseDistance", "Bilinear", "GaussianNLLLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
            "MultiMarginLoss", "PoissonNLLLoss", "LocalResponseNorm", "CircularPad1d", "CircularPad2d",
            "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
            "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d",
            "ZeroPad3d", "ChannelShuffle", "UpsamplingBilinear2d", "UpsamplingNearest2d"]

# ``nn.modules.module`` (the Module class and the global module hooks), as torch names it
import sys as _sys  # noqa: E402
from .. import module  # noqa: E402
_sys.modules.setdefault(__name__ + ".module", module)
del _sys

# 3-d convolution and pooling, power-average pooling, max unpooling and embedding bags
__all__ += ["Conv3d", "ConvTranspose3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "AvgPool3d", "MaxPool3d",
            "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "EmbeddingBag"]

# sequence losses and the adaptive softmax
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: E402
from .loss import CTCLoss  # noqa: E402

__all__ += ["AdaptiveLogSoftmaxWithLoss", "CTCLoss"]

# lazy layers and fractional max pooling
from .batchnorm import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d,  # noqa: E402
                        LazyInstanceNorm2d, LazyInstanceNorm3d)
from .conv import (LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,  # noqa: E402
                   LazyConvTranspose3d)
from .pooling import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: E402

__all__ += ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
            "LazyInstanceNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
            "LazyConvTranspose2d", "LazyConvTranspose3d", "FractionalMaxPool2d", "FractionalMaxPool3d"]
