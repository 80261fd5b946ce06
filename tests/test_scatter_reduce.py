"""scatter_reduce (sum, mean, prod, amax, amin; include_self) and index_reduce against
PyTorch: values and float64 gradients eagerly, under fusegrad.compile (no graph break),
vmap, grad and jvp; gradcheck. Many checks share each compiled function (a compile costs
about a second)."""
import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck
from helpers import errors_of

REDUCES = ("sum", "mean", "prod", "amax", "amin")
GRID = [(r, inc) for r in REDUCES for inc in (True, False)]
DIMS = (0, 1, -1)


def _inputs(rng, x_ties: bool):
    """x (3, 4), and per dim in DIMS an index and a src: duplicate indices, ties and zeros
    among src (small integers); x holds integers too only with ``x_ties``, else halves (no
    tie with src). dim 0's index is narrower than x in dim 1."""
    x = rng.integers(-2, 3, (3, 4)).astype(np.float64) + (0.0 if x_ties else 0.5)
    idx = [rng.integers(0, 3, (5, 3)), rng.integers(0, 4, (3, 6)), rng.integers(0, 4, (2, 5))]
    src = [rng.integers(-2, 3, (5, 3)), rng.integers(-2, 3, (3, 6)), rng.integers(-2, 3, (2, 5))]
    return x, idx, [s.astype(np.float64) for s in src]


def _all(mod, x, idx, src, grid=GRID):
    """Every (reduce, include_self) of ``grid`` along every dim, in one list."""
    return [mod.scatter_reduce(x, d, i, s, r, include_self=inc) for d, i, s in zip(DIMS, idx, src)
            for r, inc in grid]


def _weighted(outs, weights):
    return sum((o * w).sum() for o, w in zip(outs, weights))


def _torch_run(pt, x, idx, src, weights, grid=GRID):
    xt = pt.tensor(x, requires_grad=True)
    st = [pt.tensor(s, requires_grad=True) for s in src]
    outs = _all(pt, xt, [pt.tensor(i) for i in idx], st, grid)
    _weighted(outs, [pt.tensor(w) for w in weights]).backward()
    return [o.detach().numpy() for o in outs], [xt.grad.numpy()] + [s.grad.numpy() for s in st]


def _fg_run(fn, x, idx, src, weights):
    xf = fg.tensor(x, requires_grad=True)
    sf = [fg.tensor(s, requires_grad=True) for s in src]
    outs, loss = fn(xf, [fg.tensor(i) for i in idx], sf, [fg.tensor(w) for w in weights])
    loss.backward()
    return [o.detach().numpy() for o in outs], [xf.grad.numpy()] + [s.grad.numpy() for s in sf]


def _both(x, idx, src, weights, grid=GRID):
    """The outputs and their weighted sum (to differentiate)."""
    outs = _all(fg, x, idx, src, grid)
    return outs, _weighted(outs, weights)


def _check(got, want):
    """(values, gradients) of a run against PyTorch's."""
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("x_ties", [False, True])
def test_values_and_gradients_match_torch(pt, x_ties):
    """Eagerly, and compiled once (the compiled code does not depend on the values). With
    ties between x and src, PyTorch's amax/amin with include_self=False still counts x among
    the tied (x gets no gradient, src a smaller share): compared where x takes part."""
    rng = np.random.default_rng(0)
    grid = GRID if not x_ties else [(r, True) for r in REDUCES]
    x, idx, src = _inputs(rng, x_ties)
    weights = [rng.standard_normal((3, 4)) for _ in range(len(DIMS) * len(grid))]
    want = _torch_run(pt, x, idx, src, weights, grid)
    _check(_fg_run(lambda *a: _both(*a, grid=grid), x, idx, src, weights), want)
    if not x_ties:
        f = fg.compile(_both)
        _check(_fg_run(f, x, idx, src, weights), want)
        assert f.cache_info()["graph_breaks"] == [] and f.cache_info()["fallbacks"] == 0


