"""fusegrad.autograd: backward, grad, custom Functions, gradcheck and anomaly detection."""
from ..runtime.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from . import forward_ad, functional, grad_mode, graph, profiler
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .function import Function, FunctionCtx, once_differentiable
from .functions import backward, grad
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from ..runtime.legacy_types import Variable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "gradgradcheck", "GradcheckError",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "functional", "once_differentiable", "forward_ad", "grad_mode", "graph",
           "Variable"]
