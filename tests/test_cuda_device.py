"""CUDA devices and tensors (fusegrad.device, .to/.cuda/.cpu, device= factories, fusegrad.cuda,
the mixed-device and numpy() errors, eager autograd and optimizers on CUDA tensors, compiled
training steps with backend="cuda").

Without a GPU, the errors are PyTorch's own (compared with torch's CPU build). The device tests
run on Numba's CUDA simulator, which must be chosen before numba.cuda is first imported: without
``FUSEGRAD_CUDA_SIM=1`` this module runs itself in a subprocess that sets it. The simulator is
slow (a Python thread per CUDA thread): sizes are tiny."""
import importlib.util
import io
import os

import numpy as np
import pytest

import fusegrad as fg
from helpers import run_on_cuda_simulator, subprocess_env

# FUSEGRAD_CUDA_TESTS=device: run on the real GPU in this process (benchmarks/gpu_check.py)
SIM = os.environ.get("FUSEGRAD_CUDA_SIM") == "1" or os.environ.get("FUSEGRAD_CUDA_TESTS") == "device"
HAVE_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None


def _err(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001  (AssertionError included: PyTorch's type)
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:0", "cuda:1", ("cuda", 1), ("cpu", 0)])
@pytest.mark.torch
def test_device_objects_print_and_compare_as_torch(spec, pt):
    args = spec if isinstance(spec, tuple) else (spec,)
    d, t = fg.device(*args), pt.device(*args)
    assert (repr(d), str(d), d.type, d.index) == (repr(t), str(t), t.type, t.index)
    assert (d == fg.device("cuda:0")) == (t == pt.device("cuda:0"))
    assert fg.device(0) == fg.device("cuda", 0)  # (torch's CPU build refuses an int: no accelerator)


@pytest.mark.parametrize("spec", ["foo", "cuda:-1", "cuda:x"])
@pytest.mark.torch
def test_bad_device_strings_raise_as_torch(spec, pt):
    assert _err(lambda: fg.device(spec)) == _err(lambda: pt.device(spec))


if not SIM:
    @pytest.mark.torch
    @pytest.mark.skipif(fg.cuda.is_available(), reason="a CUDA device is present")
    def test_without_cuda_the_errors_are_torchs(pt):
        cases = [lambda m: m.zeros(2).cuda(), lambda m: m.zeros(2, device="cuda"), lambda m: m.zeros(2).to("cuda"),
                 lambda m: m.ones(2, 2).to(m.device("cuda:0"), m.float64), lambda m: m.randn(3, device="cuda"),
                 lambda m: m.nn.Linear(2, 2).cuda(), lambda m: m.nn.Linear(2, 2).to("cuda"),
                 lambda m: m.cuda.current_device(), lambda m: m.cuda.synchronize(),
                 ]
        for case in cases:
            got, want = _err(lambda: case(fg)), _err(lambda: case(pt))
            assert got == want and want is not None, (got, want)
        assert (fg.cuda.is_available(), fg.cuda.device_count(), fg.cuda.memory_allocated(),
                fg.cuda.max_memory_allocated(), fg.cuda.is_initialized()) == \
               (pt.cuda.is_available(), pt.cuda.device_count(), pt.cuda.memory_allocated(),
                pt.cuda.max_memory_allocated(), pt.cuda.is_initialized())
        x = fg.zeros(2)
        assert x.device == fg.device("cpu") and not x.is_cuda and x.cpu() is x and x.to("cpu") is x
        assert fg.get_default_device() == fg.device("cpu")
        fg.set_default_device("cuda")  # as in PyTorch, checked when a factory uses it
        try:
            assert _err(lambda: fg.zeros(1)) == ("AssertionError", "Torch not compiled with CUDA enabled")
        finally:
            fg.set_default_device("cpu")

    @pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda not installed")
    def test_cuda_device_on_the_simulator():
        run_on_cuda_simulator(__file__)

    @pytest.mark.skipif(not HAVE_NUMBA_CUDA, reason="numba-cuda not installed")
    def test_numbas_own_simulator_switch_is_the_simulator_too():
        """NUMBA_ENABLE_CUDASIM=1 without FUSEGRAD_CUDA_SIM: the driver asks Numba's config
        whether it loaded the simulator, so views and data_ptr take the simulator's arrays."""
        import subprocess
        import sys
        script = ("import fusegrad as fg\n"
                  "b = fg.zeros(3, 4, device='cuda')\n"
                  "b.t()[3].mul_(2); b[1, 1:3].fill_(7.0); b.add_(1)\n"
                  "print(b.cpu().numpy().tolist(), b.data_ptr() == b[0].data_ptr())\n")
        env = subprocess_env(NUMBA_ENABLE_CUDASIM="1")
        env.pop("FUSEGRAD_CUDA_SIM", None)
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.strip() == "[[1.0, 1.0, 1.0, 1.0], [1.0, 8.0, 8.0, 1.0], [1.0, 1.0, 1.0, 1.0]] True"

else:
    import fusegrad.nn as nn
    import fusegrad.nn.functional as F

    CUDA = fg.device("cuda:0")

    def _close(a, b, tol=1e-5):
        np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=tol, atol=tol)

    def test_fusegrad_cuda_queries():
        n = fg.cuda.device_count()
        assert fg.cuda.is_available() and n >= 1
        assert fg.cuda.current_device() == 0 and fg.cuda.is_initialized()
        fg.cuda.set_device(0)
        fg.cuda.synchronize()
        fg.cuda.manual_seed(0)
        fg.cuda.manual_seed_all(0)
        fg.cuda.empty_cache()
        with fg.cuda.device(0):
            assert fg.cuda.current_device() == 0
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            fg.zeros(1, device=f"cuda:{n}")

    def test_transfers_round_trip_with_dtype_and_gradients():
        x = fg.randn(3, 4, dtype=fg.float64)
        c = x.cuda()
        assert c.device == CUDA and c.is_cuda and c.get_device() == 0 and x.get_device() == -1
        assert str(c.device) == "cuda:0" and c.dtype is fg.float64 and c.shape == x.shape
        np.testing.assert_array_equal(c.cpu().numpy(), x.numpy())
        assert c.to("cuda") is c and c.to(CUDA) is c and x.to("cpu") is x and c.cuda() is c
        for moved in (x.to("cuda"), x.to(CUDA), x.to(device="cuda:0"), x.to(fg.zeros(1, dtype=fg.float64).cuda()), fg.as_tensor(x, device="cuda")):
            assert moved.device == CUDA
            np.testing.assert_array_equal(moved.cpu().numpy(), x.numpy())
        both = x.to("cuda", fg.float32)
        assert both.device == CUDA and both.dtype is fg.float32
        back = c.to(fg.zeros(1, dtype=fg.float32))  # to(other): its device and dtype
        assert back.device == fg.device("cpu") and back.dtype is fg.float32
        leaf = fg.randn(3, requires_grad=True)
        y = leaf.cuda()
        assert type(y.grad_fn).__name__ == "ToCopyBackward0"
        (y * y).sum().backward()
        assert leaf.grad.device == fg.device("cpu")
        _close(leaf.grad, 2 * leaf)
        assert c.tolist() == x.tolist() and c[1, 2].item() == x[1, 2].item()

    def test_factories_take_device():
        for i, make in enumerate((lambda **k: fg.zeros(2, 3, **k), lambda **k: fg.ones(2, 3, **k), lambda **k: fg.empty(2, 3, **k),
                     lambda **k: fg.full((2, 3), 1.5, **k), lambda **k: fg.arange(5, **k),
                     lambda **k: fg.linspace(0, 1, 4, **k), lambda **k: fg.eye(3, **k),
                     lambda **k: fg.tensor([[1.0, 2.0]], **k))):
            c, h = make(device="cuda"), make(device="cpu")
            assert c.device == CUDA and h.device == fg.device("cpu") and c.dtype is h.dtype
            if i != 2:  # (empty's values are unspecified)
                np.testing.assert_array_equal(c.cpu().numpy(), h.numpy())
        c = fg.zeros(2, device="cuda")
        c.copy_(fg.tensor([1.0, 2.0]))  # copy_ crosses devices, as in PyTorch
        np.testing.assert_array_equal(c.cpu().numpy(), [1, 2])
        for rnd in (lambda **k: fg.rand(4, **k), lambda **k: fg.randn(4, **k), lambda **k: fg.randint(0, 9, (4,), **k)):
            fg.manual_seed(3)
            c = rnd(device="cuda")
            fg.manual_seed(3)
            h = rnd()
            assert c.device == CUDA
            np.testing.assert_array_equal(c.cpu().numpy(), h.numpy())  # one generator for every device
        base = fg.ones(2, 2, device="cuda")
        for like in (fg.zeros_like, fg.ones_like, fg.empty_like, fg.rand_like, fg.randn_like,
                     lambda t: fg.full_like(t, 2.0), lambda t: t.new_zeros(3), lambda t: t.new_tensor([1.0])):
            assert like(base).device == CUDA
        assert fg.zeros_like(base, device="cpu").device == fg.device("cpu")
        assert fg.normal(base, 1.0).device == CUDA and fg.normal(0.0, 1.0, (2,), device="cuda").device == CUDA
        assert (base.type(), base.cpu().type()) == ("torch.cuda.FloatTensor", "torch.FloatTensor")
        moved = base.cpu().type("torch.cuda.DoubleTensor")
        assert moved.device == CUDA and moved.dtype is fg.float64 and moved.type("torch.IntTensor").is_cpu
        with fg.device("cuda"):
            assert fg.zeros(2).device == CUDA and fg.get_default_device() == CUDA
        assert fg.zeros(2).device == fg.device("cpu")
        z = fg.zeros(2, 2, device="cuda", requires_grad=True)
        assert z.is_leaf and z.requires_grad and z.device == CUDA

    def test_numpy_mixed_devices_and_printing_errors_as_torch():
        c = fg.arange(6, dtype=fg.float32).reshape(2, 3).cuda()
        msg = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")  # torch/csrc/utils/tensor_numpy.cpp
        with pytest.raises(TypeError) as e:
            c.numpy()
        assert str(e.value) == msg
        with pytest.raises(TypeError):
            np.asarray(c)
        mixed = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
        for bad in (lambda: c + fg.ones(2, 3), lambda: fg.ones(2, 3) * c, lambda: c @ fg.ones(3, 2),
                    lambda: c.add_(fg.ones(2, 3)), lambda: fg.where(c > 0, c, fg.zeros(2, 3))):
            with pytest.raises(RuntimeError) as e:
                bad()
            assert mixed in str(e.value)
        assert (c + fg.tensor(1.0)).device == CUDA  # a 0-d CPU tensor is a scalar, as in PyTorch
        assert repr(c) == "tensor([[0., 1., 2.],\n        [3., 4., 5.]], device='cuda:0')"
        assert repr(fg.ones(2, device="cuda", requires_grad=True)) == \
            "tensor([1., 1.], device='cuda:0', requires_grad=True)"
        assert repr(fg.tensor(2, device="cuda")) == "tensor(2, device='cuda:0')"

    def test_numpy_written_ops_compute_on_the_device():
        v = np.array([0, 1, -1, np.inf, -np.inf, np.nan, 1e-9, 3], np.float32)
        w = np.array([1e-9, 1.00001, -1.1, np.inf, np.inf, np.nan, 0, 3], np.float32)
        c, d = fg.tensor(v, device="cuda"), fg.tensor(w, device="cuda")
        for f in (lambda a, b: fg.isclose(a, b), lambda a, b: fg.isclose(a, b, equal_nan=True),
                  lambda a, b: fg.isinf(a), lambda a, b: fg.isfinite(a), lambda a, b: fg.nan_to_num(a),
                  lambda a, b: fg.nan_to_num(a, 1.0, 2.0, 3.0), lambda a, b: (a > 0).all(dim=0),
                  lambda a, b: (a > 0).any(), lambda a, b: fg.tensor([[True, False]], device=a.device).all(1)):
            got, want = f(c, d), f(fg.tensor(v), fg.tensor(w))
            assert got.device == CUDA and got.dtype is want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
        assert fg.allclose(c, c, equal_nan=True) and not fg.allclose(c, d)
        f = fg.tensor(v[[0, 1, 2, 7]], device="cuda")
        assert fg.equal(f, f.clone()) and not fg.equal(f, f + 1)
        picked = f[f > 0]  # boolean-mask indexing: nonzero's count read on the host, as PyTorch
        assert picked.device == CUDA and picked.tolist() == [1.0, 3.0]
        assert fg.nonzero(f).device == CUDA and fg.nonzero(f).tolist() == [[1], [2], [3]]
        vals, inv, cnt = fg.unique(fg.tensor([3, 1, 3, 2], device="cuda"), return_inverse=True, return_counts=True)
        assert vals.device == inv.device == cnt.device == CUDA
        assert (vals.tolist(), inv.tolist(), cnt.tolist()) == ([1, 2, 3], [2, 0, 2, 1], [1, 1, 2])
        bits = f.view(fg.int32)
        assert bits.device == CUDA and bits.tolist() == v[[0, 1, 2, 7]].view(np.int32).tolist()
        assert bool(c[1] > 0) and not bool(c[2] > 0)
        import pickle
        back = pickle.loads(pickle.dumps(c))
        assert back.device == CUDA
        np.testing.assert_array_equal(back.cpu().numpy(), v)

    def test_inplace_views_and_copies_stay_on_the_device():
        base = fg.zeros(3, 4, device="cuda")
        base.add_(1)
        base[0] = 5.0
        base[1, 1:3].fill_(7.0)  # a view written in place reaches its base
        base.t()[3].mul_(2)
        row = base[2]
        row.copy_(fg.arange(4, dtype=fg.float32, device="cuda"))
        want = np.ones((3, 4), np.float32)
        want[0] = 5
        want[1, 1:3] = 7
        want[:, 3] *= 2
        want[2] = np.arange(4)
        np.testing.assert_array_equal(base.cpu().numpy(), want)
        assert base.device == CUDA and base._version > 0
        k = base.clone()
        assert k.device == CUDA and k.detach().device == CUDA and base.contiguous().device == CUDA
        k.zero_()
        assert base.sum().item() == want.sum() and k.abs().sum().item() == 0
        assert base.t().contiguous().is_contiguous() and base.t().contiguous().device == CUDA
        import copy
        assert copy.deepcopy(base).device == CUDA
        a = fg.randn(3, requires_grad=True, device="cuda")
        b = a * 1
        b[1] = 0.0  # CopySlices on the device
        b.sum().backward()
        np.testing.assert_array_equal(a.grad.cpu().numpy(), [1, 0, 1])

    def test_autograd_hooks_create_graph_and_grad_accumulation():
        x = fg.tensor([0.5, -1.0, 2.0], device="cuda", requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g.device) or g * 2)
        y = (x ** 3).sum()
        (g,) = fg.autograd.grad(y, x, create_graph=True)
        assert g.device == CUDA and seen == [CUDA]
        _close(g, 2 * 3 * x ** 2)
        g.sum().backward()
        assert seen == [CUDA, CUDA]
        _close(x.grad, 2 * 2 * 6 * x)  # the hook doubles g's derivative, and this gradient too
        before = x.grad.clone()
        (x * 2).sum().backward()
        _close(x.grad, before + 2 * 2)  # accumulated in place, on the device
        assert x.grad.device == CUDA

    def _mlp():
        fg.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))

    def test_module_to_moves_parameters_and_buffers():
        m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        m.cuda()
        assert all(p.device == CUDA for p in m.parameters()) and all(b.device == CUDA for b in m.buffers())
        m(fg.randn(5, 3, device="cuda")).sum().backward()
        assert all(p.grad.device == CUDA for p in m.parameters())
        assert m[1].running_mean.device == CUDA and m[1].num_batches_tracked.item() == 1
        m.to("cpu")
        assert all(p.device == fg.device("cpu") and p.grad.device == fg.device("cpu") for p in m.parameters())
        m.to(CUDA, fg.float64)
        assert m[0].weight.dtype is fg.float64 and m[0].weight.device == CUDA
        assert m[1].num_batches_tracked.dtype is fg.int64  # not floating: not cast
        m.cpu()
        assert m[1].running_var.device == fg.device("cpu")

    def test_mlp_with_adam_trains_on_cuda_as_on_cpu():
        fg.manual_seed(1)
        x, y = fg.randn(6, 5), fg.randint(0, 3, (6,))
        runs = []
        for dev in ("cpu", "cuda"):
            m = _mlp().to(dev)
            opt = fg.optim.Adam(m.parameters(), lr=0.05)
            xd, yd = x.to(dev), y.to(dev)
            losses = []
            for _ in range(5):
                opt.zero_grad()
                loss = F.cross_entropy(m(xd), yd)
                loss.backward()
                nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opt.step()
                losses.append(loss.item())
            assert all(p.device.type == dev for p in m.parameters())
            assert all(s["exp_avg"].device.type == dev for s in opt.state.values())
            runs.append((losses, [p.detach().cpu() for p in m.parameters()]))
        np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-5)
        for a, b in zip(runs[0][1], runs[1][1]):
            _close(a, b)

    @pytest.mark.parametrize("make", [lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                                      lambda ps: fg.optim.AdamW(ps, lr=0.05, amsgrad=True)])
    def test_optimizers_update_parameters_in_place_on_the_device(make):
        x = fg.randn(4, 5)
        runs = []
        for dev in ("cpu", "cuda"):
            m = _mlp().to(dev)
            before = [p._data for p in m.parameters()]
            opt = make(m.parameters())
            for _ in range(3):
                opt.zero_grad()
                m(x.to(dev)).pow(2).mean().backward()
                opt.step()
            assert all(p._data is b for p, b in zip(m.parameters(), before))  # the same arrays, updated
            runs.append([p.detach().cpu() for p in m.parameters()])
        for a, b in zip(*runs):
            _close(a, b)

    def test_checkpoint_recomputes_on_the_device():
        from fusegrad.utils.checkpoint import checkpoint
        m = _mlp().cuda()
        x = fg.randn(3, 5, device="cuda", requires_grad=True)
        out, aux = checkpoint(lambda t: (m(t), t.sum()), x, use_reentrant=False)
        out.sum().backward()  # aux unused: its gradient is made as zeros, on the device
        g_ckpt = x.grad.clone()
        x.grad = None
        m(x).sum().backward()
        _close(g_ckpt, x.grad)
        assert g_ckpt.device == CUDA

    def test_save_and_load_cuda_tensors():
        t = fg.arange(4, dtype=fg.float32, device="cuda")
        m = _mlp().cuda()
        buf = io.BytesIO()
        fg.save({"t": t, "sd": m.state_dict()}, buf)
        buf.seek(0)
        got = fg.load(buf)
        assert got["t"].device == CUDA and got["sd"]["0.weight"].device == CUDA
        np.testing.assert_array_equal(got["t"].cpu().numpy(), np.arange(4))
        buf.seek(0)
        cpu = fg.load(buf, map_location="cpu")
        assert cpu["t"].device == fg.device("cpu")
        _close(cpu["sd"]["2.bias"], m[2].bias)

    def test_memory_allocated_counts_live_tensors():
        fg.cuda.synchronize()
        before = fg.cuda.memory_allocated()
        t = fg.zeros(64, device="cuda")
        assert fg.cuda.memory_allocated() == before + 256
        assert fg.cuda.max_memory_allocated() >= before + 256
        del t
        assert fg.cuda.memory_allocated() == before

    def test_compiled_training_step_matches_the_cpu_backend():
        fg.manual_seed(2)
        x, y = fg.randn(4, 5), fg.randint(0, 3, (4,))
        runs = []
        for backend, dev in (("cpu", "cpu"), ("cuda", "cuda")):
            m = _mlp().to(dev)
            opt = fg.optim.Adam(m.parameters(), lr=0.05)

            def step(xb, yb):
                opt.zero_grad()
                loss = F.cross_entropy(m(xb), yb)
                loss.backward()
                opt.step()
                return loss

            f = fg.compile(step, backend=backend)
            xd, yd = x.to(dev), y.to(dev)
            losses = [f(xd, yd).item() for _ in range(5)]
            info = f.cache_info()
            assert info["fallbacks"] == 0 and not info["graph_breaks"], info
            runs.append((losses, [p.detach().cpu() for p in m.parameters()]))
        np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-4)
        for a, b in zip(runs[0][1], runs[1][1]):
            _close(a, b, 1e-4)
