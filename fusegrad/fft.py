"""``torch.fft``: discrete Fourier transforms (fusegrad.runtime.fft_ops)."""
from .runtime.fft_ops import (fft, fft2, fftfreq, fftn, fftshift, hfft, hfft2, hfftn, ifft, ifft2,  # noqa: F401
                              ifftn, ifftshift, ihfft, ihfft2, ihfftn, irfft, irfft2, irfftn, rfft, rfft2, rfftfreq,
                              rfftn)
