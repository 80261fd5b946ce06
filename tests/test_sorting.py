"""sort, argsort, topk, unique, unique_consecutive, searchsorted, bucketize and multinomial
against PyTorch: values and indices over grids with ties, NaN, descending, dims and empty
tensors; sort/topk gradients by float64 finite differences; vmap and compile."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_rng = np.random.default_rng(0)
ARRAYS = {
    "ties": _rng.integers(0, 4, (3, 7)).astype(np.float32),
    "distinct": _rng.standard_normal((4, 5)),
    "nan": np.array([[1.0, np.nan, -2.0, 1.0, np.nan, 0.0]]),
    "int": _rng.integers(-3, 3, (2, 3, 4)),
    "bool": _rng.integers(0, 2, (5, 2)).astype(bool),
    "empty": np.zeros((0, 3), np.float32),
    "scalar": np.array(2.5),
}


def _same(a, b):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]


@pytest.mark.parametrize("name,dim,descending", [(n, d, s) for n in ARRAYS for d in (0, -1) for s in (False, True)])
def test_sort_argsort_stable_match_torch(name, dim, descending):
    a = ARRAYS[name]
    x, t = fg.tensor(a), torch.tensor(a)
    r, e = fg.sort(x, dim=dim, descending=descending, stable=True), torch.sort(t, dim=dim, descending=descending,
                                                                               stable=True)
    _same(r.values, e.values)
    _same(r.indices, e.indices)
    _same(x.argsort(dim=dim, descending=descending, stable=True),
          t.argsort(dim=dim, descending=descending, stable=True))
    v, i = x.sort(dim, descending)  # unpacks like torch.return_types.sort
    _same(v, e.values)
    if name in ("distinct", "nan"):  # no ties among numbers: every order agrees
        _same(fg.argsort(x, dim=dim, descending=descending), torch.argsort(t, dim=dim, descending=descending))


def test_msort_and_return_type():
    a = ARRAYS["ties"]
    _same(fg.msort(fg.tensor(a)), torch.msort(torch.tensor(a)))
    r = fg.sort(fg.tensor(a))
    assert type(r).__name__ == "sort" and r._fields == ("values", "indices")
    assert type(fg.topk(fg.tensor(a), 2)).__name__ == "topk"
    a = np.array([3.0, 1.0, 2.0], np.float32)
    assert repr(fg.sort(fg.tensor(a))) == repr(torch.sort(torch.tensor(a))).replace("torch.", "fusegrad.")


@pytest.mark.parametrize("k,dim,largest", list(itertools.product((0, 1, 3), (0, 1, -1), (True, False))))
def test_topk_matches_torch(k, dim, largest):
    a = ARRAYS["distinct"]
    r = fg.topk(fg.tensor(a), k, dim=dim, largest=largest)
    e = torch.topk(torch.tensor(a), k, dim=dim, largest=largest)
    _same(r.values, e.values)
    _same(r.indices, e.indices)
    # with ties torch's index order is unspecified: the values agree
    t = ARRAYS["ties"]
    _same(fg.tensor(t).topk(min(k, 3), dim, largest).values, torch.tensor(t).topk(min(k, 3), dim, largest).values)


def test_topk_errors():
    with pytest.raises(RuntimeError, match="topk.*out of range"):
        fg.topk(fg.ones(2, 3), 4)


@pytest.mark.parametrize("op", ["sort", "sort_desc", "topk", "topk_small"])
def test_sort_topk_gradcheck(op):
    a = fg.tensor(_rng.standard_normal((3, 5)), requires_grad=True)
    f = {"sort": lambda x: fg.sort(x, dim=1).values,
         "sort_desc": lambda x: fg.sort(x, dim=0, descending=True).values * fg.arange(3.0).reshape(3, 1).double(),
         "topk": lambda x: fg.topk(x, 2).values,
         "topk_small": lambda x: fg.topk(x, 2, dim=0, largest=False)[0]}[op]
    assert gradcheck(f, (a,))
    assert gradgradcheck(lambda x: f(x) ** 2, (a,))


def test_sort_grad_matches_torch_and_grad_fn():
    a = _rng.standard_normal((4, 6))
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    w = _rng.standard_normal((4, 3))
    r, e = fg.topk(x, 3, dim=1), torch.topk(t, 3, dim=1)
    (r.values * fg.tensor(w)).sum().backward()
    (e.values * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())
    assert type(r.values.grad_fn).__name__ == type(e.values.grad_fn).__name__ == "TopkBackward0"
    assert type(fg.sort(x).values.grad_fn).__name__ == "SortBackward0"
    assert r.indices.requires_grad is False


UNIQUE_ARRAYS = {"ties": ARRAYS["ties"], "int": ARRAYS["int"], "bool": ARRAYS["bool"], "empty": ARRAYS["empty"],
                 "rows": np.array([[1, 2], [0, 5], [1, 2], [0, 4], [1, 2]])}


@pytest.mark.parametrize("name,dim,inv,cnt", [(n, d, i, c) for n in UNIQUE_ARRAYS for d in (None, 0, 1)
                                             for i in (False, True) for c in (False, True)])
def test_unique_matches_torch(name, dim, inv, cnt):
    a = UNIQUE_ARRAYS[name]
    kw = dict(sorted=True, return_inverse=inv, return_counts=cnt, dim=dim)
    if name == "empty" and dim == 1:  # an unselected empty dimension
        for f in (fg.unique, fg.unique_consecutive):
            with pytest.raises(RuntimeError, match="0 sized dimensions"):
                f(fg.tensor(a), **{k: v for k, v in kw.items() if k != "sorted"})
        return
    r, e = fg.unique(fg.tensor(a), **kw), torch.unique(torch.tensor(a), **kw)
    r, e = (r, e) if isinstance(e, tuple) else ((r,), (e,))
    assert len(r) == len(e)
    for u, v in zip(r, e):
        _same(u, v)
    c = fg.tensor(a).unique_consecutive(return_inverse=inv, return_counts=cnt, dim=dim)
    d = torch.tensor(a).unique_consecutive(return_inverse=inv, return_counts=cnt, dim=dim)
    c, d = (c, d) if isinstance(d, tuple) else ((c,), (d,))
    for u, v in zip(c, d):
        _same(u, v)


def test_unique_unsorted_matches_torch_cpu():
    """torch's CPU unique sorts with sorted=False too; fusegrad always sorts."""
    a = np.array([3, 1, 3, 2, 7, 0, 1])
    for r, e in zip(fg.unique(fg.tensor(a), sorted=False, return_inverse=True, return_counts=True),
                    torch.unique(torch.tensor(a), sorted=False, return_inverse=True, return_counts=True)):
        _same(r, e)


