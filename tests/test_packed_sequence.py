"""Packed sequences (``nn.utils.rnn``) and the recurrent layers over them, against PyTorch (float64
weights copied across): outputs, each sequence's final state at its own last step, and gradients."""
import itertools

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.nn.utils.rnn import (PackedSequence, invert_permutation, pack_padded_sequence, pack_sequence,
                                   pad_packed_sequence, pad_sequence, unpack_sequence, unpad_sequence)

torch = pytest.importorskip("torch")
from helpers import both, copy_weights, np_of  # noqa: E402
pytestmark = pytest.mark.torch
prnn = torch.nn.utils.rnn


def flat(out):
    if isinstance(out, (tuple, list)):  # a PackedSequence is a tuple: keep only its data
        if isinstance(out, (PackedSequence, prnn.PackedSequence)):
            return [out.data]
        return [t for o in out for t in flat(o)]
    return [out]


def assert_close(f, p, rtol=1e-9, atol=1e-10):
    assert tuple(f.shape) == tuple(p.shape)
    np.testing.assert_allclose(np_of(f), np_of(p), rtol=rtol, atol=atol)


def compare(fg_out, pt_out, fg_leaves, pt_leaves):
    """Every output equal, and the gradients of a random weighted sum of them equal."""
    fo, po = flat(fg_out), flat(pt_out)
    assert len(fo) == len(po)
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(tuple(p.shape)) for p in po]
    for f, p in zip(fo, po):
        assert_close(f, p)
    sum(((f * fg.tensor(w)).sum() for f, w in zip(fo, weights)), fg.tensor(0.0)).backward()
    sum(((p * torch.tensor(w)).sum() for p, w in zip(po, weights)), torch.tensor(0.0, dtype=torch.float64)).backward()
    for f, p in zip(fg_leaves, pt_leaves):
        assert p.grad is not None and f.grad is not None
        np.testing.assert_allclose(np_of(f.grad), np_of(p.grad), rtol=1e-8, atol=1e-9)


def assert_packed_equal(f, p):
    assert isinstance(f, PackedSequence)
    assert_close(f.data, p.data, rtol=0, atol=0)
    assert f.batch_sizes.tolist() == p.batch_sizes.tolist()
    assert f.batch_sizes.dtype == fg.int64 and f.batch_sizes.device.type == "cpu"
    for a, b in ((f.sorted_indices, p.sorted_indices), (f.unsorted_indices, p.unsorted_indices)):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.tolist() == b.tolist() and a.dtype == fg.int64


# ---------------------------------------------------------------- packing and padding
@pytest.mark.parametrize("batch_first, enforce_sorted, as_tensor", itertools.product([False, True], [True, False],
                                                                                     [False, True]))
