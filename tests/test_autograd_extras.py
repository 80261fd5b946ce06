"""Forward-mode AD, saved-tensor hooks, ``grad_fn._saved_*`` and autograd.functional, against PyTorch."""
import importlib

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.autograd.forward_ad as fwAD
from helpers import errors_of


def np_of(t):
    return np.asarray(t.detach().numpy())


RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4)).astype(np.float32)
T = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 5)).astype(np.float32)
P = RNG.uniform(0.5, 2.0, (3, 4)).astype(np.float32)

# f(L, F, x, w, p) with x the dual input
FUNCS = {
    "sin_exp": lambda L, F, x, w, p: (x.sin() * 2 + x.exp()).sum(1),
    "matmul_tanh": lambda L, F, x, w, p: (x @ w).tanh(),
    "softmax": lambda L, F, x, w, p: L.softmax(x, 1),
    "log_softmax": lambda L, F, x, w, p: F.log_softmax(x * 3, 0),
    "div_pow": lambda L, F, x, w, p: x / p + x ** 3 - p ** x,
    "mean_var": lambda L, F, x, w, p: x.mean(0) + (x - x.mean(1, keepdim=True)).pow(2).sum(1).sqrt()[:, None],
    "relu_sigmoid": lambda L, F, x, w, p: F.relu(x) * x.sigmoid(),
    "views": lambda L, F, x, w, p: L.cat([x.t().reshape(2, 6), x[1:, ::2].reshape(2, 2)], 1).unsqueeze(0),
    "mse": lambda L, F, x, w, p: F.mse_loss(x, p),
    "layer_norm": lambda L, F, x, w, p: F.layer_norm(x, (4,)),
    "max_where": lambda L, F, x, w, p: L.where(x > 0, x, x * x).amax(1),
    "inplace": lambda L, F, x, w, p: x.clone().mul_(p).add_(x),
}


def _forward_ad(L, F, name):
    x, t, w, p = L.tensor(X), L.tensor(T), L.tensor(W), L.tensor(P)
    A = L.autograd.forward_ad
    with A.dual_level():
        y = FUNCS[name](L, F, A.make_dual(x, t), w, p)
        primal, tangent = A.unpack_dual(y)
        out = np_of(primal), np_of(tangent)
    assert A.unpack_dual(y).tangent is None  # dropped with the level
    return out


@pytest.mark.torch
@pytest.mark.parametrize("name", list(FUNCS))
def test_forward_ad_tangents_match_torch(pt, name):
    import fusegrad.nn.functional as F
    import torch.nn.functional as TF
    got, want = _forward_ad(fg, F, name), _forward_ad(pt, TF, name)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)


@pytest.mark.torch
def test_forward_ad_jacobian_columns_match_torch(pt):
    def jac(L):
        A = L.autograd.forward_ad
        x = L.tensor(X[0].astype(np.float64))
        cols = []
        with A.dual_level():
            for i in range(4):
                e = L.zeros(4, dtype=L.float64)
                e[i] = 1.0
                y = (A.make_dual(x, e) ** 2).cumsum(0).sin()
                cols.append(A.unpack_dual(y).tangent)
        return np_of(L.stack(cols, 1))
    np.testing.assert_allclose(jac(fg), jac(pt), rtol=1e-12)