def test_unique_keeps_nans_apart_as_torch():
    a = np.array([np.nan, 1.0, np.nan, 1.0])
    _same(fg.unique(fg.tensor(a)), torch.unique(torch.tensor(a)))


SEQS = {"1d": np.array([1.0, 2.0, 2.0, 2.0, 5.0, 7.0]),
        "2d": np.sort(_rng.integers(0, 5, (3, 6)).astype(np.float64), axis=1),
        "empty": np.zeros(0)}


@pytest.mark.parametrize("name,right", [(n, r) for n in SEQS for r in (False, True)])
def test_searchsorted_bucketize_match_torch(name, right):
    s = SEQS[name]
    v = _rng.integers(-1, 8, (3, 4)).astype(np.float64)
    if name == "1d":
        v = np.concatenate([v, np.array([[2.0, 5.0, 0.0, 9.0]])])
    S, V, tS, tV = fg.tensor(s), fg.tensor(v), torch.tensor(s), torch.tensor(v)
    _same(fg.searchsorted(S, V, right=right), torch.searchsorted(tS, tV, right=right))
    side = "right" if right else "left"
    _same(fg.searchsorted(S, V, side=side, out_int32=True), torch.searchsorted(tS, tV, side=side, out_int32=True))
    if s.ndim == 1:
        _same(fg.bucketize(V, S, right=right), torch.bucketize(tV, tS, right=right))
        _same(fg.searchsorted(S, 2.0, right=right), torch.searchsorted(tS, 2.0, right=right))
        perm = _rng.permutation(len(s))
        _same(fg.searchsorted(fg.tensor(s[perm]), V, sorter=fg.tensor(np.argsort(s[perm], kind="stable"))),
              torch.searchsorted(torch.tensor(s[perm]), tV, sorter=torch.tensor(np.argsort(s[perm], kind="stable"))))


