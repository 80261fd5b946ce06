"""Reductions and related ops at their edges, checked against PyTorch: a 0-d tensor reduced
over dim 0 or -1 (its one element), an empty dim list (all dims), a repeated dim (an error),
cumulative ops on 0-d and empty tensors, uint8 all/any, integer-to-integer in-place casts,
NaN clamp bounds, and out=, sign and where on the dtypes PyTorch accepts there; eager and
compiled."""
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

pytestmark = pytest.mark.torch


def _same(ours, theirs, rtol=1e-6, atol=1e-7):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, rtol, atol)
        return
    assert tuple(ours.shape) == tuple(theirs.shape), (tuple(ours.shape), tuple(theirs.shape))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(np.asarray(ours.detach().numpy(), dtype=np.float64),
                               np.asarray(theirs.detach().numpy(), dtype=np.float64), rtol=rtol, atol=atol)


def _both(fn, *arrays, **kw):
    """fn run on fusegrad and on PyTorch (``lib`` first), over tensors made from ``arrays``."""
    ours = fn(fg, *(fg.tensor(a, **kw) for a in arrays))
    theirs = fn(torch, *(torch.tensor(a, **kw) for a in arrays))
    return ours, theirs


def _raises_as_torch(fn, match=None):
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(type(te.value), match=match):
        fn(fg)


ZERO_D_OPS = {
    "sum": lambda lib, s: s.sum(0), "sum_keep": lambda lib, s: s.sum(-1, keepdim=True),
    "mean": lambda lib, s: s.mean(-1), "prod": lambda lib, s: s.prod(0),
    "amax": lambda lib, s: s.amax((0,)), "amin": lambda lib, s: s.amin(-1),
    "max": lambda lib, s: tuple(s.max(0)), "min_keep": lambda lib, s: tuple(s.min(-1, keepdim=True)),
    "argmax": lambda lib, s: s.argmax(0), "argmin_keep": lambda lib, s: s.argmin(-1, keepdim=True),
    "logsumexp": lambda lib, s: s.logsumexp(0), "logsumexp_keep": lambda lib, s: s.logsumexp(-1, keepdim=True),
    "norm": lambda lib, s: s.norm(dim=0), "vector_norm": lambda lib, s: lib.linalg.vector_norm(s, 1, dim=-1),
    "std": lambda lib, s: s.std(0, correction=0), "var": lambda lib, s: s.var(-1, keepdim=True, correction=0),
    "median": lambda lib, s: tuple(s.median(0)), "count_nonzero": lambda lib, s: lib.count_nonzero(s, 0),
    "nansum": lambda lib, s: s.nansum(0), "nanmean": lambda lib, s: s.nanmean(-1),
    "aminmax": lambda lib, s: tuple(lib.aminmax(s, dim=0)), "flip": lambda lib, s: s.flip(0),
    "gather": lambda lib, s: s.gather(0, lib.tensor(0)),
    "gather_1d_index": lambda lib, s: s.gather(0, lib.tensor([0, 0])),
}


@pytest.mark.parametrize("name", sorted(ZERO_D_OPS))
def test_zero_dim_tensor_reduced_over_dim_0_or_minus_1(name):
    ours, theirs = _both(ZERO_D_OPS[name], np.float32(1.25))
    _same(ours, theirs)


def test_zero_dim_dims_out_of_range_or_repeated_raise_as_torch():
    for f in (lambda lib: lib.tensor(1.5).sum(1), lambda lib: lib.tensor(1.5).max(1),
              lambda lib: lib.tensor(1.5).argmax(-2), lambda lib: lib.tensor(1.5).cumsum(1),
              lambda lib: lib.tensor(1.5).median(2), lambda lib: lib.logcumsumexp(lib.tensor(1.5), 1)):
        _raises_as_torch(f)
    _raises_as_torch(lambda lib: lib.tensor(1.5).sum((0, -1)), "appears multiple times")


def test_empty_dim_list_reduces_every_dim():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    for f in (lambda lib, t: t.amax([]), lambda lib, t: lib.amin(t, dim=[]), lambda lib, t: t.amax((), keepdim=True),
              lambda lib, t: t.sum([]), lambda lib, t: t.sum([], keepdim=True), lambda lib, t: t.mean([]),
              lambda lib, t: t.var([]), lambda lib, t: t.std([]), lambda lib, t: t.norm(dim=[]),
              lambda lib, t: lib.count_nonzero(t, []), lambda lib, t: t.nansum([]),
              lambda lib, t: lib.tensor(1.5).amax([]),
              # all/any over no dim reduce nothing (a bool tensor of the input's shape)
              lambda lib, t: t.any([]), lambda lib, t: t.all(())):
        _same(*_both(f, x))


