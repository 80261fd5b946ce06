"""torch-namespace and Tensor API gaps filled by composition: the ``torch.X`` spellings of
``nn.functional`` ops, in-place and alias variants, bitwise and integer ops, elementwise
extras, reducing scatters, linear-algebra and shape extras, windows, queries and random
fills. Values, dtypes and gradients are checked against PyTorch (the oracle); errors
against PyTorch's error types."""
import math
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

RNG = np.random.default_rng(0)


def _arr(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape)


def _check(fg_fn, torch_fn, arrays, grad=True, atol=1e-6, int_args=()):
    """Values (and gradients of every float64 input, for a random cotangent) of ``fg_fn``
    and ``torch_fn`` applied to the same arrays."""
    ts = [torch.tensor(a, requires_grad=grad and a.dtype == np.float64) for a in arrays]
    fs = [fg.tensor(a, requires_grad=grad and a.dtype == np.float64) for a in arrays]
    r_t, r_f = torch_fn(*ts), fg_fn(*fs)
    assert tuple(r_f.shape) == tuple(r_t.shape)
    assert str(r_f.dtype).split(".")[-1] == str(r_t.dtype).split(".")[-1]
    np.testing.assert_allclose(r_f.detach().numpy(), r_t.detach().numpy(), atol=atol, rtol=1e-6)
    if not grad:
        return
    wrt = [i for i, a in enumerate(arrays) if a.dtype == np.float64]
    g = RNG.standard_normal(tuple(r_t.shape))
    gt = torch.autograd.grad(r_t, [ts[i] for i in wrt], torch.tensor(g), allow_unused=True)
    gf = fg.autograd.grad(r_f, [fs[i] for i in wrt], fg.tensor(g), allow_unused=True)
    for a, b in zip(gf, gt):  # (None: an unused input, a zero gradient)
        if a is None or b is None:
            assert all(v is None or np.allclose(v.numpy(), 0) for v in (a, b))
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=atol, rtol=1e-6)


# ---------------------------------------------------------------- torch.X spellings of nn.functional
def test_torch_level_functional_aliases_match_torch():
    x, w = _arr(2, 3, 8), _arr(4, 3, 3)
    for name, args in [("conv1d", (x, w)), ("layer_norm", (x,)), ("selu", (x,)), ("celu", (x,)),
                       ("hardshrink", (x,)), ("pdist", (_arr(4, 3),))]:
        extra = {"layer_norm": ([8],)}.get(name, ())
        _check(lambda *a, n=name, e=extra: getattr(fg, n)(*a, *e), lambda *a, n=name, e=extra: getattr(torch, n)(*a, *e),
               list(args))
    _check(lambda a: fg.max_pool1d(a, 2), lambda a: torch.max_pool1d(a, 2), [x])
    _check(lambda a: fg.avg_pool1d(a, 3, 2), lambda a: torch.avg_pool1d(a, 3, 2), [x])
    _check(lambda a: fg.threshold(a, 0.5, -1.0), lambda a: torch.threshold(a, 0.5, -1.0), [x])
    _check(lambda a: fg.constant_pad_nd(a, [1, 2], 3.0), lambda a: torch.constant_pad_nd(a, [1, 2], 3.0), [x])
    _check(lambda a: fg.pixel_shuffle(a, 2), lambda a: torch.pixel_shuffle(a, 2), [_arr(1, 8, 2, 3)])
    _check(lambda a: fg.channel_shuffle(a, 2), lambda a: torch.channel_shuffle(a, 2), [_arr(1, 4, 2, 2)], grad=False)
    _check(lambda a, b: fg.cosine_similarity(a, b, 1), lambda a, b: torch.cosine_similarity(a, b, 1),
           [_arr(3, 4), _arr(1, 4)])  # (broadcast)
    _check(lambda a, b: fg.pairwise_distance(a, b), lambda a, b: torch.pairwise_distance(a, b), [_arr(3, 4), _arr(3, 4)])
    _check(lambda a, b: fg.prelu(a, b), lambda a, b: torch.prelu(a, b), [x, _arr(3)])
    _check(lambda a: a.hardshrink(0.3), lambda a: a.hardshrink(0.3), [x])
    _check(lambda a, b: fg.rms_norm(a, [8], b), lambda a, b: torch.rms_norm(a, [8], b), [x, _arr(8)])


def test_torch_level_norms_embedding_and_pooling_signatures():
    x, wt, b = _arr(2, 4, 5), _arr(4), _arr(4)
    rm, rv = _arr(4), _arr(4, lo=0.5)
    _check(lambda a, w, c: fg.batch_norm(a, w, c, fg.tensor(rm), fg.tensor(rv), False, 0.1, 1e-5, False),
           lambda a, w, c: torch.batch_norm(a, w, c, torch.tensor(rm), torch.tensor(rv), False, 0.1, 1e-5, False),
           [x, wt, b])
    _check(lambda a, w, c: fg.instance_norm(a, w, c, None, None, True, 0.1, 1e-5, False),
           lambda a, w, c: torch.instance_norm(a, w, c, None, None, True, 0.1, 1e-5, False), [x, wt, b])
    _check(lambda a, w, c: fg.group_norm(a, 2, w, c), lambda a, w, c: torch.group_norm(a, 2, w, c), [x, wt, b])
    idx = np.array([[0, 2], [3, 0]])
    _check(lambda w, i: fg.embedding(w, i, 0), lambda w, i: torch.embedding(w, i, 0), [_arr(4, 3), idx])
    v_f, i_f = fg.adaptive_max_pool1d(fg.tensor(x), 2)
    v_t, i_t = torch.adaptive_max_pool1d(torch.tensor(x), 2)
    np.testing.assert_allclose(v_f.numpy(), v_t.numpy())
    np.testing.assert_array_equal(i_f.numpy(), i_t.numpy())


