"""``fusegrad.backends``: PyTorch's backend flags, accepted and reported (``cuda``: matmul
and attention flags; ``cudnn``: no cuDNN here; ``mkldnn``: no oneDNN; ``mps``: no Metal)."""
from . import cuda, cudnn, mkldnn, mps

__all__ = ["cuda", "cudnn", "mkldnn", "mps"]
