"""Sparse COO tensors against PyTorch: construction, coalescing (duplicates summed), empty
and rectangular tensors, indices/values, transposes, arithmetic, the sparse-dense products
(torch.sparse.mm, spmm, mm, matmul, @, either order), sparse.sum, sparse.softmax,
Tensor.to_sparse and printing; values and gradients (to the dense operand, to the values
and to a leaf sparse tensor), float64 gradcheck, create_graph, vmap; errors for dense-only
ops; a 2-layer GCN trained with Adam as torch trains it; and compiled GCN steps equal to
eager."""
import pickle

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.sparse  # noqa: F401  (binds fusegrad.sparse_coo_tensor, Tensor.to_sparse, ...)
from fusegrad.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:Sparse invariant checks")]  # torch's

# a 3x4 matrix with a duplicate coordinate (0, 2) and entries out of order
IDX = np.array([[0, 1, 1, 0, 2], [2, 0, 3, 2, 1]])
VAL = np.array([3.0, 4.0, 5.0, 6.0, -7.0])


def _pair(idx=IDX, val=VAL, size=(3, 4), dtype=np.float64, requires_grad=True, **kw):
    """The same sparse tensor in fusegrad and in torch, with values (leaves) that require grad."""
    out = []
    for lib in (fg, torch):
        v = lib.tensor(val.astype(dtype), requires_grad=requires_grad)
        out.append((lib.sparse_coo_tensor(lib.tensor(idx), v, size, **kw), v))
    return out


def _close(a, b, tol=1e-12):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _same_sparse(s, t, raw: bool = True, flag: bool = True):
    """``s`` (fusegrad) and ``t`` (torch) have the same size, coalesced form and (``flag``)
    coalesced flag, and (``raw``) the same entries in the same order."""
    assert tuple(s.shape) == tuple(t.shape)
    assert not flag or s.is_coalesced() == t.is_coalesced()
    pairs = [(s.coalesce(), t.coalesce())] + [(s, t)] * raw
    for a, b in pairs:
        assert a._nnz() == b._nnz()
        _close(a._indices(), b._indices())
        _close(a._values(), b._values())


def test_construction_and_attributes():
    (s, _), (t, _) = _pair()
    assert s.is_sparse and not fg.ones(2).is_sparse
    assert s.layout is fg.sparse_coo and fg.ones(2).layout is fg.strided
    assert repr(fg.sparse_coo) == "fusegrad.sparse_coo" and repr(fg.strided) == "fusegrad.strided"
    assert tuple(s.shape) == tuple(t.shape) == (3, 4) and tuple(s.size()) == (3, 4) and s.size(-1) == 4
    assert s.dim() == s.ndim == 2 and s.nnz() == s._nnz() == 5 and s.dtype is fg.float64
    assert s.device == fg.device("cpu") and s.sparse_dim() == 2 and s.dense_dim() == 0
    assert s.requires_grad and not s.is_leaf and t.requires_grad and not t.is_leaf
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    _same_sparse(s, t)
    _close(s.to_dense(), t.to_dense())  # the duplicate (0, 2) adds up
    # inferred size, float indices, a dtype, is_coalesced=, hybrid values, nnz <= 1, lists
    makers = [lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VAL)),
              lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX.astype(np.float32)), lib.tensor(VAL), (3, 5),
                                                dtype=lib.float32),
              lambda lib: lib.sparse_coo_tensor(lib.tensor([[1], [2]]), [2.0], (2, 3)),
              lambda lib: lib.sparse_coo_tensor(lib.tensor(IDX[:, :3]), lib.ones(3, 2), (2, 4, 2)),
              lambda lib: lib.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2], is_coalesced=True)]
    for make in makers:
        a, b = make(fg), make(torch)
        _same_sparse(a, b)
        assert a.dtype.name == str(b.dtype).split(".")[1] and a._indices().dtype is fg.int64
        _close(a.to_dense(), b.to_dense())
    with pytest.warns(UserWarning, match="deprecated"):
        legacy = fg.sparse.FloatTensor(fg.tensor(IDX), fg.tensor(VAL), (3, 4))
    with pytest.warns(UserWarning, match="deprecated"):
        _same_sparse(legacy, torch.sparse.FloatTensor(torch.tensor(IDX), torch.tensor(VAL).float(), (3, 4)))


