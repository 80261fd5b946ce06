"""``grid_sample`` and ``affine_grid`` of ``nn.functional`` (re-exported there), composed from
primitives.

Sampling unnormalizes the grid's coordinates, applies the padding mode (clipping, or a
reflection about the edges and then clipping) and splits them into integer taps (``floor`` or
``round``) and interpolation weights; each tap is a ``gather`` from the input flattened over
its spatial dims, zeroed where the tap lies outside the input. Gradients with respect to the
input (gather's scatter-add), the grid (through the weights and the padding's piecewise-linear
maps) and an affine grid's ``theta`` then come from the primitives' rules, and the functions
trace into compiled graphs and ``func`` transforms like any other composition. The coordinate
arithmetic is that of PyTorch's vectorized CPU kernel, so that positions exactly between two
pixels round as there in nearest mode, and the gradient is zero where a coordinate is clipped
or lies on a border, as there."""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Optional, Sequence

from ..ir import dtypes as D
from ..runtime import ops as O
from ..runtime.autocast_state import float32_policy
from ..runtime.factory import linspace, ones, zeros
from ..runtime.keywords import _type_name
from ..runtime.ops import named
from ..runtime.tensor import Tensor
from ..tracer.trace import user_stacklevel

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_CORNERS_DEFAULT = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                          "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                          "documentation of grid_sample for details.")


def _align(align_corners: Optional[bool]) -> bool:
    """``align_corners``, False (with PyTorch's warning, pointing at the user's call) when None."""
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_DEFAULT, stacklevel=user_stacklevel())
        return False
    return bool(align_corners)


# ---------------------------------------------------------------- affine_grid
def _steps(n: int, like: Tensor, align_corners: bool) -> Tensor:
    """PyTorch's ``linspace_from_neg_one``: ``n`` points from -1 to 1, pulled in to the pixel
    centres by (n-1)/n without ``align_corners``; the single point 0 when ``n == 1``."""
    if n <= 1:
        return zeros(1, dtype=like.dtype, device=like.device)
    r = linspace(-1, 1, n, dtype=like.dtype, device=like.device)
    return r if align_corners else O.div(O.mul(r, n - 1), n)


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: Optional[bool] = None) -> Tensor:
    """The sampling grid of the affine maps ``theta`` for an output of ``size``.

    ``theta`` is (N, 2, 3) for a 4-D ``size`` (N, C, H, W), giving an (N, H, W, 2) grid, or
    (N, 3, 4) for a 5-D ``size`` (N, C, D, H, W), giving (N, D, H, W, 3); each output point's
    normalized coordinates (x along W first, then y, z; homogeneous 1 last) are mapped by its
    batch's matrix. ``align_corners`` as in ``grid_sample``.
    """
    align_corners = _align(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    k = len(size) - 2
    if k not in (2, 3):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if theta.ndim != 3 or theta.shape[-2] != k or theta.shape[-1] != k + 1:
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {size}. "
                         f"Got {theta.shape}.")
    spatial = tuple(size[2:])
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=user_stacklevel())
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n, points = size[0], math.prod(spatial)
    axes = O.meshgrid(*[_steps(s, theta, align_corners) for s in spatial], indexing="ij")
    homogeneous = ones(spatial, dtype=theta.dtype, device=theta.device)
    base = O.reshape(O.stack([*axes[::-1], homogeneous], -1), (1, points, k + 1))
    grid = O.bmm(O.expand(base, n, points, k + 1), O.transpose(theta, 1, 2))
    return named(O.reshape(grid, (n,) + spatial + (k,)), "AffineGridGeneratorBackward0")


# ---------------------------------------------------------------- grid_sample
def _check_sampler(input: Tensor, grid: Tensor, mode: str) -> None:
    """PyTorch's checks of ``torch.grid_sampler``, in its order and with its messages."""
    shapes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got {shapes}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    for i in range(2, input.ndim):
        if input.shape[i] <= 0:
            raise RuntimeError("grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")
    k = 2 if input.ndim == 4 else 3
    if input.ndim != k + 2 or grid.ndim != k + 2:
        raise RuntimeError(f"grid_sampler(): expected {k + 2}D input and grid with same number of dimensions, but "
                           f"got {shapes}")
    if k == 3 and mode == "bicubic":
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.is_floating_point():
        kernel = "grid_sampler_2d_cpu_kernel_impl" if k == 2 else "grid_sampler3d_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_type_name(input.dtype)}\'')
    if grid.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(grid.dtype)}")