def test_nan_propagates_and_empty_index_keeps_the_input(pt):
    """Also a src wider than its index (its leading part is used)."""
    nan = np.nan
    x = np.array([[1.0, nan, 3.0, 0.0], [2.0, -1.0, 0.5, 4.0]])
    s = np.array([[nan, 5.0, -1.0, 7.0], [3.0, 3.0, nan, 7.0]])
    i = np.array([[0, 0, 2], [3, 3, 1]])
    empty = np.zeros((0, 4), np.int64)

    def fn(x, s, i, e):
        return [x.scatter_reduce(1, i, s, r, include_self=inc) for r, inc in GRID] + \
            [x.scatter_reduce(0, e, x[:0], r, include_self=inc) for r, inc in GRID]
    want = [o.numpy() for o in fn(pt.tensor(x), pt.tensor(s), pt.tensor(i), pt.tensor(empty))]
    f = fg.compile(fn)
    for run in (fn, f):
        got = run(fg.tensor(x), fg.tensor(s), fg.tensor(i), fg.tensor(empty))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    assert f.cache_info()["graph_breaks"] == []
    # an empty index passes the whole gradient to x (NaN where x is NaN, as PyTorch's), none to src
    xf, sf = fg.tensor(x, requires_grad=True), fg.tensor(np.zeros((0, 4)), requires_grad=True)
    f2 = fg.compile(lambda a, b, e: a.scatter_reduce(0, e, b, "amax", include_self=False).sum())
    f2(xf, sf, fg.tensor(empty)).backward()
    np.testing.assert_array_equal(xf.grad.numpy(), np.where(np.isnan(x), np.nan, 1.0))
    assert sf.grad.shape == (0, 4)


def test_integer_values_match_torch(pt):
    """int64, int32, int16 and uint8 (no CUDA atomics: a row kernel there; amax's identity is
    0): exact, a mean rounds down."""
    rng = np.random.default_rng(2)
    dtypes = ("int64", "int32", "int16", "uint8")
    xs = [rng.integers(-9 * (dt != "uint8"), 9, (3, 4)).astype(dt) for dt in dtypes]
    ss = [rng.integers(-9 * (dt != "uint8"), 9, (3, 6)).astype(dt) for dt in dtypes]
    i = rng.integers(0, 4, (3, 6))

    def fn(xs, ss, i):
        return [x.scatter_reduce(-1, i, s, r, include_self=inc) for x, s in zip(xs, ss) for r, inc in GRID]
    want = [o.numpy() for o in fn([pt.tensor(x) for x in xs], [pt.tensor(s) for s in ss], pt.tensor(i))]
    f = fg.compile(fn)
    for run in (fn, f):
        got = run([fg.tensor(x) for x in xs], [fg.tensor(s) for s in ss], fg.tensor(i))
        for g, w in zip(got, want):
            assert g.numpy().dtype == w.dtype
            np.testing.assert_array_equal(g.numpy(), w)
    assert f.cache_info()["graph_breaks"] == []


def test_bool_values_match_torch(pt):
    x = np.array([True, False, True, False])
    s = np.array([False, True, True, False, True])
    i = np.array([0, 1, 1, 2, 3])
    for r in ("sum", "prod", "amax", "amin"):
        for inc in (True, False):
            want = pt.tensor(x).scatter_reduce(0, pt.tensor(i), pt.tensor(s), r, include_self=inc).numpy()
            got = fg.tensor(x).scatter_reduce(0, fg.tensor(i), fg.tensor(s), r, include_self=inc).numpy()
            np.testing.assert_array_equal(got, want)


