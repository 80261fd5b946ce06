"""Operations on sparse embedding gradients and embedding inputs, as PyTorch's: a sparse
lookup and a dense term on one weight in one loss, in-place scaling / norm / pow /
sparse_mask / ``.grad`` assignment of a sparse gradient, weights-only loads of sparse
tensors, EmbeddingBag input checks, bincount's weight dtype, ``torch.embedding_bag`` and
``torch.embedding_renorm_``."""
import io

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _run(f):
    """``f()``'s result (tensors as (layout, dtype, dense values)), or its error's type name
    and message."""
    try:
        r = f()
    except Exception as ex:  # noqa: BLE001 - the error is what is compared
        return type(ex).__name__, str(ex)
    if isinstance(r, tuple):
        return tuple(_plain(x) for x in r)
    return _plain(r)


def _plain(r):
    if r.is_sparse:
        return "sparse", str(r.dtype).split(".")[-1], r.is_coalesced(), np.round(r.to_dense().tolist(), 5).tolist()
    return "strided", str(r.dtype).split(".")[-1], np.round(r.tolist(), 5).tolist()


def _sparse_grad(T):
    e = T.nn.Embedding(5, 2, sparse=True)
    with T.no_grad():
        e.weight.copy_(T.arange(10.0).view(5, 2))
    e(T.tensor([1, 1, 3])).sum().backward()
    return e


def _scaled_step(T):
    """A GradScaler step of a model with a sparse embedding (unscale_ checks its values)."""
    e = T.nn.Embedding(5, 2, sparse=True)
    with T.no_grad():
        e.weight.copy_(T.arange(10.0).view(5, 2))
    opt, scaler = T.optim.SGD(e.parameters(), lr=0.1), T.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale(e(T.tensor([1, 3])).sum()).backward()
    scaler.step(opt)
    scaler.update()
    return e.weight.detach(), T.tensor(scaler.get_scale())


def _grad_ops(T):
    def assign(g):
        p = _sparse_grad(T).weight
        p.grad = g.coalesce() * 0.5
        return p.grad

    def itruediv(g):
        e = _sparse_grad(T)
        e.weight.grad /= 2
        return e.weight.grad

    ops = {
        "norm": lambda g: g.norm(), "norm1": lambda g: g.norm(1), "norm_dims": lambda g: g.norm(dim=(0, 1)),
        "norm_dim": lambda g: g.norm(dim=1), "norm_keepdim": lambda g: g.norm(dim=(0, 1), keepdim=True),
        "div_": lambda g: g.div_(2), "div_0d": lambda g: g.div_(T.tensor(4.0)), "mul_": lambda g: g.mul_(0.5),
        "mul_dense": lambda g: g.mul_(T.arange(10.0).view(5, 2)), "div_dense": lambda g: g.div_(T.ones(5, 2)),
        "imul": lambda g: g.__imul__(3), "itruediv": lambda g: g.__itruediv__(2),
        "add_": lambda g: g.add_(g.coalesce(), alpha=2), "sub_": lambda g: g.sub_(g),
        "add_coalesced": lambda g: g.coalesce().add_(g.coalesce()), "iadd": lambda g: g.__iadd__(g),
        "add_dense": lambda g: g.add_(T.ones(5, 2)), "long_add_float": lambda g: g.long().add_(g),
        "pow": lambda g: g.pow(2), "pow_neg": lambda g: g.coalesce().pow(-1), "__pow__": lambda g: g ** 3,
        "pow0": lambda g: g.pow(0), "sparse_mask": lambda g: T.arange(10.0).view(5, 2).sparse_mask(g),
        "sparse_mask_f64": lambda g: T.ones(5, 2).double().sparse_mask(g.coalesce()),
        "sparse_mask_size": lambda g: T.ones(5, 3).sparse_mask(g), "assign": assign, "p.grad /= 2": itruediv,
        "same_object": lambda g: (g.div_(2) is g, g.mul_(2) is g, g.add_(g) is g),
        "dense_plus": lambda g: T.ones(5, 2) + g, "dense_add_": lambda g: T.ones(5, 2).add_(g, alpha=2),
        "torch.add": lambda g: T.add(T.ones(5, 2), g), "dense_plus_broadcast": lambda g: T.ones(2) + g,
        "grad_scaler": lambda g: _scaled_step(T),
    }
    return {k: (_run(lambda: f(_sparse_grad(T).weight.grad)) if k != "same_object"
                else f(_sparse_grad(T).weight.grad)) for k, f in ops.items()}


def test_operations_on_a_sparse_embedding_gradient_as_pytorchs():
    got, want = _grad_ops(fg), _grad_ops(torch)
    for k in want:
        if want[k][0] in ("RuntimeError", "NotImplementedError", "TypeError"):  # (the error type; messages differ)
            assert got[k][0] == want[k][0], (k, got[k], want[k])
        else:
            assert got[k] == want[k], k


