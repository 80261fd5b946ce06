"""Recurrent layers against PyTorch (weights copied across), float64 gradchecks, vmap and compile."""
import itertools

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
from helpers import both, copy_weights, np_of  # noqa: E402


def flat(out):
    """Every tensor in a nested tuple of outputs."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def compare(fg_out, pt_out, fg_leaves, pt_leaves, rtol=1e-9, atol=1e-10):
    """Outputs equal, and gradients of a random weighted sum of all outputs equal."""
    fo, po = flat(fg_out), flat(pt_out)
    assert len(fo) == len(po)
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(tuple(p.shape)) for p in po]
    for f, p in zip(fo, po):
        assert tuple(f.shape) == tuple(p.shape)
        np.testing.assert_allclose(np_of(f), np_of(p), rtol=rtol, atol=atol)
    sum(((f * fg.tensor(w)).sum() for f, w in zip(fo, weights)), fg.tensor(0.0)).backward()
    sum(((p * torch.tensor(w)).sum() for p, w in zip(po, weights)), torch.tensor(0.0, dtype=torch.float64)).backward()
    for f, p in zip(fg_leaves, pt_leaves):
        np.testing.assert_allclose(np_of(f.grad), np_of(p.grad), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("kind, bias, batched, with_state", itertools.product(
    ["RNNCell-tanh", "RNNCell-relu", "LSTMCell", "GRUCell"], [True, False], [True, False], [True, False]))
def test_cells_match_torch(kind, bias, batched, with_state):
    name, _, nl = kind.partition("-")
    kw = dict(nonlinearity=nl) if nl else {}
    pt = getattr(torch.nn, name)(3, 4, bias=bias, dtype=torch.float64, **kw)
    fm = getattr(nn, name)(3, 4, bias=bias, dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    rng = np.random.default_rng(0)
    lead = (2,) if batched else ()
    fx, px = both(rng.standard_normal(lead + (3,)))
    args_f, args_p = [fx], [px]
    leaves_f, leaves_p = [fx], [px]
    if with_state:
        states = [both(rng.standard_normal(lead + (4,))) for _ in range(2 if name == "LSTMCell" else 1)]
        leaves_f += [s[0] for s in states]
        leaves_p += [s[1] for s in states]
        if name == "LSTMCell":
            args_f.append((states[0][0], states[1][0]))
            args_p.append((states[0][1], states[1][1]))
        else:
            args_f.append(states[0][0])
            args_p.append(states[0][1])
    compare(fm(*args_f), pt(*args_p), leaves_f + list(fm.parameters()), leaves_p + list(pt.parameters()))


GRID = list(itertools.product(["RNN", "LSTM", "GRU"], [1, 2], [False, True], [False, True], [True, False]))


@pytest.mark.parametrize("cls, num_layers, bidirectional, batch_first, with_state", GRID)
def test_layers_match_torch(cls, num_layers, bidirectional, batch_first, with_state):
    kw = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first, dtype=torch.float64)
    pt = getattr(torch.nn, cls)(3, 4, **kw)
    fm = getattr(nn, cls)(3, 4, **{**kw, "dtype": fg.float64})
    copy_weights(fm, pt)
    rng = np.random.default_rng(0)
    fx, px = both(rng.standard_normal((2, 5, 3) if batch_first else (5, 2, 3)))
    leaves_f, leaves_p = [fx], [px]
    args_f, args_p = [fx], [px]
    if with_state:
        d = 2 if bidirectional else 1
        states = [both(rng.standard_normal((d * num_layers, 2, 4))) for _ in range(2 if cls == "LSTM" else 1)]
        leaves_f += [s[0] for s in states]
        leaves_p += [s[1] for s in states]
        args_f.append(tuple(s[0] for s in states) if cls == "LSTM" else states[0][0])
        args_p.append(tuple(s[1] for s in states) if cls == "LSTM" else states[0][1])
    compare(fm(*args_f), pt(*args_p), leaves_f + list(fm.parameters()), leaves_p + list(pt.parameters()))


@pytest.mark.parametrize("cls, kw", [("RNN", dict(nonlinearity="relu", bias=False)), ("LSTM", dict(proj_size=2)),
                                     ("LSTM", dict(proj_size=2, bidirectional=True, num_layers=2)),
                                     ("GRU", dict(bidirectional=True))])
def test_layer_options_and_unbatched_input(cls, kw):
    pt = getattr(torch.nn, cls)(3, 4, dtype=torch.float64, **kw)
    fm = getattr(nn, cls)(3, 4, dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    fm.flatten_parameters()  # as programs call it after loading weights (a no-op off cuDNN)
    pt.flatten_parameters()
    fx, px = both(np.random.default_rng(2).standard_normal((6, 3)))  # unbatched (L, H_in)
    compare(fm(fx), pt(px), [fx] + list(fm.parameters()), [px] + list(pt.parameters()))


def test_parameter_names_shapes_and_default_init():
    pt = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    fm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    assert [(k, tuple(v.shape)) for k, v in fm.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in pt.state_dict().items()]
    bound = 1 / np.sqrt(5)
    values = np.concatenate([np_of(p).ravel() for p in fm.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound
    assert repr(fm) == repr(pt)
    assert repr(nn.GRUCell(3, 4, bias=False)) == repr(torch.nn.GRUCell(3, 4, bias=False))
    # (an RNN prints no nonlinearity; its cell does)
    for kw in ({"nonlinearity": "relu"}, {"nonlinearity": "relu", "num_layers": 2}):
        assert repr(nn.RNN(3, 4, **kw)) == repr(torch.nn.RNN(3, 4, **kw))
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == repr(torch.nn.RNNCell(3, 4, nonlinearity="relu"))


def test_dropout_between_layers_only_in_training():
    fg.manual_seed(0)
    m = nn.GRU(3, 4, num_layers=3, dropout=0.5, dtype=fg.float64)
    x = fg.randn(5, 2, 3, dtype=fg.float64)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(np_of(a), np_of(b))
    m.train()
    c, d = m(x)[0], m(x)[0]
    assert not np.allclose(np_of(c), np_of(d))
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)


def test_errors_are_clear():
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match="input_size"):
        m(fg.randn(5, 2, 7))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 2, 4\)"):
        m(fg.randn(5, 2, 3), (fg.randn(1, 2, 4), fg.randn(2, 2, 4)))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(RuntimeError, match="sequence length"):
        m(fg.randn(0, 2, 3))


def test_lstm_state_not_a_pair_raises_as_torch():
    """An LSTM's state that is a lone tensor, a 1-tuple or a 3-tuple: torch's IndexError or RuntimeError."""
    for lib in (fg, torch):
        m, x, h = lib.nn.LSTM(3, 4), lib.zeros(5, 2, 3), lib.zeros(1, 2, 4)
        with pytest.raises(IndexError):
            m(x, h)
        with pytest.raises(IndexError):
            m(x, (h,))
        with pytest.raises(RuntimeError, match="lstm expects two hidden states"):
            m(x, (h, h, h))
        assert tuple(m(x, [h, h])[0].shape) == (5, 2, 4)


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_gradcheck_and_gradgradcheck(name):
    fg.manual_seed(0)
    cell = getattr(nn, name)(2, 3, dtype=fg.float64)
    x = fg.randn(2, 2, dtype=fg.float64, requires_grad=True)
    h = fg.randn(2, 3, dtype=fg.float64, requires_grad=True)
    names = [n for n, _ in cell.named_parameters()]

    def f(x, h, *ps):
        state = (h, h * 0.5) if name == "LSTMCell" else h
        out = fg.func.functional_call(cell, dict(zip(names, ps)), (x, state))
        return out[0] + out[1] if name == "LSTMCell" else out

    inputs = (x, h, *[p.detach().requires_grad_() for p in cell.parameters()])
    assert gradcheck(f, inputs)
    assert gradgradcheck(f, inputs)


def test_layer_gradcheck_bidirectional_lstm():
    fg.manual_seed(1)
    m = nn.LSTM(2, 2, num_layers=2, bidirectional=True, dtype=fg.float64)
    x = fg.randn(3, 1, 2, dtype=fg.float64, requires_grad=True)
    assert gradcheck(lambda x: m(x)[0], (x,))
    assert gradgradcheck(lambda x: m(x)[1][1], (x,))


def test_vmap_over_sequences_matches_loop():
    fg.manual_seed(0)
    m = nn.GRU(3, 4, dtype=fg.float64)
    xs = fg.randn(4, 5, 2, 3, dtype=fg.float64)
    got = fg.func.vmap(lambda x: m(x)[0])(xs)
    want = fg.stack([m(x)[0] for x in xs.unbind(0)])
    np.testing.assert_allclose(np_of(got), np_of(want), rtol=1e-12, atol=1e-13)


def test_compiled_lstm_training_matches_eager():
    fg.manual_seed(0)
    ref = nn.LSTM(3, 4, bidirectional=True, batch_first=True)
    head = nn.Linear(8, 1)
    x, y = fg.randn(2, 3, 3), fg.randn(2, 3, 1)

    def step(model, head):
        def run(x, y):
            out, (h, c) = model(x)
            loss = ((head(out) - y) ** 2).mean() + (h ** 2).mean() + c.abs().mean()
            loss.backward()
            return loss
        return run

    import copy
    cm, ch = copy.deepcopy(ref), copy.deepcopy(head)
    eager = step(ref, head)
    # the "eager" backend runs the traced, optimized graph op by op: it checks the trace is one graph with
    # the right values without paying Numba compiles for every unrolled step (the GPT test covers codegen)
    compiled = fg.compile(step(cm, ch), fullgraph=True, backend="eager")
    for _ in range(2):
        le, lc = eager(x, y), compiled(x, y)
        np.testing.assert_allclose(np_of(lc), np_of(le), rtol=1e-5, atol=1e-6)
        for pe, pc in zip(list(ref.parameters()) + list(head.parameters()),
                          list(cm.parameters()) + list(ch.parameters())):
            np.testing.assert_allclose(np_of(pc.grad), np_of(pe.grad), rtol=1e-4, atol=1e-6)
            pe.grad = pc.grad = None
    assert compiled.cache_info()["graph_breaks"] == []


def test_pad_sequence_matches_torch():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, 2)) for n in (3, 1, 4)]
    for batch_first, side, value in itertools.product([False, True], ["right", "left"], [0.0, -1.5]):
        got = nn.utils.rnn.pad_sequence([fg.tensor(a) for a in arrays], batch_first=batch_first,
                                        padding_value=value, padding_side=side)
        want = torch.nn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays], batch_first=batch_first,
                                               padding_value=value, padding_side=side)
        np.testing.assert_array_equal(np_of(got), want.numpy())
    xs = [fg.tensor(a, requires_grad=True) for a in arrays]
    nn.utils.rnn.pad_sequence(xs).sum().backward()
    assert all(np.all(np_of(x.grad) == 1.0) for x in xs)


def test_unrolled_steps_of_a_compiled_lstm_share_their_kernels():
    """Each step of an unrolled recurrent layer writes its own row of the stacked output; the
    row's offset is the program's, not the kernel's, so a longer sequence compiles no more
    kernels (each distinct kernel costs a Numba compile, ~0.5 s), and values match eager."""
    counts = []
    for steps in (3, 6):
        fg.manual_seed(0)
        m = nn.LSTM(4, 6, batch_first=True)
        c = fg.compile(lambda x: m(x)[0].pow(2).sum())
        x = fg.randn(2, steps, 4)
        c(x).backward()
        got = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        m(x)[0].pow(2).sum().backward()
        for g, w in zip(got, m.parameters()):
            np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)
        counts.append(c.lower(x).kernel_source().count("@njit"))
    assert counts[0] == counts[1], counts
