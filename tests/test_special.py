"""torch.special (fusegrad/special.py) and the top-level special functions against PyTorch:
values over grids with the edge cases (0, negative, large, inf, NaN, the poles of lgamma
and digamma, erfinv at +-1) in float32 and float64, gradients against torch's and
gradcheck/gradgradcheck in float64, forward mode, vmap, and one compiled function (the
primitives have no kernel lowering: the compiled graph breaks there, with that note)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
from helpers import check_breaks_at
import fusegrad.special as fs
from fusegrad.autograd import gradcheck, gradgradcheck
from fusegrad.func import jvp, vmap
from fusegrad.passes import batching

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

INF, NAN = math.inf, math.nan
# the real line, with the poles of lgamma/digamma (0, -1, -2, ...), signed zeros and the
# points where the algorithms change branch (digamma's 10, erfcx's 26, the Bessel 30)
LINE = np.array([0.0, -0.0, -1.0, -2.0, -7.0, -0.5, -1.5, -2.7, -9.99, -25.3, -40.0, 1e-300, 1e-30, 1e-8, 0.1, 0.5,
                 1.0, 1.0 + 1e-9, 1.5, 2.0, 2.0 - 1e-9, 2.5, 3.0, 5.5, 9.999, 10.0, 10.001, 25.9, 26.0, 26.1, 29.99,
                 30.0, 30.01, 50.0, 88.0, 171.5, 700.0, 1e10, 1e300, INF, -INF, NAN])
UNIT = np.array([-1.0, -0.999999, -0.9, -0.5, -0.4999, -1e-30, 0.0, -0.0, 1e-300, 0.3, 0.5, 0.5001, 0.75, 0.99,
                 1 - 1e-12, 1 - 2 ** -52, 1.0, 1.5, -1.5, INF, NAN])
PROB = np.array([0.0, 1e-300, 1e-100, 1e-20, 1e-5, 0.02, 0.2499, 0.25, 0.5, 0.75, 0.7501, 0.98, 1 - 1e-10,
                 1 - 2 ** -53, 1.0, -0.1, 1.1, NAN])
_rng = np.random.default_rng(7)
RANDOM = np.concatenate([_rng.uniform(-30, 30, 200), _rng.uniform(0, 3, 100)])

# name -> (inputs, float64 rtol): functions of one tensor
UNARY = {
    "expit": (LINE, 1e-12), "logit": (PROB, 1e-12), "erf": (LINE, 1e-12), "erfc": (LINE, 1e-12),
    "erfcx": (LINE, 1e-12), "erfinv": (UNIT, 1e-12), "exp2": (LINE, 1e-12), "expm1": (LINE, 1e-12),
    "log1p": (LINE, 1e-12), "entr": (LINE, 1e-12), "sinc": (LINE, 1e-12), "round": (LINE, 0),
    "gammaln": (LINE, 1e-12), "digamma": (LINE, 1e-12), "psi": (LINE, 1e-12), "i0": (LINE, 1e-12),
    "i0e": (LINE, 1e-12), "i1": (LINE, 1e-12), "i1e": (LINE, 1e-12), "ndtr": (LINE, 1e-12),
    "ndtri": (PROB, 1e-12), "log_ndtr": (LINE, 1e-12),
}
# PyTorch's i0 and i1 give NaN at +-inf (its Chebyshev series); fusegrad gives +-inf
TORCH_NAN_AT_INF = {"i0", "i1"}
# PyTorch's ndtr loses its left tail (1e-12 is 2e-6 off at -7, and it is 0 below about -8.3):
# the reference there is erfc(-x / sqrt(2)) / 2, which fusegrad's ndtr computes; it still
# matches torch.special.ndtr within an absolute 1e-16
REFERENCE = {"ndtr": lambda t: torch.special.erfc(-t * math.sqrt(0.5)) / 2}


def _torch(name, t):
    return (REFERENCE.get(name) or getattr(torch.special, name))(t)


def _check(ours, theirs, rtol, atol, what):
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=f"{what}: NaN pattern")
    inf = np.isinf(theirs)
    np.testing.assert_array_equal(ours[inf], theirs[inf], err_msg=f"{what}: infinities")
    fin = ~np.isnan(theirs) & ~inf
    np.testing.assert_allclose(ours[fin], theirs[fin], rtol=rtol, atol=atol, err_msg=what)


def _inputs(name, x):
    if name in TORCH_NAN_AT_INF:
        x = x[~np.isinf(x)]
    return np.concatenate([x, RANDOM]) if x is LINE or x.min() < -30 else x


@pytest.mark.parametrize("name", sorted(UNARY))
def test_values_float64(name):
    x, rtol = UNARY[name]
    x = _inputs(name, x)
    ours = getattr(fs, name)(fg.tensor(x, dtype=fg.float64))
    assert ours.dtype == fg.float64
    _check(ours.numpy(), _torch(name, torch.tensor(x)).numpy(), rtol, 1e-300, name)
    if name in REFERENCE:
        np.testing.assert_allclose(ours.numpy(), getattr(torch.special, name)(torch.tensor(x)).numpy(), rtol=1e-15,
                                   atol=1e-16)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_values_float32(name):
    """float32: against PyTorch's float64 values at the same float32 inputs (PyTorch's own
    float32 kernels are less accurate than fusegrad's, which compute in float64), with
    float32's tolerance; and the NaN/inf pattern of PyTorch's float32 result."""
    with np.errstate(over="ignore"):
        x = _inputs(name, UNARY[name][0]).astype(np.float32)
    x = x[~np.isinf(x)] if name in TORCH_NAN_AT_INF else x
    ours = getattr(fs, name)(fg.tensor(x))
    assert ours.dtype == fg.float32
    t32 = _torch(name, torch.tensor(x))
    want = _torch(name, torch.tensor(x, dtype=torch.float64)).numpy()
    # where float64 is finite but float32 overflows or underflows, PyTorch's float32 decides
    lim = np.isinf(t32.numpy()) & np.isfinite(want)
    want = np.where(lim, t32.numpy(), want)
    # sinc multiplies by pi in float32 (as PyTorch): near its zeros only an absolute tolerance holds
    _check(ours.numpy(), want.astype(np.float32), 2e-6 if name != "round" else 0, 1e-6 if name == "sinc" else 1e-37,
           name)
    _check(ours.numpy(), t32.numpy(), 1e-4, 1e-6 if name == "sinc" else 1e-37, name + " (torch float32)")


def test_polygamma_and_multigammaln_values():
    x = np.concatenate([LINE[np.abs(LINE) < 1e20], RANDOM])
    for n in range(6):
        for dt in (torch.float64, torch.float32):
            want = torch.special.polygamma(n, torch.tensor(x, dtype=dt)).numpy()
            ours = fs.polygamma(n, fg.tensor(x, dtype=fg.float64 if dt == torch.float64 else fg.float32)).numpy()
            # PyTorch's trigamma (n = 1) is a short asymptotic series: ~1e-8 relative
            rtol = (1e-7 if n == 1 else 1e-11) if dt == torch.float64 else 1e-4
            _check(ours, want, rtol, 1e-30, f"polygamma({n}) {dt}")
    a = np.array([1.5, 2.0, 3.7, 10.0, 100.0])
    for p in (1, 2, 3, 5):
        ok = a[a > (p - 1) / 2]
        _check(fs.multigammaln(fg.tensor(ok, dtype=fg.float64), p).numpy(),
               torch.special.multigammaln(torch.tensor(ok), p).numpy(), 1e-12, 0, f"multigammaln p={p}")
    with pytest.raises(RuntimeError, match=r"greater than \(p-1\)/2"):
        fs.multigammaln(fg.tensor([1.0]), 3)


def test_zeta_xlogy_xlog1py_with_scalars_and_broadcasting():
    s = np.array([[1.0], [1.5], [2.0], [3.0], [4.5], [0.5], [INF], [NAN]])
    q = np.array([1.0, 2.0, 0.5, 7.25, -1.5, -2.0, 0.0, 1e9, INF])
    _check(fs.zeta(fg.tensor(s, dtype=fg.float64), fg.tensor(q, dtype=fg.float64)).numpy(),
           torch.special.zeta(torch.tensor(s), torch.tensor(q)).numpy(), 1e-12, 0, "zeta")
    _check(fs.zeta(3.0, fg.tensor(q[:4])).numpy(), torch.special.zeta(3.0, torch.tensor(q[:4])).numpy(), 1e-6, 0,
           "zeta(scalar, t)")
    _check(fs.zeta(fg.tensor([2.0, 3.0]), 2).numpy(), torch.special.zeta(torch.tensor([2.0, 3.0]), 2).numpy(), 1e-6, 0,
           "zeta(t, scalar)")
    a = np.array([0.0, 0.0, 1.0, -2.0, 3.0, 0.5])
    b = np.array([NAN, -1.0, -1.0, 2.0, 0.0, 1e-20])
    for name in ("xlogy", "xlog1py"):
        f, g = getattr(fs, name), getattr(torch.special, name)
        _check(f(fg.tensor(a), fg.tensor(b)).numpy(), g(torch.tensor(a), torch.tensor(b)).numpy(), 1e-6, 0, name)
        _check(f(fg.tensor(a), 3.0).numpy(), g(torch.tensor(a), 3.0).numpy(), 1e-6, 0, name + "(t, scalar)")
        _check(f(2.0, fg.tensor(b)).numpy(), g(2.0, torch.tensor(b)).numpy(), 1e-6, 0, name + "(scalar, t)")


def test_xlogy_xlog1py_gradients_where_x_is_zero():
    """d/dx x*log(y) is log(y) also at x = 0 (0 where that log is not finite), as PyTorch's:
    a Dirichlet's, Beta's or Gamma's log_prob gradient at concentration 1 depends on it."""
    x = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 0.5])
    y = np.array([2.0, -1.0, 0.0, 3.0, 0.0, 0.25])
    for name in ("xlogy", "xlog1py"):
        grads = []
        for lib, mod in ((fg, fs), (torch, torch.special)):
            a, b = lib.tensor(x, requires_grad=True), lib.tensor(y, requires_grad=True)
            getattr(mod, name)(a, b).sum().backward()
            grads.append(a.grad.numpy())
        _check(grads[0], grads[1], 1e-12, 0, name + " d/dx")
    conc = np.array([1.0, 1.0, 2.0])
    got = []
    for lib in (fg, torch):
        c = lib.tensor(conc, requires_grad=True)
        d = lib.distributions
        (d.Dirichlet(c).log_prob(lib.tensor([0.2, 0.3, 0.5], dtype=lib.float64))
         + d.Beta(c[0], c[2]).log_prob(lib.tensor(0.3, dtype=lib.float64))
         + d.Gamma(c[1], c[2]).log_prob(lib.tensor(0.3, dtype=lib.float64))).backward()
        got.append(c.grad.numpy())
    _check(got[0], got[1], 1e-10, 0, "log_prob gradient at concentration 1")