def _graphs(T):
    """A sparse lookup plus an L2 term of the whole table in one loss: a dense gradient."""
    e = T.nn.Embedding(5, 2, sparse=True)
    with T.no_grad():
        e.weight.copy_(T.arange(10.0).view(5, 2))
    (e(T.tensor([0, 3, 3])).sum() + 0.1 * e.weight.pow(2).sum()).backward()
    one = _plain(e.weight.grad)
    (e.weight.pow(2).sum() + e(T.tensor([1])).sum()).backward()  # (dense first, then the sparse term)
    return one, _plain(e.weight.grad)


def _loads(T):
    e = T.nn.Embedding(5, 2, sparse=True)
    e(T.tensor([1, 3, 1])).sum().backward()
    out = []
    for obj in [e.weight.grad, T.sparse_coo_tensor(T.tensor([[0, 2]]), T.tensor([1.0, 2.0]), (4,)),
                {"g": e.weight.grad.coalesce()}]:
        b = io.BytesIO()
        T.save(obj, b)
        b.seek(0)
        t = T.load(b)
        t = t["g"] if isinstance(t, dict) else t
        out.append((_plain(t), t._nnz()))
    return out


def test_one_graph_sparse_and_dense_and_weights_only_loads_as_pytorchs():
    assert _graphs(fg) == _graphs(torch)
    assert _loads(fg) == _loads(torch)


def test_weights_only_load_checks_a_sparse_tensors_indices():
    s = fg.sparse_coo_tensor(fg.tensor([[0, 2]]), fg.tensor([1.0, 2.0]), (4,))
    s._size = (2,)  # (a file whose indices lie outside its size)
    b = io.BytesIO()
    fg.save(s, b)
    b.seek(0)
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        fg.load(b)


def _inputs(T):
    F = T.nn.functional
    W = T.arange(12.0).view(4, 3)
    cases = {
        "decreasing_offsets": lambda: F.embedding_bag(T.tensor([1, 2, 3]), W, T.tensor([0, 2, 1]), mode="sum"),
        "decreasing_mean": lambda: F.embedding_bag(T.tensor([1, 2, 3]), W, T.tensor([0, 1, 0]), mode="mean"),
        "psw_dtype": lambda: F.embedding_bag(T.tensor([1, 2]), W.double(), T.tensor([0]), mode="sum",
                                             per_sample_weights=T.ones(2)),
        "psw_half": lambda: F.embedding_bag(T.tensor([1, 2]), W, T.tensor([0]), mode="sum",
                                            per_sample_weights=T.ones(2).half()),
        "psw_same": lambda: F.embedding_bag(T.tensor([1, 2]), W.double(), T.tensor([0]), mode="sum",
                                            per_sample_weights=T.ones(2).double()),
        "embedding_1d": lambda: F.embedding(T.tensor([1]), T.ones(5)),
        "embedding_3d": lambda: F.embedding(T.tensor([1]), T.ones(2, 3, 4)),
        "torch.embedding_1d": lambda: T.embedding(T.ones(5), T.tensor([1])),
        "bincount_half": lambda: T.bincount(T.tensor([0, 1, 1]), weights=T.tensor([1.0, 2, 3]).half()),
        "bincount_bf16": lambda: T.bincount(T.tensor([0, 1, 1]), weights=T.tensor([1.0, 2, 3]).bfloat16()),
        "bincount_f32": lambda: T.bincount(T.tensor([0, 1, 1]), weights=T.tensor([1.0, 2, 3])),
        "bincount_int": lambda: T.bincount(T.tensor([0, 1, 1]), weights=T.tensor([1, 2, 3])),
        "renorm_": lambda: T.embedding_renorm_(W.clone(), T.tensor([3, 0]), 1.0, 2.0),
    }
    I, O = T.tensor([1, 2, 3, 0]), T.tensor([0, 2, 2])
    for mode in (1, 2):
        for pad in (None, 2):
            cases[f"bag{mode}_{pad}"] = lambda m=mode, p=pad: T.embedding_bag(W, I, O, False, m, False, None, False, p)
    cases["bag_psw"] = lambda: T.embedding_bag(W.double(), I, O, False, 0, False, T.ones(4).double())
    cases["bag_last"] = lambda: T.embedding_bag(W, I, T.tensor([0, 2, 4]), False, 1, False, None, True)
    cases["bag_int32"] = lambda: T.embedding_bag(W, I.int(), O.int(), False, 2)
    cases["bag_sum_out"] = lambda: T.embedding_bag(W, I, O, False, 0)[0]
    return {k: _run(f) for k, f in cases.items()}


def test_embedding_inputs_bincount_and_torch_level_ops_as_pytorchs():
    got, want = _inputs(fg), _inputs(torch)
    # decreasing offsets: torch's kernel reads out of its bag table, raising or returning garbage
    for k in ("decreasing_offsets", "decreasing_mean"):
        assert got.pop(k)[0] == "RuntimeError" and want.pop(k) is not None
    for k in want:
        if want[k][0] == "RuntimeError":
            assert got[k] == want[k], k
        else:
            assert got[k] == want[k], (k, got[k], want[k])
    # renorm_ gives the weight back, scaled in place
    W = fg.arange(12.0).view(4, 3)
    assert fg.embedding_renorm_(W, fg.tensor([3]), 1.0, 2.0) is W and abs(W[3].norm().item() - 1.0) < 1e-5
