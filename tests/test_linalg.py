"""fusegrad.linalg.cholesky / solve_triangular and diagonal / diag_embed against PyTorch:
values, gradients, errors, vmap and forward-mode tangents."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_rng = np.random.default_rng(1)


def _spd(*batch, n=4):
    a = _rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("batch,upper", [((), False), ((2,), True), ((2, 3), False)])
def test_cholesky_matches_torch(batch, upper):
    a = _spd(*batch)
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    r, e = fg.linalg.cholesky(x, upper=upper), torch.linalg.cholesky(t, upper=upper)
    np.testing.assert_allclose(r.detach().numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = _rng.standard_normal(a.shape)
    (r * fg.tensor(w)).sum().backward()
    (e * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_cholesky_errors():
    with pytest.raises(fg.linalg.LinAlgError, match="not positive-definite"):
        fg.linalg.cholesky(fg.tensor([[1.0, 2.0], [2.0, 1.0]]))
    assert issubclass(fg.linalg.LinAlgError, RuntimeError)
    with pytest.raises(RuntimeError, match="square"):
        fg.linalg.cholesky(fg.ones(2, 3))


@pytest.mark.parametrize("upper,left,unit", [(False, True, False), (True, True, False), (False, False, True),
                                             (True, False, False)])
def test_solve_triangular_matches_torch(upper, left, unit):
    a = _rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = _rng.standard_normal((3, 2) if left else (2, 3))
    xa, xb = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    r = fg.linalg.solve_triangular(xa, xb, upper=upper, left=left, unitriangular=unit)
    e = torch.linalg.solve_triangular(ta, tb, upper=upper, left=left, unitriangular=unit)
    np.testing.assert_allclose(r.detach().numpy(), e.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = _rng.standard_normal(tuple(e.shape))
    (r * fg.tensor(w)).sum().backward()
    (e * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(xb.grad.numpy(), tb.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_gradcheck_composition_and_jvp():
    a = fg.tensor(_rng.standard_normal((3, 3)), requires_grad=True)
    b = fg.tensor(_rng.standard_normal((3, 2)), requires_grad=True)

    def f(a, b):  # solve with the Cholesky factor of a matrix built from a: log-det and a quadratic form
        lo = fg.linalg.cholesky(a @ a.mT + fg.eye(3, dtype=a.dtype))
        y = fg.linalg.solve_triangular(lo, b, upper=False)
        return fg.diagonal(lo).log().sum() + (y ** 2).sum()

    assert gradcheck(f, (a, b))
    ta, tb = torch.tensor(a.detach().numpy()), torch.tensor(b.detach().numpy())
    da, db = _rng.standard_normal((3, 3)), _rng.standard_normal((3, 2))

    def tf(a, b):
        lo = torch.linalg.cholesky(a @ a.mT + torch.eye(3, dtype=a.dtype))
        y = torch.linalg.solve_triangular(lo, b, upper=False)
        return torch.diagonal(lo).log().sum() + (y ** 2).sum()

    _, jv = fg.func.jvp(f, (a.detach(), b.detach()), (fg.tensor(da), fg.tensor(db)))
    _, tjv = torch.func.jvp(tf, (ta, tb), (torch.tensor(da), torch.tensor(db)))
    np.testing.assert_allclose(jv.numpy(), tjv.numpy(), rtol=1e-9)


def test_vmap_over_matrices():
    a = _spd(5, n=3)
    b = _rng.standard_normal((5, 3, 2))
    f = lambda a, b: fg.linalg.solve_triangular(fg.linalg.cholesky(a), b, upper=False)  # noqa: E731
    tf = lambda a, b: torch.linalg.solve_triangular(torch.linalg.cholesky(a), b, upper=False)  # noqa: E731
    np.testing.assert_allclose(fg.func.vmap(f)(fg.tensor(a), fg.tensor(b)).numpy(),
                               torch.vmap(tf)(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-10)
    np.testing.assert_allclose(fg.func.vmap(f, in_dims=(None, 0))(fg.tensor(a[0]), fg.tensor(b)).numpy(),
                               torch.vmap(tf, in_dims=(None, 0))(torch.tensor(a[0]), torch.tensor(b)).numpy(),
                               rtol=1e-10)


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 2), (-1, -1, -2), (2, 1, 2), (5, 0, 1)])
def test_diagonal_and_diag_embed_match_torch(offset, d1, d2):
    a = _rng.standard_normal((2, 3, 4))
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    r, e = fg.diagonal(x, offset, d1, d2), torch.diagonal(t, offset, d1, d2)
    np.testing.assert_array_equal(r.detach().numpy(), e.detach().numpy())
    assert tuple(x.diagonal(offset=offset, dim1=d1, dim2=d2).shape) == tuple(e.shape)
    w = _rng.standard_normal(tuple(e.shape))
    (r * fg.tensor(w)).sum().backward()
    (e * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    v = fg.tensor(a, requires_grad=True)
    tv = torch.tensor(a, requires_grad=True)
    r, e = fg.diag_embed(v, offset, d1, d2), torch.diag_embed(tv, offset, d1, d2)
    np.testing.assert_array_equal(r.detach().numpy(), e.detach().numpy())
    (r * fg.tensor(np.arange(e.numel()).reshape(tuple(e.shape)) * 1.0)).sum().backward()
    (e * torch.tensor(np.arange(e.numel()).reshape(tuple(e.shape)) * 1.0)).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), tv.grad.numpy())


def test_matmul_of_broadcast_and_strided_operands():
    """Operands whose matrices are neither row- nor column-major (a broadcast gradient with
    all strides 0, every other column, a batch of transposes) are made BLAS-ready first:
    the products are NumPy's."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = rng.standard_normal((8, 16)).astype(np.float32)
    c = rng.standard_normal((2, 4, 6)).astype(np.float32)
    t = fg.tensor
    cases = [(t(np.float32(2.0)).expand(5, 6), t(a), np.full((5, 6), 2.0, np.float32) @ a),
             (t(a)[:, ::2].t(), t(a[:, :3]), a[:, ::2].T @ a[:, :3]),
             (t(c).transpose(1, 2), t(a[:4, :5]), c.transpose(0, 2, 1) @ a[:4, :5]),
             (t(a), t(b)[:, ::2], a @ b[:, ::2]),
             (t(a), t(np.float32(1.0)).expand(8), a @ np.ones(8, np.float32))]
    for x, y, want in cases:
        assert not (x.is_contiguous() and y.is_contiguous())
        np.testing.assert_allclose(fg.matmul(x, y).numpy(), want, rtol=1e-5)
