"""The meta device (tensors with a shape and dtype, no data) against PyTorch: factories,
``with device("meta")`` module construction, Module.to("meta") / to_empty, layers on meta
inputs, the torch.func model-ensembling tutorial's meta base model, printing, is_meta,
and the errors for reading values and for mixing devices."""
import copy
import pickle

import numpy as np
import pytest
import torch

import fusegrad as fg
import fusegrad.nn as fnn
from fusegrad.func import functional_call as fg_functional_call
from fusegrad.func import stack_module_state as fg_stack
from fusegrad.func import vmap as fg_vmap


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the type is what is compared)
        return type(e).__name__, str(e)
    return None


def _same_meta(a, b):
    """fusegrad tensor ``a`` is a meta tensor described as torch's ``b``."""
    assert a.is_meta and b.is_meta
    assert str(a.device) == str(b.device) == "meta"
    assert tuple(a.shape) == tuple(b.shape)
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    # (the stride of a dim of size 1 is never used, and PyTorch's kernels differ on it)
    assert [st for st, n in zip(a.stride(), a.shape) if n != 1] == [st for st, n in zip(b.stride(), b.shape) if n != 1]


@pytest.mark.parametrize("make", [
    lambda m: m.empty(3, 4, device="meta"),
    lambda m: m.zeros(2, 3, dtype=m.int64, device="meta"),
    lambda m: m.ones((), device="meta"),
    lambda m: m.randn(2, 5, device="meta"),
    lambda m: m.rand(4, device="meta", dtype=m.float64),
    lambda m: m.full((2, 2), 7, device="meta"),
    lambda m: m.arange(5, device="meta"),
    lambda m: m.arange(0.0, 1.0, 0.25, device="meta"),
    lambda m: m.tensor([[1.0, 2.0]], device="meta"),
    lambda m: m.empty_like(m.ones(2, 3), device="meta"),
    lambda m: m.zeros_like(m.empty(4, 1, device="meta")),
    lambda m: m.ones(2, 3).to("meta"),
])
def test_factories(make):
    _same_meta(make(fg), make(torch))


def test_default_device_and_format():
    fg.set_default_device("meta")
    torch.set_default_device("meta")
    try:
        _same_meta(fg.ones(2, 3), torch.ones(2, 3))
    finally:
        fg.set_default_device("cpu")
        torch.set_default_device(None)  # ("cpu" would leave a device mode: torch's l1_loss(weight=) drops it)
    assert not fg.ones(2).is_meta
    assert f"{fg.ones((), device='meta')}" == f"{torch.ones((), device='meta')}"


def test_load_state_dict_assign_materializes():
    with fg.device("meta"):
        fl = fg.nn.Linear(2, 3)
    ref = torch.nn.Linear(2, 3)
    fl.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()}, assign=True)
    assert not fl.weight.is_meta and isinstance(fl.weight, fnn.Parameter) and fl.weight.requires_grad
    x = np.ones((1, 2), np.float32)
    np.testing.assert_allclose(fl(fg.tensor(x)).detach().numpy(), ref(torch.tensor(x)).detach().numpy(), rtol=1e-6)


def test_is_meta_and_device():
    t = fg.empty(3, 4, device="meta")
    r = torch.empty(3, 4, device="meta")
    assert t.is_meta is r.is_meta is True
    assert fg.ones(2).is_meta is torch.ones(2).is_meta is False
    assert t.device == fg.device("meta") and repr(t.device) == repr(r.device)
    assert t.is_cpu is r.is_cpu and t.is_cuda is r.is_cuda
    assert t.data_ptr() == r.data_ptr()


@pytest.mark.parametrize("make", [
    lambda m: m.empty(3, 4, device="meta"),
    lambda m: m.empty(0, device="meta"),
    lambda m: m.ones((), device="meta"),
    lambda m: m.ones(2, device="meta", dtype=m.int64),
    lambda m: m.ones(2, 2, device="meta", dtype=m.float16),
    lambda m: m.ones(2, device="meta", requires_grad=True),
    lambda m: m.ones(2, device="meta", requires_grad=True) * 2,
])
def test_repr(make):
    assert repr(make(fg)) == repr(make(torch)).replace("torch.", "fusegrad.")