def test_wrappers_keep_pytorchs_signatures():
    x = np.array([[0.3, -1.2, 2.5], [1.0, 0.0, -0.7]], np.float32)
    fx, tx = fg.tensor(x), torch.tensor(x)
    for ours, theirs in [(fs.softmax(fx, 1), torch.special.softmax(tx, 1)),
                         (fs.log_softmax(fx, 0, dtype=fg.float64), torch.special.log_softmax(tx, 0, dtype=torch.float64)),
                         (fs.logsumexp(fx, 1, keepdim=True), torch.special.logsumexp(tx, 1, keepdim=True)),
                         (fs.logit(fx.sigmoid(), eps=0.2), torch.special.logit(tx.sigmoid(), eps=0.2)),
                         (fs.round(fx * 100.123, decimals=2), torch.special.round(tx * 100.123, decimals=2)),
                         (fs.round(fx * 100.123, decimals=-1), torch.special.round(tx * 100.123, decimals=-1)),
                         (fs.expit(fg.tensor([1, 2])), torch.special.expit(torch.tensor([1, 2]))),
                         (fs.gammaln(fg.tensor([3, 4])), torch.special.gammaln(torch.tensor([3, 4])))]:
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)
    out = fg.empty(0)
    r = fs.i0e(fg.tensor([1.0, 2.0]), out=out)
    assert r is out and np.allclose(out.numpy(), torch.special.i0e(torch.tensor([1.0, 2.0])).numpy())
    assert fs.psi is fs.digamma and fs.gammaln is fs.lgamma