def test_torch_level_losses_take_integer_reductions():
    a, b, y = _arr(5, 3), _arr(5, 3), np.sign(_arr(5)) + (np.sign(_arr(5)) == 0)
    for red in (0, 1, 2):
        _check(lambda p, q, t, r=red: fg.cosine_embedding_loss(p, q, t, 0.1, r),
               lambda p, q, t, r=red: torch.cosine_embedding_loss(p, q, t, 0.1, r), [a, b, y])
        _check(lambda p, q, r=red: fg.kl_div(p, q, r, log_target=True),
               lambda p, q, r=red: torch.kl_div(p, q, r, log_target=True), [a, b])
        _check(lambda p, q, r=red: fg.binary_cross_entropy_with_logits(p, q, None, None, r),
               lambda p, q, r=red: torch.binary_cross_entropy_with_logits(p, q, None, None, r),
               [a, _arr(5, 3, lo=0, hi=1)])
        _check(lambda p, q, n, r=red: fg.triplet_margin_loss(p, q, n, 1.0, 2.0, 1e-6, True, r),
               lambda p, q, n, r=red: torch.triplet_margin_loss(p, q, n, 1.0, 2.0, 1e-6, True, r), [a, b, _arr(5, 3)])
    _check(lambda p, q, t: fg.margin_ranking_loss(p, q, t, 0.2, 2), lambda p, q, t: torch.margin_ranking_loss(p, q, t, 0.2, 2),
           [_arr(5), _arr(5), y])
    _check(lambda p, t: fg.hinge_embedding_loss(p, t, 1.0, 1), lambda p, t: torch.hinge_embedding_loss(p, t, 1.0, 1),
           [_arr(5), y])
    _check(lambda p, t: fg.poisson_nll_loss(p, t, True, True, 1e-8, 1),
           lambda p, t: torch.poisson_nll_loss(p, t, True, True, 1e-8, 1), [a, _arr(5, 3, lo=0, hi=3)])
    _check(lambda p, q, w, c: fg.bilinear(p, q, w, c), lambda p, q, w, c: torch.bilinear(p, q, w, c),
           [_arr(4, 2), _arr(4, 3), _arr(5, 2, 3), _arr(5)])


def test_dropouts_with_torch_signatures_and_dropout3d():
    x = _arr(2, 3, 2, 2, 2)
    for name in ("dropout", "alpha_dropout", "feature_alpha_dropout", "feature_dropout"):
        np.testing.assert_array_equal(getattr(fg, name)(fg.tensor(x), 0.5, False).numpy(), x)
    y = fg.nn.functional.dropout3d(fg.ones(2, 3, 2, 2, 2), 0.5)
    per_channel = y.numpy().reshape(6, -1)
    assert all(len(set(row)) == 1 and row[0] in (0.0, 2.0) for row in per_channel)
    t = fg.ones(100)
    fg.dropout_(t, 0.5, True)
    assert set(np.unique(t.numpy())) <= {0.0, 2.0}
    a, p, n = _arr(4, 3), _arr(4, 3), _arr(4, 3)
    dist = lambda u, v: (u - v).abs().sum(-1)  # noqa: E731
    _check(lambda u, v, w: fg.nn.functional.triplet_margin_with_distance_loss(u, v, w, distance_function=dist, swap=True),
           lambda u, v, w: torch.nn.functional.triplet_margin_with_distance_loss(u, v, w, distance_function=dist,
                                                                                 swap=True), [a, p, n])
    with pytest.raises(ValueError):
        fg.nn.functional.triplet_margin_with_distance_loss(fg.tensor(a), fg.tensor(p), fg.tensor(n), margin=0.0)


# ---------------------------------------------------------------- in-place and alias variants
_COMPARISONS = ("eq_", "ne_", "lt_", "le_", "gt_", "ge_", "less_", "greater_", "not_equal_", "greater_equal_",
                "less_equal_")


@pytest.mark.parametrize("name", ["eq_", "ne_", "lt_", "le_", "gt_", "ge_", "less_", "greater_", "not_equal_",
                                  "greater_equal_", "less_equal_", "fmod_", "remainder_", "floor_divide_",
                                  "logical_and_", "logical_or_", "logical_xor_", "multiply_", "divide_", "subtract_",
                                  "copysign_", "fmax", "fmin", "heaviside_", "nextafter_", "ldexp_"])
def test_binary_inplace_and_alias_methods_match_torch(name):
    a, b = _arr(3, 4), _arr(4)  # (b broadcasts)
    if name in _COMPARISONS:
        a, b = np.round(a, 1), np.round(b, 1)  # (ties)
    ta, fa = torch.tensor(a), fg.tensor(a)
    rt, rf = getattr(ta, name)(torch.tensor(b)), getattr(fa, name)(fg.tensor(b))
    np.testing.assert_allclose(rf.numpy(), rt.numpy())
    assert str(rf.dtype).split(".")[-1] == str(rt.dtype).split(".")[-1]
    if name.endswith("_"):
        assert rf is fa
        np.testing.assert_allclose(fa.numpy(), ta.numpy())


@pytest.mark.parametrize("name", ["erf_", "erfc_", "exp2_", "expm1_", "log1p_", "log2_", "log10_", "rsqrt_", "sinh_",
                                  "cosh_", "tan_", "trunc_", "fix_", "ceil_", "logit_", "nan_to_num_", "tril_", "triu_",
                                  "logical_not_", "deg2rad_", "rad2deg_"])
def test_unary_inplace_methods_match_torch(name):
    a = _arr(3, 4, lo=0.05, hi=0.95)
    ta, fa = torch.tensor(a), fg.tensor(a)
    getattr(ta, name)()
    assert getattr(fa, name)() is fa
    np.testing.assert_allclose(fa.numpy(), ta.numpy(), rtol=1e-12)
    if hasattr(torch, name):
        np.testing.assert_allclose(getattr(fg, name)(fg.tensor(a)).numpy(), getattr(torch, name)(torch.tensor(a)).numpy())


def test_addmm_inplace_and_char_match_torch():
    c, a, b = _arr(2, 4), _arr(2, 3), _arr(3, 4)
    tc, fc = torch.tensor(c), fg.tensor(c)
    assert fc.addmm_(fg.tensor(a), fg.tensor(b), beta=0.5) is fc
    np.testing.assert_allclose(fc.numpy(), tc.addmm_(torch.tensor(a), torch.tensor(b), beta=0.5).numpy())
    assert fg.tensor([1.7, -2.2]).char().dtype == fg.int8
    assert fg.tensor([1.7, -2.2]).char().numpy().tolist() == torch.tensor([1.7, -2.2]).char().tolist()


