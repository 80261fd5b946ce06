"""DLPack exchange, the *_copy functions, nonzero_static, dim_order, the device predicates and
the sym_* helpers, against PyTorch."""
import numpy as np
import pytest
import torch

import fusegrad as fg


def _both(f):
    return f(fg), f(torch)


@pytest.mark.parametrize("call", [
    lambda T, x: T.view_copy(x, (4, 3)), lambda T, x: T.permute_copy(x, (1, 0)), lambda T, x: T.t_copy(x),
    lambda T, x: T.select_copy(x, 1, 2), lambda T, x: T.slice_copy(x, 1, 1, 4, 2),
    lambda T, x: T.split_copy(x, 3, 1)[1], lambda T, x: T.unbind_copy(x)[2], lambda T, x: T.diagonal_copy(x),
    lambda T, x: T.expand_copy(x[:1], (2, 4)), lambda T, x: T.unsqueeze_copy(x, 0), lambda T, x: T.alias_copy(x),
    lambda T, x: T.unfold_copy(x, 1, 2, 2), lambda T, x: T.nonzero_static(x[0] - 1, size=4),
    lambda T, x: T.nonzero_static(x > 5, size=2, fill_value=-7),
])
def test_copies_are_the_views_values_in_memory_of_their_own(call):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got, want = call(fg, fg.tensor(x)), call(torch, torch.tensor(x))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    src = fg.tensor(x)
    out = call(fg, src)
    if out.numel() and out.dtype == fg.float32:
        out.view(-1)[0] = -100.0
        assert src.numpy().min() == 0


def test_copy_gradients_and_dim_order_and_predicates():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    grads = []
    for T in (fg, torch):
        w = T.tensor(x, requires_grad=True)
        (T.transpose_copy(w, 0, 1) * T.tensor(x.T)).sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_array_equal(*grads)
    a, b = _both(lambda T: T.ones(2, 3, 4, 5).permute(0, 2, 3, 1).dim_order())
    assert a == b
    t = fg.ones(2)
    assert t.const_data_ptr() == t.data_ptr()
    assert not any([t.is_mps, t.is_xpu, t.is_nested, t.is_quantized, t.is_sparse_csr, t.is_mkldnn])
    assert [fg.sym_int(3.7), fg.sym_max(3, 5), fg.sym_min(3, 5), fg.sym_not(True), fg.sym_ite(False, 1, 2),
            fg.sym_sum([1, 2])] == [torch.sym_int(3.7), torch.sym_max(3, 5), torch.sym_min(3, 5), torch.sym_not(True),
                                    torch.sym_ite(False, 1, 2), torch.sym_sum([1, 2])]
    assert fg.get_device_module("cpu") is fg.cpu


def test_dlpack_shares_memory_both_ways():
    a = np.arange(4, dtype=np.float32)
    t = fg.from_dlpack(a)
    a[0] = 7
    assert t.tolist() == [7, 1, 2, 3]
    assert fg.from_dlpack(fg.to_dlpack(t)).tolist() == [7, 1, 2, 3]
    assert torch.from_dlpack(fg.tensor([3.0, 4.0])).tolist() == [3, 4]
    assert fg.from_dlpack(torch.tensor([5.0, 6.0])).tolist() == [5, 6]
    with pytest.raises(BufferError, match="require gradient"):
        fg.tensor([1.0], requires_grad=True).__dlpack__()


def test_clone_in_a_memory_format_the_tensor_has_is_still_a_copy():
    for x, fmt in ((fg.arange(4.0), fg.contiguous_format),
                   (fg.ones(1, 2, 3, 3).contiguous(memory_format=fg.channels_last), fg.channels_last)):
        y = x.clone(memory_format=fmt)
        y.fill_(-1.0)
        assert x.min().item() >= 0 and y.is_contiguous(memory_format=fmt)


def test_broadcast_to_takes_sizes_as_the_method_does():
    x = np.arange(3, dtype=np.float32)
    for call in (lambda T, t: t.broadcast_to(2, 3), lambda T, t: t.broadcast_to((2, 3)),
                 lambda T, t: T.broadcast_to(t, (2, 3))):
        np.testing.assert_array_equal(call(fg, fg.tensor(x)).numpy(), call(torch, torch.tensor(x)).numpy())


def test_legacy_storages_and_from_numpy_refusals_as_pytorchs():
    buf = bytes(range(12))
    for T in (fg, torch):
        img = T.ByteTensor(T.ByteStorage.from_buffer(buf))  # (older torchvision's to_tensor of a PIL image)
        assert img.view(2, 2, 3).permute(2, 0, 1).tolist() == torch.arange(12).view(2, 2, 3).permute(2, 0, 1).tolist()
        assert T.FloatTensor(T.FloatStorage([1, 2.5])).tolist() == [1.0, 2.5] and len(T.FloatStorage(3)) == 3
        assert isinstance(T.ones(2).untyped_storage(), T.UntypedStorage)
        with pytest.raises(ValueError, match="negative"):
            T.from_numpy(np.arange(4)[::-1])
        with pytest.raises(TypeError, match="dims"):
            T.flip(T.ones(2))


def test_in_place_remainder_and_floor_division_and_formats_of_another_rank():
    for T in (fg, torch):
        y = T.tensor([5, 7])
        z = y
        y %= 3
        w = T.tensor([5.0, 7.0])
        v = w
        w //= 2
        assert y is z and z.tolist() == [2, 1] and w is v and v.tolist() == [2.0, 3.0]
        assert not T.ones(3, 4).is_contiguous(memory_format=T.channels_last)
        assert not T.ones(2, 3, 4, 5).is_contiguous(memory_format=T.channels_last_3d)
        with pytest.raises(RuntimeError, match="required rank 4"):
            T.ones(3).contiguous(memory_format=T.channels_last)


def test_random_integer_factories_take_requires_grad_as_pytorchs():
    """(the channels-last tutorial's ``torch.randint(1, 10, (2, 8, 4, 4), dtype=torch.float32,
    requires_grad=True)``)"""
    for T in (fg, torch):
        assert T.randint(1, 10, (2, 3), dtype=T.float32, requires_grad=True).requires_grad
        assert T.randperm(3, dtype=T.float64, requires_grad=True).requires_grad
        with pytest.raises(RuntimeError, match="floating point"):
            T.randint(0, 5, (2,), requires_grad=True)