def test_top_level_functions_and_methods():
    """torch.erfinv/lgamma/digamma/polygamma/i0/sinc and their Tensor methods and in-place
    forms (fusegrad/__init__.py imports fusegrad.special before binding the methods)."""
    x = np.array([0.2, 1.5, 3.0, 7.5])
    fx, tx = fg.tensor(x), torch.tensor(x)
    for name in ("lgamma", "digamma", "i0", "sinc"):
        np.testing.assert_allclose(getattr(fg, name)(fx).numpy(), getattr(torch, name)(tx).numpy(), rtol=1e-12)
        np.testing.assert_allclose(getattr(fx, name)().numpy(), getattr(tx, name)().numpy(), rtol=1e-12)
        a, b = fx.clone(), tx.clone()
        getattr(a, name + "_")()
        getattr(b, name + "_")()
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    y = fg.tensor(x / 8)
    np.testing.assert_allclose(fg.erfinv(y).numpy(), torch.erfinv(torch.tensor(x / 8)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.erfinv().numpy(), torch.tensor(x / 8).erfinv().numpy(), rtol=1e-12)
    for n in (0, 1, 3):
        want = torch.polygamma(n, tx).numpy()
        np.testing.assert_allclose(fg.polygamma(n, fx).numpy(), want, rtol=1e-7)
        np.testing.assert_allclose(fx.polygamma(n).numpy(), want, rtol=1e-7)
        a = fx.clone()
        a.polygamma_(n)
        np.testing.assert_allclose(a.numpy(), want, rtol=1e-7)
    for name in ("i0_", "sinc_"):  # torch.i0_ and torch.sinc_ exist (not torch.lgamma_)
        a = fx.clone()
        getattr(fg, name)(a)
        np.testing.assert_allclose(a.numpy(), getattr(torch, name)(tx.clone()).numpy(), rtol=1e-12)
    assert fg.lgamma(fg.tensor([2, 3])).dtype == fg.float32  # integers become the default float
    with pytest.raises(RuntimeError, match="negative n"):
        fg.polygamma(-1, fx)


# ---------------------------------------------------------------- gradients
# (name, call on fusegrad, call on torch, float64 inputs on the function's smooth domain)
_POS = np.array([0.3, 0.9, 1.7, 2.0, 4.2, 12.5])
_ANY = np.array([-2.6, -0.7, 0.3, 1.1, 3.9, 31.0])
_NEG = np.array([-3.4, -1.25, -0.5, 0.4, 2.2, 14.0])  # (digamma/polygamma: away from the poles)
GRADS = [
    ("gammaln", lambda f, x: f.special.gammaln(x), _NEG),
    ("digamma", lambda f, x: f.special.digamma(x), _NEG),
    ("polygamma1", lambda f, x: f.special.polygamma(1, x), _NEG),
    ("polygamma2", lambda f, x: f.special.polygamma(2, x), _POS),
    ("polygamma3", lambda f, x: f.special.polygamma(3, x), _NEG),
    ("multigammaln", lambda f, x: f.special.multigammaln(x, 3), _POS + 1.0),
    ("erfinv", lambda f, x: f.special.erfinv(x), np.array([-0.95, -0.4, 0.0, 0.3, 0.7, 0.999])),
    ("ndtri", lambda f, x: f.special.ndtri(x), np.array([1e-3, 0.1, 0.3, 0.5, 0.8, 0.99])),
    ("erfcx", lambda f, x: f.special.erfcx(x), np.array([-3.0, -0.3, 0.2, 0.5, 4.0, 30.0])),
    ("erfc", lambda f, x: f.special.erfc(x), np.array([-3.0, -0.3, 0.2, 0.5, 4.0, 9.0])),
    ("ndtr", lambda f, x: f.special.ndtr(x), _ANY),
    ("log_ndtr", lambda f, x: f.special.log_ndtr(x), np.array([-40.0, -3.0, -1.0, -0.2, 2.0, 9.0])),
    ("i0", lambda f, x: f.special.i0(x), _ANY),
    ("i0e", lambda f, x: f.special.i0e(x), _ANY),
    ("i1", lambda f, x: f.special.i1(x), np.concatenate([_ANY, [0.0]])),
    ("i1e", lambda f, x: f.special.i1e(x), np.concatenate([_ANY, [0.0]])),
    ("entr", lambda f, x: f.special.entr(x), _POS),
    ("sinc", lambda f, x: f.special.sinc(x), np.concatenate([_ANY, [0.0]])),
    ("xlog1py", lambda f, x: f.special.xlog1py(x, x * x), _ANY),
    ("zeta_q", lambda f, x: f.special.zeta(3.5, x), _POS),
    ("expit", lambda f, x: f.special.expit(x), _ANY),
    ("logit", lambda f, x: f.special.logit(x / 80 + 0.5), _ANY),
]


@pytest.mark.parametrize("name,fn,x", GRADS, ids=[g[0] for g in GRADS])
def test_gradient_matches_torch(name, fn, x):
    g = np.random.default_rng(3).standard_normal(x.shape)
    fx = fg.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    fy, ty = fn(fg, fx), fn(torch, tx)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-7 if "polygamma1" in name else 1e-11)
    (fy * fg.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-7 if name in ("digamma", "polygamma1")
                               else 1e-10, atol=1e-12)


