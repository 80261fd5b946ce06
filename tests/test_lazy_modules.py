"""Lazy modules (``LazyModuleMixin``; LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*,
LazyInstanceNorm*) against PyTorch's: printed form, parameters, buffers and class before and
after the first call; forward values and gradients from the same weights; state dicts loaded
both ways (materializing an uninitialized module); the first call inside ``fusegrad.compile``."""
import pickle

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.nn.modules.lazy import LazyModuleMixin
from fusegrad.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytestmark = pytest.mark.torch

# (class name, constructor arguments, input shape)
CASES = [
    ("LazyLinear", (3,), (2, 5)),
    ("LazyConv1d", (4, 3), (2, 3, 9)),
    ("LazyConv2d", (4, 3), (3, 7, 8)),  # (unbatched: in_channels from dim 0)
    ("LazyConv3d", (2, 2), (1, 2, 4, 5, 6)),
    ("LazyConvTranspose1d", (4, 3), (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), (3, 4, 5)),
    ("LazyConvTranspose3d", (2, 2), (1, 2, 3, 4, 5)),
    ("LazyBatchNorm1d", (), (4, 3)),
    ("LazyBatchNorm2d", (), (2, 3, 4, 5)),
    ("LazyBatchNorm3d", (), (2, 3, 2, 3, 4)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (), (2, 3, 4, 5)),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 3, 4)),
]
IDS = [c[0] for c in CASES]


def _make(lib, name, args, **kwargs):
    return getattr(lib.nn, name)(*args, dtype=lib.float64, **kwargs)


def _input(shape):
    return np.random.default_rng(len(shape)).standard_normal(shape)


def _state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def _shapes(module):
    return {k: (tuple(v.shape), str(v.dtype).split(".")[-1]) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("name, args, shape", CASES, ids=IDS)
def test_materializes_as_torch(name, args, shape):
    """Uninitialized parameters and buffers before the first call; after it the same class,
    printed form, parameter and buffer shapes and dtypes as PyTorch's."""
    t, f = _make(torch, name, args), _make(fg, name, args)
    assert isinstance(f, LazyModuleMixin) and f.has_uninitialized_params()
    assert repr(f) == repr(t)
    assert list(f.state_dict()) == list(t.state_dict())
    assert [type(p).__name__ for p in f.parameters()] == [type(p).__name__ for p in t.parameters()]
    assert [type(b).__name__ for b in f.buffers()] == [type(b).__name__ for b in t.buffers()]
    params = list(f.parameters())  # (an optimizer holds these: they are materialized in place)
    x = _input(shape)
    t(torch.tensor(x))
    f(fg.tensor(x))
    assert type(f).__name__ == type(t).__name__ and not isinstance(f, LazyModuleMixin)
    assert repr(f) == repr(t)
    assert _shapes(f) == _shapes(t)
    assert all(p is q for p, q in zip(params, f.parameters()))
    assert [type(p).__name__ for p in f.parameters()] == ["Parameter"] * len(params)
    assert not any(is_lazy(b) for b in f.buffers())


@pytest.mark.parametrize("name, args, shape", CASES, ids=IDS)
def test_forward_and_gradients_from_torch_weights(name, args, shape):
    """Materialized by a first call, then given torch's weights (and running statistics): two
    training steps' outputs, input and parameter gradients and running statistics are torch's."""
    x = _input(shape)
    t, f = _make(torch, name, args), _make(fg, name, args)
    t(torch.tensor(x))
    f(fg.tensor(x))
    f.load_state_dict({k: fg.tensor(v) for k, v in _state(t).items()})
    for _ in range(2):
        got, want = [], []
        for lib, m, out in ((torch, t, want), (fg, f, got)):
            xt = lib.tensor(x, requires_grad=True)
            y = m(xt)
            (y * lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)))).sum().backward()
            out += [y.detach().numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in m.parameters()]
            m.zero_grad()
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    for k, v in _state(t).items():
        np.testing.assert_allclose(_state(f)[k], v, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, args, shape", [CASES[0], CASES[2], CASES[4], CASES[8]],
                         ids=[IDS[0], IDS[2], IDS[4], IDS[8]])
