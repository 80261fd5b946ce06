"""``fusegrad.linalg``: the parts of ``torch.linalg`` that fusegrad has."""
from .runtime.linalg import (LinAlgError, cholesky, cond, det, eigh, eigvalsh, inv, linalg_cross as cross,
                             linalg_qr as qr, linalg_svd as svd, matrix_exp, matrix_norm, matrix_power, matrix_rank,
                             multi_dot, norm, pinv, slogdet, solve, solve_triangular, svdvals, vecdot, vector_norm)
from .runtime.linalg_more import (cholesky_ex, diagonal, eig, eigvals, inv_ex, lstsq, lu, lu_factor, lu_factor_ex,
                                  lu_solve, matmul, solve_ex, tensorinv, tensorsolve, vander)
from .runtime.linalg_packed import householder_product, ldl_factor, ldl_factor_ex, ldl_solve

__all__ = ["LinAlgError", "cholesky", "cond", "cross", "det", "eigh", "eigvalsh", "inv", "matrix_exp", "matrix_norm",
           "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular",
           "svd", "svdvals", "vecdot", "vector_norm", "cholesky_ex", "diagonal", "eig", "eigvals", "inv_ex", "lstsq",
           "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "solve_ex", "tensorinv", "tensorsolve", "vander",
           "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve"]