def test_inplace_variants_track_gradients_and_cumsum_():
    a = _arr(3, 4)

    def run(lib):
        x = lib.tensor(a, requires_grad=True)
        y = x * 1.0
        y.sinh_()
        y.cumsum_(1)
        return lib.autograd.grad(y.sum(), x)[0].numpy(), y.detach().numpy()
    for u, v in zip(run(fg), run(torch)):
        np.testing.assert_allclose(u, v)
    assert fg.positive(fg.tensor(a)).numpy().tolist() == a.tolist()
    with pytest.raises(RuntimeError):
        fg.positive(fg.tensor([True]))
    with pytest.raises(RuntimeError):
        torch.positive(torch.tensor([True]))


# ---------------------------------------------------------------- bitwise and integer ops
def test_bitwise_ops_and_operators_match_torch():
    a = RNG.integers(-50, 50, (3, 4))
    b = RNG.integers(0, 5, (4,))
    pairs = [(torch.tensor(a), torch.tensor(b), fg.tensor(a), fg.tensor(b)),
             (torch.tensor(a, dtype=torch.int32), 3, fg.tensor(a, dtype=fg.int32), 3),
             (torch.tensor(a > 0), torch.tensor(b > 2), fg.tensor(a > 0), fg.tensor(b > 2))]
    for ta, tb, fa, fb in pairs:
        for op in ("__and__", "__or__", "__xor__", "bitwise_and", "bitwise_or", "bitwise_xor"):
            rt, rf = getattr(ta, op)(tb), getattr(fa, op)(fb)
            np.testing.assert_array_equal(rf.numpy(), rt.numpy())
            assert str(rf.dtype).split(".")[-1] == str(rt.dtype).split(".")[-1]
        np.testing.assert_array_equal((~fa).numpy(), (~ta).numpy())
    ta, fa = torch.tensor(a), fg.tensor(a)
    np.testing.assert_array_equal((fa << fg.tensor(b)).numpy(), (ta << torch.tensor(b)).numpy())
    np.testing.assert_array_equal((fa >> 2).numpy(), (ta >> 2).numpy())
    np.testing.assert_array_equal(fg.gcd(fa, fg.tensor(b)).numpy(), torch.gcd(ta, torch.tensor(b)).numpy())
    np.testing.assert_array_equal(fg.lcm(fa, fg.tensor(b)).numpy(), torch.lcm(ta, torch.tensor(b)).numpy())
    fa &= 7
    ta &= 7
    np.testing.assert_array_equal(fa.numpy(), ta.numpy())
    for bad_t, bad_f in [(lambda: torch.ones(2) & torch.ones(2), lambda: fg.ones(2) & fg.ones(2)),
                         (lambda: torch.bitwise_not(torch.ones(2)), lambda: fg.bitwise_not(fg.ones(2))),
                         (lambda: torch.gcd(torch.tensor([True]), torch.tensor([True])),
                          lambda: fg.gcd(fg.tensor([True]), fg.tensor([True])))]:
        with pytest.raises(NotImplementedError):
            bad_t()
        with pytest.raises(NotImplementedError):
            bad_f()


# ---------------------------------------------------------------- elementwise extras
def test_differentiable_elementwise_extras_match_torch_with_broadcasting():
    a, b = _arr(3, 4), _arr(4)
    b[0] = -0.0
    a[0, 1] = np.nan
    b[2] = np.nan
    _check(fg.copysign, torch.copysign, [np.nan_to_num(a), b])
    _check(fg.fmax, torch.fmax, [a, b])
    _check(fg.fmin, torch.fmin, [a, b])
    # (float exponents: torch's gradient for negative integer exponents is 0, its 2 ** e in integers)
    _check(lambda x, e: fg.ldexp(x, e), lambda x, e: torch.ldexp(x, e), [_arr(3, 4), _arr(4)])
    _check(lambda x: fg.ldexp(x, fg.tensor([0, 2, 3])), lambda x: torch.ldexp(x, torch.tensor([0, 2, 3])), [_arr(3)])
    _check(fg.deg2rad, torch.deg2rad, [_arr(3, 4)])
    _check(fg.rad2deg, torch.rad2deg, [_arr(3, 4)])
    _check(lambda x: fg.logcumsumexp(x, 1), lambda x: torch.logcumsumexp(x, 1), [_arr(3, 5, lo=-30, hi=30)])
    _check(lambda x: fg.renorm(x, 2, 0, 1.5), lambda x: torch.renorm(x, 2, 0, 1.5), [_arr(4, 3)])
    _check(lambda x: x.renorm(1, 1, 2.0), lambda x: x.renorm(1, 1, 2.0), [_arr(4, 3)])


def test_non_differentiable_elementwise_extras_match_torch():
    x = np.array([-1.5, -0.0, 0.0, 2.0, np.inf, -np.inf, np.nan])
    t, f = torch.tensor(x), fg.tensor(x)
    for name in ("signbit", "isposinf", "isneginf", "isreal"):
        rt, rf = getattr(torch, name)(t), getattr(fg, name)(f)
        np.testing.assert_array_equal(rf.numpy(), rt.numpy())
        assert rf.dtype == fg.bool
    np.testing.assert_array_equal(fg.signbit(fg.tensor([-3, 0, 2])).numpy(), [True, False, False])
    v = np.array([1.0, -2.0, 0.5, 0.0])
    np.testing.assert_array_equal(fg.heaviside(f[:4], fg.tensor(v)).numpy(), torch.heaviside(t[:4], torch.tensor(v)).numpy())
    with pytest.raises(RuntimeError):
        fg.heaviside(fg.tensor([1.0]), fg.tensor([1]))
    m_f, e_f = fg.frexp(fg.tensor(x[:4], dtype=fg.float32))
    m_t, e_t = torch.frexp(torch.tensor(x[:4], dtype=torch.float32))
    np.testing.assert_array_equal(m_f.numpy(), m_t.numpy())
    np.testing.assert_array_equal(e_f.numpy(), e_t.numpy())
    assert e_f.dtype == fg.int32 and e_t.dtype == torch.int32
    with pytest.raises(RuntimeError):
        fg.frexp(fg.tensor([1]))
    n_f = fg.nextafter(fg.tensor([1.0, 2.0], dtype=fg.float32), fg.tensor([2.0, 0.0], dtype=fg.float32))
    n_t = torch.nextafter(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 0.0]))
    np.testing.assert_array_equal(n_f.numpy(), n_t.numpy())


