"""``torch.fft``: discrete Fourier transforms (fusegrad.runtime.fft_ops)."""
from .runtime.fft_ops import (fft, fft2, fftfreq, fftn, fftshift, hfft, ifft, ifft2, ifftn, ifftshift,  # noqa: F401
                              ihfft, irfft, irfft2, irfftn, rfft, rfft2, rfftfreq, rfftn)