def test_state_dict_round_trip_with_torch(name, args, shape):
    """torch's initialized state dict loaded into an uninitialized fusegrad module materializes
    it (it stays lazy until its first call, as PyTorch's), and the other way round; the
    outputs then agree. An uninitialized state dict holds the uninitialized tensors."""
    x = _input(shape)
    t = _make(torch, name, args)
    t(torch.tensor(x))
    f = _make(fg, name, args)
    f.load_state_dict({k: fg.tensor(v) for k, v in _state(t).items()})
    assert not f.has_uninitialized_params() and type(f).__name__ == name
    assert _shapes(f) == _shapes(t)
    t.eval(), f.eval()
    np.testing.assert_allclose(f(fg.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    # (the inferred size is read from that call: PyTorch's conv and norm layers leave it 0)
    assert type(f).__name__ == type(t).__name__ and repr(f) == repr(t)

    back = _make(torch, name, args)
    back.load_state_dict({k: torch.tensor(v) for k, v in _state(f).items()})
    back.eval()
    np.testing.assert_allclose(back(torch.tensor(x)).detach().numpy(), f(fg.tensor(x)).detach().numpy(),
                               rtol=1e-12)

    lazy = _make(fg, name, args)
    sd, torch_sd = lazy.state_dict(), _make(torch, name, args).state_dict()
    assert [type(v).__name__ for v in sd.values()] == [type(v).__name__ for v in torch_sd.values()]
    again = _make(fg, name, args)
    again.load_state_dict(sd)
    assert again.has_uninitialized_params()


def test_dtype_conversion_keeps_buffers_uninitialized():
    """``.double()`` on a lazy norm layer changes the dtype its tensors will have, as PyTorch's."""
    for lib in (torch, fg):
        m = lib.nn.LazyBatchNorm1d().double()
        assert type(m.running_mean).__name__ == "UninitializedBuffer" and m.running_mean.dtype == lib.float64
        assert m.weight.dtype == lib.float64
        m(lib.ones(2, 3, dtype=lib.float64))
        assert m.running_mean.dtype == lib.float64 and tuple(m.running_var.shape) == (3,)


def test_uninitialized_tensors():
    """Their printed form, grad requirement, materialization, and a pickled lazy module (it stays lazy)."""
    m = pickle.loads(pickle.dumps(fg.nn.LazyBatchNorm2d(dtype=fg.float64)))
    assert type(m.weight) is UninitializedParameter and type(m.running_var) is UninitializedBuffer
    assert m.weight.dtype == fg.float64 and m.weight.requires_grad and m.has_uninitialized_params()
    m(fg.ones(2, 3, 1, 1, dtype=fg.float64))
    assert type(m) is fg.nn.BatchNorm2d and tuple(m.running_var.shape) == (3,)
    p, b = UninitializedParameter(dtype=fg.float64), UninitializedBuffer()
    assert repr(p) == "<UninitializedParameter>" and repr(b) == "<UninitializedBuffer>"
    assert p.requires_grad and not b.requires_grad and is_lazy(p) and is_lazy(b)
    p.materialize((2, 3))
    b.materialize((4,), dtype=fg.float64)
    assert type(p) is fg.nn.Parameter and p.dtype == fg.float64 and tuple(p.shape) == (2, 3)
    assert type(b) is fg.Tensor and b.dtype == fg.float64 and tuple(b.shape) == (4,)


def test_errors_as_torch():
    for lib in (torch, fg):
        with pytest.raises(RuntimeError, match="Expected 3D .unbatched. or 4D .batched. input to LazyConv2d"):
            lib.nn.LazyConv2d(4, 3)(lib.ones(2, 3))
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            lib.nn.LazyConv1d(4, 3, groups=2)(lib.ones(1, 3, 5))

    class Lazy(LazyModuleMixin, fg.nn.Module):
        pass
    with pytest.raises(NotImplementedError, match="initialize_parameters is not implemented for Lazy"):
        Lazy()(fg.ones(1))


@pytest.mark.parametrize("whole_model", [True, False], ids=["compiled-module", "compiled-function"])
def test_first_call_inside_compile_matches_eager(whole_model):
    """A model of lazy layers called first inside ``fusegrad.compile`` (the compiled module, whose
    input is the caller's tensor, or a function that hands it a traced value) materializes there
    (that call runs the initialization eagerly), becomes the plain layers and computes what the
    same model does eagerly, outputs and gradients, over calls that update the running statistics."""
    def build():  # (small: each compiled kernel costs time)
        return fg.nn.Sequential(fg.nn.LazyLinear(4, dtype=fg.float64), fg.nn.LazyBatchNorm1d(dtype=fg.float64),
                                fg.nn.ReLU(), fg.nn.LazyLinear(2, dtype=fg.float64))

    compiled_model, eager = build(), build()
    compiled = fg.compile(compiled_model) if whole_model else fg.compile(lambda x: compiled_model(x * 2))
    xs = [fg.tensor(np.random.default_rng(i).standard_normal((6, 5))) for i in range(3)]
    for x in xs:
        fg.manual_seed(0)  # (the first call initializes the parameters from the generator)
        got = compiled(x)
        fg.manual_seed(0)
        want = eager(x if whole_model else x * 2)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
        got.square().sum().backward()
        want.square().sum().backward()
    assert [type(m).__name__ for m in compiled_model] == ["Linear", "BatchNorm1d", "ReLU", "Linear"]
    assert compiled_model[0].in_features == 5 and compiled_model[1].num_features == 4
    for (k, p), q in zip(compiled_model.named_parameters(), eager.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
    for k, v in _state(eager).items():
        np.testing.assert_allclose(_state(compiled_model)[k], v, rtol=1e-10, atol=1e-12, err_msg=k)