GRADCHECKED = ["gammaln", "digamma", "polygamma1", "polygamma3", "erfinv", "ndtri", "erfcx", "log_ndtr", "i0",
               "i0e", "i1", "i1e", "zeta_q", "multigammaln"]


@pytest.mark.parametrize("name", GRADCHECKED)
def test_gradcheck_float64(name):
    _, fn, x = next(g for g in GRADS if g[0] == name)
    x = x[x != 0] if name in ("i1", "i1e") else x  # (finite differences across 0 are fine; keep it simple)
    assert gradcheck(lambda t: fn(fg, t), (fg.tensor(x, requires_grad=True),))
    if name in ("gammaln", "digamma", "erfinv", "ndtri", "i1", "i1e", "log_ndtr", "zeta_q"):
        assert gradgradcheck(lambda t: fn(fg, t), (fg.tensor(x, requires_grad=True),))


def test_second_derivatives_match_torch():
    x = np.array([-1.3, 0.4, 2.5, 6.0])
    for fname in ("lgamma", "digamma", "i0"):
        fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        (g1,) = fg.autograd.grad(getattr(fg, fname)(fx).sum(), fx, create_graph=True)
        (g2,) = fg.autograd.grad(g1.sum(), fx)
        (t1,) = torch.autograd.grad(getattr(torch, fname)(tx).sum(), tx, create_graph=True)
        (t2,) = torch.autograd.grad(t1.sum(), tx)
        np.testing.assert_allclose(g2.numpy(), t2.numpy(), rtol=1e-7, err_msg=fname)