# ---------------------------------------------------------------- scatters
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_values_and_gradients_match_torch(reduce, include_self):
    src = np.round(_arr(3, 4), 1)  # (rounded: ties for amax/amin share the gradient)
    src[0, 0] = 0.0  # (a zero for prod)
    idx = RNG.integers(0, 4, (3, 4))
    # (self's values never tie src's: torch counts excluded ties of self in amax's shares)
    _check(lambda x, s, i: x.scatter_reduce(1, i, s, reduce, include_self=include_self),
           lambda x, s, i: x.scatter_reduce(1, i, s, reduce, include_self=include_self),
           [np.round(_arr(3, 4), 1) + 0.05, src, idx])
    a = RNG.integers(-5, 5, (2, 4))
    i2 = RNG.integers(0, 4, (2, 3))
    s2 = RNG.integers(-5, 5, (2, 3))
    rt = torch.tensor(a).scatter_reduce(1, torch.tensor(i2), torch.tensor(s2), reduce, include_self=include_self)
    rf = fg.tensor(a).scatter_reduce(1, fg.tensor(i2), fg.tensor(s2), reduce, include_self=include_self)
    np.testing.assert_array_equal(rf.numpy(), rt.numpy())


def test_scatter_reduce_sum_and_mean_compile_without_a_break():
    """A GraphSAGE-style mean (and sum) aggregation compiles into the graph (scatter_adds):
    PyTorch's values and gradients, include_self either way, no graph break."""
    x0, s0 = _arr(4, 5), _arr(6, 5)
    i0 = RNG.integers(0, 4, (6, 5))

    def agg(lib, x, s, i):
        return (x.scatter_reduce(0, i, s, "mean", include_self=False) * 2
                + x.scatter_reduce(-2, i, s * s, "sum") + x.scatter_reduce(0, i, s, "mean"))
    cf = fg.compile(lambda x, s, i: agg(fg, x, s, i))
    res = []
    for lib, f in ((fg, cf), (torch, lambda x, s, i: agg(torch, x, s, i))):
        x, s = lib.tensor(x0, requires_grad=True), lib.tensor(s0, requires_grad=True)
        out = f(x, s, lib.tensor(i0))
        (out * lib.arange(20.0, dtype=lib.float64).reshape(4, 5)).sum().backward()
        res.append((out.detach().numpy(), x.grad.numpy(), s.grad.numpy()))
    for ours, theirs in zip(*res):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert not cf.cache_info()["graph_breaks"] and cf.cache_info()["compiles"] == 1


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_into_infinities_keeps_torchs_values_under_autograd(reduce):
    """A graph attention layer's segment max starts from -inf: with gradients on, the values
    stay PyTorch's (the gradient surrogate made them all NaN), and so do the gradients of
    the finite results; pdist's p=inf rows likewise."""
    idx, src = np.array([0, 0, 2]), np.array([1.0, 2.0, 3.0])
    outs = []
    for lib in (fg, torch):
        e = lib.tensor(src, requires_grad=True)
        r = lib.full((3,), -math.inf, dtype=lib.float64).scatter_reduce(0, lib.tensor(idx), e, reduce,
                                                                         include_self=reduce != "amax")
        lib.where(lib.isfinite(r), r, lib.zeros(3, dtype=lib.float64)).sum().backward()
        x = lib.tensor([[0, 1.0], [math.inf, 2.0], [3, 4]], requires_grad=True)
        outs.append((r.detach().numpy(), e.grad.numpy(), lib.nn.functional.pdist(x, p=math.inf).detach().numpy()))
    for f, t in zip(*outs):
        np.testing.assert_array_equal(f, t)


def test_index_reduce_masked_and_embedding_scatters_match_torch():
    idx = np.array([0, 2, 0])
    for reduce in ("prod", "mean", "amax", "amin"):
        _check(lambda x, s: x.index_reduce(0, fg.tensor(idx), s, reduce),
               lambda x, s: x.index_reduce(0, torch.tensor(idx), s, reduce), [_arr(3, 2), _arr(3, 2)])
    mask = _arr(4) > 0
    _check(lambda x, s: x.masked_scatter(fg.tensor(mask), s), lambda x, s: x.masked_scatter(torch.tensor(mask), s),
           [_arr(3, 4), _arr(13)])  # (the mask broadcasts)
    _check(lambda x, s: fg.select_scatter(x, s, 1, -1), lambda x, s: torch.select_scatter(x, s, 1, -1),
           [_arr(3, 4), _arr(3)])
    _check(lambda x, s: fg.slice_scatter(x, s, 1, 0, None, 2), lambda x, s: torch.slice_scatter(x, s, 1, 0, None, 2),
           [_arr(3, 4), _arr(3, 2)])
    for off in (-1, 0, 2):
        n = len(np.diagonal(np.zeros((3, 4)), off))
        _check(lambda x, s, o=off: fg.diagonal_scatter(x, s, o), lambda x, s, o=off: torch.diagonal_scatter(x, s, o),
               [_arr(3, 4), _arr(n)])
    with pytest.raises(RuntimeError):
        fg.select_scatter(fg.zeros(3, 4), fg.zeros(4), 1, 0)
    with pytest.raises(RuntimeError):
        torch.select_scatter(torch.zeros(3, 4), torch.zeros(4), 1, 0)