@pytest.mark.parametrize("op", [
    lambda m, x, y: x + y,
    lambda m, x, y: (x * 2.0).exp().sum(1),
    lambda m, x, y: x @ y.t(),
    lambda m, x, y: x.t(),
    lambda m, x, y: x[1:, ::2],
    lambda m, x, y: x.reshape(4, 3).mean(0, keepdim=True),
    lambda m, x, y: m.cat([x, y], 0),
    lambda m, x, y: x.unsqueeze(0).expand(2, 3, 4),
    lambda m, x, y: (x > y).to(m.int32),
    lambda m, x, y: x.softmax(-1),
    lambda m, x, y: x.argmax(1),
    lambda m, x, y: x + m.tensor(1.0),  # a 0-d CPU tensor passes as a scalar
    lambda m, x, y: x[m.tensor([2, 0])],  # CPU indices index a meta tensor
    lambda m, x, y: x.t().contiguous(),
    lambda m, x, y: x.clone().half(),
    lambda m, x, y: x.fill_(1.0),
    lambda m, x, y: x.zero_(),
    lambda m, x, y: m.nn.init.kaiming_uniform_(x),
    lambda m, x, y: x.normal_(),
    lambda m, x, y: x.copy_(m.ones(3, 4)),  # copy_ is the op that crosses devices
    lambda m, x, y: x.new_zeros(2),
    lambda m, x, y: copy.deepcopy(x),
    lambda m, x, y: pickle.loads(pickle.dumps(x)),
])
def test_ops_give_meta_results(op):
    fx, fy = fg.empty(3, 4, device="meta"), fg.empty(3, 4, device="meta")
    tx, ty = torch.empty(3, 4, device="meta"), torch.empty(3, 4, device="meta")
    _same_meta(op(fg, fx, fy), op(torch, tx, ty))


@pytest.mark.parametrize("read", [
    lambda m: m.empty(3, 4, device="meta").item(),
    lambda m: m.empty(1, device="meta").item(),
    lambda m: float(m.empty((), device="meta")),
    lambda m: bool(m.empty((), device="meta")),
    lambda m: m.empty(3, device="meta").numpy(),
    lambda m: m.empty(3, device="meta").tolist(),
    lambda m: m.empty(3, device="meta").cpu(),
    lambda m: m.empty(3, device="meta").to("cpu"),
])
def test_reading_values_raises(read):
    expected = _err(lambda: read(torch))
    assert expected is not None
    assert _err(lambda: read(fg)) == expected


@pytest.mark.parametrize("mix", [
    lambda m: m.empty(3, 4, device="meta") + m.ones(3, 4),
    lambda m: m.ones(3, 4) + m.empty(3, 4, device="meta"),
    lambda m: m.ones(3, 4) * m.empty(4, device="meta"),
])
def test_mixing_meta_and_cpu_raises(mix):
    expected = _err(lambda: mix(torch))
    assert expected is not None
    assert _err(lambda: mix(fg)) == expected


def _conv_net(m):
    nn = m.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5))


def test_construct_under_device_context_and_forward():
    with fg.device("meta"):
        fnet = _conv_net(fg)
        inner = fg.empty(2)
    with torch.device("meta"):
        tnet = _conv_net(torch)
    assert inner.is_meta and not fg.empty(2).is_meta  # the default device comes back after the block
    for (name, fp), (tname, tp) in zip(fnet.state_dict().items(), tnet.state_dict().items()):
        assert name == tname
        _same_meta(fp, tp)
    fx, tx = fg.randn(2, 3, 6, 6, device="meta"), torch.randn(2, 3, 6, 6, device="meta")
    fy, ty = fnet(fx), tnet(tx)
    _same_meta(fy, ty)
    assert type(fy.grad_fn).__name__ == type(ty.grad_fn).__name__


def test_linear_and_conv_on_meta_input():
    for make, shape in ((lambda m: m.nn.Linear(6, 3), (4, 6)), (lambda m: m.nn.Conv2d(2, 5, 3, stride=2), (1, 2, 7, 9))):
        fl, tl = make(fg).to("meta"), make(torch).to("meta")
        assert fl.weight.is_meta and isinstance(fl.weight, fnn.Parameter) and fl.weight.requires_grad
        _same_meta(fl(fg.empty(*shape, device="meta")), tl(torch.empty(*shape, device="meta")))


