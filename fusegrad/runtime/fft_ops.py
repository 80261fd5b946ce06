"""``torch.fft``'s transforms with PyTorch's signatures (``n``/``s`` sizes that trim or
zero-pad, ``dim``, ``norm`` of "backward", "forward" or "ortho"), their frequency helpers,
and ``torch.stft``/``torch.istft``, built on the primitives of ``fusegrad.ir.prims.fft``."""
from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np

from ..ir import dtypes as D
from ..ir import prims as P
from ..tracer.trace import user_stacklevel
from . import ops as O
from .autocast_state import STATE as AUTOCAST
from .complex_ops import conj, real, view_as_real
from .dispatch import bind
from .exports import op
from .keywords import _type_name
from .tensor import Tensor

_NORMS = ("backward", "forward", "ortho")


def _scale(norm: Optional[str], n: int, forward: bool) -> float:
    """The factor ``norm`` puts on a transform over ``n`` points (forward or inverse)."""
    norm = norm or "backward"
    if norm not in _NORMS:
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")
    if norm == "ortho":
        return 1.0 / math.sqrt(n) if n else 1.0
    return 1.0 if (norm == "backward") == forward else (1.0 / n if n else 1.0)


def _axes(x: Tensor, dim, s, default_all: bool, what: str) -> tuple:
    nd = x.dim()
    if dim is None:
        if s is not None:
            dim = tuple(range(nd - len(s), nd))
        else:
            dim = tuple(range(nd)) if default_all else (nd - 1,)
    elif isinstance(dim, int):
        dim = (dim,)
    axes = []
    for d in dim:
        if not -nd <= d < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {d})")
        axes.append(d % nd)
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{what} dims must be unique")
    if s is not None and len(s) != len(axes):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    for a, n in zip(axes, s or [None] * len(axes)):
        if (n is None or n == -1) and x.shape[a] == 0:
            raise RuntimeError("Invalid number of data points (0) specified")
    return tuple(axes)


def _resized(x: Tensor, axes, sizes) -> Tensor:
    """``x`` trimmed or zero-padded to ``sizes`` along ``axes`` (-1 or None: as it is)."""
    for a, n in zip(axes, sizes):
        if n is None or n == -1:
            continue
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
        have = x.shape[a]
        if n < have:
            x = O.narrow(x, a, 0, n)
        elif n > have:
            widths = tuple((0, n - have) if d == a else (0, 0) for d in range(x.dim()))
            x = bind(P.pad, (x,), {"widths": widths, "value": 0.0})
    return x


def _floating(x: Tensor, what: str) -> Tensor:
    if x.dtype.is_complex or x.dtype in (D.float32, D.float64):
        return x
    if x.dtype.is_floating_point:
        if AUTOCAST.dtype is not None:  # (under autocast FFTs run in float32, as PyTorch's policy lists them)
            return O.to(x, D.float32)
        raise RuntimeError(f"Unsupported dtype {_type_name(x.dtype)}")  # (as PyTorch's CPU FFTs)
    return O.to(x, D.get_default_dtype())


def _as_complex(x: Tensor) -> Tensor:
    return x if x.dtype.is_complex else O.to(x, x.dtype.to_complex())


def _c2c(x, s, dim, norm, default_all: bool, what: str, forward: bool = True) -> Tensor:
    x = _floating(O.as_t(x), what)
    if forward and not x.dtype.is_complex:  # (a real signal's full spectrum: PyTorch's r2c, not onesided)
        return _r2c(x, s, dim, norm, default_all, what, onesided=False)
    axes = _axes(x, dim, s, default_all, what)
    x = _resized(_as_complex(x), axes, s or [None] * len(axes))
    n = math.prod(x.shape[a] for a in axes)
    return bind(P.fft_c2c, (x,), {"axes": axes, "forward": forward, "scale": _scale(norm, n, forward)})


def _ifft(x, s, dim, norm, default_all: bool, what: str) -> Tensor:
    return _c2c(x, s, dim, norm, default_all, what, forward=False)
def _r2c(x, s, dim, norm, default_all: bool, what: str, onesided: bool = True) -> Tensor:
    x = _floating(O.as_t(x), what)
    if x.dtype.is_complex:
        raise RuntimeError(f"{what} expects a real input tensor, but got {_type_name(x.dtype)}")
    axes = _axes(x, dim, s, default_all, what)
    x = _resized(x, axes, s or [None] * len(axes))
    n = math.prod(x.shape[a] for a in axes)
    return bind(P.fft_r2c, (x,), {"axes": axes, "onesided": onesided, "scale": _scale(norm, n, True)})