def test_pack_pad_round_trip_matches_torch(batch_first, enforce_sorted, as_tensor):
    lengths = [5, 3, 2, 1] if enforce_sorted else [2, 5, 1, 3]
    rng = np.random.default_rng(0)
    shape = (4, 5, 3, 2) if batch_first else (5, 4, 3, 2)  # trailing dims beyond the features
    fx, px = both(rng.standard_normal(shape))
    fl = fg.tensor(lengths, dtype=fg.int64) if as_tensor else lengths
    pl = torch.tensor(lengths) if as_tensor else lengths
    fp = pack_padded_sequence(fx, fl, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pp = prnn.pack_padded_sequence(px, pl, batch_first=batch_first, enforce_sorted=enforce_sorted)
    assert_packed_equal(fp, pp)
    for total, value in ((None, 0.0), (7, -2.5)):
        fy, flen = pad_packed_sequence(fp, batch_first=batch_first, padding_value=value, total_length=total)
        py, plen = prnn.pad_packed_sequence(pp, batch_first=batch_first, padding_value=value, total_length=total)
        assert_close(fy, py, rtol=0, atol=0)
        assert flen.tolist() == plen.tolist() == lengths and flen.dtype == fg.int64
    w = rng.standard_normal(tuple(py.shape))
    (fy * fg.tensor(w)).sum().backward()
    (py * torch.tensor(w)).sum().backward()
    assert_close(fx.grad, px.grad, rtol=0, atol=0)


def test_pack_sequence_unpack_and_unpad_match_torch():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, 2)) for n in (2, 4, 1)]
    fs = [fg.tensor(a) for a in arrays]
    ps = [torch.tensor(a) for a in arrays]
    fp, pp = pack_sequence(fs, enforce_sorted=False), prnn.pack_sequence(ps, enforce_sorted=False)
    assert_packed_equal(fp, pp)
    for got, a in zip(unpack_sequence(fp), arrays):
        np.testing.assert_array_equal(np_of(got), a)
    sorted_arrays = sorted(arrays, key=len, reverse=True)
    assert_packed_equal(pack_sequence([fg.tensor(a) for a in sorted_arrays]),
                        prnn.pack_sequence([torch.tensor(a) for a in sorted_arrays]))
    for batch_first in (False, True):
        padded = pad_sequence(fs, batch_first=batch_first)
        got = unpad_sequence(padded, fg.tensor([2, 4, 1]), batch_first=batch_first)
        assert [tuple(g.shape) for g in got] == [(2, 2), (4, 2), (1, 2)]
        for g, a in zip(got, arrays):
            np.testing.assert_array_equal(np_of(g), a)
    # unpack_sequence is differentiable back to the sequences
    xs = [fg.tensor(a, requires_grad=True) for a in arrays]
    sum((s * (i + 1)).sum() for i, s in enumerate(unpack_sequence(pack_sequence(xs, enforce_sorted=False)))).backward()
    for i, x in enumerate(xs):
        assert np.all(np_of(x.grad) == i + 1)


def test_packed_sequence_is_a_named_tuple():
    p = pack_padded_sequence(fg.randn(3, 2, 4, dtype=fg.float64), [3, 1], enforce_sorted=False)
    data, batch_sizes, sorted_indices, unsorted_indices = p
    assert PackedSequence._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert data is p.data and batch_sizes.tolist() == [2, 1, 1]
    assert sorted_indices.tolist() == [0, 1] and unsorted_indices.tolist() == [0, 1]
    assert p.double() is p and p.to(fg.float64) is p and not p.is_cuda
    f = p.float()
    assert f.data.dtype == fg.float32 and f.batch_sizes is p.batch_sizes
    assert f.sorted_indices.tolist() == [0, 1]
    # the constructor inverts sorted_indices when unsorted_indices is not given
    q = PackedSequence(p.data, p.batch_sizes, fg.tensor([1, 2, 0]))
    assert q.unsorted_indices.tolist() == [2, 0, 1]
    assert invert_permutation(fg.tensor([2, 0, 3, 1])).tolist() == \
        prnn.invert_permutation(torch.tensor([2, 0, 3, 1])).tolist()
    assert invert_permutation(None) is None
    assert PackedSequence((p.data, p.batch_sizes)).sorted_indices is None