def test_coalesce_indices_values():
    (s, v), (t, tv) = _pair()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.indices()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.values()
    assert not s._values().requires_grad and not t._values().requires_grad
    c, tc = s.coalesce(), t.coalesce()
    _same_sparse(c, tc)
    _close(c.indices(), tc.indices())
    assert c.coalesce() is c
    w = np.arange(1.0, 5.0)
    (c.values() * fg.tensor(w)).sum().backward()
    (tc.values() * torch.tensor(w)).sum().backward()
    _close(v.grad, tv.grad)


def test_empty_and_rectangular():
    (s, v), (t, tv) = _pair(np.zeros((2, 0), np.int64), np.zeros(0), (3, 5))
    _same_sparse(s, t)
    _same_sparse(s.coalesce(), t.coalesce())
    _close(s.to_dense(), t.to_dense())
    d = np.random.default_rng(0).standard_normal((5, 2))
    _close(fg.sparse.mm(s, fg.tensor(d)), torch.sparse.mm(t, torch.tensor(d)))
    assert repr(s) == repr(t).replace("torch.", "fusegrad.")
    # rectangular, both products, gradients to the values and the dense operand
    rng = np.random.default_rng(1)
    for size, dshape, left in [((3, 4), (4, 6), True), ((3, 4), (2, 3), False), ((3, 4), (4,), True),
                               ((3, 4), (3,), False)]:
        (s, v), (t, tv) = _pair(size=size)
        d = rng.standard_normal(dshape)
        df, dt = fg.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
        out_f = fg.matmul(s, df) if left else df @ s
        out_t = torch.matmul(t, dt) if left else dt @ t
        _close(out_f, out_t)
        g = rng.standard_normal(tuple(out_t.shape))
        out_f.backward(fg.tensor(g))
        out_t.backward(torch.tensor(g))
        _close(v.grad, tv.grad)
        _close(df.grad, dt.grad)