def test_forward_ad_errors_and_grad_interplay():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="dual_level"):
        fwAD.make_dual(x, fg.ones(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(x, fg.ones(3))
        d = fwAD.make_dual(x, fg.tensor([1.0, 0.0]))
        y = (d * d).sum()
        assert fwAD.unpack_dual(y).tangent.item() == 2.0  # 2 x . t
        y.backward()  # reverse mode still works through dual tensors
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    assert fwAD.unpack_dual(fg.ones(2)).tangent is None


# ---------------------------------------------------------------- saved tensors
HOOKED = {
    "mul_exp_sin": lambda L, a, b: (a * b).exp().sin().sum(),
    "matmul_tanh": lambda L, a, b: (a @ b.t()).tanh().sum(),
    "add_relu": lambda L, a, b: L.relu(a + b).sum(),
    "sqrt_div": lambda L, a, b: ((a * a + 1).sqrt() / (b * b + 1)).sum(),
}


def _hooked(L, name, wrap):
    a, b = L.tensor(X, requires_grad=True), L.tensor(P, requires_grad=True)
    calls = []

    def pack(t):
        calls.append(("pack", tuple(t.shape)))
        return wrap(t)

    def unpack(t):
        calls.append(("unpack", tuple(t.shape)))
        return t
    with L.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = HOOKED[name](L, a, b)
    n_packed = len(calls)
    y.backward()
    return calls, n_packed, np_of(a.grad), np_of(b.grad)


@pytest.mark.torch
@pytest.mark.parametrize("name", list(HOOKED))
def test_saved_tensors_hooks_calls_and_grads_match_torch(pt, name):
    got = _hooked(fg, name, lambda t: t)
    want = _hooked(pt, name, lambda t: t)
    assert got[1] == want[1] and sorted(got[0]) == sorted(want[0])
    for g, w in zip(got[2:], want[2:]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # a pack hook that changes what is saved changes the gradient the same way
    got = _hooked(fg, name, lambda t: t * 0.5)
    want = _hooked(pt, name, lambda t: t * 0.5)
    for g, w in zip(got[2:], want[2:]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.torch
def test_save_on_cpu_and_custom_function_hooks_match_torch(pt):
    def run(L):
        class Cube(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 3 * x * x * g
        a = L.tensor(X, requires_grad=True)
        with L.autograd.graph.save_on_cpu():
            y = (Cube.apply(a) * a.sin()).sum()
        y.backward()
        seen = []
        with L.autograd.graph.saved_tensors_hooks(lambda t: seen.append("p") or t * 2, lambda t: seen.append("u") or t):
            z = Cube.apply(a).sum()
        z.backward()
        return np_of(a.grad), seen
    got, want = run(fg), run(pt)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    assert got[1] == want[1] == ["p", "u"]


SAVED = [
    ("a * c", ["_saved_self", "_saved_other"]),
    ("a / c", ["_saved_self", "_saved_other"]),
    ("a @ w", ["_saved_self", "_saved_mat2", "_saved_self_sym_sizes", "_saved_mat2_sym_sizes"]),
    ("a.exp()", ["_saved_result"]),
    ("a.tanh()", ["_saved_result"]),
    ("a.sigmoid()", ["_saved_result"]),
    ("a.relu()", ["_saved_result"]),
    ("a.sqrt()", ["_saved_result"]),
    ("a.log()", ["_saved_self"]),
    ("a.sin()", ["_saved_self"]),
    ("a.cos()", ["_saved_self"]),
    ("a.abs()", ["_saved_self"]),
    ("a.pow(2)", ["_saved_self", "_saved_exponent"]),
    ("a ** c", ["_saved_self", "_saved_exponent", "_saved_result"]),
    ("a + c", ["_saved_alpha"]),
    ("a.sum()", ["_saved_self_sym_sizes"]),
    ("a.sum(1)", ["_saved_self_sym_sizes", "_saved_dim", "_saved_keepdim"]),
    ("a.view(12)", ["_saved_self_sym_sizes"]),
    ("a.softmax(1)", ["_saved_result"]),
    ("a.log_softmax(1)", ["_saved_result"]),
]


@pytest.mark.torch
@pytest.mark.parametrize("expr,attrs", SAVED, ids=[e for e, _ in SAVED])
def test_saved_attributes_match_torch(pt, expr, attrs):
    def get(L):
        a, c, w = L.tensor(P, requires_grad=True), L.tensor(P[::-1].copy(), requires_grad=True), L.tensor(W, requires_grad=True)
        y = eval(expr)
        out = {"name": type(y.grad_fn).__name__}
        for n in attrs:
            v = getattr(y.grad_fn, n)
            out[n] = np_of(v) if hasattr(v, "detach") else v
        # (PyTorch gives mm's saved self as another tensor object; the others as the input itself)
        out["self_is_a"] = "_saved_self" in attrs and "@" not in expr and y.grad_fn._saved_self is a
        return out
    got, want = get(fg), get(pt)
    assert got.keys() == want.keys() and got["name"] == want["name"] and got["self_is_a"] == want["self_is_a"]
    for n in attrs:
        if isinstance(want[n], np.ndarray):
            np.testing.assert_allclose(got[n], want[n], rtol=1e-6)
        else:
            assert got[n] == want[n], n


@pytest.mark.torch
def test_raw_saved_register_hooks_and_freed_saved_values_match_torch(pt):
    def run(L):
        a, c = L.tensor(X, requires_grad=True), L.tensor(P, requires_grad=True)
        y = a * c
        calls = []
        y.grad_fn._raw_saved_self.register_hooks(lambda t: calls.append("p") or t * 10,
                                                 lambda t: calls.append("u") or t)
        with pytest.raises(RuntimeError, match="already been set"):
            y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
        y.sum().backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.grad_fn._saved_self
        with pytest.raises(AttributeError):
            y.grad_fn._saved_nothing
        return np_of(c.grad), calls
    got, want = run(fg), run(pt)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1] == want[1] == ["p", "u"]


@pytest.mark.torch
@pytest.mark.parametrize("fn", ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"])
def test_autograd_functional_matches_torch(pt, fn):
    def run(L):
        F = L.autograd.functional
        x, y = L.tensor(X[0].astype(np.float64)), L.tensor(P[0].astype(np.float64))
        v = L.tensor(T[0].astype(np.float64))
        scalar = lambda a, b: (a.sin() * b ** 2).sum()  # noqa: E731
        vector = lambda a, b: a.exp() * b  # noqa: E731
        if fn == "jacobian":
            r = F.jacobian(vector, (x, y)), F.jacobian(lambda a: a.tanh(), x)
        elif fn == "hessian":
            r = F.hessian(scalar, (x, y)), F.hessian(lambda a: (a ** 3).sum(), x)
        elif fn == "vjp":
            r = F.vjp(vector, (x, y), v), F.vjp(lambda a: a.cos(), x, v)
        elif fn == "jvp":
            r = F.jvp(vector, (x, y), (v, v)), F.jvp(lambda a: a.cos(), x, v)
        else:
            r = getattr(F, fn)(scalar, (x, y), (v, v)), getattr(F, fn)(lambda a: (a ** 3).sum(), x, v)
        return r

    def flat(r):
        if hasattr(r, "detach"):
            return [np_of(r)]
        return [z for e in r for z in flat(e)]
    got, want = flat(run(fg)), flat(run(pt))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- module hooks
def _module_hooks(L, x_requires_grad):
    nn = L.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x, scale):
            return self.lin(x).tanh() * scale, x.sum()

    L.manual_seed(0)
    blk = Block()
    with L.no_grad():
        blk.lin.weight.copy_(L.tensor(W[:, :3].T.copy()))
        blk.lin.bias.fill_(0.1)
    log = []
    blk.register_forward_pre_hook(lambda m, args: log.append(("fwd_pre", len(args))))
    blk.register_full_backward_pre_hook(
        lambda m, go: log.append(("bwd_pre", [None if g is None else tuple(g.shape) for g in go])) or
        (go[0] * 2, go[1]))
    blk.register_full_backward_hook(
        lambda m, gi, go: log.append(("bwd", [None if g is None else tuple(g.shape) for g in gi],
                                      [None if g is None else tuple(g.shape) for g in go])) or
        ((gi[0] + 1 if gi[0] is not None else None), gi[1]))
    blk.lin.register_full_backward_hook(lambda m, gi, go: log.append(("lin_bwd", len(gi), len(go))))
    h = blk.register_full_backward_hook(lambda m, gi, go: log.append(("removed",)))
    h.remove()
    x = L.tensor(X, requires_grad=x_requires_grad)
    scale = L.tensor(2.0)
    out, s = blk(x, scale)
    (out.sum() + s).backward()
    return log, np_of(blk.lin.weight.grad), (np_of(x.grad) if x_requires_grad else None)


@pytest.mark.torch
def test_module_backward_hooks_order_counts_and_grads_match_torch(pt):
    got, want = _module_hooks(fg, True), _module_hooks(pt, True)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5)
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        got = _module_hooks(fg, False)
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        want = _module_hooks(pt, False)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


def test_forward_ad_through_a_compiled_function_runs_eagerly():
    @fg.compile(backend="eager")
    def f(x):
        return (x.sin() * x).sum()
    x = fg.tensor([0.5, 1.0, 2.0], dtype=fg.float64)
    f(x)
    with fwAD.dual_level():
        t = fwAD.unpack_dual(f(fwAD.make_dual(x, fg.ones(3, dtype=fg.float64)))).tangent
    np.testing.assert_allclose(t.item(), (np.sin(x.numpy()) + x.numpy() * np.cos(x.numpy())).sum(), rtol=1e-12)
    assert any("forward-mode AD" in n for n in f.cache_info()["notes"])


def _tutorial_functions(L):
    """Custom Functions as in the "Double Backward with Custom Functions" and "Forward-mode
    Automatic Differentiation" tutorials (plus deliberately wrong ones), built on library L."""
    once = __import__(L.__name__ + ".autograd.function", fromlist=["once_differentiable"]).once_differentiable
    seen = []

    class SquareOnce(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        @once
        def backward(ctx, g):
            seen.append(L.is_grad_enabled())
            (x,) = ctx.saved_tensors
            return g * 2 * x

    class Exp(L.autograd.Function):  # jvp of the argument ``jvp_scale``, backward of ``vjp_scale`` (1: right)
        jvp_scale = vjp_scale = 1.0

        @staticmethod
        def forward(ctx, x):
            ctx.result = r = L.exp(x)
            ctx.save_for_backward(r)
            return r

        @classmethod
        def backward(cls, ctx, g):
            (r,) = ctx.saved_tensors
            return g * r * cls.vjp_scale

        @classmethod
        def jvp(cls, ctx, t):
            return t * ctx.result * cls.jvp_scale

    class ExpJvpOnly(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.result = L.exp(x)
            return ctx.result

        @staticmethod
        def jvp(ctx, t):
            return t * ctx.result

    noise = [0.0]

    class Noisy(L.autograd.Function):  # each backward differs from the last by ~1e-9
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            noise[0] += 1e-9
            return g * (2 * x + noise[0])

    class Sticky(L.autograd.Function):  # right Jacobian, but a zero grad_output gives a nonzero grad
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x + (g == 0).all() * 1.0

    def with_scales(jvp=1.0, vjp=1.0):
        return type("Exp", (Exp,), {"jvp_scale": jvp, "vjp_scale": vjp})
    return SquareOnce, seen, with_scales, ExpJvpOnly, Noisy, Sticky


def _outcome(fn, *args, **kwargs):
    """fn's result, or the type and first line (up to 45 characters) of what it raised."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception is the observed behaviour
        return type(e).__name__, str(e).split("\n")[0][:45]


@pytest.mark.torch
def test_once_differentiable_matches_torch(pt):
    def run(L):
        SquareOnce, seen, *_ = _tutorial_functions(L)
        x = L.tensor(X.astype(np.float64), requires_grad=True)
        g, = L.autograd.grad(SquareOnce.apply(x).sum(), x, create_graph=True)
        go = L.ones(3, 4, dtype=L.float64, requires_grad=True)
        g2, = L.autograd.grad(SquareOnce.apply(x), x, go, create_graph=True)
        g3, = L.autograd.grad(SquareOnce.apply(x), x, go)
        return (set(seen), g.requires_grad, g2.requires_grad, type(g2.grad_fn).__name__, g3.requires_grad,
                _outcome(lambda: g2.sum().backward()),
                _outcome(L.autograd.gradgradcheck, SquareOnce.apply, (x[:2, :2].detach().requires_grad_(),)),
                L.autograd.gradgradcheck(SquareOnce.apply, (x[:2, :2].detach().requires_grad_(),),
                                         raise_exception=False),
                np_of(g2))
    got, want = run(fg), run(pt)
    assert got[:-1] == want[:-1]
    assert want[5] == ("RuntimeError", "trying to differentiate twice a function that")
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-12)


@pytest.mark.torch
def test_gradcheck_forward_ad_matches_torch(pt):
    def run(L):
        _, _, exp, ExpJvpOnly, *_ = _tutorial_functions(L)
        x = L.tensor(X[:2].astype(np.float64), requires_grad=True)
        check = L.autograd.gradcheck
        fwd_only = dict(check_forward_ad=True, check_backward_ad=False, check_undefined_grad=False,
                        check_batched_grad=False)
        return (_outcome(check, ExpJvpOnly.apply, (x,), **fwd_only),
                _outcome(check, ExpJvpOnly.apply, (x,)),  # backward mode is checked by default
                _outcome(check, exp().apply, (x,), check_forward_ad=True, check_batched_forward_grad=True),
                _outcome(check, exp(jvp=3.0).apply, (x,)),
                _outcome(check, exp(jvp=3.0).apply, (x,), check_forward_ad=True),
                _outcome(check, exp(jvp=3.0).apply, (x,), check_forward_ad=True, raise_exception=False),
                _outcome(check, exp(vjp=3.0).apply, (x,), check_forward_ad=True),
                _outcome(check, exp(vjp=3.0).apply, (x,), **fwd_only),
                _outcome(check, exp().apply, (x,), check_backward_ad=False))
    got, want = run(fg), run(pt)
    assert got == want
    assert want[0] is True and want[4][1].startswith("Jacobian computed with forward mode mismatch")


@pytest.mark.torch
def test_gradcheck_options_match_torch(pt):
    def run(L):
        _, _, _, _, Noisy, Sticky = _tutorial_functions(L)
        x = L.tensor(X[:2].astype(np.float64), requires_grad=True)
        y = L.tensor(P[:2].astype(np.float64), requires_grad=True)
        check, checkgrad = L.autograd.gradcheck, L.autograd.gradgradcheck
        return (_outcome(check, Noisy.apply, (x,)),
                _outcome(check, Noisy.apply, (x,), nondet_tol=1e-6),
                _outcome(check, Sticky.apply, (x,)),
                _outcome(check, Sticky.apply, (x,), check_undefined_grad=False),
                _outcome(check, lambda a: a * 2, (x.detach(),)),
                _outcome(check, lambda a: a.exp(), (x,), atol=0.0, rtol=0.0, eps=1e-1),
                _outcome(check, lambda a, b: (a * b.sin(), a.exp()), (x, y), check_batched_grad=True,
                         check_forward_ad=True, check_batched_forward_grad=True),
                _outcome(checkgrad, lambda a, b: (a * b.sin()).sum(1), (x, y), check_batched_grad=True,
                         check_fwd_over_rev=True),
                _outcome(checkgrad, lambda a: a.exp(), (x,), check_rev_over_rev=False),
                _outcome(check, lambda a: a.exp(), (x,), check_grad_dtypes=True, fast_mode=True, masked=False),
                _outcome(check, lambda a: a.exp(), (x,), no_such_option=True),
                _outcome(checkgrad, lambda a: a.exp(), (x,), check_forward_ad=True))
    got, want = run(fg), run(pt)
    assert got == want
    assert want[-1][0] == want[-2][0] == "TypeError"
    assert want[0][1].startswith("Backward is not reentrant") and want[1] is True


@pytest.mark.torch
def test_gradcheck_signatures_match_torch(pt):
    import inspect

    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]
    assert params(fg.autograd.gradcheck) == params(pt.autograd.gradcheck)
    assert params(fg.autograd.gradgradcheck) == params(pt.autograd.gradgradcheck)


# ---------------------------------------------------------------- composites as one node
def _chain(t, depth=4):
    """The grad_fn names down the first non-leaf edge, with each node's next_functions."""
    out, f = [], t.grad_fn
    while f is not None and depth:
        out.append((type(f).__name__, [type(n).__name__ for n, _ in f.next_functions]))
        nxt = [n for n, _ in f.next_functions if n is not None and type(n).__name__ != "AccumulateGrad"]
        f, depth = (nxt[0] if nxt else None), depth - 1
    return out


def _composites(lib):
    """Programs whose grad_fn chains tutorials print (the 60-minute blitz walks its MSE loss's
    next_functions down to AddmmBackward0), and their gradients."""
    nn, F = lib.nn, lib.nn.functional
    lin = nn.Linear(3, 2).double()
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(W[:3, :2].T.astype(np.float64)))
        lin.bias.copy_(lib.tensor([0.5, -0.25], dtype=lib.float64))
    x, y = lib.tensor(X[:2, :3].astype(np.float64)), lib.tensor(T[:2, :2].astype(np.float64))
    v = lib.tensor(X[0, :3].astype(np.float64), requires_grad=True)
    m = lib.tensor(W[:3, :2].astype(np.float64), requires_grad=True)
    outs = [nn.MSELoss()(lin(x), y), lin(x), lin(lib.stack([x, x])), nn.CrossEntropyLoss()(lin(x), lib.tensor([1, 0])),
            F.relu(lin(x)).sum(), v @ m, m.t() @ v, nn.BCEWithLogitsLoss()(lin(x), y.sigmoid()),
            nn.L1Loss()(lin(x), y), nn.SmoothL1Loss()(lin(x), y), nn.HuberLoss()(lin(x), y),
            nn.BCELoss()(lin(x).sigmoid(), y.sigmoid()), lin(x).softmax(1), lin(x).mean(0)]
    chains = [_chain(o) for o in outs]
    total = sum((o * o).sum() for o in outs)
    gs = lib.autograd.grad(total, [lin.weight, lin.bias, v, m], create_graph=True)
    gg = lib.autograd.grad(sum((g * g).sum() for g in gs), [lin.weight, v])
    return chains, [g.detach().numpy() for g in gs + gg]


def test_composites_are_one_node_as_in_torch(pt):
    """A loss, a mean, softmax, addmm and mv that fusegrad composes record one node with
    PyTorch's name and next_functions; gradients and double gradients are unchanged."""
    ours, theirs = _composites(fg), _composites(pt)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_composite_node_frees_and_sees_in_place_updates():
    """The merged nodes free their saved values after a backward without retain_graph (a second
    backward raises), and an in-place change of an input it saved is detected, as in PyTorch."""
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = fg.nn.functional.mse_loss(x * 2, fg.zeros(3))
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 8 * np.array([1.0, 2.0, 3.0]) / 3, rtol=1e-6)  # twice
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    y = (x * 0.1).sigmoid()
    bce = fg.nn.functional.binary_cross_entropy(y, fg.full((3,), 0.5))
    y.mul_(0.5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        bce.backward()


def test_function_with_setup_context(pt):
    """torch.func's style of autograd.Function: forward without ctx, setup_context saving from
    the inputs and output; under backward and fusegrad.func.grad."""
    def make(lib):
        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(x):
                return x ** 3, 3 * x ** 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0], output[1])

            @staticmethod
            def backward(ctx, g, gdx):
                x, dx = ctx.saved_tensors
                return g * dx + gdx * 6 * x
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y, dy = Cube.apply(x)
        (y.sum() + dy.sum()).backward()
        return x.grad.numpy(), lib.func.grad(lambda t: Cube.apply(t)[0].sum())(lib.tensor([1.0, 3.0])).numpy()
    for a, b in zip(make(fg), make(pt)):
        np.testing.assert_allclose(a, b)


def test_full_backward_hook_sees_none_for_an_output_without_gradient():
    torch = pytest.importorskip("torch")

    def run(lib):
        class TwoIO(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(2, 2)

            def forward(self, a, b):
                return self.lin(a) * b, a + b

        m, log = TwoIO(), []
        m.register_full_backward_hook(lambda mod, gi, go: log.append(([g is None for g in gi], [g is None for g in go])))
        a = lib.ones(1, 2, requires_grad=True)
        o1, _ = m(a, lib.ones(1, 2))
        o1.sum().backward()
        return log

    assert run(fg) == run(torch)


def test_in_place_changes_through_data_are_not_tracked_as_torch():
    """``p.data.mul_(...)`` between a forward and its backward (weight clipping, projections)
    keeps the backward legal; it reads the changed values, as PyTorch's."""
    torch = pytest.importorskip("torch")
    w0 = np.random.default_rng(1).standard_normal((2, 3))
    x0 = np.random.default_rng(2).standard_normal((4, 3))
    res = []
    for lib in (torch, fg):
        w = lib.tensor(w0, requires_grad=True)
        x = lib.tensor(x0, requires_grad=True)
        out = (x @ w.T).tanh()
        w.data.mul_(0.5)
        out.sum().backward()
        a = lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        y = a.exp()
        y.data.mul_(2)
        assert y._version == 0 and a._version == 0
        res.append([x.grad.numpy(), w.grad.numpy(), lib.autograd.grad(y.sum(), a)[0].numpy()])
    for ours, theirs in zip(res[1], res[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_in_place_clamp_with_bounds_that_require_grad_and_the_deprecated_clip_grad_norm():
    """``x.clamp_(min=t)`` on a tensor that does not require grad, with a bound that does: the
    result requires grad and t gets its gradient, as PyTorch's (keyword operands were not
    seen by the in-place machinery); ``nn.utils.clip_grad_norm`` warns and clips."""
    torch = pytest.importorskip("torch")
    res = []
    for lib in (torch, fg):
        t = lib.tensor(0.6, dtype=lib.float64, requires_grad=True)
        y = lib.tensor([0.1, 0.5, 0.9, 1.5], dtype=lib.float64).clamp_(min=t)
        (y * lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)).sum().backward()
        p = lib.nn.Parameter(lib.ones(3, dtype=lib.float64))
        p.grad = lib.full((3,), 3.0, dtype=lib.float64)
        with pytest.warns(FutureWarning, match="clip_grad_norm_"):
            norm = lib.nn.utils.clip_grad_norm([p], 1.0)
        res.append((y.requires_grad, t.grad.item(), norm.item(), p.grad.numpy()))
    assert res[1][:3] == pytest.approx(res[0][:3])
    np.testing.assert_allclose(res[1][3], res[0][3], rtol=1e-12)


def test_in_place_update_after_a_product_with_a_constant_is_legal_as_torch():
    """A squeeze-excite block's ``h.mul_(gate(adaptive_avg_pool2d(h, 1)))``: matmul's backward
    reads an operand only for the other's gradient, so updating h after ``h @ W_const`` is
    legal (it raised 'modified by an inplace operation'); with W requiring grad it still raises."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    grads = []
    for lib in (torch, fg):
        x = lib.tensor(x0, requires_grad=True)
        h = x * 2
        outs = [h @ lib.tensor(w0), lib.nn.functional.linear(h, lib.tensor(w0.T)),
                lib.nn.functional.adaptive_avg_pool2d(h[None, None], 1)]
        h.add_(1)
        sum(o.sum() for o in outs).backward()
        grads.append(x.grad.numpy())
        w = lib.tensor(w0, requires_grad=True)
        h = x * 2
        y = h @ w
        h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_autograd_functional_detaches_without_create_graph_and_checks_strict_as_torch():
    torch = pytest.importorskip("torch")
    x0 = np.array([0.5, -1.0, 2.0])
    res = []
    for lib in (torch, fg):
        AF = lib.autograd.functional
        x = lib.tensor(x0, requires_grad=True)
        outs = [AF.jacobian(lambda a: a.exp() * a, x), AF.hessian(lambda a: (a.exp() * a).sum(), x),
                *AF.vjp(lambda a: a.exp(), x, lib.ones(3, dtype=lib.float64)),
                *AF.jvp(lambda a: a.exp(), x, lib.ones(3, dtype=lib.float64)),
                *AF.hvp(lambda a: (a ** 3).sum(), x, lib.ones(3, dtype=lib.float64))]
        assert not any(o.requires_grad for o in outs)
        J = AF.jacobian(lambda a: a.sin() * a, x, create_graph=True)
        assert J.requires_grad
        J.sum().backward()
        with pytest.raises(RuntimeError, match="does not require gradients"):
            AF.jacobian(lambda a: lib.ones(2), x, strict=True)
        res.append([o.numpy() for o in outs] + [x.grad.numpy()])
    for ours, theirs in zip(res[1], res[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_functional_create_graph_results_have_a_graph_whatever_the_inputs():
    """torch.autograd.functional with create_graph=True differentiates inputs that do not
    require grad as fresh leaves that do: the results require grad (they did not), and with
    inputs that do, their gradients match torch's."""
    import torch
    a = np.array([0.3, -0.2, 0.5])
    got = []
    for lib in (fg, torch):
        AF = lib.autograd.functional
        x = lib.tensor(a)
        out = [AF.hessian(lambda t: (t ** 4).sum(), x, create_graph=True).requires_grad,
               AF.jacobian(lambda t: t ** 3, x, create_graph=True).requires_grad,
               AF.hvp(lambda t: (t ** 4).sum(), x, lib.ones(3, dtype=lib.float64), create_graph=True)[1].requires_grad,
               AF.vjp(lambda t: t.exp(), x, lib.ones(3, dtype=lib.float64), create_graph=True)[1].requires_grad,
               AF.hessian(lambda t: (t ** 4).sum(), x).requires_grad]
        b = lib.tensor(a, requires_grad=True)
        h = AF.hessian(lambda t: (t ** 4).sum(), b, create_graph=True)
        out.append(np.round(lib.autograd.grad(h.trace(), b)[0].numpy(), 12).tolist())
        got.append(out)
    assert got[0] == got[1]


@pytest.mark.torch
def test_forward_over_reverse_reverse_over_forward_and_views_written_in_place():
    """Eager forward AD composed with reverse mode, against PyTorch: the tangent of a
    create_graph gradient (H v) through ops whose backward reads their saved output; the
    gradient of a loss on a tangent (a Jacobian regularizer); in-place ops on views of a
    dual tensor update its tangent, and copy_/fill_ of a dual value carry its tangent."""
    torch = pytest.importorskip("torch")

    def program(lib):
        A = importlib.import_module(lib.__name__ + ".autograd.forward_ad")
        x, v = lib.tensor([0.5, 1.2, 0.8, 2.0, 0.3]), lib.tensor([1.0, 0.5, -0.7, 0.2, 0.9])
        out = {}
        fs = {"exp": lambda z: z.exp().sum(), "tanh": lambda z: z.tanh().sum(), "sqrt": lambda z: z.sqrt().sum(),
              "softmax": lambda z: (z.softmax(0) * lib.arange(5.0)).sum(), "prod": lambda z: z.prod(),
              "norm": lambda z: z.norm(), "rsqrt": lambda z: z.rsqrt().sum()}
        for name, f in fs.items():
            with A.dual_level():
                dual = A.make_dual(x.clone().requires_grad_(True), v)
                g, = lib.autograd.grad(f(dual), dual, create_graph=True)
                out["hvp_" + name] = A.unpack_dual(g).tangent.detach()
        for name in ("tanh", "sigmoid", "exp"):
            w = lib.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2]], requires_grad=True)
            with A.dual_level():
                y = getattr(A.make_dual(lib.tensor([[1.0, 0.5, -0.3]]), lib.tensor([[0.2, -0.1, 0.4]])) @ w, name)()
                (A.unpack_dual(y).tangent ** 2).sum().backward()
            out["jreg_" + name] = w.grad
        with A.dual_level():
            z = A.make_dual(lib.arange(6.0).reshape(2, 3), lib.ones(2, 3))
            z[:, 0].mul_(3)
            out["view_mul"] = A.unpack_dual(z).tangent.clone()
            w2 = A.make_dual(lib.arange(6.0).reshape(2, 3), lib.ones(2, 3))
            w2[0].add_(w2[1] * 5)
            out["view_add"] = A.unpack_dual(w2).tangent.clone()
            u = A.make_dual(lib.arange(6.0).reshape(2, 3), lib.ones(2, 3))
            row = u[1]
            u.view(-1)[1:5].zero_()
            out["view_zero"], out["sibling"] = A.unpack_dual(u).tangent.clone(), A.unpack_dual(row).tangent.clone()
            src = A.make_dual(lib.ones(3), lib.tensor([1.0, 2.0, 3.0]))
            plain, block = lib.zeros(3), lib.zeros(2, 3)
            plain.copy_(src)
            block[1].copy_(src * 2)
            out["copy"], out["copy_view"] = A.unpack_dual(plain).tangent.clone(), A.unpack_dual(block).tangent.clone()
            filled = lib.zeros(2)
            filled.fill_(A.make_dual(lib.tensor(1.5), lib.tensor(4.0)))
            out["fill"] = A.unpack_dual(filled).tangent.clone()
            over = A.make_dual(lib.zeros(2), lib.ones(2))
            over.copy_(lib.tensor([5.0, 6.0]))  # (a plain source: the tangent becomes zero)
            t = A.unpack_dual(over).tangent
            out["overwritten"] = t.clone() if t is not None else lib.zeros(2)
        return {k: t.numpy() for k, t in out.items()}
    mine, ref = program(fg), program(torch)
    for k in ref:
        np.testing.assert_allclose(mine[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.torch
def test_gradients_take_their_inputs_dtype_as_pytorchs_engine():
    """A custom Function's float64 gradient for a float32 input, or float32 for a bfloat16
    one (custom_fwd's cast_inputs pattern), and float64 grad_outputs, arrive in the input's
    (output's) dtype, rounded; a hook that changes the dtype is refused."""
    torch = pytest.importorskip("torch")

    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = [lib.autograd.grad(x * 2, x, grad_outputs=lib.ones(2, dtype=lib.float64))[0].dtype]

        class F64(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return (g * 2).double()
        h = x * 1.0
        h.retain_grad()
        F64.apply(h).sum().backward()
        out.append(h.grad.dtype)

        class Id32(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a.float()

            @staticmethod
            def backward(ctx, g):
                return g
        xb = x.to(lib.bfloat16)
        xb.retain_grad()
        (Id32.apply(xb) * lib.tensor([1 / 3, 1.001])).sum().backward()
        out += [xb.grad.dtype, xb.grad.tolist()]
        y = x * 3
        y.register_hook(lambda g: g.double())
        try:
            y.sum().backward()
        except RuntimeError as e:
            out.append(str(e))
        return [str(v).replace("fusegrad.", "torch.") for v in out]
    assert program(fg) == program(torch)


def test_functional_refuses_as_torch():
    """autograd.functional: a strategy other than its two names, forward mode without
    vectorize, and v=None where the input or output has more than one element raise as torch's."""
    torch = pytest.importorskip("torch")

    def errors(lib):
        AF, x = importlib.import_module(lib.__name__ + ".autograd.functional"), lib.ones(3)
        out = errors_of((lambda: AF.jacobian(lib.sin, x, strategy="forward-mode"),
                         lambda: AF.jacobian(lib.sin, x, strategy="bogus"),
                         lambda: AF.hessian(lambda a: a.sum(), x, outer_jacobian_strategy="bogus"),
                         lambda: AF.jvp(lib.sin, x), lambda: AF.vjp(lib.sin, x)))
        out.append(np.round(AF.jacobian(lib.sin, x, strategy="forward-mode", vectorize=True).numpy(), 6).tolist())
        return out
    assert errors(fg) == errors(torch)


def test_a_deep_copied_parameter_starts_without_gradients_and_create_graph_grads_are_clones():
    """PyTorch's Parameter.__deepcopy__ copies the data only (an unrolled GAN's surrogate
    discriminator must not start with the original's stale gradients), and AccumulateGrad
    under create_graph stores a clone: never a view, so zero_grad(set_to_none=False) works."""
    import copy
    torch = pytest.importorskip("torch")
    for T in (fg, torch):
        lin = T.nn.Linear(2, 2)
        lin(T.ones(1, 2)).pow(2).sum().backward(create_graph=True)
        assert lin.weight.grad._base is None and type(lin.weight.grad.grad_fn).__name__ == "CopyBackwards"
        twin = copy.deepcopy(lin)
        assert twin.weight.grad is None and isinstance(twin.weight, T.nn.Parameter) and twin.weight.requires_grad
        T.optim.SGD(lin.parameters(), lr=0.1).zero_grad(set_to_none=False)
        assert lin.weight.grad.abs().sum().item() == 0 and not lin.weight.grad.requires_grad
        frozen = T.nn.Parameter(T.ones(2), requires_grad=False)
        assert not copy.deepcopy(frozen).requires_grad


def test_capturable_optimizers_refuse_cpu_parameters_and_is_view():
    torch = pytest.importorskip("torch")
    for T in (fg, torch):
        x = T.ones(3)
        assert [x._is_view(), x[1:]._is_view(), x.view(3)._is_view()] == [False, True, True]
        for opt in (T.optim.Adam, T.optim.AdamW, T.optim.RMSprop):
            p = T.nn.Parameter(T.ones(2))
            p.grad = T.ones(2)
            with pytest.raises(AssertionError, match="capturable=True"):
                opt([p], capturable=True).step()
            opt([p]).step()


def test_an_inference_tensor_into_a_convolution_with_trainable_weights_raises_as_pytorch():
    torch = pytest.importorskip("torch")
    for T in (fg, torch):
        conv = T.nn.Conv2d(3, 3, 1)
        with T.inference_mode():
            x = T.ones(1, 3, 2, 2) * 2
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            conv(x).sum().backward()
        with T.no_grad():
            assert conv(x).shape == (1, 3, 2, 2)


def test_second_derivatives_through_piecewise_linear_layers_are_zeros_as_torchs():
    """A PINN's u_xx through ReLU/LeakyReLU/Hardtanh/ReLU6 layers and max pooling: PyTorch's
    backward functions take the input, so the first derivative stays connected to it and
    the second is zeros; ours raised "does not require grad" / "not used in the graph" (the
    VJPs read the input only through masks: Primitive.mask_vjp)."""
    import torch as T
    rng = np.random.default_rng(39)
    ws = [rng.standard_normal(s) for s in ((8, 1), (8,), (1, 8), (1,))]
    got = []
    for L in (fg, T):
        L.set_default_dtype(L.float64)
        try:
            out = []
            for act in (L.nn.ReLU(), L.nn.LeakyReLU(0.1), L.nn.Hardtanh(), L.nn.ReLU6()):
                net = L.nn.Sequential(L.nn.Linear(1, 8), act, L.nn.Linear(8, 1))
                with L.no_grad():
                    for p, w in zip(net.parameters(), ws):
                        p.copy_(L.tensor(w))
                x = L.linspace(-1, 1, 7)[:, None].requires_grad_(True)
                u = net(x)
                u_x = L.autograd.grad(u, x, L.ones_like(u), create_graph=True)[0]
                u_xx = L.autograd.grad(u_x, x, L.ones_like(u_x), create_graph=True)[0]
                loss = (u_xx + 1).pow(2).mean() + u_x.pow(2).mean()
                loss.backward()
                out += [u_x.detach().numpy(), u_xx.detach().numpy(), net[0].weight.grad.numpy()]
            z = L.tensor([-1.5, -0.3, 0.4, 1.2, 2.5, -2.2], requires_grad=True)
            d1, = L.autograd.grad(L.nn.functional.max_pool1d(z.view(1, 1, 6), 2).sum(), z, create_graph=True)
            d1r = L.relu(z).sum()
            g1, = L.autograd.grad(d1r, z, create_graph=True)
            out += [L.autograd.grad(d1.sum(), z)[0].numpy(), L.autograd.grad(g1.sum(), z)[0].numpy()]
            got.append(out)
        finally:
            L.set_default_dtype(L.float32)
    for g, w in zip(*got):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_functional_hessian_refuses_a_function_with_more_than_one_output_element():
    """autograd.functional.hessian of a function returning several elements raises as
    PyTorch's (it returned a stack of per-element Hessians)."""
    import torch as T
    for L in (fg, T):
        with pytest.raises(RuntimeError, match="should contain a single element"):
            L.autograd.functional.hessian(lambda x: x ** 2, L.tensor([1.0, 2.0]))
        assert L.autograd.functional.hessian(lambda x: (x ** 3).sum(), L.tensor([1.0, 2.0])).tolist() == \
            [[6.0, 0.0], [0.0, 12.0]]


def test_inference_mode_random_fills_and_unread_fma_operands_as_pytorch():
    """As PyTorch's: enable_grad inside inference_mode says grad mode is on but records nothing;
    random in-place fills record a node that gives the overwritten value a zero gradient (and
    refuse a leaf that requires grad); an add with alpha, lerp or addcmul does not read the
    operand it adds, so updating that one in place afterwards is no error."""
    torch = pytest.importorskip("torch")

    def run(m):
        out = []
        w = m.ones(2, requires_grad=True)
        with m.inference_mode():
            with m.enable_grad():
                y = w * 2
                out += [y.requires_grad, m.is_grad_enabled(), y.is_inference()]
            with m.inference_mode(False):
                out += [(w * 2).requires_grad, m.is_grad_enabled()]
            out.append(m.is_grad_enabled())
        out.append(m.is_grad_enabled())
        for name, args in (("uniform_", ()), ("normal_", ()), ("bernoulli_", (0.5,)), ("random_", (0, 5)),
                           ("exponential_", ()), ("geometric_", (0.3,)), ("log_normal_", ()), ("cauchy_", ())):
            x = m.ones(3, requires_grad=True)
            h = x * 2
            getattr(h, name)(*args)
            h.sum().backward()
            out += [type(h.grad_fn).__name__, x.grad.tolist()]
            with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
                getattr(m.ones(2, requires_grad=True), name)(*args)
        for f in (lambda h, a: m.add(h, a, alpha=2), lambda h, a: h.sub(a, alpha=3), lambda h, a: a.lerp(h, 0.5),
                  lambda h, a: h.addcmul(a, a)):
            x, a = m.ones(3, requires_grad=True), m.ones(3)
            h = x * 1
            y = f(h, a)
            h.mul_(5)
            y.sum().backward()
            out.append(x.grad.tolist())
        return out
    assert run(fg) == run(torch)
