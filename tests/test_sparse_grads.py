"""Embedding(sparse=True) gives the weight a sparse COO gradient, as PyTorch's (one entry
per looked-up index, padding_idx's left out, summed as sparse across backwards and
lookups); SGD, Adagrad and SparseAdam take it (the others refuse, with PyTorch's errors);
compiled steps with one match eager."""
import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

W = np.random.default_rng(0).standard_normal((10, 4))


def _train(T):
    out = []
    for name, kw in [("SparseAdam", {"lr": 0.1}), ("SGD", {"lr": 0.1}),
                     ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}), ("Adagrad", {"lr": 0.1}),
                     ("Adam", {}), ("Adagrad", {"weight_decay": 0.1}), ("SGD", {"lr": 0.1, "weight_decay": 0.1}),
                     ("RMSprop", {})]:
        e = T.nn.Embedding(10, 4, sparse=True, padding_idx=0)
        with T.no_grad():
            e.weight.copy_(T.tensor(W, dtype=T.float32))
        lin = T.nn.Linear(4, 1)
        with T.no_grad():
            lin.weight.fill_(0.5)
            lin.bias.fill_(0.1)
        opt, opt2 = getattr(T.optim, name)(e.parameters(), **kw), T.optim.SGD(lin.parameters(), lr=0.1)
        try:
            for step in range(4):
                idx = T.tensor([[1, 2, 1, 0], [3, 3, 5, 2]][step % 2])
                opt.zero_grad()
                opt2.zero_grad()
                ((lin(e(idx)) ** 2).mean() + e(T.tensor([7, 1])).sum() * 0.1).backward()
                opt.step()
                opt2.step()
            out.append(np.round(e.weight.detach().numpy(), 5).tolist())
        except RuntimeError as ex:
            out.append(str(ex))
    lin = T.nn.Linear(2, 2)
    opt = T.optim.SparseAdam(lin.parameters())
    lin(T.ones(2)).sum().backward()
    with pytest.raises(RuntimeError) as ex:
        opt.step()
    return out + [str(ex.value)]


def test_optimizers_on_sparse_gradients_as_pytorchs():
    assert _train(fg) == _train(torch)


def test_the_gradient_is_sparse_and_sums_as_pytorchs():
    def grads(T):
        e = T.nn.Embedding(10, 3, sparse=True, padding_idx=0)
        with T.no_grad():
            e.weight.copy_(T.tensor(W[:, :3], dtype=T.float32))
        e(T.tensor([1, 2, 1, 0])).sum().backward()
        first = (e.weight.grad.is_sparse, e.weight.grad._nnz(), e.weight.grad._indices().tolist(),
                 e.weight.grad._values().tolist())
        e(T.tensor([[3, 1]])).pow(2).sum().backward()
        g = e.weight.grad
        e2 = T.nn.Embedding(4, 2, sparse=True, scale_grad_by_freq=True)
        try:
            e2(T.tensor([1, 1])).sum().backward()
        except RuntimeError as ex:
            refused = str(ex)
        return first, g._nnz(), g.coalesce().indices().tolist(), np.round(g.to_dense().numpy(), 5).tolist(), refused
    assert grads(fg) == grads(torch)


def test_a_compiled_step_with_a_sparse_embedding_matches_eager():
    results = []
    for compiled in (False, True):
        e = fg.nn.Embedding(10, 4, sparse=True)
        with fg.no_grad():
            e.weight.copy_(fg.tensor(W, dtype=fg.float32))
        opt = fg.optim.SparseAdam(e.parameters(), lr=0.1)

        def step(idx):
            opt.zero_grad()
            loss = (e(idx) ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        f = fg.compile(step) if compiled else step
        losses = [f(fg.tensor([[1, 2, 1], [3, 5, 2]][i % 2])).item() for i in range(4)]
        assert e.weight.grad.is_sparse  # (compiled too: the lookup runs eagerly, its gradient sparse)
        results.append((losses, e.weight.detach().numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-5)  # (float32 rounding)


def _bags(T):
    out = []
    for kw, inp, off, psw in [({"mode": "sum"}, [1, 2, 2, 5], [0, 2], None),
                              ({"mode": "mean"}, [1, 2, 2, 5, 0, 7], [0, 2, 2], None),
                              ({"mode": "sum", "padding_idx": 2}, [1, 2, 2, 5], [0, 1], None),
                              ({"mode": "sum"}, [[1, 3], [4, 4]], None, [[0.5, 2.0], [1.0, -1.0]]),
                              ({"mode": "mean"}, [[1, 3], [4, 0]], None, None)]:
        eb = T.nn.EmbeddingBag(10, 4, sparse=True, **kw)
        with T.no_grad():
            eb.weight.copy_(T.tensor(W, dtype=T.float32))
        y = eb(T.tensor(inp), T.tensor(off) if off is not None else None,
               per_sample_weights=T.tensor(psw) if psw is not None else None)
        (y * T.tensor(np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape)))).sum().backward()
        g = eb.weight.grad
        out.append((g.is_sparse, g._nnz(), g._indices().tolist(), np.round(g._values().numpy(), 5).tolist(),
                    np.round(y.detach().numpy(), 5).tolist()))
    return out


def test_embedding_bag_sparse_gradients_as_pytorchs():
    """One entry per index in a bag, in input order, scaled as the mode and per-sample
    weights scale it; the padding index left out."""
    assert _bags(fg) == _bags(torch)


def test_sparse_gradient_zeroing_selection_and_bags_compiled_as_torch():
    """zero_grad(set_to_none=False) empties a sparse gradient; torch.index_select takes a
    sparse tensor; a compiled fastText-style step (EmbeddingBag(sparse=True), SGD) keeps the
    gradient sparse and matches eager."""
    def program(T, compile_fn):
        e = T.nn.EmbeddingBag(10, 4, mode="mean", sparse=True)
        with T.no_grad():
            e.weight.copy_(T.tensor(W, dtype=T.float32))
        opt = T.optim.SGD(e.parameters(), lr=0.5)

        def step(tokens, offsets):
            opt.zero_grad()
            loss = (e(tokens, offsets) ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        f = compile_fn(step)
        losses = [f(T.tensor([1, 2, 4, 4, 7]), T.tensor([0, 2])).item() for _ in range(3)]
        out = [np.round(losses, 5).tolist(), e.weight.grad.is_sparse, np.round(e.weight.detach().numpy(), 5).tolist()]
        opt.zero_grad(set_to_none=False)
        out += [e.weight.grad.to_dense().abs().sum().item(), e.weight.grad._nnz()]
        s = T.sparse_coo_tensor(T.tensor([[0, 1], [1, 0]]), T.tensor([1.0, 2.0]), (2, 2))
        out.append(T.index_select(s, 0, T.tensor([1])).to_dense().tolist())
        return out
    assert program(fg, fg.compile) == program(fg, lambda f: f) == program(torch, lambda f: f)