@pytest.mark.parametrize("name", ["sparse.mm", "spmm", "mm", "matmul", "@", "Tensor.mm", "Tensor.matmul"])
def test_products(name):
    rng = np.random.default_rng(2)
    d, e, m = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal((3, 3))
    outs, grads = [], []
    for lib, (s, v) in zip((fg, torch), _pair()):
        dl = lib.tensor(d, requires_grad=True)
        fn = {"sparse.mm": lib.sparse.mm, "spmm": lib.spmm, "mm": lib.mm, "matmul": lib.matmul,
              "@": lambda a, b: a @ b, "Tensor.mm": lambda a, b: a.mm(b),
              "Tensor.matmul": lambda a, b: a.matmul(b)}[name]
        out = fn(s, dl)
        (out * lib.tensor(np.arange(9.0).reshape(3, 3) - 4)).sum().backward()
        outs.append(out)
        grads.append((v.grad, dl.grad))
        if name in ("sparse.mm", "mm"):  # a dense left operand too
            outs.append(fn(lib.tensor(e), s))
        if name == "sparse.mm":
            outs.append(lib.sparse.addmm(lib.tensor(m), s, dl, beta=0.5, alpha=2.0))
    for a, b in zip(outs[:len(outs) // 2], outs[len(outs) // 2:]):
        _close(a, b)
    for a, b in zip(*grads):
        _close(a, b)
    assert type(outs[0].grad_fn).__name__ == type(outs[len(outs) // 2].grad_fn).__name__


def test_leaf_sparse_gradient():
    """A sparse tensor made with requires_grad=True: its .grad is the coalesced gradient."""
    rng = np.random.default_rng(3)
    d = rng.standard_normal((4, 2))
    res = []
    for lib in (fg, torch):
        s = lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VAL), (3, 4), requires_grad=True)
        assert s.is_leaf and s.requires_grad and s.grad is None
        lib.sparse.mm(s, lib.tensor(d)).sum().backward()
        s2 = lib.sparse_coo_tensor(lib.tensor(IDX), lib.tensor(VAL), (3, 4), requires_grad=True)
        (s2.to_dense() * lib.tensor(np.arange(12.0).reshape(3, 4))).sum().backward()
        res.append((s.grad, s2.grad))
    for a, b in zip(*res):  # (torch does not flag the gradient from to_dense coalesced)
        _same_sparse(a, b, flag=False)


def test_transpose_and_arithmetic():
    (s, v), (t, tv) = _pair()
    c, tc = s.coalesce(), t.coalesce()
    pairs = [(s.t(), t.t()), (s.transpose(0, 1), t.transpose(0, 1)), (s.T, t.T), (s * 2.5, t * 2.5),
             (3 * s, 3 * t), (s * fg.tensor(2.0, dtype=fg.float64), t * torch.tensor(2.0, dtype=torch.float64)),
             (-s, -t), (s / 4, t / 4), (s + s, t + t), (c + c, tc + tc), (c - s * 2, tc - t * 2),
             (c * 2, tc * 2), (s + c.t().t(), t + tc.t().t())]
    dense = np.random.default_rng(4).standard_normal((3, 4))
    pairs.append((s * fg.tensor(dense), t * torch.tensor(dense)))
    for a, b in pairs:  # (torch merges the entries of uncoalesced sums its own way)
        _same_sparse(a, b, raw=a.is_coalesced() or a._nnz() == s._nnz())
        _close(a.to_dense(), b.to_dense())
    sum(a.to_dense().sum() * k for k, (a, _) in enumerate(pairs)).backward()
    sum(b.to_dense().sum() * k for k, (_, b) in enumerate(pairs)).backward()
    _close(v.grad, tv.grad)
    with pytest.raises(RuntimeError, match="expected sizes"):
        s + fg.sparse_coo_tensor(fg.tensor(IDX), fg.tensor(VAL), (3, 5))
    with pytest.raises(RuntimeError, match="not supported"):
        s + fg.ones(3, 4)
    hybrid = fg.sparse_coo_tensor(fg.tensor(IDX), fg.ones(5, 2), (3, 4, 2))
    with pytest.raises(RuntimeError, match="transposed dimensions must be sparse"):
        hybrid.transpose(1, 2)


def test_sparse_sum():
    (s, v), (t, tv) = _pair()
    hs, ht = _pair(val=np.arange(10.0).reshape(5, 2), size=(3, 4, 2))
    outs = []
    for x, lib in ((s, fg), (t, torch)):
        outs.append([lib.sparse.sum(x), lib.sparse.sum(x, 0), lib.sparse.sum(x, 1), lib.sparse.sum(x, -1),
                     lib.sparse.sum(x, (0, 1)), x.sum()])
    for (x, _), lib in ((hs, fg), (ht, torch)):
        outs[lib is torch] += [lib.sparse.sum(x, 2), lib.sparse.sum(x, (0, 2)), lib.sparse.sum(x, (0, 1))]
    total = []
    for r in outs:
        dense = [o.to_dense() if o.is_sparse else o for o in r]
        total.append(sum((o * (k + 1)).sum() for k, o in enumerate(dense)))
    for a, b in zip(*outs):
        assert a.is_sparse == b.is_sparse
        if a.is_sparse:
            _same_sparse(a, b)
        _close(a.to_dense() if a.is_sparse else a, b.to_dense() if b.is_sparse else b)
    total[0].backward()
    total[1].backward()
    _close(v.grad, tv.grad)
    _close(hs[1].grad, ht[1].grad)


@pytest.mark.parametrize("log", [False, True])
def test_sparse_softmax(log):
    rng = np.random.default_rng(5)
    g = rng.standard_normal(4)
    hybrid = _pair(val=rng.standard_normal((5, 2)), size=(3, 4, 2))
    for (s, v), (t, tv) in (_pair(), hybrid):
        got, want = [], []
        for dim in range(s.dim()):
            got.append((fg.sparse.log_softmax if log else fg.sparse.softmax)(s, dim))
            want.append((torch.sparse.log_softmax if log else torch.sparse.softmax)(t, dim))
        for a, b in zip(got, want):
            _same_sparse(a, b)
        sum((a.values() * fg.tensor(g[:a._nnz()].reshape(-1, *[1] * a.dense_dim()))).sum() for a in got).backward()
        sum((b.values() * torch.tensor(g[:b._nnz()].reshape(-1, *[1] * b.dense_dim()))).sum() for b in want).backward()
        _close(v.grad, tv.grad)


def test_to_sparse():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    h = np.array([[[0.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[2.0, 3.0], [0.0, 0.0]]])
    res = []
    for lib in (fg, torch):
        xs, hs = lib.tensor(x, requires_grad=True), lib.tensor(h, requires_grad=True)
        outs = [xs.to_sparse(), xs.to_sparse_coo(), hs.to_sparse(1), hs.to_sparse(2), lib.tensor(2.0).to_sparse()]
        m = lib.tensor(np.arange(6.0).reshape(2, 3))
        (outs[0].to_dense() * m).sum().backward()
        lib.sparse.sum(outs[2]).backward()
        res.append((outs, xs.grad, hs.grad))
    for a, b in zip(res[0][0], res[1][0]):
        _same_sparse(a, b)
    _close(res[0][1], res[1][1])
    _close(res[0][2], res[1][2])
    s = fg.ones(2).to_sparse()
    assert s.to_sparse() is s and fg.ones(2).to_dense().is_sparse is False


def test_printing():
    (s, _), (t, _) = _pair(dtype=np.float32)
    cases = [(s, t), (s.coalesce(), t.coalesce()), (s.detach(), t.detach()), (s.double(), t.double()),
             (fg.sparse_coo_tensor(fg.tensor(IDX[:, :2]), fg.ones(2, 2), (3, 4, 2)),
              torch.sparse_coo_tensor(torch.tensor(IDX[:, :2]), torch.ones(2, 2), (3, 4, 2))),
             (fg.sparse_coo_tensor(fg.tensor(IDX), fg.tensor([1, 2, 3, 4, 5]), (3, 4)),
              torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor([1, 2, 3, 4, 5]), (3, 4))),
             (fg.sparse_coo_tensor(fg.tensor(IDX), fg.tensor(VAL), (3, 4), requires_grad=True),
              torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL), (3, 4), requires_grad=True))]
    for a, b in cases:  # ("fusegrad.sparse_coo" is longer than "torch.sparse_coo": lines may wrap elsewhere)
        assert repr(a).split() == repr(b).replace("torch.", "fusegrad.").split(), (repr(a), repr(b))
    a, b = cases[0]
    assert repr(a) == repr(b).replace("torch.", "fusegrad.")


