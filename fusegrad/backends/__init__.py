"""``fusegrad.backends``: PyTorch's backend flags, accepted and reported (``cudnn``: no
cuDNN here; ``mps``: no Metal)."""
from . import cudnn, mps

__all__ = ["cudnn", "mps"]