def test_repeated_dims_raise_as_torch():
    x = np.ones((2, 3), dtype=np.float32)
    for f in (lambda lib, t: t.sum((0, 0)), lambda lib, t: t.sum((1, -1)), lambda lib, t: t.mean((0, 0)),
              lambda lib, t: t.amax((0, 0)), lambda lib, t: t.var((0, 0)), lambda lib, t: t.logsumexp((0, 0)),
              lambda lib, t: t.any((0, 0)), lambda lib, t: t.norm(dim=(0, 0)), lambda lib, t: t.flip((0, 0)),
              lambda lib, t: lib.count_nonzero(t, (0, 0))):
        _raises_as_torch(lambda lib: f(lib, lib.tensor(x)), "dim [01] appears multiple times in the list of dims")


def test_cumulative_ops_keep_a_0d_tensor_0d():
    for f in (lambda lib, s: s.cumsum(0), lambda lib, s: s.cumprod(-1), lambda lib, s: tuple(s.cummax(0)),
              lambda lib, s: tuple(s.cummin(-1)), lambda lib, s: lib.logcumsumexp(s, 0)):
        _same(*_both(f, np.float32(1.25)))
    _same(*_both(lambda lib, s: s.cumsum(0), np.uint8(3)))  # (int64, 0-d)


def test_logcumsumexp_over_an_empty_dim():
    for shape, dim in (((0, 3), 0), ((3, 0), 1), ((0, 3), 1), ((0,), -1)):
        _same(*_both(lambda lib, t: lib.logcumsumexp(t, dim), np.zeros(shape, dtype=np.float32)))
    _raises_as_torch(lambda lib: lib.logcumsumexp(lib.zeros(0, 3), 2))


def test_all_any_keep_uint8():
    u = np.array([[1, 0], [2, 3]], dtype=np.uint8)
    for f in (lambda lib, t: t.all(), lambda lib, t: t.any(), lambda lib, t: t.all(1),
              lambda lib, t: t.any(0, keepdim=True), lambda lib, t: lib.all(t, (0, 1)), lambda lib, t: t[0, 0].any(0),
              lambda lib, t: t.to(lib.int8).all(1), lambda lib, t: t.float().any()):
        _same(*_both(f, u))
    _same(*_both(lambda lib, t: t.any(), np.zeros(0, dtype=np.uint8)))


def test_inplace_integer_results_cast_to_any_integer_type():
    u = np.array([1, 2, 3], dtype=np.uint8)
    for f in (lambda lib, t: t.clone().sub_(lib.tensor([2, 3, 4])),
              lambda lib, t: t.clone().add_(lib.tensor([300, 0, 0])),
              lambda lib, t: t.clone().mul_(lib.tensor([-1, 2, 100], dtype=lib.int32)),
              lambda lib, t: t.to(lib.int8).add_(lib.tensor([200, 3, 127], dtype=lib.uint8)),
              lambda lib, t: t.clone().add_(lib.tensor([True, False, True]))):
        _same(*_both(f, u))
    # a float result still can't be written into an integer tensor, nor an integer into a bool one
    _raises_as_torch(lambda lib: lib.tensor([1, 2], dtype=lib.uint8).add_(lib.tensor([0.5, 1.0])), "can't be cast")
    _raises_as_torch(lambda lib: lib.tensor([True]).add_(lib.tensor([2])), "can't be cast")


def test_clamp_with_nan_bounds_gives_nan():
    x = np.array([0.2, 1.0, np.nan, -3.0], dtype=np.float32)
    lo = np.array([np.nan, 0.0, 0.0, -1.0], dtype=np.float32)
    hi = np.array([0.5, np.nan, 2.0, 3.0], dtype=np.float32)
    for f in (lambda lib, t, a, b: lib.clamp(t, min=a), lambda lib, t, a, b: lib.clamp(t, max=b),
              lambda lib, t, a, b: t.clamp(a, b), lambda lib, t, a, b: t.clip(min=float("nan")),
              lambda lib, t, a, b: t.clamp(max=float("nan")), lambda lib, t, a, b: t.clone().clamp_(min=a),
              lambda lib, t, a, b: lib.clamp(t.nan_to_num().to(lib.int64), min=a),
              lambda lib, t, a, b: t.clamp(-1.0, 0.5)):
        _same(*_both(f, x, lo, hi))