# ---------------------------------------------------------------- linear algebra
def test_linalg_extras_match_torch():
    _check(lambda c, u, v: fg.addr(c, u, v, beta=0.5, alpha=2), lambda c, u, v: torch.addr(c, u, v, beta=0.5, alpha=2),
           [_arr(4), _arr(3), _arr(4)])  # (input broadcasts)
    _check(lambda c, m, v: fg.addmv(c, m, v, alpha=3), lambda c, m, v: torch.addmv(c, m, v, alpha=3),
           [_arr(1), _arr(3, 4), _arr(4)])
    _check(lambda u, v: fg.vdot(u, v), lambda u, v: torch.vdot(u, v), [_arr(4), _arr(4)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(lambda a, b, c: fg.chain_matmul(a, b, c), lambda a, b, c: torch.chain_matmul(a, b, c),
               [_arr(2, 3), _arr(3, 4), _arr(4, 2)])
    m = _arr(3, 3)
    spd = m @ m.T + 3 * np.eye(3)
    for upper in (False, True):
        factor = np.linalg.cholesky(spd)
        factor = factor.T if upper else factor
        _check(lambda b, L, u=upper: fg.cholesky_solve(b, L, u), lambda b, L, u=upper: torch.cholesky_solve(b, L, u),
               [_arr(3, 2), factor], atol=1e-8)
        _check(lambda L, u=upper: fg.cholesky_inverse(L, u), lambda L, u=upper: torch.cholesky_inverse(L, u),
               [factor], atol=1e-8)
    # a right-hand side shaped like the factors' batch of vectors is still a matrix, broadcast
    factors = np.linalg.cholesky(np.stack([spd, 2 * spd, spd + np.eye(3)]))
    _check(lambda b, L: fg.cholesky_solve(b, L), lambda b, L: torch.cholesky_solve(b, L), [_arr(3, 3), factors],
           atol=1e-8)
    with pytest.raises(RuntimeError, match="b should have at least 2 dimensions"):
        fg.cholesky_solve(fg.ones(3), fg.eye(3))


def test_adjoint_and_matrix_transposes_match_torch():
    _check(fg.adjoint, torch.adjoint, [_arr(2, 3, 4)])
    _check(lambda x: x.mH, lambda x: x.mH, [_arr(2, 3, 4)])
    _check(lambda x: x.H, lambda x: x.H, [_arr(3, 4)])
    for lib in (fg, torch):
        with pytest.raises(RuntimeError):
            lib.zeros(2, 3, 4).H
        with pytest.raises(RuntimeError):
            lib.adjoint(lib.zeros(3))


def test_composed_ops_compile_with_eager_values_and_gradients():
    """One compiled function over the traceable compositions (a single Numba compile)."""
    def f(x, y, m):
        a = fg.copysign(x, y) + fg.fmax(x, y) + fg.logcumsumexp(x, 1) + fg.deg2rad(x)
        b = fg.select_scatter(a, y, 0, 1) + fg.diagonal_scatter(a, y[:3], 0)
        c = b.masked_scatter(m & (x > 0), x) + fg.renorm(x, 2, 0, 1.0) + fg.addr(x, y[:3], y)
        return c.sum() + fg.slice_scatter(x, y[None].expand(2, 4), 0, 0, 3, 2).sum()
    x, y, m = fg.tensor(_arr(3, 4), requires_grad=True), fg.tensor(_arr(4)), fg.tensor([True, False, True, True])
    eager = f(x, y, m)
    compiled = fg.compile(f)(x, y, m)
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-10)
    np.testing.assert_allclose(fg.autograd.grad(compiled, x)[0].numpy(), fg.autograd.grad(eager, x)[0].numpy(),
                               rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- shapes and histograms
def test_shape_extras_match_torch():
    a = _arr(4, 6, 2)
    for name, arg in (("hsplit", 3), ("vsplit", [1, 3]), ("dsplit", 2)):
        for u, v in zip(getattr(fg, name)(fg.tensor(a), arg), getattr(torch, name)(torch.tensor(a), arg)):
            np.testing.assert_array_equal(u.numpy(), v.numpy())
    _check(lambda x, y: fg.dstack([x, y]), lambda x, y: torch.dstack([x, y]), [_arr(3), _arr(3)])
    _check(lambda x: fg.split_with_sizes(x, [1, 3], 0)[1], lambda x: torch.split_with_sizes(x, [1, 3], 0)[1], [_arr(4, 2)])
    _check(lambda x: x.sum_to_size(1, 3), lambda x: x.sum_to_size(1, 3), [_arr(2, 4, 3)])
    _check(lambda x: fg.diagflat(x, 1), lambda x: torch.diagflat(x, 1), [_arr(2, 2)])
    # (torch.vander's own backward fails: "modified by an inplace operation"; values only)
    _check(lambda x: fg.vander(x, 4), lambda x: torch.vander(x, 4), [_arr(3)], grad=False)
    _check(lambda x: fg.vander(x, increasing=True), lambda x: torch.vander(x, increasing=True), [_arr(3)], grad=False)
    x = fg.tensor([0.0, 1.5], dtype=fg.float64, requires_grad=True)
    g = fg.autograd.grad(fg.vander(x, 4).sum(), x)[0]  # d/dx (x^3 + x^2 + x + 1)
    np.testing.assert_allclose(g.numpy(), [1.0, 3 * 1.5 ** 2 + 2 * 1.5 + 1])
    np.testing.assert_array_equal(fg.vander(fg.tensor([2, 3])).numpy(), torch.vander(torch.tensor([2, 3])).numpy())
    _check(lambda x: fg.combinations(x, 2), lambda x: torch.combinations(x, 2), [_arr(4)])
    _check(lambda x: fg.combinations(x, 3, True), lambda x: torch.combinations(x, 3, True), [_arr(3)])
    flat = np.array([0, 5, 11, 7])
    for u, v in zip(fg.unravel_index(fg.tensor(flat), (3, 4)), torch.unravel_index(torch.tensor(flat), (3, 4))):
        np.testing.assert_array_equal(u.numpy(), v.numpy())
        assert u.dtype == fg.int64
    assert fg.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    with pytest.raises(RuntimeError):
        fg.broadcast_shapes((2,), (3,))
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes((2,), (3,))
    x = _arr(50).astype(np.float32)
    np.testing.assert_array_equal(fg.histc(fg.tensor(x), 7).numpy(), torch.histc(torch.tensor(x), 7).numpy())
    np.testing.assert_array_equal(fg.histc(fg.tensor(x), 5, -1, 1).numpy(),
                                  torch.histc(torch.tensor(x), 5, -1, 1).numpy())
    h_f, e_f = fg.histogram(fg.tensor(x), 6, range=(-1.0, 1.0))
    h_t, e_t = torch.histogram(torch.tensor(x), 6, range=(-1.0, 1.0))
    np.testing.assert_allclose(h_f.numpy(), h_t.numpy())
    np.testing.assert_allclose(e_f.numpy(), e_t.numpy(), atol=1e-6)
    with pytest.raises(NotImplementedError):
        fg.histc(fg.tensor([1, 2]))


# ---------------------------------------------------------------- windows, queries, constants, random
@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows_match_torch(name):
    for n in (0, 1, 5, 8):
        for periodic in (True, False):
            rf = getattr(fg, name)(n, periodic)
            rt = getattr(torch, name)(n, periodic)
            np.testing.assert_allclose(rf.numpy(), rt.numpy(), atol=1e-6)
            assert rf.dtype == fg.float32
    assert getattr(fg, name)(4, dtype=fg.float64).dtype == fg.float64
    with pytest.raises(RuntimeError):
        getattr(fg, name)(4, dtype=fg.int64)


def test_queries_constants_and_factories_match_torch():
    for lib in (fg, torch):
        t = lib.zeros(2, 3, dtype=lib.float64)
        assert lib.is_same_size(t, lib.ones(2, 3)) and not lib.is_same_size(t, lib.ones(3, 2))
        assert lib.is_signed(t) and not lib.is_signed(lib.zeros(1, dtype=lib.uint8))
        assert not lib.is_complex(t) and not t.is_complex()
        assert lib.is_nonzero(lib.tensor([2.0])) and not lib.is_nonzero(lib.tensor(0))
        with pytest.raises(RuntimeError):
            lib.is_nonzero(lib.ones(2))
        assert (t.nbytes, t.itemsize, t.storage_offset(), t[1:].storage_offset()) == (48, 8, 0, 3)
    assert fg.typename(fg.zeros(1)) == torch.typename(torch.zeros(1))
    assert fg.typename(3) == torch.typename(3)
    assert (fg.pi, fg.e, fg.inf, fg.newaxis) == (torch.pi, torch.e, torch.inf, torch.newaxis)
    assert math.isnan(fg.nan)
    s_f, s_t = fg.scalar_tensor(3), torch.scalar_tensor(3)
    assert s_f.item() == s_t.item() and s_f.dtype == fg.float32 and s_f.ndim == 0
    r = fg.randint_like(fg.zeros(3, 4, dtype=fg.int32), 5, 9)
    assert r.dtype == fg.int32 and r.shape == (3, 4) and 5 <= r.min().item() and r.max().item() < 9
    assert fg.is_anomaly_enabled() is False
    fg.set_anomaly_enabled(True)
    assert fg.is_anomaly_enabled() and fg.autograd.is_anomaly_enabled()
    fg.set_anomaly_enabled(False)
    assert not fg.is_anomaly_enabled()
    assert fg.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    fg.set_float32_matmul_precision("high")
    assert fg.get_float32_matmul_precision() == "high"
    fg.set_float32_matmul_precision("highest")
    with pytest.warns(UserWarning):
        fg.set_float32_matmul_precision("low")
    assert fg.get_float32_matmul_precision() == "highest"


def test_random_fills_draw_from_their_distributions():
    n = 20000
    gen = fg.Generator().manual_seed(1)
    x = fg.empty(n, dtype=fg.float64)
    assert x.exponential_(2.0, generator=gen) is x and abs(x.mean().item() - 0.5) < 0.03
    assert x.geometric_(0.25).min().item() >= 1 and abs(x.mean().item() - 4.0) < 0.15
    assert abs(x.log_normal_(0.0, 0.25).log().std().item() - 0.25) < 0.01
    assert abs(x.cauchy_(1.0, 2.0).median().item() - 1.0) < 0.1
    i = fg.empty(n, dtype=fg.int64).random_(3, 7)
    assert sorted(np.unique(i.numpy()).tolist()) == [3, 4, 5, 6]
    assert set(np.unique(fg.empty(100, dtype=fg.int64).random_(2).numpy())) <= {0, 1}
    for name, arg in (("exponential_", -1.0), ("geometric_", 1.5)):
        with pytest.raises(RuntimeError):
            getattr(fg.zeros(2), name)(arg)
        with pytest.raises(RuntimeError):
            getattr(torch.zeros(2), name)(arg)


def test_legacy_methods_new_resize_apply_map():
    t = fg.zeros(2, dtype=fg.int32)
    assert t.new(3, 4).shape == (3, 4) and t.new(3, 4).dtype == fg.int32
    assert t.new([1, 2]).numpy().tolist() == [1, 2] and t.new([1, 2]).dtype == fg.int32
    # (PyTorch's reading: no argument, an empty [0]; a tuple is data; a Size is a size)
    assert t.new().shape == (0,) and fg.cat([t.new(), t]).tolist() == [0, 0]
    assert t.new((4, 5)).tolist() == [4, 5] and t.new(fg.Size([2, 3])).shape == (2, 3)
    with pytest.raises(TypeError, match="data must be a sequence"):
        t.new(3.5)
    x = fg.arange(6.0)
    assert x.resize_(2, 3) is x and x.shape == (2, 3)
    assert x.numpy().tolist() == torch.arange(6.0).resize_(2, 3).tolist()
    x.resize_as_(fg.zeros(3, 2))
    assert x.shape == (3, 2)
    y = fg.arange(4.0)
    y.apply_(lambda v: v * v)
    assert y.numpy().tolist() == [0.0, 1.0, 4.0, 9.0]
    y.map_(fg.tensor([1.0]), lambda a, b: a + b)
    assert y.numpy().tolist() == [1.0, 2.0, 5.0, 10.0]
    with pytest.raises(RuntimeError):
        fg.zeros(2, requires_grad=True).resize_(4)


def test_dropout3d_and_triplet_margin_with_distance_modules():
    rng = np.random.default_rng(3)
    a, p, n = (rng.standard_normal((4, 3)) for _ in range(3))

    def l1(x, y):
        return (x - y).abs().sum(-1)
    got = fg.nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=0.5, swap=True)(
        *map(fg.tensor, (a, p, n)))
    want = torch.nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=0.5, swap=True)(
        *map(torch.tensor, (a, p, n)))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    y = fg.nn.Dropout3d(0.5)(fg.ones(4, 6, 2, 2, 2)).numpy()
    per_channel = y.reshape(24, 8)
    assert set(np.unique(y)) <= {0.0, 2.0} and all(len(set(row)) == 1 for row in per_channel)
    assert fg.nn.Dropout3d(0.5).eval()(fg.ones(2, 2, 2, 2)).numpy().min() == 1.0


