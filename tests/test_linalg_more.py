"""The torch.linalg functions beyond Cholesky (norms, distances, inverse, determinants,
solve, matrix exponential and powers, QR, products) and their top-level aliases, against
PyTorch: values on batched float32/float64 inputs, errors, gradients to second order,
vmap and forward-mode tangents of the primitives, and one compiled function."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

_rng = np.random.default_rng(3)
INF = float("inf")


def _mats(*shape):
    """Well-conditioned square matrices (identity-dominated) of ``shape``."""
    return _rng.standard_normal(shape) + 2 * np.eye(shape[-1])


def _same(got, want, rtol, atol=0.0):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and g.numpy().dtype == w.numpy().dtype
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=rtol, atol=atol)


def _call(mod, fname: str, *arrays, **kw):
    """``mod.fname`` (dotted, e.g. "linalg.inv") called on tensors of ``arrays``."""
    f = mod
    for part in fname.split("."):
        f = getattr(f, part)
    return f(*map(mod.tensor, arrays), **kw)


def _both(fname: str, *arrays, **kw):
    return _call(fg, fname, *arrays, **kw), _call(torch, fname, *arrays, **kw)


VALUE_CASES = [
    ("linalg.vector_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=2)),
    ("linalg.vector_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=3.5, dim=(0, 2), keepdim=True)),
    ("linalg.vector_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=INF, dim=1)),
    ("linalg.vector_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=-INF, dim=-1)),
    ("linalg.vector_norm", lambda: [np.array([0.0, 1.5, 0.0, -2.0])], dict(ord=0)),
    ("linalg.vector_norm", lambda: [_rng.standard_normal((5,))], dict(ord=-1.5)),
    ("linalg.matrix_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord="fro")),
    ("linalg.matrix_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=1, keepdim=True)),
    ("linalg.matrix_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=-1, dim=(0, 2))),
    ("linalg.matrix_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=INF)),
    ("linalg.matrix_norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=-INF, dim=(2, 1))),
    ("linalg.norm", lambda: [_rng.standard_normal((2, 3, 4))], {}),
    ("linalg.norm", lambda: [_rng.standard_normal((3, 4))], dict(ord=INF)),
    ("linalg.norm", lambda: [_rng.standard_normal((2, 3, 4))], dict(ord=1, dim=1)),
    ("dist", lambda: [_rng.standard_normal((2, 3)), _rng.standard_normal(3)], dict(p=3)),
    ("cdist", lambda: [_rng.standard_normal((2, 5, 3)), _rng.standard_normal((4, 3))], {}),
    ("cdist", lambda: [_rng.standard_normal((5, 3)), _rng.standard_normal((4, 3))], dict(p=1.0)),
    ("linalg.inv", lambda: [_mats(2, 3, 4, 4)], {}),
    ("inverse", lambda: [_mats(1, 1)], {}),
    ("linalg.det", lambda: [_mats(2, 3, 4, 4)], {}),
    ("det", lambda: [_mats(1, 1)], {}),
    ("linalg.slogdet", lambda: [_mats(3, 4, 4)], {}),
    ("logdet", lambda: [_mats(3, 4, 4)], {}),
    ("linalg.solve", lambda: [_mats(2, 3, 4, 4), _rng.standard_normal((3, 4, 2))], {}),
    ("linalg.solve", lambda: [_mats(3, 4, 4), _rng.standard_normal((3, 4))], {}),
    ("linalg.solve", lambda: [_mats(3, 4, 4), _rng.standard_normal((2, 4))], dict(left=False)),
    ("linalg.matrix_exp", lambda: [_rng.standard_normal((2, 3, 4, 4)) * 2], {}),
    ("matrix_exp", lambda: [_rng.standard_normal((1, 1))], {}),
    ("linalg.matrix_power", lambda: [_mats(2, 3, 3)], dict(n=5)),
    ("linalg.matrix_power", lambda: [_mats(2, 3, 3)], dict(n=0)),
    ("linalg.matrix_power", lambda: [_mats(2, 3, 3)], dict(n=-2)),
    ("linalg.cross", lambda: [_rng.standard_normal((2, 3, 4)), _rng.standard_normal((1, 3, 4))], dict(dim=1)),
    ("cross", lambda: [_rng.standard_normal((4, 3)), _rng.standard_normal((4, 3))], dict(dim=1)),
    ("linalg.vecdot", lambda: [_rng.standard_normal((2, 3, 4)), _rng.standard_normal((3, 4))], {}),
    ("tensordot", lambda: [_rng.standard_normal((2, 3, 4)), _rng.standard_normal((4, 3, 5))], dict(dims=([1, 2], [1, 0]))),
    ("tensordot", lambda: [_rng.standard_normal((2, 3, 4)), _rng.standard_normal((3, 4, 5))], {}),
    ("tensordot", lambda: [_rng.standard_normal((1, 4)), _rng.standard_normal((1, 4, 2))], dict(dims=([1, 0], [1, 0]))),
    ("tensordot", lambda: [_rng.standard_normal((2, 1)), _rng.standard_normal((3, 5))], dict(dims=1)),
    ("kron", lambda: [_rng.standard_normal((2, 3)), _rng.standard_normal((2, 2, 2))], {}),
    ("block_diag", lambda: [_rng.standard_normal((2, 3)), _rng.standard_normal(2), np.array(1.5)], {}),
    ("cartesian_prod", lambda: [_rng.standard_normal(2), _rng.standard_normal(3), _rng.standard_normal(2)], {}),
    ("cov", lambda: [_rng.standard_normal((3, 6))], {}),
    ("cov", lambda: [_rng.standard_normal((3, 6)), _rng.integers(1, 4, 6), _rng.random(6)], "weights"),
    ("corrcoef", lambda: [_rng.standard_normal((3, 6))], {}),
    ("linalg.qr", lambda: [_rng.standard_normal((2, 5, 3))], {}),
    ("linalg.qr", lambda: [_rng.standard_normal((2, 3, 5))], dict(mode="complete")),
    ("linalg.qr", lambda: [_rng.standard_normal((5, 3))], dict(mode="r")),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,gen,kw", VALUE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(VALUE_CASES)])
def test_values_match_torch(name, gen, kw, dtype):
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in gen()]
    if kw == "weights":  # cov's weights are keywords
        x, f, w = arrays
        got = fg.cov(fg.tensor(x), correction=2, fweights=fg.tensor(f), aweights=fg.tensor(w))
        want = torch.cov(torch.tensor(x), correction=2, fweights=torch.tensor(f), aweights=torch.tensor(w))
    else:
        got, want = _both(name, *arrays, **kw)
    tol = 1e-10 if dtype == np.float64 else 2e-4
    _same(tuple(got) if isinstance(got, tuple) else got, tuple(want) if isinstance(want, tuple) else want, tol, tol)


def test_determinant_gradients_of_singular_matrices_as_torch():
    """det's gradient at a singular matrix is 0 (also where the incoming gradient is 0, in a
    batch); slogdet's and logdet's are the inverse through LU factors with a zero pivot: inf
    and NaN entries as PyTorch's, not the inversion's error."""
    mats = [[[1.0, 2.0], [2.0, 4.0]], [[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], [[0.0, 0.0], [0.0, 0.0]],
            [[1.0, 2, 3], [2, 4, 6], [1, 0, 1]]]
    for a in mats:
        for name in ("linalg.det", "logdet"):
            grads = []
            for m in (fg, torch):
                x = m.tensor(a, dtype=m.float64, requires_grad=True)
                fn = m.linalg.det if name == "linalg.det" else m.logdet
                grads.append(m.autograd.grad(fn(x), [x])[0].numpy())
            np.testing.assert_array_equal(grads[0], grads[1])
    x = fg.tensor([mats[0], [[2.0, 1.0], [1.0, 3.0]]], dtype=fg.float64, requires_grad=True)
    (fg.linalg.det(x) * fg.tensor([0.0, 1.0], dtype=fg.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [np.zeros((2, 2)), [[3.0, -1.0], [-1.0, 2.0]]], rtol=1e-12)


def test_norms_below_one_and_negative_have_zero_gradients_at_zero_elements_as_torch():
    """vector_norm with 0 < p < 1 or p < 0, and cdist with p < 1, where an element (a
    difference) is 0: PyTorch's zero gradient there (the inf derivative of |x|**p times abs's
    0 was NaN), eagerly and compiled."""
    a = np.array([[0.0, 0.0], [1.0, 2.0], [1.0, 0.0]])

    def f(m, x):
        return sum(m.linalg.vector_norm(x, p, -1).sum() for p in (0.3, 0.5, -0.5, -2.0)) + m.cdist(x, x, p=0.5).sum()
    t = torch.tensor(a, requires_grad=True)
    want, = torch.autograd.grad(f(torch, t), [t])
    for fn in (lambda x: f(fg, x), fg.compile(lambda x: f(fg, x))):
        x = fg.tensor(a, requires_grad=True)
        got, = fg.autograd.grad(fn(x), [x])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_matrix_exp_to_1e12_over_scales():
    for scale in (1e-3, 1.0, 8.0):
        a = _rng.standard_normal((3, 5, 5)) * scale
        got, want = _both("linalg.matrix_exp", a)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12 * np.abs(want.numpy()).max())


def test_methods_and_aliases():
    a = _mats(2, 3, 3)
    x, t = fg.tensor(a), torch.tensor(a)
    for m in ("inverse", "det", "slogdet", "logdet", "matrix_exp"):
        g, w = getattr(x, m)(), getattr(t, m)()
        _same(tuple(g) if isinstance(g, tuple) else g, tuple(w) if isinstance(w, tuple) else w, 1e-12, 1e-12)
    _same(x.matrix_power(3), t.matrix_power(3), 1e-12)
    _same(x.dist(x * 2), t.dist(t * 2), 1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.qr is deprecated
        _same(tuple(fg.qr(x)), tuple(torch.qr(t)), 1e-12, 1e-12)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        g = fg.cross(x, x * 2 + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(g, torch.cross(t, t * 2 + 1), 1e-12)


def test_edge_shapes():
    for shape in ((0, 3, 3), (2, 0, 0), (1, 1)):
        a = _mats(*shape) if shape[-1] else np.zeros(shape)
        for f in ("linalg.inv", "linalg.det", "linalg.matrix_exp"):
            got, want = _both(f, a)
            _same(got, want, 1e-12)
    got, want = _both("linalg.vector_norm", np.zeros((0, 3)), dim=1)
    _same(got, want, 0)


def test_errors_as_torch():
    sing = np.array([[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [2.0, 4.0]]])
    for f, arrays in (("linalg.inv", [sing]), ("linalg.inv", [sing[1]]), ("linalg.solve", [sing, np.ones((2, 2))])):
        with pytest.raises(torch.linalg.LinAlgError) as want:
            _call(torch, f, *arrays)
        with pytest.raises(fg.linalg.LinAlgError) as got:  # fusegrad's adds the operands and the call site
            _call(fg, f, *arrays)
        assert str(want.value) in str(got.value)
    s, ld = fg.linalg.slogdet(fg.tensor(sing))
    np.testing.assert_array_equal(s.numpy(), [-1, 0])
    assert ld.numpy()[1] == -INF and fg.linalg.det(fg.tensor(sing)).numpy()[1] == 0
    bad = [("linalg.inv", [np.ones((2, 3))], {}), ("linalg.det", [np.ones((2, 2), np.int64)], {}),
           ("linalg.solve", [np.eye(2), np.ones(3)], {}), ("linalg.matrix_norm", [np.ones(3)], {}),
           ("linalg.matrix_norm", [np.ones((3, 3))], dict(ord=3)), ("linalg.norm", [np.ones((2, 3, 4))], dict(ord=2)),
           ("linalg.vector_norm", [np.ones((0, 3))], dict(ord=INF)),
           ("linalg.vector_norm", [np.ones((0, 3))], dict(ord=-1, dim=0)),
           ("linalg.vector_norm", [np.ones(3, np.int64)], {}),
           ("cdist", [np.ones((2, 3)), np.ones((4, 5))], {}), ("cdist", [np.ones((2, 3)), np.ones((4, 3))], dict(p=-1)),
           ("linalg.cross", [np.ones((2, 4)), np.ones((2, 4))], {}), ("linalg.matrix_power", [np.ones((2, 3))], dict(n=2)),
           ("linalg.qr", [np.ones((3, 3))], dict(mode="x"))]
    for f, arrays, kw in bad:
        with pytest.raises(RuntimeError) as want:
            _call(torch, f, *arrays, **kw)
        with pytest.raises(RuntimeError) as got:
            _call(fg, f, *arrays, **kw)
        assert str(want.value) in str(got.value), f


GRAD_CASES = {
    "vector_norm": lambda a, b: fg.linalg.vector_norm(a, 3.5, dim=-1),
    "vector_norm_inf": lambda a, b: fg.linalg.vector_norm(a, INF, dim=0),
    "matrix_norm": lambda a, b: fg.linalg.matrix_norm(a, 1) + fg.linalg.matrix_norm(a, "fro"),
    "cdist": lambda a, b: fg.cdist(a, b.mT),
    "inv": lambda a, b: fg.linalg.inv(a),
    "det": lambda a, b: fg.linalg.det(a),
    "slogdet": lambda a, b: fg.linalg.slogdet(a).logabsdet,
    "solve": lambda a, b: fg.linalg.solve(a, b),
    "matrix_exp": lambda a, b: fg.linalg.matrix_exp(a * 0.5),
    "matrix_power": lambda a, b: fg.linalg.matrix_power(a, -3),
    "cross_vecdot": lambda a, b: fg.linalg.cross(a[..., :2, :], b.mT) + fg.linalg.vecdot(a, a)[..., :1],
    "tensordot_kron": lambda a, b: fg.tensordot(a, b, ([2], [1])).sum() + fg.kron(a, b).sum(),
    "cov_corrcoef": lambda a, b: fg.cov(a[0]) + fg.corrcoef(a[0]),
    "qr": lambda a, b: fg.linalg.qr(a),
    "qr_wide": lambda a, b: fg.linalg.qr(a[..., :2, :]),
    "qr_tall": lambda a, b: fg.linalg.qr(b),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck_and_gradgradcheck(name):
    a = fg.tensor(_mats(2, 3, 3), requires_grad=True)
    b = fg.tensor(_rng.standard_normal((2, 3, 2)), requires_grad=True)
    assert gradcheck(GRAD_CASES[name], (a, b))
    assert gradgradcheck(GRAD_CASES[name], (a, b))


def test_gradients_match_torch():
    a, b = _mats(2, 3, 3), _rng.standard_normal((2, 3, 2))
    xs = [fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)]
    ts = [torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)]

    def f(m, a, b):
        q, r = m.linalg.qr(b)
        return (m.linalg.solve(a, b) * 2 + m.linalg.inv(a) @ b + m.linalg.matrix_exp(a) @ q).sum() + \
            m.linalg.det(a).sum() + m.cdist(b, b).sum() + r.sum() + m.linalg.vector_norm(a - a.mT.detach())

    f(fg, *xs).backward()
    f(torch, *ts).backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_norm_gradient_is_zero_at_zero():
    x, t = fg.zeros(2, 3, requires_grad=True), torch.zeros(2, 3, dtype=torch.float32, requires_grad=True)
    (fg.linalg.vector_norm(x, dim=1).sum() + fg.cdist(x, x).sum()).backward()
    (torch.linalg.vector_norm(t, dim=1).sum() + torch.cdist(t, t).sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("fname", ["inv", "det", "slogdet", "solve", "matrix_exp", "qr"])
def test_vmap_matches_a_loop(fname):
    a, b = _mats(4, 3, 3), _rng.standard_normal((4, 3, 2))
    fns = {"inv": lambda a, b: fg.linalg.inv(a), "det": lambda a, b: fg.linalg.det(a),
           "slogdet": lambda a, b: fg.linalg.slogdet(a).logabsdet, "solve": fg.linalg.solve,
           "matrix_exp": lambda a, b: fg.linalg.matrix_exp(a), "qr": lambda a, b: fg.linalg.qr(b).Q}
    f = fns[fname]
    got = fg.func.vmap(f)(fg.tensor(a), fg.tensor(b))
    want = np.stack([f(fg.tensor(a[i]), fg.tensor(b[i])).numpy() for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    got = fg.func.vmap(f, in_dims=(None, 0))(fg.tensor(a[0]), fg.tensor(b))  # an unbatched operand
    want = np.stack([f(fg.tensor(a[0]), fg.tensor(b[i])).numpy() for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fname", ["inv", "det", "solve", "matrix_exp", "qr"])
def test_jacfwd_matches_torch(fname):
    a = _mats(3, 3)
    b = _rng.standard_normal((3, 2))

    def f(m):
        return {"inv": lambda x: m.linalg.inv(x), "det": lambda x: m.linalg.det(x),
                "solve": lambda x: m.linalg.solve(x, m.tensor(b) if m is fg else torch.tensor(b)),
                "matrix_exp": lambda x: m.linalg.matrix_exp(x), "qr": lambda x: m.linalg.qr(x).Q}[fname]
    got = fg.func.jacfwd(f(fg))(fg.tensor(a))
    want = torch.func.jacfwd(f(torch))(torch.tensor(a))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)


def test_compiled_matches_eager():
    a, v = _mats(2, 3, 3) * 0.5, _rng.standard_normal((2, 3))

    def step(a, v):
        y = fg.linalg.matrix_exp(a * 0.3) @ fg.linalg.inv(a)
        return fg.linalg.vector_norm(y, dim=(-2, -1)).sum() + fg.linalg.norm(v * 2.0 + 1.0)

    results = []
    for f in (step, fg.compile(step, backend="cpu")):
        x, w = fg.tensor(a, requires_grad=True), fg.tensor(v, requires_grad=True)
        out = f(x, w)
        out.backward()
        results.append((out.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
    for e, c in zip(*results):
        np.testing.assert_allclose(c, e, rtol=1e-10, atol=1e-12)


def test_norm_gradient_at_a_zero_vector_matches_torch():
    """Tensor.norm's gradient at an all-zero vector is 0, as torch's (it was NaN: the
    derivative of sqrt at 0 times 0), for every p; F.normalize's follows its eps clamp."""

    def run(lib):
        out = []
        fs = [lambda x: x.norm(dim=0), lambda x: x.norm(), lambda x: x.norm(p=3, dim=0), lambda x: x.norm(p=1),
              lambda x: x.norm(p=float("inf"), dim=0), lambda x: lib.nn.functional.normalize(x, dim=0),
              lambda x: x.norm(p="fro", dim=(0, 1), keepdim=True)]
        for f in fs:
            x = lib.zeros(3, 2, dtype=lib.float64)
            x[:, 1] = lib.tensor([1.0, -2.0, 3.0], dtype=lib.float64)
            x.requires_grad_()
            y = f(x)
            y.sum().backward()
            out.append((y.detach().numpy(), x.grad.numpy()))
        return out

    for (gy, gg), (wy, wg) in zip(run(fg), run(torch), strict=True):
        np.testing.assert_allclose(gy, wy, rtol=1e-12)
        np.testing.assert_allclose(gg, wg, rtol=1e-12)