def test_backward_gives_meta_grads():
    w = fg.empty(3, 4, device="meta", requires_grad=True)
    tw = torch.empty(3, 4, device="meta", requires_grad=True)
    (w.exp() @ fg.empty(4, 2, device="meta")).sum().backward()
    (tw.exp() @ torch.empty(4, 2, device="meta")).sum().backward()
    _same_meta(w.grad, tw.grad)


def test_to_meta_then_to_empty_and_reinit():
    tnet = _conv_net(torch)
    fnet = _conv_net(fg)
    fnet.load_state_dict({k: fg.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    fnet.to("meta")
    tnet.to("meta")
    assert all(p.is_meta for p in fnet.parameters()) and all(b.is_meta for b in fnet.buffers())
    fnet.to_empty(device="cpu")
    tnet.to_empty(device="cpu")
    for (name, fp), tp in zip(fnet.state_dict().items(), tnet.state_dict().values()):
        assert not fp.is_meta and fp.device == fg.device("cpu"), name
        assert tuple(fp.shape) == tuple(tp.shape) and str(fp.dtype).split(".")[-1] == str(tp.dtype).split(".")[-1]
    # re-initialized from real values, the model computes as torch's
    torch.manual_seed(0)
    ref = _conv_net(torch)
    with torch.no_grad():
        tnet.load_state_dict(ref.state_dict())
    fnet.load_state_dict({k: fg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(fnet(fg.tensor(x)).detach().numpy(), tnet(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def _mlp_class(m):
    """The model-ensembling tutorial's SimpleMLP (smaller), for either library."""
    class SimpleMLP(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = m.nn.Linear(12, 8)
            self.fc2 = m.nn.Linear(8, 8)
            self.fc3 = m.nn.Linear(8, 3)

        def forward(self, x):
            x = x.flatten(1)
            x = m.nn.functional.relu(self.fc1(x))
            x = m.nn.functional.relu(self.fc2(x))
            return self.fc3(x)
    return SimpleMLP


def test_model_ensembling_tutorial():
    from torch.func import functional_call, stack_module_state, vmap
    torch.manual_seed(0)
    tmlp, fmlp = _mlp_class(torch), _mlp_class(fg)
    tmodels = [tmlp() for _ in range(4)]
    fmodels = [fmlp() for _ in range(4)]
    for fm, tm in zip(fmodels, tmodels):
        fm.load_state_dict({k: fg.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(1)
    minibatches = rng.standard_normal((4, 5, 3, 4)).astype(np.float32)
    minibatch = minibatches[0]

    def ensemble(m, models, stack, call, vmap_, data, same):
        params, buffers = stack(models)
        base_model = copy.deepcopy(models[0])
        base_model = base_model.to("meta")
        assert all(p.is_meta for p in base_model.parameters())

        def fmodel(params, buffers, x):
            return call(base_model, (params, buffers), (x,))
        dims = (0, 0, None) if same else (0, 0, 0)
        return vmap_(fmodel, in_dims=dims)(params, buffers, m.tensor(data)).detach().numpy()

    for data, same in ((minibatch, True), (minibatches, False)):
        got = ensemble(fg, fmodels, fg_stack, fg_functional_call, fg_vmap, data, same)
        want = ensemble(torch, tmodels, stack_module_state, functional_call, vmap, data, same)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_layers_made_on_the_meta_device_and_dropout_of_meta_input():
    """The ``device=`` of Linear, Bilinear, Conv2d and Embedding, and dropout's mask on its
    input's device, as torch's."""
    for make in (lambda T: T.nn.Linear(3, 4, device="meta"), lambda T: T.nn.Bilinear(2, 3, 4, device="meta"),
                 lambda T: T.nn.Conv2d(3, 4, 3, device="meta"), lambda T: T.nn.Embedding(5, 2, device="meta")):
        got, want = make(fg), make(torch)
        for (n, p), (tn, tp) in zip(got.named_parameters(), want.named_parameters()):
            assert n == tn and p.is_meta and tp.is_meta and tuple(p.shape) == tuple(tp.shape)
    out = fg.nn.functional.dropout(fg.empty(2, 3, device="meta"), 0.5)
    assert out.is_meta and tuple(out.shape) == (2, 3)