def test_zeta_gradient_in_its_first_argument_is_not_implemented():
    s = fg.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        fs.zeta(s, fg.tensor([1.0, 2.0])).sum().backward()


def test_grad_fn_names_follow_torch():
    x = np.array([0.3, 0.6])
    for fname in ("lgamma", "digamma", "erfinv", "i0"):
        ours = getattr(fg, fname)(fg.tensor(x, requires_grad=True))
        theirs = getattr(torch, fname)(torch.tensor(x, requires_grad=True))
        assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__
    for fname in ("i0e", "i1", "i1e", "ndtri", "erfcx"):
        ours = getattr(fs, fname)(fg.tensor(x, requires_grad=True))
        theirs = getattr(torch.special, fname)(torch.tensor(x, requires_grad=True))
        assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__


def test_forward_mode():
    x = np.array([0.4, 1.3, 5.0])
    v = np.array([1.0, -2.0, 0.5])
    for f, d in [(fs.gammaln, torch.special.digamma), (fs.i0, torch.special.i1),
                 (fs.erfinv, lambda t: math.sqrt(math.pi) / 2 * torch.exp(torch.special.erfinv(t) ** 2))]:
        xs = x / 6 if f is fs.erfinv else x
        _, tan = jvp(f, (fg.tensor(xs),), (fg.tensor(v),))
        np.testing.assert_allclose(tan.numpy(), v * d(torch.tensor(xs)).numpy(), rtol=1e-10)