def test_zero_norms_and_distances_keep_the_graph_with_zero_gradients():
    """p = 0 (the count of nonzeros) in vector_norm, Tensor.norm, cdist and
    pairwise_distance: the result requires grad and backward gives zeros, as PyTorch's."""
    a0 = np.random.default_rng(0).standard_normal((5, 3))
    a0[1, 2] = 0.0
    res = []
    for m in (fg, torch):
        a = m.tensor(a0, requires_grad=True)
        b = m.tensor(a0[:4] * 0.5)
        outs = [m.cdist(a, b, p=0), m.nn.functional.pairwise_distance(a, b[:1], p=0),
                m.linalg.vector_norm(a, ord=0, dim=-1), a.norm(p=0, dim=1)]
        assert all(o.requires_grad for o in outs)
        sum(o.sum() for o in outs).backward()
        res.append([o.detach().numpy() for o in outs] + [a.grad.numpy()])
    for ours, theirs in zip(*res):
        np.testing.assert_array_equal(ours, theirs)


def test_triangular_solve_matches_torch():
    """The deprecated torch.triangular_solve (upper/lower, transpose, unitriangular, a batched
    right-hand side): solution, the broadcast coefficient copy and gradients as PyTorch's."""
    a0 = np.triu(np.random.default_rng(0).standard_normal((3, 3))) + 3 * np.eye(3)
    b0 = np.random.default_rng(1).standard_normal((2, 3, 2))
    res = []
    for m in (fg, torch):
        a, b = m.tensor(a0, requires_grad=True), m.tensor(b0, requires_grad=True)
        outs = []
        for upper in (True, False):
            for transpose in (True, False):
                for unit in (True, False):
                    r = m.triangular_solve(b, a if upper else a.mT, upper=upper, transpose=transpose,
                                           unitriangular=unit)
                    outs.append(r.solution)
        total = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
        total.backward()
        res.append([o.detach().numpy() for o in outs] + [r.cloned_coefficient.detach().numpy(), a.grad.numpy(),
                                                         b.grad.numpy(), b.triangular_solve(a).solution.detach().numpy()])
    for ours, theirs in zip(*res):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
