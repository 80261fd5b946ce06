"""``fusegrad.utils.benchmark``: ``Timer`` as in ``torch.utils.benchmark``."""
from .timer import Measurement, Timer

__all__ = ["Measurement", "Timer"]