def test_dense_only_operations_raise():
    (s, _), _ = _pair()
    with pytest.raises(NotImplementedError, match="aten::view"):
        s.view(12)
    with pytest.raises(NotImplementedError, match="aten::exp"):
        s.exp()
    with pytest.raises(NotImplementedError):
        s[0:1]  # (integers select: tests/test_sparse_graph_ops.py)
    with pytest.raises(AttributeError):
        s.no_such_attribute
    with pytest.raises(NotImplementedError, match="SparseCPU"):  # dense ops: never a result
        fg.relu(s)
    assert (fg.ones(3, 4, dtype=fg.float64) + s).layout == fg.strided  # (dense + sparse: dense, as torch's)
    with pytest.raises(NotImplementedError, match="SparseCPU"):
        np.asarray(s)
    with pytest.raises(RuntimeError, match="Expected dim 0 size 4, got 3"):
        fg.sparse.mm(s, fg.ones(3, 2, dtype=fg.float64))
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        fg.sparse.mm(s, fg.ones(4, 2))
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        fg.sparse_coo_tensor(fg.tensor(IDX), fg.tensor(VAL), (3, 3))
    with pytest.raises(RuntimeError, match="negative index"):
        fg.sparse_coo_tensor(fg.tensor(-IDX), fg.tensor(VAL), (3, 4))
    with pytest.raises(RuntimeError, match="same nnz"):
        fg.sparse_coo_tensor(fg.tensor(IDX), fg.tensor(VAL[:3]), (3, 4))
    assert not isinstance(s, fg.Tensor)  # (the design: see runtime/sparse_coo.py)


def test_gradcheck_create_graph_vmap():
    idx = fg.tensor(IDX)
    v = fg.tensor(VAL, requires_grad=True)
    d = fg.tensor(np.random.default_rng(6).standard_normal((4, 3)), requires_grad=True)
    assert gradcheck(lambda v, d: fg.sparse.mm(fg.sparse_coo_tensor(idx, v, (3, 4)), d), (v, d))
    assert gradcheck(lambda v, d: d.t() @ fg.sparse_coo_tensor(idx, v, (3, 4)).coalesce().t(), (v, d))
    assert gradcheck(lambda v: fg.sparse.softmax(fg.sparse_coo_tensor(idx, v, (3, 4)), 1).to_dense(), (v,))
    assert gradcheck(lambda d: d.to_sparse().to_dense() * d, (d,))
    # second order (create_graph) against torch
    res = []
    for lib in (fg, torch):
        vl = lib.tensor(VAL, requires_grad=True)
        dl = lib.tensor(d.detach().numpy(), requires_grad=True)
        out = lib.sparse.mm(lib.sparse_coo_tensor(lib.tensor(IDX), vl, (3, 4)), dl).pow(2).sum()
        g, = lib.autograd.grad(out, dl, create_graph=True)
        res.append(lib.autograd.grad((g * g).sum(), vl)[0])
    _close(*res, tol=1e-10)
    # vmap over the dense operand and over the values
    s = fg.sparse_coo_tensor(idx, fg.tensor(VAL), (3, 4))
    xb = fg.tensor(np.random.default_rng(7).standard_normal((5, 4, 3)))
    _close(fg.vmap(lambda x: fg.sparse.mm(s, x))(xb), fg.stack([fg.sparse.mm(s, x) for x in xb.unbind(0)]))
    wb = fg.tensor(np.random.default_rng(8).standard_normal((2, 5)))
    by_w = fg.vmap(lambda w: fg.sparse_coo_tensor(idx, w, (3, 4)) @ xb[0])(wb)
    _close(by_w, fg.stack([fg.sparse_coo_tensor(idx, w, (3, 4)) @ xb[0] for w in wb.unbind(0)]))