def test_searchsorted_against_sequences_holding_nan_as_torch():
    """No order places NaN inside a sequence: PyTorch's binary search (move right while
    !(mid >= v), right: !(mid > v)) defines the result, eager and compiled."""
    v = np.array([0.5, 2.0, 4.0, np.nan, 6.0, 1.0, 3.0])
    seqs = [[1.0, np.nan, 3.0, 5.0], [1.0, 3.0, np.nan], [np.nan, np.nan], [np.nan, 1.0, 2.0]]
    search = lambda T, s, v: [T.searchsorted(s, v, right=r) for r in (False, True)]  # noqa: E731
    compiled = fg.compile(lambda s, v: search(fg, s, v))
    for s in seqs:
        want = search(torch, torch.tensor(s), torch.tensor(v))
        for got in (search(fg, fg.tensor(s), fg.tensor(v)), compiled(fg.tensor(s), fg.tensor(v))):
            for g, w in zip(got, want):
                _same(g, w)
    rows, vals = np.array([[1.0, np.nan, 3.0], [0.0, 2.0, 4.0]]), np.array([[2.0, 0.5], [3.0, np.nan]])
    for r in (False, True):
        _same(fg.searchsorted(fg.tensor(rows), fg.tensor(vals), right=r),
              torch.searchsorted(torch.tensor(rows), torch.tensor(vals), right=r))
    assert compiled.cache_info()["fallbacks"] == 0


def test_searchsorted_errors():
    with pytest.raises(RuntimeError, match="side and right"):
        fg.searchsorted(fg.arange(3.0), fg.ones(2), right=True, side="left")
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        fg.searchsorted(fg.ones(2, 3), fg.ones(3, 3))


def test_multinomial_frequencies_and_errors():
    p = fg.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]])
    g = fg.Generator().manual_seed(3)
    s = fg.multinomial(p, 4000, replacement=True, generator=g)
    assert s.shape == (2, 4000) and s.dtype == fg.int64
    freq = np.stack([np.bincount(r, minlength=4) for r in s.numpy()]) / 4000
    want = p.numpy() / p.numpy().sum(1, keepdims=True)
    np.testing.assert_allclose(freq, want, atol=0.04)  # ~5 standard errors
    # without replacement: distinct, never a zero-probability category while others remain
    draws = np.stack([fg.multinomial(p, 3, generator=g).numpy() for _ in range(300)])
    assert all(len(set(r)) == 3 for d in draws for r in d)
    assert not (draws[:, 0] == 1).any() and not (draws[:, 1] == 2).any()
    first = np.bincount(draws[:, 0, 0], minlength=4) / 300  # the first draw follows p
    np.testing.assert_allclose(first, want[0], atol=0.12)
    with pytest.raises(RuntimeError, match="without replacement"):
        fg.multinomial(p, 5)
    with pytest.raises(RuntimeError, match="element < 0"):
        fg.multinomial(fg.tensor([0.5, -0.1]), 1)
    assert fg.tensor([0.2, 0.8]).multinomial(2).shape == (2,)


def test_vmap_and_compile():
    a = _rng.standard_normal((3, 4, 5)).astype(np.float32)
    f = lambda x: fg.topk(x, 2, dim=0).values.sum() + fg.sort(x, dim=1, descending=True).values[0]  # noqa: E731
    out = fg.func.vmap(f)(fg.tensor(a))
    want = torch.vmap(lambda x: torch.topk(x, 2, dim=0).values.sum() + torch.sort(x, dim=1, descending=True).values[0])(
        torch.tensor(a))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-5)
    s, v = np.sort(_rng.standard_normal((3, 6)), 1), _rng.standard_normal((3, 2))
    _same(fg.func.vmap(fg.searchsorted)(fg.tensor(s), fg.tensor(v)), torch.vmap(torch.searchsorted)(torch.tensor(s),
                                                                                              torch.tensor(v)))
    g = fg.compile(lambda x: fg.sort(x * 2.0, dim=-1).values + 1.0)
    np.testing.assert_allclose(g(fg.tensor(a)).numpy(), np.sort(a * 2, -1) + 1, rtol=1e-6)


def test_forward_mode_tangents_match_torch():
    a, t = _rng.standard_normal((3, 5)), _rng.standard_normal((3, 5))
    f = lambda x: fg.topk(x, 2, dim=1).values * 2 + fg.sort(x, dim=0).values[:1, :2]  # noqa: E731
    tf = lambda x: torch.topk(x, 2, dim=1).values * 2 + torch.sort(x, dim=0).values[:1, :2]  # noqa: E731
    _, jv = fg.func.jvp(f, (fg.tensor(a),), (fg.tensor(t),))
    _, tjv = torch.func.jvp(tf, (torch.tensor(a),), (torch.tensor(t),))
    np.testing.assert_allclose(jv.numpy(), tjv.numpy(), rtol=1e-12)