def _c2r(x, s, dim, norm, default_all: bool, what: str) -> Tensor:
    x = _as_complex(_floating(O.as_t(x), what))
    axes = _axes(x, dim, s, default_all, what)
    sizes = list(s) if s is not None else [None] * len(axes)
    last = sizes[-1] if sizes[-1] not in (None, -1) else 2 * (x.shape[axes[-1]] - 1)
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    x = _resized(x, axes, sizes[:-1] + [last // 2 + 1])
    n = math.prod(x.shape[a] for a in axes[:-1]) * last
    return bind(P.fft_c2r, (x,), {"axes": axes, "last_size": last, "scale": _scale(norm, n, False)})


def _one(s):
    return None if s is None else (s,)


def _family(transform, names: tuple, what: str) -> tuple:
    """The 1-D, 2-D and N-D functions of one transform (``fft``, ``fft2``, ``fftn`` and their
    kin) with PyTorch's signatures: ``n`` and one ``dim``; ``s`` and the last two dims; ``s``
    and every dim (or the last ``len(s)``)."""
    def one(input, n=None, dim=-1, norm=None) -> Tensor:  # noqa: A002
        return transform(input, _one(n), dim, norm, False, names[0])

    def two(input, s=None, dim=(-2, -1), norm=None) -> Tensor:  # noqa: A002
        return transform(input, s, dim, norm, False, names[1])

    def many(input, s=None, dim=None, norm=None) -> Tensor:  # noqa: A002
        return transform(input, s, dim, norm, True, names[2])
    for f, name, dims in zip((one, two, many), names, ("one dimension", "two dimensions", "N dimensions")):
        f.__name__ = f.__qualname__ = name
        f.__doc__ = f"{what} over {dims} (``torch.fft.{name}``)."
    return one, two, many


fft, fft2, fftn = _family(_c2c, ("fft", "fft2", "fftn"), "The discrete Fourier transform")
ifft, ifft2, ifftn = _family(_ifft, ("ifft", "ifft2", "ifftn"), "The inverse discrete Fourier transform")
rfft, rfft2, rfftn = _family(_r2c, ("rfft", "rfft2", "rfftn"),
                             "The transform of a real signal (the last dimension's non-negative frequencies)")
irfft, irfft2, irfftn = _family(_c2r, ("irfft", "irfft2", "irfftn"),
                                "The real signal of a onesided spectrum (2 (m - 1) samples on the last dimension "
                                "unless sized)")


_SWAPPED = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _hermitian(x, s, dim, norm, default_all: bool, what: str) -> Tensor:
    """The real transform of a signal with Hermitian symmetry given by its first half: the
    inverse real transform of its conjugate, the normalization swapped."""
    return _c2r(_conj(x), s, dim, _SWAPPED[norm], default_all, what)


def _ihermitian(x, s, dim, norm, default_all: bool, what: str) -> Tensor:
    """The inverse of ``_hermitian``: the first half of a real signal's inverse transform."""
    return _conj(_r2c(x, s, dim, _SWAPPED[norm], default_all, what))


hfft, hfft2, hfftn = _family(_hermitian, ("hfft", "hfft2", "hfftn"),
                             "The real transform of a signal with Hermitian symmetry, given by its first half")
ihfft, ihfft2, ihfftn = _family(_ihermitian, ("ihfft", "ihfft2", "ihfftn"),
                                "The first half of a real signal's inverse transform (the inverse of hfft)")


def _conj(x):
    return conj(O.as_t(x))


def _freq_tensor(k: np.ndarray, n: int, d: float, dtype, device, requires_grad: bool) -> Tensor:
    """The integers ``k`` times ``1 / (n d)``, as PyTorch: the factor rounded to the dtype, the
    product rounded once (a half-precision dtype's computed in float32)."""
    from .factory import tensor
    dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    work = np.float32 if dt.np.itemsize < 4 else dt.np.type
    factor = work(np.asarray(1.0 / (n * d)).astype(dt.np))
    return tensor(k.astype(work) * factor, dtype=dt, device=device, requires_grad=requires_grad)


def fftfreq(n: int, d: float = 1.0, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
            out=None) -> Tensor:
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``."""
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)])
    r = _freq_tensor(k, n, d, dtype, device, requires_grad)
    return r if out is None else out.copy_(r)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
             out=None) -> Tensor:
    """The non-negative sample frequencies of ``rfft`` over ``n`` points."""
    r = _freq_tensor(np.arange(n // 2 + 1), n, d, dtype, device, requires_grad)
    return r if out is None else out.copy_(r)


def _shift(x, dim, sign: int) -> Tensor:
    x = O.as_t(x)
    dims = tuple(range(x.dim())) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    return O.roll(x, tuple(sign * (x.shape[d] // 2) for d in dims), dims)


def fftshift(input, dim=None) -> Tensor:  # noqa: A002
    """The zero frequency moved to the centre of ``dim`` (all dimensions by default)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None) -> Tensor:  # noqa: A002
    """The inverse of ``fftshift``."""
    return _shift(input, dim, -1)


_NO_WINDOW = {
    "stft": "A window was not provided. A rectangular window will be applied,which is known to cause spectral "
            "leakage. Other windows such as torch.hann_window or torch.hamming_window are recommended to reduce "
            "spectral leakage.",
    "istft": "A window was not provided. A rectangular window will be applied.Please provide the same window used "
             "by stft to make the inversion lossless.",
}


def _window(window: Optional[Tensor], win_length: int, n_fft: int, like: Tensor, what: str) -> Tensor:
    """The window padded with zeros on both sides to ``n_fft`` (PyTorch's centring)."""
    from .factory import ones
    if window is None:
        warnings.warn(_NO_WINDOW[what] + "To suppress this warning and use a rectangular window, explicitly set "
                      "`window=torch.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=user_stacklevel())
        window = ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    if window.dim() != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    left = (n_fft - win_length) // 2
    if win_length == n_fft:
        return window
    return bind(P.pad, (window,), {"widths": ((left, n_fft - win_length - left),), "value": 0.0})


@op
def stft(input: Tensor, n_fft: int, hop_length: Optional[int] = None, win_length: Optional[int] = None,  # noqa: A002
         window: Optional[Tensor] = None, center: bool = True, pad_mode: str = "reflect", normalized: bool = False,
         onesided: Optional[bool] = None, return_complex: Optional[bool] = None) -> Tensor:
    """The short-time Fourier transform: frames of ``n_fft`` samples every ``hop_length``,
    windowed, transformed; (batch,) frequencies x frames, complex (``return_complex``) or as
    (real, imaginary) pairs."""
    from ..nn import functional as F
    x = O.as_t(input)
    if return_complex is None:
        if not x.dtype.is_complex and (window is None or not window.dtype.is_complex):
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if x.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {x.dim()}D tensor")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):  # (raw int16 PCM, say)
        raise RuntimeError(f"stft({x.type()}{list(x.shape)}, n_fft={n_fft}) : expected a tensor of floating point "
                           "or complex values")
    hop = hop_length if hop_length is not None else n_fft // 4
    win = win_length if win_length is not None else n_fft
    if n_fft <= 0 or hop <= 0 or not 0 < win <= n_fft:
        raise RuntimeError(f"stft: expected 0 < n_fft, 0 < hop_length and 0 < win_length <= n_fft, but got "
                           f"n_fft={n_fft}, hop_length={hop}, win_length={win}")
    batched = x.dim() == 2
    if not batched:
        x = O.unsqueeze(x, 0)
    if center:
        half = n_fft // 2
        x = O.squeeze(F.pad(O.unsqueeze(x, 1), (half, half), mode=pad_mode), 1)
    if x.shape[-1] < n_fft:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = O.mul(x.unfold(-1, n_fft, hop), _window(window, win, n_fft, x, "stft"))
    onesided = (not frames.dtype.is_complex) if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    if onesided:
        spec = _r2c(frames, None, -1, norm, False, "stft")
    else:
        spec = _c2c(frames, None, -1, norm, False, "stft")
    spec = O.transpose(spec, -1, -2)
    if not batched:
        spec = O.squeeze(spec, 0)
    return spec if return_complex else view_as_real(spec)


@op
def istft(input: Tensor, n_fft: int, hop_length: Optional[int] = None, win_length: Optional[int] = None,  # noqa: A002
          window: Optional[Tensor] = None, center: bool = True, normalized: bool = False,
          onesided: Optional[bool] = None, length: Optional[int] = None, return_complex: bool = False) -> Tensor:
    """The inverse of ``stft``: each frame's inverse transform, windowed, overlapped and
    added, divided by the overlapped squared window."""
    from ..nn import functional as F
    spec = O.as_t(input)
    if not spec.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor")
    if length is not None and length <= 0:  # (PyTorch's message: its NOLA check's reduction of nothing)
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument.")
    hop = hop_length if hop_length is not None else n_fft // 4
    win = win_length if win_length is not None else n_fft
    batched = spec.dim() == 3
    if not batched:
        spec = O.unsqueeze(spec, 0)
    n_frames = spec.shape[-1]
    onesided = (spec.shape[-2] != n_fft) if onesided is None else onesided
    norm = "ortho" if normalized else "backward"
    frames = O.transpose(spec, -1, -2)
    if onesided:
        if return_complex:
            raise RuntimeError("cannot have onesided output if window or input is complex")
        frames = _c2r(frames, (n_fft,), (-1,), norm, False, "istft")
    else:
        frames = _ifft(frames, None, -1, norm, False, "istft")
        if not return_complex:
            frames = real(frames)
    w = _window(window, win, n_fft, frames, "istft")
    frames = O.mul(frames, w)
    total = n_fft + hop * (n_frames - 1)

    def overlap_add(f):  # (batch, frames, n_fft) -> (batch, total)
        cols = O.transpose(f, 1, 2)
        return O.reshape(F.fold(cols, output_size=(1, total), kernel_size=(1, n_fft), stride=(1, hop)),
                         (f.shape[0], total))
    y = overlap_add(frames)
    env = overlap_add(O.expand(O.unsqueeze(O.unsqueeze(O.mul(w, w), 0), 0), (1, n_frames, n_fft)))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + length
    y, env = y[:, start:min(end, total)], env[:, start:min(end, total)]
    if type(env._data) is np.ndarray and bool((O.abs(env) < 1e-11).any()):  # (traced: not checked)
        raise RuntimeError("istft(...): window overlap add min: 0, the NOLA constraint is not satisfied")
    y = O.div(y, env)
    if length is not None and y.shape[-1] < length:
        y = _resized(y, (1,), (length,))
    return y if batched else O.squeeze(y, 0)
