"""fusegrad.func's grad/vjp/jvp/jacrev/jacfwd/hessian as IR transforms, against torch.func
(float64): pytrees, argnums, has_aux, compositions with vmap and compile, the cache, one
batched evaluation per Jacobian, and the eager fallback."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad
import fusegrad.func as ff
from fusegrad.func import transforms as TR
from fusegrad.passes import batching
from helpers import tensors

torch = pytest.importorskip("torch")
tf = torch.func
pytestmark = pytest.mark.torch


def _arr(*shape, seed=0):
    return np.random.default_rng(seed + 7 * sum(shape) + len(shape)).standard_normal(shape)


def _np(x):
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_np(v) for v in x)
    if isinstance(x, (fusegrad.Tensor, torch.Tensor)):
        return x.detach().numpy()
    return x


def assert_close(a, b, tol=1e-9):
    a, b = _np(a), _np(b)
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys()
        for k in b:
            assert_close(a[k], b[k], tol)
    elif isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), (type(a), a)
        for x, y in zip(a, b):
            assert_close(x, y, tol)
    elif isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray), type(a)
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    else:
        assert a == b


def both(make, transform, *inputs, no_fallback=True, **kw):
    """transform(make(lib), **kw)(*inputs) for fusegrad and torch, compared."""
    fb = TR.STATS["fallbacks"]
    bf = batching.STATS["fallback"]
    got = getattr(ff, transform)(make(fusegrad), **kw)(*tensors(inputs, fusegrad))
    want = getattr(tf, transform)(make(torch), **kw)(*tensors(inputs, torch))
    assert_close(got, want)
    if no_fallback:
        assert TR.STATS["fallbacks"] == fb, TR.STATS["fallback_reasons"][fb:]
        assert batching.STATS["fallback"] == bf
    return got


# ------------------------------------------------------------------ each transform
def f_mlp(m):
    def f(p, x):
        h = m.tanh(x @ p["W"] + p["b"])
        return (h * m.sin(h)).sum() + (p["b"] ** 2).sum()
    return f


P0 = {"W": _arr(4, 3), "b": _arr(3)}
X0 = _arr(5, 4)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_grad_pytree_argnums(argnums):
    both(f_mlp, "grad", P0, X0, argnums=argnums)
    both(f_mlp, "grad_and_value", P0, X0, argnums=argnums)


def test_grad_has_aux_tuple_args():
    def make(m):
        def f(xy, s):
            x, y = xy
            z = m.exp(x) * y.cos() / s
            return z.sum(), {"z": z, "n": x.sum()}
        return f
    both(make, "grad", (_arr(3, 2), _arr(3, 2, seed=1)), 2.0, argnums=0, has_aux=True)
    both(make, "grad_and_value", (_arr(3, 2), _arr(3, 2, seed=1)), 2.0, has_aux=True)


def test_vjp_and_jvp():
    def make(m):
        return lambda x, w: (m.tanh(x @ w), (x * x).sum(-1))
    x, w, u1, u2 = _arr(3, 4), _arr(4, 2), _arr(3, 2), _arr(3)
    out, fn = ff.vjp(make(fusegrad), fusegrad.tensor(x), fusegrad.tensor(w))
    tout, tfn = tf.vjp(make(torch), torch.tensor(x), torch.tensor(w))
    assert_close(out, tout)
    assert_close(fn((fusegrad.tensor(u1), fusegrad.tensor(u2))), tfn((torch.tensor(u1), torch.tensor(u2))))
    tx, tw = _arr(3, 4, seed=3), _arr(4, 2, seed=3)
    got = ff.jvp(make(fusegrad), (fusegrad.tensor(x), fusegrad.tensor(w)), (fusegrad.tensor(tx), fusegrad.tensor(tw)))
    want = tf.jvp(make(torch), (torch.tensor(x), torch.tensor(w)), (torch.tensor(tx), torch.tensor(tw)))
    assert_close(got, want)


def test_vjp_jvp_has_aux():
    def make(m):
        return lambda x: (m.sin(x) * x, {"c": x.cos()})
    x, u = _arr(5), _arr(5, seed=2)
    out, fn, aux = ff.vjp(make(fusegrad), fusegrad.tensor(x), has_aux=True)
    tout, tfn, taux = tf.vjp(make(torch), torch.tensor(x), has_aux=True)
    assert_close((out, aux, fn(fusegrad.tensor(u))), (tout, taux, tfn(torch.tensor(u))))
    got = ff.jvp(make(fusegrad), (fusegrad.tensor(x),), (fusegrad.tensor(u),), has_aux=True)
    want = tf.jvp(make(torch), (torch.tensor(x),), (torch.tensor(u),), has_aux=True)
    assert_close(got, want)



@pytest.mark.parametrize("body", ["fused", "breaks"])
def test_jvp_strict_refuses_outputs_independent_of_the_primals(body):
    """As torch.func.jvp(strict=True): RuntimeError when an output (an integer one, a detached
    one, a constant) has no tangent; otherwise the same values as without strict. "breaks"
    reads a number from a tensor, so it takes the eager path."""
    def make(m, out):
        def f(x):
            y = x * (float(x.sum()) if body == "breaks" else 2.0)
            return {"dep": (y.sin(), y), "argmax": (y, y.argmax()), "detached": (y.detach(),),
                    "const": (x.new_ones(3), y)}[out]
        return f
    x, t = _arr(3), _arr(3, seed=1)
    for out in ["dep", "argmax", "detached", "const"]:
        want = got = None
        try:
            want = tf.jvp(make(torch, out), (torch.tensor(x),), (torch.tensor(t),), strict=True)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match="independent of the inputs"):
                ff.jvp(make(fusegrad, out), (fusegrad.tensor(x),), (fusegrad.tensor(t),), strict=True)
            assert "independent" in str(e)
        else:
            got = ff.jvp(make(fusegrad, out), (fusegrad.tensor(x),), (fusegrad.tensor(t),), strict=True)
            assert_close(got, want)
        assert (want is None) == (out != "dep")
        lax = ff.jvp(make(fusegrad, out), (fusegrad.tensor(x),), (fusegrad.tensor(t),))
        assert_close(lax, tf.jvp(make(torch, out), (torch.tensor(x),), (torch.tensor(t),)))

def f_vec(m):
    return lambda x, W, b: m.tanh(W @ x + b) * x


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, (0, 1), 2])
def test_jacobians(transform, argnums):
    both(f_vec, transform, _arr(6), _arr(6, 6), _arr(6, seed=4), argnums=argnums)


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
def test_jacobians_pytrees_multi_output_aux(transform):
    def make(m):
        def f(p, x):
            y = x @ p["W"]
            return (m.sin(y), {"s": (y * y).sum(0)}), y.mean()
        return f
    both(make, transform, {"W": _arr(3, 2), "v": _arr(2)}, _arr(4, 3), has_aux=True)
    both(make, transform, {"W": _arr(3, 2)}, _arr(4, 3), argnums=(0, 1), has_aux=True)


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
def test_jacobian_batched_matmul(transform):
    both(lambda m: (lambda a, b: m.tanh(a @ b)), transform, _arr(2, 3, 4), _arr(2, 4, 2), argnums=(0, 1))


def test_hessian():
    both(lambda m: (lambda x, W, b: (m.tanh(W @ x + b) * x).sum()), "hessian", _arr(5), _arr(5, 5), _arr(5))
    both(lambda m: (lambda x, y: (m.exp(x) * y.sin()).sum() * (x * y).sum()), "hessian", _arr(3), _arr(3),
         argnums=(0, 1))


# ------------------------------------------------------------------ compositions
def test_jacfwd_jacrev_and_grad_grad():
    def make(m):
        return lambda x: (m.sin(x) * x.exp()).sum()
    x = _arr(4)
    got = ff.jacfwd(ff.jacrev(make(fusegrad)))(fusegrad.tensor(x))
    assert_close(got, tf.jacfwd(tf.jacrev(make(torch)))(torch.tensor(x)))
    g2 = ff.grad(lambda x: ff.grad(make(fusegrad))(x).sum())(fusegrad.tensor(x))
    assert_close(g2, tf.grad(lambda x: tf.grad(make(torch))(x).sum())(torch.tensor(x)))
    g3 = ff.grad(ff.grad(lambda s: (s ** 3).sin()))(fusegrad.tensor(0.7, dtype=fusegrad.float64))
    assert_close(g3, tf.grad(tf.grad(lambda s: (s ** 3).sin()))(torch.tensor(0.7, dtype=torch.float64)))


def test_vmap_of_grad_in_dims_none():
    def make(m):
        return lambda w, x: ((x @ w).tanh() ** 2).sum()
    w, xs = _arr(3, 2), _arr(5, 4, 3)
    got = ff.vmap(ff.grad(make(fusegrad)), in_dims=(None, 0))(fusegrad.tensor(w), fusegrad.tensor(xs))
    want = tf.vmap(tf.grad(make(torch)), in_dims=(None, 0))(torch.tensor(w), torch.tensor(xs))
    assert_close(got, want)
    got = ff.vmap(ff.jacrev(make(fusegrad), argnums=1), in_dims=(None, 0))(fusegrad.tensor(w), fusegrad.tensor(xs))
    want = tf.vmap(tf.jacrev(make(torch), argnums=1), in_dims=(None, 0))(torch.tensor(w), torch.tensor(xs))
    assert_close(got, want)


def test_transforms_of_grad_and_of_grad_and_value_keep_their_own_graphs():
    """vmap of grad(f) and vmap of grad_and_value(f) return their own structures, whichever
    ran first (the per-sample-gradient tutorial runs both on one f)."""
    x = _arr(2, 3)
    pairs = {ff.grad: tf.grad, ff.grad_and_value: tf.grad_and_value}
    for order in ((ff.grad, ff.grad_and_value), (ff.grad_and_value, ff.grad)):
        def f(x):  # a function of its own per order: its caches start empty
            return (x ** 3).sum()
        for tr in order:
            got = ff.vmap(tr(f))(fusegrad.tensor(x))
            want = tf.vmap(pairs[tr](f))(torch.tensor(x))
            assert isinstance(got, tuple) == isinstance(want, tuple)
            for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert_close(a, b)


def test_results_differentiable_by_eager_engine():
    x = _arr(4)
    fx = fusegrad.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    g = ff.grad(lambda v: (v.sin() * v).sum())(fx)
    tg = tf.grad(lambda v: (v.sin() * v).sum())(tx)
    (g ** 2).sum().backward()
    (tg ** 2).sum().backward()
    assert_close(fx.grad, tx.grad)
    # closure-captured tensors that require grad stay connected too
    W = _arr(3, 4)
    fW, tW = fusegrad.tensor(W, requires_grad=True), torch.tensor(W, requires_grad=True)
    J = ff.jacrev(lambda v: (fW @ v).tanh())(fusegrad.tensor(x))
    tJ = tf.jacrev(lambda v: (tW @ v).tanh())(torch.tensor(x))
    J.sum().backward()
    tJ.sum().backward()
    assert_close(fW.grad, tW.grad)


@pytest.mark.parametrize("backend", ["eager", "cpu"])
def test_with_compile_both_ways(backend):
    def make(m):
        return lambda x, W: (m.tanh(W @ x) * x).sum()
    x, W = _arr(5), _arr(5, 5)
    fx, fW, tx, tW = fusegrad.tensor(x), fusegrad.tensor(W), torch.tensor(x), torch.tensor(W)
    want_g = tf.grad(make(torch))(tx, tW)
    cg = fusegrad.compile(ff.grad(make(fusegrad)), backend=backend)
    assert_close(cg(fx, fW), want_g)
    assert_close(cg(fx, fW), want_g)
    assert cg.cache_info()["fallbacks"] == 0 and cg.cache_info()["hits"] >= 1
    assert_close(ff.grad(fusegrad.compile(make(fusegrad), backend=backend))(fx, fW), want_g)
    vec = lambda m: (lambda x, W: m.tanh(W @ x) * x)  # noqa: E731
    cj = fusegrad.compile(ff.jacrev(vec(fusegrad)), backend=backend)
    assert_close(cj(fx, fW), tf.jacrev(vec(torch))(tx, tW))
    ch = fusegrad.compile(ff.hessian(make(fusegrad)), backend=backend)
    assert_close(ch(fx, fW), tf.hessian(make(torch))(tx, tW))
    assert cj.cache_info()["fallbacks"] == 0 and ch.cache_info()["fallbacks"] == 0


# ------------------------------------------------------------------ no loops, cache, fallback
def test_jacrev_jacfwd_one_batched_evaluation_and_cache():
    W = fusegrad.tensor(_arr(8, 8))

    def f(x):
        return (W @ x).sin() * x
    x = fusegrad.tensor(_arr(8))
    for transform in (ff.jacrev, ff.jacfwd):
        jf = transform(f)
        t0, b0 = TR.STATS["traces"], TR.STATS["batched_evaluations"]
        jf(x)
        assert TR.STATS["traces"] == t0 + 1 and TR.STATS["batched_evaluations"] == b0 + 1
        jf(x)
        jf(x + 1)  # same signature: its closed graph is reused, nothing traced or evaluated again
        assert TR.STATS["traces"] == t0 + 1 and TR.STATS["batched_evaluations"] == b0 + 1
        info = jf.cache_info()
        assert (info["captures"], info["hits"], info["compiles"]) == (1, 2, 1), info
    # hessian built anew per call reuses the closed jacfwd(jacrev) graph: no trace, no evaluation
    h = lambda v: (f(v) ** 2).sum()  # noqa: E731
    ff.hessian(h)(x)
    t0, b0 = TR.STATS["traces"], TR.STATS["batched_evaluations"]
    ff.hessian(h)(x)
    assert TR.STATS["traces"] == t0 and TR.STATS["batched_evaluations"] == b0
    assert ff.hessian(h).cache_info()["hits"] == 1


def test_cache_sees_rebound_closure_and_in_place_updates():
    W = fusegrad.tensor(np.eye(3))

    def f(x):
        return (W @ x).sum()
    g = ff.grad(f)
    x = fusegrad.tensor(np.ones(3))
    assert_close(g(x), np.ones(3))
    with fusegrad.no_grad():
        W.mul_(2.0)  # in place: the cached graph reads the holder's current value
    assert_close(g(x), 2 * np.ones(3))
    W = fusegrad.tensor(3 * np.eye(3))  # rebound: traced again
    assert_close(g(x), 3 * np.ones(3))


def test_fallback_on_data_dependent_control_flow():
    def make(m):
        def f(x):
            if x.sum() > 0:
                return (x ** 2).sum()
            return x.sin().sum()
        return f
    for sign in (1, -1):
        fb = TR.STATS["fallbacks"]
        both(make, "grad", sign * np.abs(_arr(4)), no_fallback=False)
        both(make, "jacrev", sign * np.abs(_arr(4)), no_fallback=False)
        assert TR.STATS["fallbacks"] == fb + 2


def test_fallback_on_item_and_stop_gradient_on_detach():
    fb = TR.STATS["fallbacks"]
    both(lambda m: (lambda x: x.sum() * float(x.max().item())), "grad", _arr(4), no_fallback=False)
    assert TR.STATS["fallbacks"] == fb + 1
    # detach() and no_grad() regions become stop_gradient in the IR: no fallback needed
    both(lambda m: (lambda x: (x * x.detach()).sum()), "grad", _arr(4))
    both(lambda m: (lambda x: x * x.detach()), "jacfwd", _arr(3))

    def with_no_grad(m):
        def f(x):
            with m.no_grad():
                s = x.max()
            return (x * s).sum()
        return f
    both(with_no_grad, "grad", _arr(4))


def test_softmax_family_stays_on_the_ir_path():
    import fusegrad.nn.functional  # noqa: F401
    y = np.array([0, 2, 1])
    both(lambda m: (lambda x: m.nn.functional.cross_entropy(x, tensors(y, m))), "grad", _arr(3, 4))
    both(lambda m: (lambda x: m.softmax(x, 0) * m.logsumexp(x, 0)), "jacrev", _arr(4))


def test_errors_as_torch():
    with pytest.raises(RuntimeError, match="scalar"):
        ff.grad(lambda x: x * 2)(fusegrad.tensor(np.ones(3)))


def test_tangent_cotangent_shapes_and_integer_outputs_refused_as_torch():
    """A tangent or cotangent of another shape than its primal or output, vjp of an integer
    output (they were broadcast or skipped), primals that are not a tuple, argnums out of
    range and has_aux without a pair raise torch.func's RuntimeErrors."""
    def errors(lib):
        x, out = lib.ones(3, 4), []
        for call in (lambda: lib.func.jvp(lib.sin, (x,), (lib.ones(4),)),
                     lambda: lib.func.vjp(lib.sin, x)[1](lib.ones(4)),
                     lambda: lib.func.vjp(lambda t: t.argmax(), x), lambda: lib.func.jacrev(lambda t: t.argmax())(x),
                     lambda: lib.func.jvp(lib.sin, x, (x,)), lambda: lib.func.jvp(lib.sin, [x], [x]),
                     lambda: lib.func.grad(lambda t: t.sum(), argnums=2)(x),
                     lambda: lib.func.grad(lambda t: t.sum(), has_aux=True)(x)):
            with pytest.raises(RuntimeError) as info:
                call()
            out.append(str(info.value).replace("fusegrad", "torch"))
        return out
    assert errors(fusegrad) == errors(torch)