# ---------------------------------------------------------------- vmap and compile
def test_vmap_batches_by_the_elementwise_rule():
    x = np.random.default_rng(0).uniform(0.2, 4.0, (5, 3))
    before = batching.STATS["fallback"]
    out = vmap(lambda r: (fs.gammaln(r) + fs.i1e(r) + fs.polygamma(2, r) + fs.zeta(2.5, r)).sum())(fg.tensor(x))
    assert batching.STATS["fallback"] == before
    tx = torch.tensor(x)
    want = (torch.special.gammaln(tx) + torch.special.i1e(tx) + torch.special.polygamma(2, tx)
            + torch.special.zeta(2.5, tx)).sum(1)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-11)


def test_compiled_graph_breaks_at_an_unlowered_special_function():
    """lgamma and erfcx have no kernel lowering: compile says so (a graph break naming the
    op) and runs them eagerly, with the eager values and gradients."""
    x = np.linspace(0.1, 3.0, 7)

    def f(a):
        return fs.gammaln(a * 2.0 + 1.0).exp() * 0.5 + fs.ndtr(a) * a

    check_breaks_at(f, x, "lgamma")


def test_polygamma_gradients_keep_the_dtype_and_compile_twice_differentiated():
    """polygamma's (and digamma's second) derivative, zeta(n + 2, x), keeps float32 (the
    number n + 1 made a float64 0-d tensor), under autograd.grad, func.grad and a compiled
    double backward (which crashed tracing ``add`` of two numbers)."""
    x0 = np.array([0.5, 1.5, 2.5, 0.3], np.float32)

    def hvp(lib, fn, x):
        g, = lib.autograd.grad(fn(lib, x).sum(), x, create_graph=True)
        return lib.autograd.grad(g.sum(), x)[0]
    for fn, compiled in ((lambda m, x: m.polygamma(1, x), False), (lambda m, x: m.digamma(x), True)):
        want = hvp(torch, fn, torch.tensor(x0, requires_grad=True)).numpy()
        for run in [lambda x: hvp(fg, fn, x)] + [fg.compile(lambda x: hvp(fg, fn, x))] * compiled:
            got = run(fg.tensor(x0, requires_grad=True))
            assert got.dtype == fg.float32
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4)
    assert fg.func.grad(lambda z: fg.polygamma(1, z).sum())(fg.tensor(x0)).dtype == fg.float32


def test_compiled_hessians_through_special_functions_with_graph_breaks(monkeypatch):
    """A compiled Hessian-vector product of lgamma(x.sum()) (a Dirichlet's normalizer) and of
    Dirichlet.log_prob: the backward breaks at digamma/trigamma (no kernel lowering) while
    autograd.grad's seed of ones is still a traced value, which the segment now computes
    (a KeyError before). (The default SEGMENT_MIN_WORK: the first call runs in segments.)"""
    from fusegrad.runtime import segments
    monkeypatch.setattr(segments, "SEGMENT_MIN_WORK", 1 << 16)
    x0 = np.array([0.7, 1.3, 2.0, 0.6])

    def hvp(lib, fn, x):
        g, = lib.autograd.grad(fn(lib, x), x, create_graph=True)
        return lib.autograd.grad(g.sum(), x)[0]
    for fn in (lambda m, x: m.lgamma(x.sum()) - m.lgamma(x).sum(),
               lambda m, x: m.distributions.Dirichlet(x).log_prob(m.tensor([0.1, 0.2, 0.3, 0.4], dtype=m.float64))):
        want = hvp(torch, fn, torch.tensor(x0, requires_grad=True)).numpy()
        got = fg.compile(lambda x: hvp(fg, fn, x))(fg.tensor(x0, requires_grad=True))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-7)  # (trigamma series: ~3e-9)