def _clip(coord: Tensor, top: int) -> Tensor:
    """``coord`` clamped to [0, top]: NaN goes to 0, and the gradient is zero on the borders
    too (PyTorch counts them as outside)."""
    return O.where(O.gt(coord, 0), O.where(O.lt(coord, top), coord, top), 0)


def _reflect(coord: Tensor, low: float, twice_span: float) -> Tensor:
    """``coord`` reflected about ``low`` and ``low + twice_span / 2`` until it lies between them."""
    t = O.sub(coord, low)
    # a select rather than abs: the gradient at ``low`` itself is +1, as in PyTorch, not abs's 0
    t = O.where(O.lt(t, 0), O.neg(t), t)
    extra = O.fmod(t, twice_span)
    flipped = O.rsub(extra, twice_span)
    return O.add(O.where(O.gt(extra, flipped), flipped, extra), low)


def _source_index(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Normalized coordinates along an axis of ``size`` pixels as (fractional) pixel indices,
    padded by ``padding_mode``."""
    if align_corners:  # -1 and 1 are the centres of the corner pixels
        coord = O.mul(O.add(coord, 1), (size - 1) / 2)
    else:  # -1 and 1 are the outer edges of the corner pixels
        coord = O.sub(O.mul(O.add(coord, 1), size / 2), 0.5)
    if padding_mode == "reflection" and not (align_corners and size == 1):
        # (a single pixel with align_corners reflects everything onto 0, which clipping alone gives)
        coord = _reflect(coord, 0.0, 2.0 * (size - 1)) if align_corners else _reflect(coord, -0.5, 2.0 * size)
    return coord if padding_mode == "zeros" else _clip(coord, size - 1)


def _pad_tap(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """A bicubic tap's integral pixel index padded by ``padding_mode`` (bicubic pads each of
    its 16 taps, where the other modes pad the sampling position)."""
    if padding_mode == "reflection" and not (align_corners and size == 1):
        coord = _reflect(coord, 0.0, 2.0 * (size - 1)) if align_corners else _reflect(coord, -0.5, 2.0 * size)
    return coord if padding_mode == "zeros" else _clip(coord, size - 1)


def _cubic_weights(t: Tensor) -> list:
    """The 4 cubic-convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 pixels from the
    floor, for the fraction ``t``, written as PyTorch's vectorized kernel writes them."""
    a = -0.75

    def outer(x):  # 1 < |x| < 2
        return O.sub(O.mul(O.add(O.mul(O.sub(O.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)

    def inner(x):  # |x| <= 1
        return O.add(O.mul(O.mul(O.sub(O.mul(x, a + 2), a + 3), x), x), 1)
    return [outer(O.add(t, 1)), inner(t), inner(O.rsub(t, 1)), outer(O.rsub(t, 2))]


def _tap(flat: Tensor, at: list, sizes: list) -> Tensor:
    """The (N, C, L) values of ``flat`` (N, C, spatial sizes flattened) at the integral-valued
    float pixel indices ``at`` (x, y[, z], each (N, L)) along ``sizes`` (W, H[, D]); zero
    where they lie outside the input."""
    inside = None
    for i, size in zip(at, sizes):
        ok = O.logical_and(O.ge(i, 0), O.le(i, size - 1))
        inside = ok if inside is None else O.logical_and(inside, ok)
    # outside taps (NaN ones too) read pixel 0 and are zeroed below, so every index is in range;
    # each coordinate is converted separately so that large images index exactly
    index, stride = None, 1
    for i, size in zip(at, sizes):
        term = O.mul(O.to(O.where(inside, i, 0), D.int64), stride)
        index, stride = term if index is None else O.add(index, term), stride * size
    n, c, _ = flat.shape
    index = O.expand(O.unsqueeze(index, 1), n, c, at[0].shape[1])
    return O.where(O.unsqueeze(inside, 1), O.gather(flat, 2, index), 0)


@float32_policy
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: Optional[bool] = None) -> Tensor:
    """Sample ``input`` (N, C, H, W) at the normalized positions ``grid`` (N, H_out, W_out, 2),
    or volumetric ``input`` (N, C, D, H, W) at ``grid`` (N, D_out, H_out, W_out, 3).

    ``grid[..., 0]`` is x (along W), ``grid[..., 1]`` y (and ``[..., 2]`` z), in [-1, 1] across the input:
    with ``align_corners`` -1 and 1 are the centres of the corner pixels, without it (the
    default, with PyTorch's warning when not given) their outer edges. ``mode`` is 'bilinear',
    (trilinear for 5-D input), 'nearest' (ties to even) or 'bicubic' (16 taps; 4-D only);
    ``padding_mode`` says what positions outside the input read: 'zeros', the 'border' pixels,
    or the input's 'reflection' about its edges. Returns (N, C, *grid's output sizes).
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    align_corners = _align(align_corners)
    _check_sampler(input, grid, mode)
    n, c = input.shape[:2]
    sizes = list(input.shape[2:])[::-1]  # W, H[, D]: the order of the grid's coordinates
    outs = tuple(grid.shape[1:-1])
    points = (n, math.prod(outs))
    flat = O.reshape(input, (n, c, math.prod(sizes)))
    node = f"GridSampler{len(sizes)}DBackward0"
    if mode == "bicubic":
        (w, h), (x, y) = sizes, (_source_index(O.reshape(O.select(grid, -1, k), points), size, "zeros",
                                               align_corners) for k, size in enumerate(sizes))
        x0, y0 = O.floor(x), O.floor(y)
        wx, wy = _cubic_weights(O.sub(x, x0)), _cubic_weights(O.sub(y, y0))
        xs = [_pad_tap(O.add(x0, i - 1), w, padding_mode, align_corners) for i in range(4)]
        out = None
        for j in range(4):  # along x in each of the 4 rows, then across the rows
            ty = _pad_tap(O.add(y0, j - 1), h, padding_mode, align_corners)
            row = None
            for i in range(4):
                term = O.mul(O.unsqueeze(wx[i], 1), _tap(flat, [xs[i], ty], sizes))
                row = term if row is None else O.add(row, term)
            term = O.mul(O.unsqueeze(wy[j], 1), row)
            out = term if out is None else O.add(out, term)
        return named(O.reshape(out, (n, c) + outs), node)
    coords = [_source_index(O.reshape(O.select(grid, -1, k), points), size, padding_mode, align_corners)
              for k, size in enumerate(sizes)]
    if mode == "nearest":
        rounded = [O.round(v) for v in coords]
        # PyTorch gives the grid a gradient of zeros here, not none: adding an exact 0 that depends
        # on the (rounded, so zero-gradient) coordinates keeps the grid in the graph
        s = rounded[0]
        for v in rounded[1:]:
            s = O.add(s, v)
        zero = O.where(O.isfinite(s), O.sub(s, s), 0)
        out = O.add(_tap(flat, rounded, sizes), O.unsqueeze(zero, 1))
    else:  # (bi/tri)linear: 2 ** k taps, the last coordinate's choice varying slowest, as PyTorch sums them
        lows = [O.floor(v) for v in coords]
        near = [O.sub(v, lo) for v, lo in zip(coords, lows)]  # distances to the lower taps
        far = [O.rsub(f, 1) for f in near]  # ... and to the upper ones
        out = None
        for corner in itertools.product((0, 1), repeat=len(sizes)):
            at, weight = [], None
            for k in reversed(range(len(sizes))):  # (z, then y, then x: PyTorch's product order)
                up = corner[len(sizes) - 1 - k]
                at.insert(0, O.add(lows[k], 1) if up else lows[k])
                wk = near[k] if up else far[k]
                weight = wk if weight is None else O.mul(weight, wk)
            term = O.mul(_tap(flat, at, sizes), O.unsqueeze(weight, 1))
            out = term if out is None else O.add(out, term)
    return named(O.reshape(out, (n, c) + outs), node)