def test_python_types_as_dtypes_mean_what_torch_says():
    """``dtype=float`` is float64 (not the default float dtype), ``int`` int64, ``bool`` bool,
    in factories, ``tensor`` and ``.to``: ported NumPy code keeps double precision."""
    for typ in (float, int, bool):
        for make in (lambda m: m.zeros(2, dtype=typ), lambda m: m.tensor([1], dtype=typ),
                     lambda m: m.ones(1).to(typ), lambda m: m.arange(3, dtype=typ if typ is not bool else None)):
            assert str(make(fg)).replace("fusegrad", "torch") == str(make(torch))
            assert make(fg).dtype.itemsize == make(torch).dtype.itemsize


def test_results_of_reductions_gathers_and_joins_of_permuted_inputs_are_contiguous():
    """As PyTorch's: a reduction, softmax, index_select, cat, cumsum, layer_norm or topk of a
    permuted tensor is contiguous, so the common ``.view(-1)`` after it works (it raised)."""
    def ops(m):
        a = m.arange(60.).reshape(4, 3, 5).permute(1, 0, 2)
        return [a.sum(-1), a.amax(-1), a.std(-1), a.softmax(-1), a.index_select(1, m.tensor([2, 0, 1, 3])),
                a[:, [2, 0, 1, 3]], a.cumsum(-1), a.norm(dim=-1), a.logsumexp(-1),
                m.nn.functional.layer_norm(a, (5,)), a.topk(2, -1)[0], m.cat([a, a], -1), m.stack([a, a])]
    for ours, theirs in zip(ops(fg), ops(torch), strict=True):
        assert ours.is_contiguous() and theirs.is_contiguous()
        np.testing.assert_allclose(ours.view(-1).numpy(), theirs.view(-1).numpy(), rtol=1e-6)


