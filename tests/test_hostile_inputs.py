"""Hostile inputs: each raises a clear exception (or works) and never crashes the process."""
import time

import numpy as np
import pytest

import fusegrad as fg

BACKENDS = ["eager", "cpu"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_broadcasting_shapes(backend):
    f = fg.compile(lambda a, b: a + b, backend=backend)
    with pytest.raises(RuntimeError):
        f(fg.ones(3), fg.ones(4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_shapes_and_dtypes_recompile(backend):
    f = fg.compile(lambda a, b: (a * b).sum(), backend=backend)
    assert f(fg.ones(3), fg.ones(3)).item() == 3
    assert f(fg.ones(2, 2, dtype=fg.float64), fg.ones(2, dtype=fg.float64)).item() == 4
    out = f(fg.ones(3, dtype=fg.float32), fg.ones(3, dtype=fg.float64))
    assert out.dtype == fg.float64


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_number_of_args(backend):
    f = fg.compile(lambda a, b: a + b, backend=backend)
    with pytest.raises(TypeError):
        f(fg.ones(3))
    with pytest.raises(TypeError):
        f(fg.ones(3), fg.ones(3), fg.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_tensor_arguments(backend):
    f = fg.compile(lambda a, b: a * b, backend=backend)
    assert np.allclose(f(fg.ones(3), 2.0).numpy(), 2.0)
    with pytest.raises(TypeError):
        f(fg.ones(3), "two")
    with pytest.raises(TypeError):
        f(fg.ones(3), object())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), ()])
def test_empty_and_0d(backend, shape):
    f = fg.compile(lambda a: ((a.exp() * 2).sum(-1 if a.ndim else None) if a.ndim else a.exp() * 2), backend=backend)
    x = fg.ones(*shape, dtype=fg.float64, requires_grad=True) if shape else fg.tensor(1.0, requires_grad=True)
    out = f(x)
    ref = (x.detach().exp() * 2).sum(-1) if x.ndim else x.detach().exp() * 2
    assert tuple(out.shape) == tuple(ref.shape)
    assert np.allclose(out.detach().numpy(), ref.numpy())
    out.sum().backward()
    assert x.grad is not None and tuple(x.grad.shape) == shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_strides(backend):
    a = fg.arange(12, dtype=fg.float64).reshape(3, 4)
    f = fg.compile(lambda x, y: x * 2 + y, backend=backend)
    out = f(a.flip(0), a.flip(1))
    assert np.array_equal(out.numpy(), a.numpy()[::-1] * 2 + a.numpy()[:, ::-1])
    with pytest.raises(ValueError, match="negative"):  # (as PyTorch: a tensor cannot share such memory)
        fg.from_numpy(np.arange(8.0)[::-2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank8(backend):
    x = fg.randn(*([2] * 8), dtype=fg.float64, requires_grad=True)
    f = fg.compile(lambda t: (t.sin() * t.transpose(0, 7)).sum(3), backend=backend)
    out = f(x)
    assert np.allclose(out.detach().numpy(), (x.detach().sin() * x.detach().transpose(0, 7)).sum(3).numpy())
    out.sum().backward()
    assert x.grad.shape == x.shape


def test_out_of_range_and_negative_indices():
    x = fg.arange(5.0)
    assert x[-1].item() == 4 and x[-5].item() == 0
    for bad in (5, -6, 100):
        with pytest.raises(IndexError):
            x[bad]
    with pytest.raises(IndexError):
        x[fg.tensor([0, 5])]
    with pytest.raises(IndexError):
        x[fg.tensor([-6])]
    with pytest.raises(IndexError):
        x[0, 0]
    assert x[fg.tensor([-1, -5])].tolist() == [4.0, 0.0]
    with pytest.raises((IndexError, RuntimeError)):
        fg.gather(x, 0, fg.tensor([7]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_indices_compiled(backend):
    f = fg.compile(lambda x, i: x[i] * 2, backend=backend)
    assert f(fg.arange(5.0), fg.tensor([-1, 0])).tolist() == [8.0, 0.0]
    with pytest.raises(IndexError):
        f(fg.arange(5.0), fg.tensor([0, 5]))
    g = fg.compile(lambda x: x[7] * 2, backend=backend)
    with pytest.raises(IndexError):
        g(fg.arange(5.0))


def test_huge_allocation_is_memory_error():
    t = time.time()
    with pytest.raises((MemoryError, RuntimeError)):
        fg.zeros(2 ** 40)
    with pytest.raises((MemoryError, RuntimeError)):
        fg.empty(2 ** 31, 2 ** 31)
    assert time.time() - t < 5


def test_requires_grad_on_integers_and_bad_dtype_mix():
    with pytest.raises(RuntimeError):
        fg.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError):
        fg.ones(2, 3) @ fg.ones(4, 2)


def test_executable_takes_any_layout_of_the_right_type():
    """Read-only, unaligned, non-contiguous and non-ndarray arguments of the right dtype and
    shape give the same results as a plain array; a wrong dtype is refused."""
    from fusegrad.codegen.cpu import CpuBackend
    from helpers import graph_of
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = CpuBackend().compile(graph_of(lambda a, b: a * 2 + b, [x, x]))
    want = x * 2 + x
    readonly = x.copy()
    readonly.flags.writeable = False
    raw = np.zeros(x.nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(3, 4)
    unaligned[...] = x
    assert not unaligned.flags.aligned
    strided = np.asfortranarray(x)
    for a in (readonly, unaligned, strided, memoryview(x.copy())):
        np.testing.assert_array_equal(exe(a, x)[0], want)
    with pytest.raises(ValueError, match="argument 1: expected float32"):
        exe(x, x.astype(np.float64))