def test_packing_errors_match_torch():
    x = fg.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when `enforce_sorted` is True"):
        pack_padded_sequence(x, [2, 3, 1])
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        pack_sequence([fg.ones(2), fg.ones(3)])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack_padded_sequence(x, [4, 3, 0])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack_padded_sequence(x, [0, 0, 0], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to batch_size"):
        pack_padded_sequence(x, [4, 3])
    with pytest.raises(RuntimeError, match="1D CPU int64 tensor"):
        pack_padded_sequence(x, fg.tensor([[4], [3], [1]]))
    with pytest.raises(RuntimeError, match="exceeds"):  # PyTorch reads out of bounds here
        pack_padded_sequence(x, [5, 3, 1])
    with pytest.raises(ValueError, match="total_length"):
        pad_packed_sequence(pack_padded_sequence(x, [4, 2, 1]), total_length=3)


# ---------------------------------------------------------------- recurrent layers
def test_chatbot_tutorial_encoder_matches_torch():
    """The PyTorch chatbot tutorial's EncoderRNN: embedding -> pack -> bidirectional GRU -> pad -> sum of
    the two directions' outputs; the decoder starts from the forward half of the final hidden state."""
    vocab, hidden, layers = 11, 4, 2

    class Encoder:
        def __init__(self, lib):
            self.lib = lib
            self.embedding = lib.nn.Embedding(vocab, hidden, dtype=lib.float64)
            self.gru = lib.nn.GRU(hidden, hidden, layers, bidirectional=True, dtype=lib.float64)

        def __call__(self, input_seq, input_lengths, hidden_state=None):
            ru = self.lib.nn.utils.rnn
            packed = ru.pack_padded_sequence(self.embedding(input_seq), input_lengths)
            outputs, hidden_state = self.gru(packed, hidden_state)
            outputs, _ = ru.pad_packed_sequence(outputs)
            outputs = outputs[:, :, :hidden] + outputs[:, :, hidden:]
            return outputs, hidden_state[:layers]

        def parameters(self):
            return list(self.embedding.parameters()) + list(self.gru.parameters())

    fe, pe = Encoder(fg), Encoder(torch)
    copy_weights(fe.embedding, pe.embedding)
    copy_weights(fe.gru, pe.gru)
    rng = np.random.default_rng(0)
    lengths = [6, 4, 4, 2, 1]
    tokens = rng.integers(1, vocab, (6, 5))
    for b, n in enumerate(lengths):
        tokens[n:, b] = 0  # PAD
    fo = fe(fg.tensor(tokens), fg.tensor(lengths))
    po = pe(torch.tensor(tokens), torch.tensor(lengths))
    assert np.all(np_of(fo[0])[4:, 2:] == 0)  # padded steps are zero
    compare(fo, po, fe.parameters(), pe.parameters())


GRID = list(itertools.product(["RNN", "LSTM", "GRU"], [1, 2], [False, True]))


@pytest.mark.parametrize("cls, num_layers, bidirectional", GRID)
@pytest.mark.parametrize("batch_first, enforce_sorted, with_state", [(False, True, False), (True, False, True),
                                                                      (False, False, True), (True, True, False)])
def test_layers_over_packed_input_match_torch(cls, num_layers, bidirectional, batch_first, enforce_sorted,
                                              with_state):
    kw = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    pt = getattr(torch.nn, cls)(3, 4, dtype=torch.float64, **kw)
    fm = getattr(nn, cls)(3, 4, dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    rng = np.random.default_rng(0)
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    fx, px = both(rng.standard_normal((4, 5, 3) if batch_first else (5, 4, 3)))
    fp = pack_padded_sequence(fx, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    pp = prnn.pack_padded_sequence(px, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
    args_f, args_p, leaves_f, leaves_p = [fp], [pp], [fx], [px]
    if with_state:
        d = 2 if bidirectional else 1
        states = [both(rng.standard_normal((d * num_layers, 4, 4))) for _ in range(2 if cls == "LSTM" else 1)]
        leaves_f += [s[0] for s in states]
        leaves_p += [s[1] for s in states]
        args_f.append(tuple(s[0] for s in states) if cls == "LSTM" else states[0][0])
        args_p.append(tuple(s[1] for s in states) if cls == "LSTM" else states[0][1])
    fo, fh = fm(*args_f)
    po, ph = pt(*args_p)
    assert isinstance(fo, PackedSequence)
    assert fo.batch_sizes.tolist() == po.batch_sizes.tolist()
    assert (fo.unsorted_indices is None) == enforce_sorted
    fy, flen = pad_packed_sequence(fo, batch_first=batch_first)
    py, plen = prnn.pad_packed_sequence(po, batch_first=batch_first)
    assert flen.tolist() == plen.tolist() == lengths
    compare((fy, fh), (py, ph), leaves_f + list(fm.parameters()), leaves_p + list(pt.parameters()))


@pytest.mark.parametrize("cls, kw", [("LSTM", dict(proj_size=2, bidirectional=True, num_layers=2)),
                                     ("RNN", dict(nonlinearity="relu", bias=False, bidirectional=True))])
def test_layer_options_over_packed_input_match_torch(cls, kw):
    pt = getattr(torch.nn, cls)(3, 4, dtype=torch.float64, **kw)
    fm = getattr(nn, cls)(3, 4, dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    arrays = [np.random.default_rng(i).standard_normal((n, 3)) for i, n in enumerate((2, 4, 1))]
    fs, ps = zip(*(both(a) for a in arrays))
    fo = fm(pack_sequence(list(fs), enforce_sorted=False))
    po = pt(prnn.pack_sequence(list(ps), enforce_sorted=False))
    compare(fo, po, list(fs) + list(fm.parameters()), list(ps) + list(pt.parameters()))


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_packed_run_equals_running_each_sequence_alone(cls):
    fg.manual_seed(0)
    m = getattr(nn, cls)(3, 4, num_layers=2, bidirectional=True, dtype=fg.float64)
    seqs = [fg.randn(n, 3, dtype=fg.float64) for n in (3, 5, 2)]
    out, hn = m(pack_sequence(seqs, enforce_sorted=False))
    hn = hn[0] if cls == "LSTM" else hn
    for b, (seq, got) in enumerate(zip(seqs, unpack_sequence(out))):
        want, h = m(seq)  # unbatched
        h = h[0] if cls == "LSTM" else h
        np.testing.assert_allclose(np_of(got), np_of(want), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(np_of(hn[:, b]), np_of(h), rtol=1e-12, atol=1e-13)


def test_packed_input_errors_and_dropout():
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5, dtype=fg.float64)
    p = pack_sequence([fg.randn(3, 3, dtype=fg.float64), fg.randn(2, 3, dtype=fg.float64)])
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 2, 4\)"):
        m(p, fg.zeros(2, 3, 4, dtype=fg.float64))
    with pytest.raises(RuntimeError, match="input_size"):
        m(pack_sequence([fg.randn(3, 5, dtype=fg.float64)]))
    m.eval()
    np.testing.assert_array_equal(np_of(m(p)[0].data), np_of(m(p)[0].data))
    m.train()
    assert not np.allclose(np_of(m(p)[0].data), np_of(m(p)[0].data))


def test_empty_softmax_dims_pad_sequence_dtypes_and_argument_errors_as_torch():
    """softmax/log_softmax over an empty dim give an empty result (attention with no keys
    returns zeros: it raised IndexError); pad_sequence takes the first sequence's dtype and
    refuses 0-d sequences and an unknown side with RuntimeError; a GRU refuses a packed input
    of another dtype (ValueError) and ctc_loss float lengths (RuntimeError), as PyTorch."""
    torch = pytest.importorskip("torch")

    def run(m):
        F, rnn = m.nn.functional, m.nn.utils.rnn
        out = [tuple(F.softmax(m.zeros(3, 0), -1).shape), tuple(F.log_softmax(m.zeros(2, 0, 3), 1).shape)]
        q = m.ones(1, 2, 2, 2)
        out.append(F.scaled_dot_product_attention(q, m.zeros(1, 2, 0, 2), m.zeros(1, 2, 0, 2)).tolist())
        out.append(rnn.pad_sequence([m.tensor([1, 2]), m.tensor([4.5])]).tolist())
        out.append(str(rnn.pad_sequence([m.tensor([1, 2]), m.tensor([4.5])]).dtype).split(".")[-1])
        for f in (lambda: rnn.pad_sequence([m.zeros(2)], padding_side="middle"),
                  lambda: rnn.pad_sequence([m.tensor(1.0), m.tensor(2.0)]),
                  lambda: m.nn.GRU(4, 3)(rnn.pack_sequence([m.zeros(3, 4, dtype=m.float64)])),
                  lambda: F.ctc_loss(m.zeros(4, 1, 3).log_softmax(2), m.tensor([[1]]), m.tensor([4.0]), m.tensor([1]))):
            try:
                f()
                out.append("ok")
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
        return out
    assert run(fg) == run(torch)
