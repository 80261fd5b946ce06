"""cummax, cummin, mode and nanmedian against PyTorch: values and indices over shapes,
dims, keepdim, ties, NaN, integer and bool dtypes, 0-d and empty inputs; printed return
types and grad_fn names; gradients against torch's and by float64 finite differences;
forward mode, vmap and one compiled function."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_rng = np.random.default_rng(0)
_nan = np.nan
ARRAYS = {
    "ties": _rng.integers(0, 4, (3, 7)).astype(np.float32),
    "distinct": _rng.standard_normal((2, 3, 4)),
    "nan": np.array([[1.0, _nan, 3.0, _nan, 2.0, 5.0], [-1.0, -1.0, 0.0, -0.0, 0.0, _nan]]),
    "signed_zero": np.array([[0.0, -0.0, 0.0, -1.0], [-0.0, 0.0, -0.0, 1.0]], np.float32),
    "int": _rng.integers(-3, 3, (2, 3, 4)),
    "int32": _rng.integers(-5, 5, (4, 6)).astype(np.int32),
    "uint8": _rng.integers(0, 4, (5, 3)).astype(np.uint8),
    "bool": _rng.integers(0, 2, (5, 2)).astype(bool),
    "half": _rng.integers(-2, 3, (3, 5)).astype(np.float16),
    "empty": np.zeros((0, 3), np.float32),
    "scalar": np.array(2.5),
}


def _same(a, b):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]


def _dims(a):
    return (0, -1) if a.ndim == 0 else tuple(range(-a.ndim, a.ndim))


@pytest.mark.parametrize("name,dim,op", [(n, d, o) for n in ARRAYS for d in _dims(ARRAYS[n])
                                         for o in ("cummax", "cummin")])
def test_cummax_cummin_match_torch(name, dim, op):
    """Exact values and indices: ties take the last index, a NaN propagates and every
    later NaN takes the index."""
    a = ARRAYS[name]
    r, e = getattr(fg, op)(fg.tensor(a), dim), getattr(torch, op)(torch.tensor(a), dim)
    _same(r.values, e.values)
    _same(r.indices, e.indices)
    m = getattr(fg.tensor(a), op)(dim=dim)  # the method, with torch's keyword
    _same(m[0], e[0])
    _same(m[1], e[1])


def test_cummax_documented_ties_and_nan():
    r = fg.cummax(fg.tensor([1.0, 3, 3, 2]), 0)
    assert r.values.tolist() == [1, 3, 3, 3] and r.indices.tolist() == [0, 1, 2, 2]
    r = fg.cummin(fg.tensor([1.0, _nan, 0, _nan, 2]), 0)
    assert r.indices.tolist() == [0, 1, 1, 3, 3] and np.isnan(r.values.numpy()[1:]).all()


def test_return_types_grad_fns_and_errors():
    a = np.array([3.0, 1.0, 2.0, 1.0], np.float32)
    for op in ("cummax", "cummin"):
        r, e = getattr(fg, op)(fg.tensor(a), 0), getattr(torch, op)(torch.tensor(a), 0)
        assert type(r).__name__ == op and r._fields == ("values", "indices")
        assert repr(r) == repr(e).replace("torch.", "fusegrad.")
    for fn, args in (("mode", ()), ("nanmedian", (0,))):
        r, e = getattr(fg, fn)(fg.tensor(a), *args), getattr(torch, fn)(torch.tensor(a), *args)
        assert repr(r) == repr(e).replace("torch.", "fusegrad.")
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for ours, theirs in ((fg.cummax(x, 0).values, torch.cummax(t, 0).values),
                         (x.cummin(0).values, t.cummin(0).values), (x.mode().values, t.mode().values),
                         (x.nanmedian(), t.nanmedian()), (x.nanmedian(0).values, t.nanmedian(0).values)):
        assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__
    assert fg.cummax(x, 0).indices.requires_grad is False
    for lib in (fg, torch):
        with pytest.raises(IndexError, match="Expected reduction dim -1 or 0 for scalar but got 1"):
            lib.cummax(lib.tensor(1.0), 1)
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            lib.mode(lib.zeros(0, 3), 0)
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            lib.nanmedian(lib.zeros(0, 3), 0)


MODE_ARRAYS = {k: ARRAYS[k] for k in ("ties", "signed_zero", "int", "int32", "uint8", "bool", "half", "scalar")}
MODE_ARRAYS["runs"] = np.array([[3.0, 2, 2, 3, 1, 1], [5, 1, 5, 1, 2, 2], [4, 1, 2, 3, 0, 7]])
MODE_ARRAYS["long_rows"] = _rng.integers(0, 3, (4, 16)).astype(np.float64)  # torch names the last occurrence up to 16


@pytest.mark.parametrize("name,dim,keepdim", [(n, d, k) for n in MODE_ARRAYS for d in _dims(MODE_ARRAYS[n])
                                              for k in (False, True)])
def test_mode_matches_torch(name, dim, keepdim):
    """The smallest most frequent value and (rows up to 16 long) torch's index, the last
    occurrence."""
    a = MODE_ARRAYS[name]
    r, e = fg.tensor(a).mode(dim, keepdim), torch.mode(torch.tensor(a), dim=dim, keepdim=keepdim)
    _same(r.values, e.values)
    _same(r.indices, e.indices)
    if a.ndim and dim == -1 and not keepdim:
        _same(fg.mode(fg.tensor(a)).values, torch.mode(torch.tensor(a)).values)  # the default dim


def test_mode_long_rows_and_empty():
    """Beyond 16 elements torch's index among the occurrences is unspecified: the value
    agrees and ours names an occurrence of it (the last)."""
    a = _rng.integers(0, 5, (6, 40)).astype(np.float32)
    r, e = fg.mode(fg.tensor(a), 1), torch.mode(torch.tensor(a), 1)
    _same(r.values, e.values)
    i = r.indices.numpy()
    np.testing.assert_array_equal(a[np.arange(6), i], e.values.numpy())
    np.testing.assert_array_equal(i, [np.flatnonzero(row == v)[-1] for row, v in zip(a, e.values.numpy())])
    z = np.zeros((0, 3), np.float32)
    _same(fg.mode(fg.tensor(z), 1).values, torch.mode(torch.tensor(z), 1).values)
    _same(fg.mode(fg.tensor(z), 1).indices, torch.mode(torch.tensor(z), 1).indices)


NANMEDIAN_ARRAYS = {"distinct": ARRAYS["distinct"], "int": ARRAYS["int"], "scalar": ARRAYS["scalar"],
                    "nan": np.array([[_nan, _nan, 1.0, 4.0], [_nan, 2.0, _nan, -1.0], [_nan, _nan, _nan, _nan],
                                     [1.0, 2.0, 3.0, 0.5], [_nan, 5.0, 6.0, 7.0]])}


@pytest.mark.parametrize("name,dim,keepdim", [(n, d, k) for n in NANMEDIAN_ARRAYS for d in _dims(NANMEDIAN_ARRAYS[n])
                                              for k in (False, True)])
def test_nanmedian_matches_torch(name, dim, keepdim):
    """The lower median of the non-NaN elements (NaN, at the first NaN, where all are NaN)."""
    a = NANMEDIAN_ARRAYS[name]
    r, e = fg.tensor(a).nanmedian(dim, keepdim), torch.nanmedian(torch.tensor(a), dim=dim, keepdim=keepdim)
    _same(r.values, e.values)
    if a.ndim and a.dtype.kind == "f" and np.isnan(a).all(axis=dim).any():
        # in an all-NaN slice torch's index is whatever its nth_element leaves there (n=4: 2); ours is the first
        all_nan = np.isnan(a).all(axis=dim, keepdims=keepdim)
        np.testing.assert_array_equal(r.indices.numpy()[~all_nan], e.indices.numpy()[~all_nan])
        assert (r.indices.numpy()[all_nan] == 0).all()
    else:
        _same(r.indices, e.indices)
    _same(fg.nanmedian(fg.tensor(a)), torch.nanmedian(torch.tensor(a)))


def test_nanmedian_ties_all_nan_and_empty():
    a = ARRAYS["ties"]
    r, e = fg.nanmedian(fg.tensor(a), 1), torch.nanmedian(torch.tensor(a), 1)
    _same(r.values, e.values)  # among equal elements torch's index is unspecified
    np.testing.assert_array_equal(a[np.arange(3), r.indices.numpy()], e.values.numpy())
    for v in ([_nan, _nan], [], [1.0, _nan, 3.0, 2.0]):
        np.testing.assert_array_equal(fg.nanmedian(fg.tensor(v)).numpy(), torch.nanmedian(torch.tensor(v)).numpy())


def _grads(fn_fg, fn_t, a, w):
    x, t = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (fn_fg(x) * fg.tensor(w)).sum().backward()
    (fn_t(t) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


GRAD_CASES = {
    "cummax0": (lambda m: m.cummax(0).values, (4, 6)),
    "cummax1": (lambda m: m.cummax(dim=1).values, (4, 6)),
    "cummin": (lambda m: m.cummin(-1).values, (4, 6)),
    "mode": (lambda m: m.mode(1).values, (4,)),
    "mode_keepdim": (lambda m: m.mode(0, keepdim=True).values, (1, 6)),
    "nanmedian_dim": (lambda m: m.nanmedian(1).values, (4,)),
    "nanmedian": (lambda m: m.nanmedian(), ()),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_match_torch_with_ties_and_nan(case):
    """loss = (values * weights).sum(): cummax/cummin scatter-add the gradient to the
    indices (repeated with ties), mode and nanmedian(dim) send it to the returned index,
    nanmedian() shares it among the elements equal to the median."""
    f, wshape = GRAD_CASES[case]
    w = _rng.standard_normal(wshape)
    a = _rng.integers(0, 3, (4, 6)).astype(np.float64)  # ties everywhere
    if case.startswith("cum") or case == "nanmedian":
        a[1, 2] = a[3, 0] = _nan
    _grads(f, f, a, w)
    _grads(f, f, _rng.standard_normal((4, 6)), w)


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradcheck_float64(case):
    f = GRAD_CASES[case][0]
    a = fg.tensor(_rng.permutation(24).reshape(4, 6) * 0.37 + _rng.uniform(0, 0.1, (4, 6)), requires_grad=True)
    assert gradcheck(f, (a,))


def test_forward_mode_matches_torch():
    a, t = _rng.standard_normal((3, 5)), _rng.standard_normal((3, 5))
    f = lambda x: x.cummax(1).values * 2 + x.cummin(0).values + x.nanmedian(0).values  # noqa: E731
    _, jv = fg.func.jvp(f, (fg.tensor(a),), (fg.tensor(t),))
    _, tjv = torch.func.jvp(f, (torch.tensor(a),), (torch.tensor(t),))
    np.testing.assert_allclose(jv.numpy(), tjv.numpy(), rtol=1e-12)


def test_vmap_matches_a_loop():
    a = _rng.integers(-2, 3, (3, 4, 6)).astype(np.float32)
    a[0, 1, 2] = _nan
    for f in (lambda x: tuple(fg.cummax(x, 1)), lambda x: tuple(fg.cummin(x, 0)),
              lambda x: tuple(fg.mode(x, -1)), lambda x: tuple(fg.nanmedian(x, 0, keepdim=True))):
        got = fg.func.vmap(f)(fg.tensor(a))
        for k, out in enumerate(got):
            want = np.stack([f(fg.tensor(a[b]))[k].numpy() for b in range(3)])
            np.testing.assert_array_equal(out.numpy(), want)


def test_compiled_equals_eager():
    """One compiled function over all four (sorting itself runs eagerly inside it)."""
    a = _rng.integers(-3, 3, (4, 7)).astype(np.float32)
    a[1, 3] = _nan

    def f(x):
        y = x * 2.0
        return (fg.cummax(y, 1).values + 1.0, fg.cummin(y, 0).indices, fg.mode(y, 0).values,
                fg.mode(y, 1).indices, fg.nanmedian(y, 1).values, fg.nanmedian(y, 0).indices)
    g = fg.compile(f)
    for arr in (a, a[::-1].copy()):
        for got, want in zip(g(fg.tensor(arr)), f(fg.tensor(arr))):
            _same(got, want)


def test_bfloat16_with_nan_sorts_scatters_and_fills_as_torch():
    """bfloat16 (which NumPy sorts without placing NaN): sort, argsort, topk, msort, kthvalue,
    nanmedian, unique and searchsorted put NaN where torch does; scatter_reduce/index_reduce amax and amin
    without the tensor's own values, and random_() without bounds, work in bfloat16."""
    import warnings

    def program(lib):
        b = lib.tensor([1.0, float("nan"), 3.0, -2.0, 0.5], dtype=lib.bfloat16)
        s, i = lib.tensor([1.5, 2.25, -1.0, 4.0], dtype=lib.bfloat16), lib.tensor([1, 1, 0, 2])
        out = [lib.sort(b).values, lib.sort(b, descending=True).values, lib.argsort(b), lib.topk(b, 2).values,
               lib.msort(b), lib.kthvalue(b, 2).values, b.nanmedian(), lib.unique(b),
               lib.searchsorted(lib.tensor([-1.0, 0.0, 1.0, 2.0], dtype=lib.bfloat16), b)]
        for red in ("amax", "amin", "prod", "mean"):
            for inc in (True, False):
                out.append(lib.zeros(3, dtype=lib.bfloat16).scatter_reduce(0, i, s, red, include_self=inc))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch: index_reduce is in beta)
            out.append(lib.zeros(3, dtype=lib.bfloat16).index_reduce(0, i, s, "amin", include_self=False))
        r = lib.empty(2000, dtype=lib.bfloat16).random_()
        out.append(lib.tensor([float(r.min()) >= 0, float(r.max()) <= 256, float(r.max()) > 200]))
        return [t.float().numpy() for t in out]
    for got, want in zip(program(fg), program(torch)):
        np.testing.assert_array_equal(got, want)
