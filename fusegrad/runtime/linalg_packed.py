"""Factorizations in LAPACK's packed forms: ``torch.geqrf`` (Householder QR: reflectors below
the diagonal, ``R`` on and above it, and their scales ``tau``), ``linalg.householder_product``
(``torch.orgqr``: ``Q`` from them), ``torch.ormqr`` (a product with that ``Q``), and the
Bunch-Kaufman LDL^T (LDL^H) factorization ``linalg.ldl_factor(_ex)`` with ``ldl_solve``.

``geqrf`` and the LDL functions run LAPACK itself (SciPy's wrappers, the routines PyTorch's
CPU kernels call), so their packed outputs and pivots are PyTorch's; like PyTorch's, they
carry no gradient. ``householder_product`` and ``ormqr`` are composed from fusegrad's ops,
reflector by reflector, so gradients flow through them."""
from __future__ import annotations

import numpy as np

from ..ir.prims.linalg import LinAlgError
from . import linalg as L
from . import ops as O
from .exports import op
from .factory import eye
from .keywords import _type_name
from .sorting import _return_type
from .tensor import Tensor, wrap

__all__ = ["geqrf", "householder_product", "orgqr", "ormqr", "ldl_factor", "ldl_factor_ex", "ldl_solve"]

geqrf_type = _return_type("geqrf", ("a", "tau"))
ldl_factor_type = _return_type("linalg_ldl_factor", ("LD", "pivots"))
ldl_factor_ex_type = _return_type("linalg_ldl_factor_ex", ("LD", "pivots", "info"))

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
           np.dtype(np.complex128): "z"}


def _routine(a: np.ndarray, name: str, what: str):
    """The LAPACK routine ``?name`` for ``a``'s dtype (PyTorch's dtype error for the others).
    (SciPy's linear algebra is imported here, at first use: importing fusegrad stays light.)"""
    import scipy.linalg.lapack as lapack
    if a.dtype not in _PREFIX:
        raise RuntimeError(f"{what}: Expected a floating point or complex tensor as input. Got {_type_name(a.dtype)}")
    return getattr(lapack, _PREFIX[a.dtype] + name)


def _per_matrix(a: np.ndarray, fn, *outs) -> list:
    """``fn(matrix)`` for each matrix of ``a``'s batch, its results stacked back into that batch."""
    batch = a.shape[:-2]
    results = [fn(m) for m in a.reshape((-1,) + a.shape[-2:])]
    return [np.stack([r[i] for r in results]).reshape(batch + np.shape(results[0][i])) if results else
            np.zeros(batch + shape, dtype) for i, (shape, dtype) in enumerate(outs)]


# ---------------------------------------------------------------- Householder QR
@op
def geqrf(input: Tensor):  # noqa: A002
    """``(a, tau)``: ``A``'s QR factorization as LAPACK's ``geqrf`` packs it."""
    a = O.as_t(input)
    if a.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    x = a.detach().numpy()
    f = _routine(x, "geqrf", "torch.geqrf")
    k = min(x.shape[-2:])
    qr, tau = _per_matrix(x, lambda m: f(m)[:2], (x.shape[-2:], x.dtype), ((k,), x.dtype))
    return geqrf_type(wrap(np.ascontiguousarray(qr)), wrap(np.ascontiguousarray(tau)))


def _reflectors(a: Tensor, tau: Tensor, what: str):
    """Each reflector ``(v_i, tau_i)`` packed in ``a`` (``v_i``: 1 at row ``i``, ``a``'s column ``i``
    below it) and ``tau``, as column vectors."""
    if a.ndim < 2:
        raise RuntimeError(f"{what}: input must have at least 2 dimensions.")
    m, n = a.shape[-2:]
    k = tau.shape[-1]
    if tau.ndim != a.ndim - 1:
        raise RuntimeError(f"{what}: input.dim() - tau.dim() must be equal to 1 but got {a.ndim - tau.ndim}")
    if k > n:
        raise RuntimeError(f"{what}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    below = O.tril(a, -1)
    unit = wrap(np.eye(m, n, dtype=a._data.dtype))
    v = below + unit
    return [(O.narrow(v, -1, i, 1), O.narrow(tau, -1, i, 1).unsqueeze(-1)) for i in range(k)]


def _reflect(x: Tensor, v: Tensor, t: Tensor, adjoint: bool) -> Tensor:
    """``H x`` with ``H = I - t v v^H`` (``adjoint``: ``H^H x``, ``t`` conjugated)."""
    t = t.conj() if adjoint and t.dtype.is_complex else t
    return x - O.matmul(v * t, O.matmul(v.mH, x))


def householder_product(A: Tensor, tau: Tensor) -> Tensor:  # noqa: N803
    """The first ``n`` columns of ``H_1 H_2 ... H_k`` (``torch.linalg.householder_product``)."""
    a, t = O.as_t(A), O.as_t(tau)
    m, n = a.shape[-2:]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    q = O.expand(eye(m, n, dtype=a.dtype), tuple(a.shape))
    for v, s in reversed(_reflectors(a, t, "torch.linalg.householder_product")):
        q = _reflect(q, v, s, adjoint=False)
    return O.named(q, "LinalgHouseholderProductBackward0")


@op
def orgqr(input: Tensor, tau: Tensor) -> Tensor:  # noqa: A002
    """``linalg.householder_product`` under LAPACK's name."""
    return householder_product(input, tau)


@op
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True,  # noqa: A002
          transpose: bool = False) -> Tensor:
    """``Q other`` (``left=False``: ``other Q``; ``transpose``: ``Q^H``), ``Q = H_1 ... H_k`` the
    ``m x m`` product of the reflectors packed in ``input`` and ``tau``."""
    a, t, c = O.as_t(input), O.as_t(tau), O.as_t(other)
    reflectors = _reflectors(a, t, "torch.ormqr")
    if not left:  # C Q = (Q^H C^H)^H
        return O.named(ormqr(a, t, c.mH, left=True, transpose=not transpose).mH, "OrmqrBackward0")
    # Q C applies H_k first; Q^H C = H_k^H ... H_1^H C applies H_1^H first
    for v, s in (reflectors if transpose else reversed(reflectors)):
        c = _reflect(c, v, s, adjoint=transpose)
    return O.named(c, "OrmqrBackward0")