@pytest.mark.torch
def test_kthvalue_matches_torch(pt):
    """kthvalue: values, indices (the index of an equal element among ties: torch's
    quickselect may name another), keepdim, 0-d, the range error and the gradient."""
    xa = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, 4.0], [2.5, -1.0, 7.0, 0.5]])
    for k, dim, keepdim in ((2, -1, False), (1, 0, True), (3, 1, True), (4, 1, False)):
        x, tx = fg.tensor(xa, requires_grad=True), pt.tensor(xa, requires_grad=True)
        (v, i), (tv, ti) = x.kthvalue(k, dim, keepdim), pt.kthvalue(tx, k, dim, keepdim)
        np.testing.assert_array_equal(v.detach().numpy(), tv.detach().numpy())
        idx = i.numpy() if keepdim else np.expand_dims(i.numpy(), dim)
        np.testing.assert_array_equal(np.take_along_axis(xa, idx, dim).reshape(v.shape), v.detach().numpy())
        (v * v).sum().backward()
        (tv * tv).sum().backward()
        np.testing.assert_array_equal(x.grad.sum(dim).numpy(), tx.grad.sum(dim).numpy())
    assert fg.kthvalue(fg.tensor(3.0), 1).values.item() == 3.0
    for lib in (fg, pt):
        with pytest.raises(RuntimeError, match="selected number k out of range"):
            lib.tensor(xa).kthvalue(5)


def test_sorting_ops_compile_into_one_graph():
    """argsort and searchsorted have cpu kernels: sort, argsort (stable, descending, ties,
    NaN, integer and bool rows), topk, kthvalue, median and searchsorted (1-D and batched
    sequences, right, int32, a scalar value) compile with fullgraph=True, equal to eager and
    to torch where torch defines the order; the gradient through sorted values too."""
    g = np.random.default_rng(0)
    a = g.standard_normal((3, 7)).astype(np.float32)
    a[0, 2] = np.nan
    a[1, :4] = 0.5
    s = np.array([-1.0, 0.0, 0.5, 2.0], np.float32)
    vals = g.standard_normal((2, 5)).astype(np.float32)
    vals[0, 0], vals[1, 1] = 0.5, np.nan

    def f(lib, x, s, v):
        return [x.argsort(dim=1, stable=True), x.argsort(dim=0, descending=True, stable=True),
                lib.sort(x, 1, descending=True).values, lib.sort(x, dim=0, stable=True).indices,
                x.kthvalue(2, 0).values, x.median(1).values, lib.searchsorted(s, v),
                lib.searchsorted(s, v, right=True, out_int32=True),
                lib.searchsorted(s.expand(3, 4).contiguous(), x[:, :5]),
                (x.nan_to_num() * 3).long().argsort(dim=1, descending=True, stable=True),
                (x > 0).argsort(dim=1, stable=True), lib.searchsorted(s, 0.3), x.topk(2, dim=0).values]

    cf = fg.compile(lambda x, s, v: f(fg, x, s, v), fullgraph=True)
    args = (a, s, vals)
    got = cf(*map(fg.tensor, args))
    eager = f(fg, *map(fg.tensor, args))
    want = f(torch, *map(torch.tensor, args))
    for x, y, z in zip(got, eager, want):
        _same(x, y)
        np.testing.assert_array_equal(x.numpy(), z.numpy())
    assert cf.cache_info()["compiles"] == 1

    def loss(lib, x):
        top = x.sort(dim=1, descending=True).values[:, :3]
        return (top.cumsum(1) * top).sum() + x.topk(2, dim=0).values.pow(2).sum()
    b = g.standard_normal((4, 6))
    x, tx = fg.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
    fg.compile(lambda x: loss(fg, x), fullgraph=True)(x).backward()
    loss(torch, tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)



def test_multinomial_refuses_a_row_without_probability_mass():
    """A row of zeros (a top-p mask that removed every token) raises torch's RuntimeError
    instead of drawing arbitrary indices; rows with mass still draw only their categories."""
    for p in ([0.0, 0.0, 0.0], [[0.0, 0.0], [1.0, 1.0]]):
        for lib in (fg, torch):
            with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
                lib.multinomial(lib.tensor(p), 1)
    assert fg.multinomial(fg.tensor([[0.0, 1.0], [2.0, 0.0]]), 3, replacement=True).tolist() == [[1] * 3, [0] * 3]