def test_pickle():
    (s, _), _ = _pair()
    r = pickle.loads(pickle.dumps(s.detach()))
    _same_sparse(r, s)


# ---------------------------------------------------------------- a GCN without PyG
N, F, H, C = 24, 6, 8, 3


def _graph():
    rng = np.random.default_rng(9)
    src, dst = rng.integers(0, N, 60), rng.integers(0, N, 60)
    ei = np.concatenate([np.stack([src, dst]), np.stack([dst, src]), np.stack([np.arange(N)] * 2)], 1)
    deg = np.bincount(ei[0], minlength=N).astype(np.float32)
    w = (1 / np.sqrt(deg[ei[0]] * deg[ei[1]])).astype(np.float32)  # symmetric normalization
    x = rng.standard_normal((N, F)).astype(np.float32)
    y = rng.integers(0, C, N)
    w1 = (rng.standard_normal((F, H)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((H, C)) * 0.4).astype(np.float32)
    return ei, w, x, y, w1, w2


def _gcn(lib, adj_kind: str, learn_edges: bool = False):
    """A 2-layer GCN, its Adam optimizer and its training step ``step(x, y) -> loss``."""
    ei, w, x, y, w1, w2 = _graph()
    if adj_kind == "to_sparse":
        dense = np.zeros((N, N), np.float32)
        np.add.at(dense, (ei[0], ei[1]), w)
        adj = lib.tensor(dense).to_sparse()
    else:
        adj = lib.sparse_coo_tensor(lib.tensor(ei), lib.tensor(w), (N, N))
    p1, p2 = lib.nn.Parameter(lib.tensor(w1)), lib.nn.Parameter(lib.tensor(w2))
    params = [p1, p2]
    if learn_edges:
        edge = lib.nn.Parameter(lib.tensor(w))
        params.append(edge)
    opt = lib.optim.Adam(params, lr=0.02)

    def step(x, y):
        opt.zero_grad()
        a = lib.sparse_coo_tensor(lib.tensor(ei), edge, (N, N)) if learn_edges else adj
        h = lib.relu(lib.sparse.mm(a, x @ p1))
        out = lib.spmm(a, h) @ p2 if adj_kind == "spmm" else a @ (h @ p2)
        loss = lib.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step, lib.tensor(x), lib.tensor(y), params


@pytest.mark.parametrize("adj_kind,learn_edges", [("coo", False), ("to_sparse", False), ("spmm", True)])
def test_gcn_trains_as_torch(adj_kind, learn_edges):
    (sf, xf, yf, pf), (st, xt, yt, ptr) = (_gcn(lib, adj_kind, learn_edges) for lib in (fg, torch))
    lf = [float(sf(xf, yf)) for _ in range(5)]
    lt = [float(st(xt, yt)) for _ in range(5)]
    np.testing.assert_allclose(lf, lt, rtol=1e-5, atol=1e-5)
    for a, b in zip(pf, ptr):
        _close(a, b, tol=1e-5)


def test_compiled_gcn_step_matches_eager():
    """Compiled training steps, one with the adjacency captured (built from learnable edge
    weights inside the step), one with it passed as an argument, equal eager's."""
    (eager, x, y, pe), (compiled, _, _, pc) = (_gcn(fg, "spmm", learn_edges=True) for _ in range(2))
    compiled = fg.compile(compiled)
    for _ in range(3):
        _close(compiled(x, y), eager(x, y), tol=1e-5)
    for a, b in zip(pc, pe):
        _close(a, b, tol=1e-5)
    assert compiled.cache_info()["graph_breaks"] == []
    ei, w, *_ = _graph()
    adj = fg.sparse_coo_tensor(fg.tensor(ei), fg.tensor(w), (N, N))
    lin = fg.nn.Linear(F, C)

    def fwd(a, x):
        a = a.coalesce()  # (the indices read at trace time: the compiled code guards their value)
        return fg.nn.functional.log_softmax(fg.sparse.mm(a, fg.relu(a @ lin(x))), 1)
    fwd_c = fg.compile(fwd)
    for a in (adj, adj, adj * 0.5):
        _close(fwd_c(a, x), fwd(a, x), tol=1e-5)
    assert fwd_c.cache_info()["graph_breaks"] == []
    adj._indices()[:, :2] = fg.tensor([[1, 2], [3, 4]])  # (new indices in place: the guard retraces)
    _close(fwd_c(adj, x), fwd(adj, x), tol=1e-5)

    def from_dense(m, x):  # to_sparse of a traced tensor reads its nonzeros: a graph break
        return fg.sparse.mm(m.to_sparse(), x).sum(1)
    dense = fg.tensor(np.diag(np.arange(N, dtype=np.float32)))
    _close(fg.compile(from_dense)(dense, x), from_dense(dense, x), tol=1e-5)


def test_sparse_sparse_products_index_select_and_addmm_as_torch():
    """Two sparse matrices multiply to a sparse one (torch.sparse.mm, mm, @), index_select
    picks slices along a sparse dimension (repeats too), addmm takes a sparse mat1: values
    as torch's."""
    torch = pytest.importorskip("torch")

    def program(T):
        i = T.tensor([[0, 1, 1, 2, 0], [2, 0, 0, 1, 2]])
        v = T.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
        s = T.sparse_coo_tensor(i, v, (3, 3))
        out = [T.sparse.mm(s, s).to_dense(), (s @ s).to_dense(), s.mm(s.t()).to_dense(),
               s.coalesce().index_select(0, T.tensor([2, 0, 2])).to_dense(),
               s.index_select(1, T.tensor([0])).to_dense(),
               T.addmm(T.ones(3, 2), s, T.ones(3, 2), beta=0.5, alpha=2.0)]
        return [o.tolist() for o in out] + [T.sparse.mm(s, s).is_sparse]
    assert program(fg) == program(torch)


def test_csr_matrices_as_torch():
    """sparse_csr_tensor, to_sparse_csr, the CSR parts and print, conversions, products with
    dense matrices and sampled_addmm, with their gradients, as torch's (they were missing)."""
    import warnings
    got, want = [], []
    for T, out in ((fg, got), (torch, want)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch's beta-state and invariant-check warnings)
            crow, col = T.tensor([0, 2, 3, 5]), T.tensor([0, 2, 1, 0, 2])
            v = T.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=T.float64, requires_grad=True)
            s = T.sparse_csr_tensor(crow, col, v, size=(3, 3))
            d = T.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
            m1 = T.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
            m2 = T.tensor(np.arange(12.0).reshape(4, 3) / 7, requires_grad=True)
            r = T.sparse.sampled_addmm(s, m1, m2, beta=0.5, alpha=2.0)
            prod = (s @ d) + T.sparse.mm(s, d) + s.matmul(d) + T.mm(s * 2, d) + (d.t() @ s).t()
            (prod.sum() + r.values().sum()).backward()
            x = T.tensor([[0.0, 1.5], [2.0, 0.0]])
            out += [str(s).replace("torch.", "").replace("fusegrad.", ""), s.layout is T.sparse_csr, s.is_sparse,
                    s.is_sparse_csr, s._nnz(), tuple(s.shape), s.crow_indices(), s.col_indices(), s.to_dense(),
                    s.to_sparse().indices(), x.to_sparse_csr().crow_indices(), x.to_sparse().to_sparse_csr().values(),
                    (-s).layout is T.sparse_csr, s.clone().layout is T.sparse_csr, r.values(), prod, v.grad, d.grad, m1.grad, m2.grad,
                    T.sparse_csr_tensor(crow, col, v.detach()).shape]
            with pytest.raises(RuntimeError, match="indices expected sparse coordinate tensor layout"):
                s.indices()
    for g, w in zip(got, want):
        if isinstance(g, (fg.Tensor, torch.Tensor)):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)
        else:
            assert g == w
