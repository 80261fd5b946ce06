"""``fusegrad.backends``: PyTorch's backend flags, accepted and reported (``cuda``: matmul
and attention flags; ``cudnn``: no cuDNN here; ``mkldnn``: no oneDNN; ``mps``: no Metal;
``cpu``: the CPU's vector capability)."""
from . import cpu, cuda, cudnn, mkldnn, mps

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps"]
