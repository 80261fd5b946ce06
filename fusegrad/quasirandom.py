"""torch.quasirandom: the Sobol low-discrepancy sequence (``SobolEngine``), for quasi-Monte
Carlo sampling (PINN collocation points, Bayesian optimization's candidates).

Points come from SciPy's generator of the same direction numbers (Joe and Kuo's, up to
21201 dimensions), so the unscrambled sequence is PyTorch's exactly; a scrambled one is
drawn from fusegrad's generator (``seed`` or the global one), so its values differ from
PyTorch's, as every random stream does."""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from .ir import dtypes as D
from .runtime.tensor import Tensor

__all__ = ["SobolEngine"]


class SobolEngine:
    """``SobolEngine(dimension, scramble=False, seed=None)``: ``draw(n)`` returns the next
    ``n`` points of the ``dimension``-dimensional Sobol sequence as an (n, dimension) tensor."""
    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension: int, scramble: bool = False, seed: Optional[int] = None) -> None:
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError(f"Supported range of dimensionality for SobolEngine is [1, {self.MAXDIM}]")
        self.dimension, self.scramble, self.seed = dimension, scramble, seed
        self.reset()

    def _engine(self):
        from scipy.stats import qmc  # (imported on first use, as scipy.special elsewhere)
        rng = None
        if self.scramble:
            from .runtime.factory import randint
            seed = self.seed if self.seed is not None else int(randint(0, 2 ** 31 - 1, (1,)).item())
            rng = np.random.default_rng(seed)
        return qmc.Sobol(self.dimension, scramble=self.scramble, rng=rng, bits=self.MAXBIT)

    def draw(self, n: int = 1, out: Optional[Tensor] = None, dtype=None) -> Tensor:
        """The next ``n`` points (the default dtype's, or ``dtype``), written into ``out`` if given."""
        from .runtime.factory import tensor
        with warnings.catch_warnings():  # (SciPy's balance warning: PyTorch's draw() says nothing)
            warnings.simplefilter("ignore", UserWarning)
            points = self._sobol.random(n) if n else np.zeros((0, self.dimension))
        self.num_generated += n
        t = tensor(points, dtype=dtype if dtype is not None else D.get_default_dtype())
        if out is not None:
            out.resize_as_(t).copy_(t)
            return out
        return t

    def draw_base2(self, m: int, out: Optional[Tensor] = None, dtype=None) -> Tensor:
        """The next ``2 ** m`` points; the total drawn must stay a power of 2 (the sequence's
        balance properties need it)."""
        n = 2 ** m
        total = self.num_generated + n
        if total & (total - 1):
            raise ValueError("The balance properties of Sobol' points require n to be a power of 2. "
                             f"{self.num_generated} points have been previously generated, then: "
                             f"n={self.num_generated}+2**{m}={total}. If you still want to do this, please use "
                             "'SobolEngine.draw()' instead.")
        return self.draw(n, out, dtype)

    def reset(self) -> "SobolEngine":
        """Back to the first point."""
        self._sobol = self._engine()
        self.num_generated = 0
        return self

    def fast_forward(self, n: int) -> "SobolEngine":
        """Skip the next ``n`` points."""
        self._sobol.fast_forward(n)
        self.num_generated += n
        return self

    def __repr__(self) -> str:
        parts = [f"dimension={self.dimension}"] + (["scramble=True"] if self.scramble else []) + (
            [f"seed={self.seed}"] if self.seed is not None else [])
        return f"SobolEngine({', '.join(parts)})"