# ---------------------------------------------------------------- LDL
def _symmetric(A, what: str) -> np.ndarray:
    a = O.as_t(A)
    L._square(a, what)
    return a.detach().numpy()


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False):  # noqa: N803
    """``(LD, pivots, info)``: LAPACK's ``sytrf`` (``hermitian``: ``hetrf``) of the lower triangle
    of symmetric ``A``; ``info`` > 0 marks a singular ``D`` (``torch.linalg.ldl_factor_ex``)."""
    x = _symmetric(A, "torch.linalg.ldl_factor_ex")
    f = _routine(x, "hetrf" if hermitian and x.dtype.kind == "c" else "sytrf", "torch.linalg.ldl_factor_ex")
    n = x.shape[-1]
    ld, piv, info = _per_matrix(x, lambda m: f(m, lower=1) if n else (m, np.zeros(0, np.int32), 0),
                                (x.shape[-2:], x.dtype), ((n,), np.int32), ((), np.int32))
    ld = np.tril(ld)
    info = np.asarray(info, dtype=np.int32)
    if check_errors:
        _check_singular(info, "torch.linalg.ldl_factor_ex")
    return ldl_factor_ex_type(wrap(np.ascontiguousarray(ld)), wrap(np.asarray(piv, dtype=np.int32)), wrap(info))


def _check_singular(info: np.ndarray, what: str) -> None:
    """The error for the first matrix whose ``D`` is singular (``info`` > 0), as PyTorch raises."""
    if (info > 0).any():
        raise LinAlgError(f"{what}: The factorization could not be completed because the input is singular "
                          f"(D[{int(info[info > 0].reshape(-1)[0])}] is zero).")


def ldl_factor(A: Tensor, *, hermitian: bool = False):  # noqa: N803
    """``(LD, pivots)`` of ``ldl_factor_ex`` (``torch.linalg.ldl_factor``); a singular ``D`` raises."""
    ld, piv, info = ldl_factor_ex(A, hermitian=hermitian)
    _check_singular(info._data, "torch.linalg.ldl_factor")
    return ldl_factor_type(ld, piv)


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False) -> Tensor:  # noqa: N803
    """``X`` with ``A X = B`` from ``A``'s ``ldl_factor`` (LAPACK's ``sytrs``/``hetrs``)."""
    ld, b = _symmetric(LD, "torch.linalg.ldl_solve"), O.as_t(B).detach().numpy()
    if b.ndim < 2:
        raise RuntimeError("torch.linalg.ldl_solve: B must have at least 2 dimensions.")
    if b.shape[-2] != ld.shape[-1]:
        raise RuntimeError(f"torch.linalg.ldl_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({ld.shape[-2]}x{ld.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    f = _routine(ld, "hetrs" if hermitian and ld.dtype.kind == "c" else "sytrs", "torch.linalg.ldl_solve")
    batch = tuple(np.broadcast_shapes(ld.shape[:-2], b.shape[:-2], np.shape(pivots._data)[:-1]))
    ld = np.broadcast_to(ld, batch + ld.shape[-2:])
    piv = np.broadcast_to(pivots._data, batch + ld.shape[-1:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    flat = [f(m, p, r, lower=1)[0] for m, p, r in zip(ld.reshape((-1,) + ld.shape[-2:]), piv.reshape(-1, piv.shape[-1]),
                                                       b.reshape((-1,) + b.shape[-2:]))]
    x = np.stack(flat).reshape(batch + b.shape[-2:]) if flat else np.zeros(batch + b.shape[-2:], b.dtype)
    return wrap(np.ascontiguousarray(x))