def test_vmap_grad_and_jvp(pt):
    rng = np.random.default_rng(3)
    x, s = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 5))
    s[:, 0, 1] = 0.0  # a zero in a product
    i = rng.integers(0, 4, (3, 5))

    def stack(mod, it):
        return lambda a, b: mod.stack([a.scatter_reduce(1, it, b, r, include_self=inc) for r, inc in GRID])

    def loss(mod, it):
        return lambda a, b: (stack(mod, it)(a, b).sin()).sum()
    got = fg.func.vmap(stack(fg, fg.tensor(i)))(fg.tensor(x), fg.tensor(s))
    want = pt.vmap(stack(pt, pt.tensor(i)))(pt.tensor(x), pt.tensor(s))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    got = fg.func.grad(loss(fg, fg.tensor(i)), argnums=(0, 1))(fg.tensor(x[0]), fg.tensor(s[0]))
    want = pt.func.grad(loss(pt, pt.tensor(i)), argnums=(0, 1))(pt.tensor(x[0]), pt.tensor(s[0]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)
    # jvp against finite differences (PyTorch 2.13's own prod jvp disagrees with them)
    f = stack(fg, fg.tensor(i))
    _, jt = fg.func.jvp(f, (fg.tensor(x[0]), fg.tensor(s[0])), (fg.tensor(x[1]), fg.tensor(s[1])))
    eps = 1e-6
    fd = (f(fg.tensor(x[0] + eps * x[1]), fg.tensor(s[0] + eps * s[1])).numpy()
          - f(fg.tensor(x[0] - eps * x[1]), fg.tensor(s[0] - eps * s[1])).numpy()) / (2 * eps)
    np.testing.assert_allclose(jt.numpy(), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_gradcheck(reduce):
    """Distinct values (no ties), and one zero among a product's; with include_self=False
    a src equal to x takes the whole gradient (x is no member)."""
    rng = np.random.default_rng(4)
    x = fg.tensor(rng.uniform(-1, 1, (3, 4)), requires_grad=True)
    s = fg.tensor(np.concatenate([rng.uniform(-1, 1, (3, 4)), [[0.0], [0.3], [0.0]]], 1), requires_grad=True)
    i = fg.tensor(rng.integers(0, 4, (3, 5)))
    for inc in (True, False):
        assert gradcheck(lambda a, b: a.scatter_reduce(1, i, b, reduce, include_self=inc), (x, s))
    xt = fg.tensor([[0.5, 2.0]], requires_grad=True)
    st = fg.tensor([[0.5]], requires_grad=True)
    fg.scatter_reduce(xt, 1, fg.tensor([[0]]), st, reduce, include_self=False).sum().backward()
    assert xt.grad.tolist() == [[0.0, 1.0]] and st.grad.tolist() == [[1.0]]


def test_index_reduce_compiles_and_matches_torch(pt):
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (4, 3)).astype(np.float64) + 0.5
    src = rng.integers(-2, 3, (5, 3)).astype(np.float64)
    i = np.array([0, 2, 2, 3, 0])
    grid = [(r, inc) for r in ("prod", "mean", "amax", "amin") for inc in (True, False)]

    def fn(x, s, i):
        outs = [x.index_reduce(0, i, s, r, include_self=inc) for r, inc in grid]
        return outs, sum((o * (k + 1)).sum() for k, o in enumerate(outs))
    xt, st = pt.tensor(x, requires_grad=True), pt.tensor(src, requires_grad=True)
    outs, loss = fn(xt, st, pt.tensor(i))
    loss.backward()
    f = fg.compile(fn)
    xf, sf = fg.tensor(x, requires_grad=True), fg.tensor(src, requires_grad=True)
    got, gl = f(xf, sf, fg.tensor(i))
    gl.backward()
    assert f.cache_info()["graph_breaks"] == []
    for g, w in zip(got + [xf.grad, sf.grad], outs + [xt.grad, st.grad]):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_errors_keep_their_messages():
    x, i = fg.zeros(2, 3), fg.tensor([[0, 1]])
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin"):
        x.scatter_reduce(1, i, fg.ones(1, 2), "max_")
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter_reduce(1, i, fg.ones(1, 2, dtype=fg.float64), "amax")
    with pytest.raises(RuntimeError, match="out of bounds for dimension 1 with size 3"):
        x.scatter_reduce(1, fg.tensor([[0, 7]]), fg.ones(1, 2), "amax")
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin"):
        x.index_reduce(0, fg.tensor([0]), fg.ones(1, 3), "sum")


def test_scatter_index_add_and_masked_scatter_refuse_as_torch():
    """Dtype and index checks with torch 2.13's errors: a source of another dtype (scatter_add,
    masked_scatter), a float index, an index larger than the source, index_add_ out of range
    (IndexError), tensors that do not broadcast (broadcast_tensors, a distribution's
    parameters); and scatter_reduce's 'max'/'min' spellings of amax/amin."""
    torch = pytest.importorskip("torch")

    def program(lib):
        f32, f64, i = lib.zeros(2), lib.ones(1, dtype=lib.float64), lib.tensor([0])
        out = errors_of((
            lambda: f32.scatter_add(0, i, f64), lambda: f32.masked_scatter(lib.tensor([True, False]), f64),
            lambda: lib.zeros(3).index_add_(0, lib.tensor([5]), lib.ones(1)),
            lambda: lib.zeros(3).index_add_(0, lib.tensor([1.0]), lib.ones(1)),
            lambda: lib.zeros(3, 2).scatter_add_(0, lib.tensor([[0, 1, 2]]), lib.ones(1, 2)),
            lambda: lib.zeros(3, 2).scatter_add(0, lib.tensor([[0.0, 1.0]]), lib.ones(1, 2)),
            lambda: lib.broadcast_tensors(lib.zeros(3), lib.ones(2)),
            lambda: lib.distributions.Normal(lib.zeros(3), lib.ones(2))))
        for red in ("max", "min"):
            src = lib.tensor([2.0, 5.0, -1.0])
            out.append(lib.zeros(3).scatter_reduce(0, lib.tensor([0, 0, 1]), src, red).tolist())
        return out
    assert program(fg) == program(torch)
