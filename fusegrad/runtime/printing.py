"""How tensors print: PyTorch's format (``torch/_tensor_str.py``) on the NumPy data. Four
decimals, or scientific notation when the finite nonzero magnitudes span more than 1000x,
exceed 1e8 or go below 1e-4; whole-valued floats as ``1.``; columns padded to one width;
rows wrapped at 80 characters; more than 1000 elements summarized with ``...``; then the
``dtype=`` (when not the default, int64 or bool), ``grad_fn=<...>`` or
``requires_grad=True`` suffixes."""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, List, Optional

import numpy as np

from ..ir import dtypes as D


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: Optional[bool] = None


PRINT_OPTS = _PrintOptions()  # the options set_printoptions changes, as torch's PRINT_OPTS
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision: Optional[int] = None, threshold: Optional[float] = None,
                     edgeitems: Optional[int] = None, linewidth: Optional[int] = None, profile: Optional[str] = None,
                     sci_mode: Optional[bool] = None) -> None:
    """PyTorch's ``set_printoptions``: a ``profile`` ("default", "short", "full") and
    individual options; ``sci_mode`` None lets the values decide."""
    if profile is not None:
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems,
         PRINT_OPTS.linewidth) = _PROFILES[profile]
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            setattr(PRINT_OPTS, name, value)
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs: Any):
    """``set_printoptions(**kwargs)`` inside the block only."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """One width and notation for every element, chosen from the values shown."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f" or D.np_floating(values.dtype)
        self.int_mode, self.sci_mode, self.max_width = True, False, 1
        flat = values.reshape(-1)
        p = PRINT_OPTS.precision
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        wide = flat.astype(np.float64)
        finite = wide[np.isfinite(wide) & (wide != 0)]
        if finite.size == 0:
            return
        mags = np.abs(finite)
        lo, hi = mags.min(), mags.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) if PRINT_OPTS.sci_mode is None \
            else PRINT_OPTS.sci_mode
        vals = finite.tolist()
        if self.sci_mode:
            self.max_width = max(len(f"{v:.{p}e}") for v in vals)
        elif self.int_mode:
            self.max_width = max(len(f"{v:.0f}") + 1 for v in vals)
        else:
            self.max_width = max(len(f"{v:.{p}f}") for v in vals)

    def format(self, value: Any) -> str:
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


class _ComplexFormatter:
    """Complex elements as PyTorch prints them: the real parts with one formatter, the
    imaginary parts with another, joined with their sign and a ``j`` (``1.+2.j``)."""

    def __init__(self, values: np.ndarray) -> None:
        self.real, self.imag = _Formatter(values.real), _Formatter(values.imag)
        self.max_width = self.real.max_width + self.imag.max_width + 1

    def format(self, value: complex) -> str:
        real = self.real.format(value.real)
        imag = (self.imag.format(value.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _formatter(values: np.ndarray):
    return _ComplexFormatter(values) if values.dtype.kind == "c" else _Formatter(values)


def _plain(a: np.ndarray) -> List[Any]:
    """Elements as Python numbers (half precisions through float64, exactly)."""
    return (a.astype(np.float64) if a.dtype.kind == "f" or D.np_floating(a.dtype) else a).tolist()


def _vector(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in _plain(a[:e])] + [" ..."] + [fmt.format(v) for v in _plain(a[-e:])]
    else:
        data = [fmt.format(v) for v in _plain(a)]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if a.ndim == 0:
        return fmt.format(_plain(a))
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] + \
               [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0] - e, a.shape[0])]
    else:
        rows = [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements a summarized print shows (edge items of every dimension)."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:e], a[-e:]]) if a.shape[0] > 2 * e else a
    if not e:
        return a.reshape((0,) * a.ndim)
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) if a.shape[0] > 2 * e else range(a.shape[0])
    return np.stack([_summarized(a[i]) for i in rows])


def tensor_str(a: np.ndarray, indent: int) -> str:
    """The bracketed body of a tensor's print."""
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS.threshold
    return _nested(a, indent, summarize, _formatter(_summarized(a) if summarize else a))


def _add_suffixes(body: str, suffixes: List[str], indent: int) -> str:
    parts = [body]
    last = len(body) - body.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"


def tensor_repr(a: np.ndarray, dtype: D.dtype, grad_fn: Any, requires_grad: bool, device: str = "cpu") -> str:
    """``tensor(...)`` with PyTorch's suffixes, for array ``a`` (copied to the host from
    ``device``) of fusegrad dtype ``dtype``."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = [] if device == "cpu" else [f"device='{device}'"]
    default = D.get_default_dtype()
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append("size=" + str(tuple(a.shape)))
        if dtype is not default:
            suffixes.append(f"dtype={dtype}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append("size=" + str(tuple(a.shape)))
        if dtype not in (default, default.to_complex(), D.int64, D.bool_):
            suffixes.append(f"dtype={dtype}")
        body = tensor_str(a, indent)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(grad_fn).__name__}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


def meta_repr(shape: tuple, dtype: D.dtype, grad_fn: Any, requires_grad: bool) -> str:
    """A meta tensor as PyTorch prints it: ``tensor(..., device='meta', size=(3, 4))``,
    the dtype when not the default, then the autograd suffix."""
    suffixes = ["device='meta'", f"size={tuple(shape)}"]
    if dtype is not D.get_default_dtype():
        suffixes.append(f"dtype={dtype}")
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(grad_fn).__name__}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes("tensor(...", suffixes, len("tensor("))