def test_roll_without_dims_tile_with_fewer_dims_and_backend_flags_as_torch():
    """roll without dims rolls the flattened tensor; tile with fewer dims repeats the last
    ones (also as varargs); nanoGPT's start-up flags (torch.backends.cuda.matmul.allow_tf32,
    sdp switches) can be set."""
    for m in (fg, torch):
        m.backends.cuda.matmul.allow_tf32 = True
        m.backends.cudnn.allow_tf32 = True
    with fg.backends.cuda.sdp_kernel(enable_flash=False):  # (deprecated in torch)
        assert fg.backends.cuda.math_sdp_enabled() and not fg.backends.cuda.flash_sdp_enabled()
    assert fg.backends.cuda.flash_sdp_enabled()

    def cases(m):
        a = m.arange(6).view(2, 3)
        return [a.roll(2), m.roll(a, -1), a.roll(1, 0), m.tile(a, (2,)), a.tile(2, 1), m.tile(m.arange(3), (2, 2))]
    for ours, theirs in zip(cases(fg), cases(torch), strict=True):
        assert ours.tolist() == theirs.tolist()


def test_functional_multi_head_attention_forward_takes_torchs_arguments():
    """F.multi_head_attention_forward with PyTorch's signature (packed or separate
    projections, masks, batched and unbatched) equals torch's."""
    g = np.random.default_rng(3)
    E, H, L, S, N = 8, 2, 3, 4, 2
    arrays = {k: g.standard_normal(s).astype(np.float32) for k, s in dict(
        q=(L, N, E), k=(S, N, E), w=(3 * E, E), b=(3 * E,), ow=(E, E), ob=(E,), qw=(E, E), kw=(E, E), vw=(E, E)).items()}
    pad = np.array([[False, False, True, False], [False, True, False, False]])

    def run(m, sep, batched):
        t = {k: m.tensor(v) for k, v in arrays.items()}
        q, k = (t["q"], t["k"]) if batched else (t["q"][:, 0], t["k"][:, 0])
        return m.nn.functional.multi_head_attention_forward(
            q, k, k, E, H, None if sep else t["w"], t["b"], None, None, False, 0.0, t["ow"], t["ob"],
            key_padding_mask=m.tensor(pad if batched else pad[0]), use_separate_proj_weight=sep,
            q_proj_weight=t["qw"], k_proj_weight=t["kw"], v_proj_weight=t["vw"], average_attn_weights=False)
    for sep in (False, True):
        for batched in (True, False):
            for a, b in zip(run(fg, sep, batched), run(torch, sep, batched)):
                np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_return_types_name_the_named_tuples_ops_return():
    x = fg.tensor([[3.0, 1.0, 2.0]])
    assert isinstance(x.max(1), fg.return_types.max) and isinstance(x.sort(), fg.return_types.sort)
    assert isinstance(x.topk(2), fg.return_types.topk) and "topk" in dir(fg.return_types)
    assert set(dir(fg.return_types)) >= {"max", "min", "sort", "topk", "kthvalue", "median", "linalg_svd"}
    with pytest.raises(AttributeError):
        fg.return_types.nothing_here


