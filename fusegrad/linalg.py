"""``fusegrad.linalg``: the parts of ``torch.linalg`` that fusegrad has."""
from .runtime.linalg import LinAlgError, cholesky, solve_triangular

__all__ = ["LinAlgError", "cholesky", "solve_triangular"]