def test_out_sign_and_where_as_torch():
    b = np.array([[0.6, 0.6, 1.7], [-0.6, -0.6, 2.2]], dtype=np.float32)
    # logsumexp takes out=, computed in its dtype; sum into an integer out= sums the input cast to it
    _same(*_both(lambda lib, t: lib.logsumexp(t, 1, out=lib.empty(2)), b))
    _same(*_both(lambda lib, t: lib.logsumexp(t, 1, True, out=lib.empty(2, 1, dtype=lib.float64)), b), rtol=1e-7)
    _same(*_both(lambda lib, t: lib.sum(t, 1, out=lib.empty(2, dtype=lib.int64)), b))
    _same(*_both(lambda lib, t: lib.sum(t, 1, out=lib.empty(2, dtype=lib.bool)), b))
    _same(*_both(lambda lib, t: lib.sum(t.to(lib.uint8) * 100, 1, out=lib.empty(2, dtype=lib.uint8)), b + 1))
    _raises_as_torch(lambda lib: lib.logsumexp(lib.tensor(b), 1, out=lib.empty(2, dtype=lib.int64)), "floating point")
    _raises_as_torch(lambda lib: lib.tensor(b).logsumexp(1, out=lib.empty(2)))
    _raises_as_torch(lambda lib: lib.sum(lib.tensor(b), 1, dtype=lib.float64, out=lib.empty(2, dtype=lib.int64)),
                     "Expected out tensor to have dtype double, but got long int instead")
    # sign of a bool tensor is itself; a uint8 condition is read as a mask (with PyTorch's warning)
    _same(*_both(lambda lib, t: t.sign(), np.array([True, False])))
    _same(*_both(lambda lib, t: t.clone().sign_(), np.array([True, False])))
    c = np.array([1, 0, 2], dtype=np.uint8)
    with pytest.warns(UserWarning, match="uint8 condition"):
        ours = fg.where(fg.tensor(c), fg.ones(3), 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(ours, torch.where(torch.tensor(c), torch.ones(3), 0.0))
        _same(*_both(lambda lib, t: lib.ones(3).where(t, lib.zeros(3)), c))
    _raises_as_torch(lambda lib: lib.where(lib.tensor([1, 0], dtype=lib.int8), lib.ones(2), 0.0), "boolean")


def _mixed(lib, s, x, u, v, lo):
    """Ops this file fixes, in one function (run eagerly, compiled and by PyTorch)."""
    out = [s.sum(0), s.mean(-1), s.amax((0,)), s.amin(0), s.logsumexp(0), s.std(0, correction=0), s.norm(dim=0),
           lib.count_nonzero(s, 0), s.prod(0), s.flip(0), s.cumsum(0), s.cumprod(0), lib.logcumsumexp(s, 0)]
    out += list(s.max(0)) + list(s.min(-1, keepdim=True)) + [s.argmax(0), s.argmin(-1, keepdim=True)]
    out += [s.gather(0, lib.tensor(0)), s.any(0), s.all(-1)]
    out += [x.amax([]), x.amin(dim=[]), x.sum([]), x.mean([]), x.var([]), x.amax([], keepdim=True)]
    out += [u.all(), u.any(), u.all(1), u.any(1, keepdim=True)]
    out += [lib.clamp(x, min=lo), lib.clamp(x, max=lo), lib.clamp(x, min=float("nan")), (x > 0).sign()]
    w = u.clone()
    w.sub_(v)
    w2 = u.clone()
    w2.add_(v * 100)
    out += [w, w2, lib.logcumsumexp(x[:0], 0), lib.logcumsumexp(x[:, :0], 1)]
    return out


def test_compiled_agrees_with_eager_and_torch():
    r = np.random.default_rng(0)
    arrays = (np.float32(1.25), r.normal(size=(2, 3)).astype(np.float32),
              np.array([[1, 0, 2], [3, 4, 5]], dtype=np.uint8), np.array([[2, 3, 4], [5, 6, 7]]),
              np.array([[np.nan, 0.0, 0.1], [0.2, np.nan, -5]], dtype=np.float32))
    cf = fg.compile(lambda *a: _mixed(fg, *a))
    args = tuple(fg.tensor(a) for a in arrays)
    cf(*args)
    compiled = cf(*args)
    info = cf.cache_info()
    assert info["compiles"] >= 1 and info["fallbacks"] == 0 and not info["graph_breaks"], info
    eager = _mixed(fg, *args)
    theirs = _mixed(torch, *(torch.tensor(a) for a in arrays))
    assert len(compiled) == len(eager) == len(theirs)
    for c, e, t in zip(compiled, eager, theirs):
        _same(e, t, rtol=1e-5, atol=1e-6)
        _same(c, t, rtol=1e-5, atol=1e-6)


def test_sums_over_outer_dims_and_variances_are_accurate():
    """A float32 sum down a long column accumulates in double (NumPy's is a running sum there:
    a million 0.1s came to 100958), as its pairwise sum does along the innermost dim; var and
    std compute in double as PyTorch's Welford kernel, so a constant column has variance 0
    exactly and random data agrees bit for bit."""
    col = fg.full((1_000_000, 2), 0.1)
    np.testing.assert_allclose(col.sum(0).numpy(), [1e5, 1e5], rtol=1e-6)
    np.testing.assert_allclose(col.mean(0).numpy(), [0.1, 0.1], rtol=1e-6)
    np.testing.assert_allclose(col.T.sum(1).numpy(), [1e5, 1e5], rtol=1e-6)
    for n in (10, 100, 2000):
        c = fg.full((n, 3), 1000.1)
        assert c.var(0).tolist() == [0.0] * 3 and c.std(0).tolist() == [0.0] * 3
        assert c.T.contiguous().var(1).tolist() == [0.0] * 3 and c.half().std(0).tolist() == [0.0] * 3
    x = np.random.default_rng(0).standard_normal((50, 70)).astype(np.float32)
    for f in (lambda m, t: t.var(0), lambda m, t: t.std(1, correction=0), lambda m, t: m.var_mean(t, 1)[0],
              lambda m, t: t.half().var(1), lambda m, t: t.bfloat16().std(0)):
        ours, theirs = f(fg, fg.tensor(x)), f(torch, torch.tensor(x))
        assert np.array_equal(ours.float().numpy(), theirs.float().numpy())
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        fg.tensor([1, 2]).std()


def test_full_max_and_min_share_their_gradient_as_pytorch():
    """max() and min() over all elements give the gradient to the elements equal to the
    result, evenly, or to the NaNs when the result is NaN (amax's rule would give NaN
    everywhere), eagerly and compiled."""
    nan = float("nan")
    for vals in ([0.5, nan, 2.0], [2.0, 1.0, 2.0], [nan, 1.0, nan], [3.0]):
        for f in ("max", "min"):
            grads = []
            for m, run in ((torch, None), (fg, None), (fg, fg.compile(lambda t, f=f: getattr(t, f)() * 3))):
                x = m.tensor(vals, requires_grad=True)
                y = run(x) if run else getattr(x, f)() * 3
                y.backward()
                grads.append(x.grad.tolist())
            assert grads[1] == grads[0] and grads[2] == grads[0], (vals, f, grads)


def test_statistics_argument_checks_as_pytorch():
    """cov's weight checks, matrix norms of empty matrices (0 for the largest kinds, as
    PyTorch), and the argument checks of diff, sort/topk/kthvalue on 0-d tensors, kthvalue
    on an empty dim, bincount, histc, vector_norm's dtype and searchsorted's sorter: each
    raises PyTorch's exception type or gives its value."""
    def outcome(f):
        try:
            r = f()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__
        return [round(v, 5) for v in np.atleast_1d(r.detach().float().numpy()).tolist()]

    calls = [lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), fweights=m.tensor([1, -1, 2])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), fweights=m.tensor([1.0, 2.0, 1.0])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), fweights=m.tensor([[1, 1, 1]])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), fweights=m.tensor([1, 2])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), aweights=m.tensor([1.0, -1.0, 1.0])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), aweights=m.tensor([1, 2, 1])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), aweights=m.tensor([0.0, 0.0, 0.0])),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 3.0]]), correction=0.5),
             lambda m: m.cov(m.tensor([[1.0, 2.0, 4.0]]), fweights=m.tensor([1, 2, 1]), aweights=m.tensor([.5, 1, 2])),
             lambda m: m.linalg.matrix_norm(m.zeros(0, 3), ord=2),
             lambda m: m.linalg.matrix_norm(m.zeros(3, 0), ord=2),
             lambda m: m.linalg.matrix_norm(m.zeros(2, 0, 3), ord=float("inf")),
             lambda m: m.linalg.matrix_norm(m.zeros(3, 0), ord=1),
             lambda m: m.linalg.norm(m.zeros(0, 3), ord=2),
             lambda m: m.tensor([3.0, 1.0, 2.0]).diff(n=-1),
             lambda m: m.diff(m.ones(1, 2), prepend=m.zeros(1)),
             lambda m: m.tensor(2.5).sort(dim=1)[0],
             lambda m: m.tensor(2.5).topk(1, dim=1)[0],
             lambda m: m.tensor(2.5).sort(dim=-1)[0],
             lambda m: m.zeros(0).kthvalue(1)[0],
             lambda m: m.bincount(m.tensor([1]), minlength=-1),
             lambda m: m.histc(m.tensor([1.0, 2.0]), bins=0),
             lambda m: m.linalg.vector_norm(m.tensor([3.0, 4.0]), dtype=m.float16),
             lambda m: m.linalg.vector_norm(m.tensor([3.0, 4.0]).bfloat16(), dtype=m.float16),
             lambda m: m.linalg.vector_norm(m.tensor([3.0, 4.0]).half(), dtype=m.float32),
             lambda m: m.searchsorted(m.tensor([1.0, 2.0, 3.0]), m.tensor([2.0]), sorter=m.tensor([1, 2]))]
    for f in calls:
        assert outcome(lambda: f(fg)) == outcome(lambda: f(torch))