def test_hypot_at_extreme_magnitudes_and_sign_of_nan_match_torch():
    """hypot neither overflows nor underflows on the way (float32 of 1e30 gave inf), and
    sign(NaN) is 0, eagerly and compiled."""
    av = np.array([3, 1e30, 1e-30, 1e20, 0.0, -5, -1.5, 2.0], np.float32)
    bv = np.array([4, 1e30, 1e-30, 1, 2.0, 12, 2.0, 2.0], np.float32)
    got = []
    for lib in (fg, torch):
        a = lib.tensor(av, requires_grad=True)
        r = lib.hypot(a, lib.tensor(bv))
        r.sum().backward()
        got.append((r.detach().numpy(), a.grad.numpy()))
    (rf, gf), (rt, gt) = got
    np.testing.assert_allclose(rf, rt, rtol=1e-6)
    np.testing.assert_allclose(gf, gt, rtol=1e-6)
    x = np.array([np.nan, -0.0, 2.0, -3.0, np.inf], np.float32)
    want = torch.sign(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(fg.sign(fg.tensor(x)).numpy(), want)
    np.testing.assert_array_equal(fg.compile(lambda t: fg.sign(t) + 0)(fg.tensor(x)).numpy(), want)


def test_angle_and_mvlgamma_match_torch():
    x = np.array([-2.0, 0.0, 3.0, np.nan, -0.0, np.inf, -np.inf])
    got = []
    for lib in (fg, torch):
        t = lib.tensor(x, requires_grad=True)
        a = lib.angle(t)
        a.sum().backward()
        m = lib.tensor([2.5, 3.0], requires_grad=True)
        v = lib.mvlgamma(m, 3)
        v.sum().backward()
        got.append((a.detach().numpy(), t.grad.numpy(), lib.angle(lib.tensor([-1, 2])).numpy(), v.detach().numpy(),
                    m.grad.numpy(), m.detach().mvlgamma(2).numpy()))
    for f, t in zip(*got):
        np.testing.assert_allclose(f, t, rtol=1e-6)


def test_matrix_products_of_mixed_dtypes_raise_as_torch():
    """PyTorch promotes no matrix product's operands (a float32 model fed float64 or
    bfloat16 inputs raises): neither does fusegrad, with PyTorch's messages."""
    cases = [(True, lambda L: L.ones(2, 2) @ L.ones(2, 2, dtype=L.bfloat16)),
             (False, lambda L: L.ones(2, 3) @ L.ones(3, dtype=L.float64)),
             (True, lambda L: L.ones(3) @ L.ones(3, dtype=L.float64)),
             (True, lambda L: L.ones(2, 2, dtype=L.int64) @ L.ones(2, 2)),
             (True, lambda L: L.nn.functional.linear(L.ones(2, 3), L.ones(4, 3, dtype=L.float64))),
             (False, lambda L: L.bmm(L.ones(1, 2, 2), L.ones(1, 2, 2, dtype=L.float64)))]
    for same_message, case in cases:
        with pytest.raises(RuntimeError) as want:
            case(torch)
        with pytest.raises(RuntimeError) as got:
            case(fg)
        assert not same_message or str(got.value) == str(want.value)
    assert (fg.ones(2, 2, dtype=fg.int64) @ fg.ones(2, 2, dtype=fg.int64)).dtype == fg.int64


def test_empty_reductions_and_splits_match_torch():
    """An empty last batch: logsumexp over an empty dim is -inf, median() of an empty tensor
    NaN, and splitting or chunking an empty dim gives PyTorch's chunks."""
    for lib in (fg, torch):
        e = lib.ones(0, 3)
        got = [lib.logsumexp(e, 0), lib.logsumexp(lib.ones(2, 0), 1, keepdim=True), e.median(),
               lib.ones(0, dtype=lib.int64).median()]
        shapes = [[tuple(t.shape) for t in parts] for parts in (e.split(2), e.chunk(2), lib.ones(2, 0).chunk(3, 1))]
        if lib is fg:
            mine = ([t.numpy() for t in got], shapes)
        else:
            theirs = ([t.numpy() for t in got], shapes)
    for f, t in zip(mine[0], theirs[0]):
        np.testing.assert_array_equal(f, t)
    assert mine[1] == theirs[1]


def test_copysign_gives_its_sign_argument_a_zero_gradient():
    """copysign's sign argument gets PyTorch's zero gradient (it got None), signed zeros kept."""
    res = []
    for lib in (fg, torch):
        a = lib.tensor([1.0, -2.0, 0.0, 3.0], requires_grad=True)
        b = lib.tensor([-1.0, 2.0, -0.0, -0.5], requires_grad=True)
        r = lib.copysign(a, b)
        r.sum().backward()
        res.append((r.detach().numpy(), np.signbit(r.detach().numpy()), a.grad.numpy(), b.grad.numpy()))
    for ours, theirs in zip(*res):
        np.testing.assert_array_equal(ours, theirs)


def test_frexp_mantissa_is_differentiable():
    """frexp's mantissa has PyTorch's gradient 2 ** -exponent (signed zeros kept)."""
    res = []
    for lib in (fg, torch):
        a = lib.tensor([1.0, -2.0, 0.0, 3.0, -0.0, 0.1, 1e-30], requires_grad=True)
        r = lib.frexp(a)
        (r.mantissa * lib.arange(7.0)).sum().backward()
        res.append((r.mantissa.detach().numpy(), np.signbit(r.mantissa.detach().numpy()), r.exponent.numpy(),
                    a.grad.numpy()))
    for ours, theirs in zip(*res):
        np.testing.assert_array_equal(ours, theirs)


def test_poisson_sampler():
    """torch.poisson: draws in the rate's dtype with the rate's mean and variance, following
    manual_seed or a given generator, a zero gradient to the rates, PyTorch's rate check."""
    rates = fg.tensor(np.repeat([0.5, 4.0, 30.0], 20000).astype(np.float32), requires_grad=True)
    fg.manual_seed(5)
    a = fg.poisson(rates)
    fg.manual_seed(5)
    assert np.array_equal(fg.poisson(rates).detach().numpy(), a.detach().numpy())
    draws = a.detach().numpy().reshape(3, -1)
    np.testing.assert_allclose(draws.mean(1), [0.5, 4.0, 30.0], rtol=0.05)
    np.testing.assert_allclose(draws.var(1), [0.5, 4.0, 30.0], rtol=0.1)
    assert a.dtype == fg.float32 and np.all(draws == np.round(draws))
    a.sum().backward()
    assert not rates.grad.numpy().any()
    g1, g2 = fg.Generator().manual_seed(3), fg.Generator().manual_seed(3)
    np.testing.assert_array_equal(fg.poisson(fg.full((50,), 2.0), generator=g1).numpy(),
                                  fg.poisson(fg.full((50,), 2.0), generator=g2).numpy())
    for lib in (fg, torch):
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            lib.poisson(lib.tensor([-1.0]))


def test_uint8_masks_and_bool_scatter_reduce_as_torch():
    """A uint8 index tensor reads as a mask (PyTorch's deprecated form, with its warning);
    writing through one raises PyTorch's error; scatter_reduce amax/amin on bools."""
    x0 = np.arange(12.0).reshape(3, 4)
    for lib in (fg, torch):
        x = lib.tensor(x0)
        with pytest.warns(UserWarning, match="uint8 is now deprecated"):
            got = (x[(x > 6).to(lib.uint8)], x[lib.tensor([1, 0, 1], dtype=lib.uint8)])
        np.testing.assert_array_equal(got[0].numpy(), [7, 8, 9, 10, 11])
        np.testing.assert_array_equal(got[1].numpy(), x0[[0, 2]])
        with pytest.raises(RuntimeError, match="only supports boolean masks"):
            x[(x > 6).to(lib.uint8)] = -1.0
        b = lib.tensor([True, False, False, True])
        i = lib.tensor([0, 0, 2, 1])
        for reduce in ("amax", "amin"):
            r = lib.zeros(3, dtype=lib.bool).scatter_reduce(0, i, b, reduce, include_self=False)
            assert r.tolist() == {"amax": [True, True, False], "amin": [False, True, False]}[reduce]


def test_legacy_contiguous_format_is_contiguous_format():
    assert fg.legacy_contiguous_format is fg.contiguous_format
    assert repr(fg.legacy_contiguous_format) == repr(torch.legacy_contiguous_format)
    x = fg.ones(2, 3, 4, 5).contiguous(memory_format=fg.channels_last)
    assert x.contiguous(memory_format=fg.legacy_contiguous_format).is_contiguous()
