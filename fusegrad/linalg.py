"""``fusegrad.linalg``: the parts of ``torch.linalg`` that fusegrad has."""
from .runtime.linalg import (LinAlgError, cholesky, det, inv, linalg_cross as cross, linalg_qr as qr, matrix_exp,
                             matrix_norm, matrix_power, multi_dot, norm, slogdet, solve, solve_triangular, vecdot,
                             vector_norm)

__all__ = ["LinAlgError", "cholesky", "cross", "det", "inv", "matrix_exp", "matrix_norm", "matrix_power", "multi_dot",
           "norm", "qr", "slogdet", "solve", "solve_triangular", "vecdot", "vector_norm"]
