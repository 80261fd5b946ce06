"""PyTorch compatibility of the surface programs meet first: the legacy ``Tensor(...)``
constructor, ``contiguous()`` layouts, keyword names, printing, the no-GPU namespaces."""
import numpy as np
import pytest

import fusegrad as fg


@pytest.fixture(scope="module")
def pt():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


@pytest.mark.torch
@pytest.mark.parametrize("args", [(), (40, 1), (3,), ([1, 2],), ([[1.5, 2], [3, 4]],), (np.arange(3),),
                                  ("size",)])
def test_legacy_tensor_constructor_matches_torch(pt, args):
    def build(lib):
        a = tuple(lib.Size([2, 3]) if isinstance(x, str) else x for x in args)
        return lib.Tensor(*a)

    ours, theirs = build(fg), build(pt)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1] == "float32"
    if args and not isinstance(args[0], (int, str)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.torch
def test_legacy_tensor_constructor_errors_and_alias(pt):
    for args in [(3.5,), ([1], [2])]:
        with pytest.raises(TypeError):
            pt.Tensor(*args)
        with pytest.raises(TypeError):
            fg.Tensor(*args)
    x = fg.ones(2, requires_grad=True)
    y = fg.Tensor(x)  # an alias that stays in the graph, as in torch
    assert y.requires_grad
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3, 3])
    fg.set_default_dtype(fg.float64)
    assert fg.Tensor([1, 2]).dtype is fg.float64 and fg.Tensor(2, 2).dtype is fg.float64


@pytest.mark.torch
@pytest.mark.parametrize("perm", [(0, 2, 1), (2, 1, 0), (1, 0, 2)])
def test_contiguous_after_transpose_views(pt, perm):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = fg.tensor(a, requires_grad=True)
    y = x.permute(*perm).contiguous()
    assert y.is_contiguous()
    v = y.view(-1)
    expect = pt.tensor(a).permute(*perm).contiguous().view(-1)
    np.testing.assert_array_equal(v.detach().numpy(), expect.numpy())
    (v * fg.arange(24.0)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(24.0, dtype=np.float32).reshape(
        [a.shape[p] for p in perm]).transpose(np.argsort(perm)))
    t = fg.tensor(a).transpose(1, 2).contiguous().view(2, 12)
    np.testing.assert_array_equal(t.numpy(), a.transpose(0, 2, 1).reshape(2, 12))
    b = fg.tensor(a > 5).transpose(0, 2).contiguous()
    assert b.view(-1).tolist() == (a > 5).transpose(2, 1, 0).reshape(-1).tolist()


@pytest.mark.torch
def test_softplus_gradient_at_zero_matches_torch(pt):
    v = np.array([0.0, -0.0, 1e-8, -3.0, 5.0, 25.0, -30.0], dtype=np.float32)
    for beta in (1.0, 2.0):
        x, t = fg.tensor(v, requires_grad=True), pt.tensor(v, requires_grad=True)
        a, b = fg.nn.functional.softplus(x, beta=beta), pt.nn.functional.softplus(t, beta=beta)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=0)
        a.sum().backward()
        b.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)
