"""The ops of runtime/extra_ops.py against PyTorch: values, dtypes, shapes, gradients
(float64, through backward) and the errors of common misuse."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _pair(a, dtype=np.float64, grad=False):
    a = np.asarray(a, dtype=dtype)
    return fg.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _same(f, t, rtol=1e-6, atol=1e-9):
    if isinstance(t, (tuple, list)):
        assert isinstance(f, (tuple, list)) and len(f) == len(t)
        for a, b in zip(f, t):
            _same(a, b, rtol, atol)
        return
    assert tuple(f.shape) == tuple(t.shape), (tuple(f.shape), tuple(t.shape))
    assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (f.dtype, t.dtype)
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)


def _grads(fn_fg, fn_t, *arrays, rtol=1e-6, atol=1e-9, seed=0):
    """Forward values and the gradients of a weighted sum of the output, in float64."""
    fs = [fg.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    ts = [torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    fo, to = fn_fg(*fs), fn_t(*ts)
    _same(fo, to, rtol, atol)
    w = np.random.default_rng(seed).standard_normal(tuple(to.shape))
    (fo * fg.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    for f, t in zip(fs, ts):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- small helpers
def test_ndimension_is_inference_ravel_moveaxis():
    a = np.arange(24.0).reshape(2, 3, 4)
    f, t = _pair(a)
    assert f.ndimension() == t.ndimension() == 3
    assert not f.is_inference() and not fg.is_inference(f)
    with fg.inference_mode(), torch.inference_mode():
        assert fg.ones(2).is_inference() and torch.ones(2).is_inference()
    _same(fg.ravel(f.transpose(0, 2)), torch.ravel(t.transpose(0, 2)))
    _same(f.ravel(), t.ravel())
    _same(fg.moveaxis(f, 0, -1), torch.moveaxis(t, 0, -1))
    _same(f.moveaxis((0, 1), (2, 0)), t.moveaxis((0, 1), (2, 0)))


# ---------------------------------------------------------------- inverse trig / hyperbolic
@pytest.mark.parametrize("name,lo,hi", [("asin", -0.99, 0.99), ("acos", -0.99, 0.99), ("asinh", -30, 30),
                                        ("acosh", 1.01, 40), ("atanh", -0.99, 0.99)])
def test_inverse_trig_values_and_grads(name, lo, hi):
    a = np.random.default_rng(0).uniform(lo, hi, (3, 5))
    _grads(getattr(fg, name), getattr(torch, name), a)
    f32, t32 = _pair(a, np.float32)
    _same(getattr(fg, name)(f32), getattr(torch, name)(t32), rtol=2e-6, atol=1e-6)
    _same(getattr(f32, "arc" + name[1:])(), getattr(t32, "arc" + name[1:])(), rtol=2e-6, atol=1e-6)
    assert getattr(fg, name)(f32.requires_grad_()).grad_fn.name() == name.capitalize() + "Backward0"


def test_inverse_trig_edges_dtypes_inplace_out():
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30])
    for name in ("asin", "acos", "asinh", "acosh", "atanh"):
        for dt in (np.float32, np.float64):
            f, t = _pair(special, dt)
            _same(getattr(fg, name)(f), getattr(torch, name)(t), rtol=2e-6, atol=1e-7)
    # the gradient of asinh at 0 is 1 (an odd extension, not one through |x|)
    x = fg.tensor([0.0], dtype=fg.float64, requires_grad=True)
    fg.asinh(x).sum().backward()
    assert x.grad.tolist() == [1.0]
    i_f, i_t = _pair([0, 1], np.int64)
    _same(fg.asin(i_f), torch.asin(i_t))  # integers -> the default float dtype
    f, t = _pair([0.5, -0.25])
    f.asin_(), t.asin_()
    _same(f, t)
    fg.arccos_(f), torch.arccos_(t)
    _same(f, t)
    f.arctan_(), t.arctan_()
    _same(f, t)
    o = fg.empty(2, dtype=fg.float64)
    fg.atanh(fg.tensor([0.5, -0.5], dtype=fg.float64), out=o)
    _same(o, torch.atanh(torch.tensor([0.5, -0.5], dtype=torch.float64)))
    _same(fg.arctan2(f, f + 1), torch.arctan2(t, t + 1))


# ---------------------------------------------------------------- addcmul / addcdiv
def test_addcmul_addcdiv():
    r = np.random.default_rng(1)
    a, b, c = r.standard_normal((3, 1)), r.standard_normal((1, 4)), r.uniform(0.5, 2, (3, 4))
    _grads(lambda x, y, z: fg.addcmul(x, y, z, value=0.5), lambda x, y, z: torch.addcmul(x, y, z, value=0.5), a, b, c)
    _grads(lambda x, y, z: x.addcdiv(y, z, value=-2), lambda x, y, z: x.addcdiv(y, z, value=-2), a, b, c)
    fa = fg.tensor(a, requires_grad=True)
    assert fg.addcmul(fa, fa, fa).grad_fn.name() == "AddcmulBackward0"
    assert fg.addcdiv(fa, fa, fa).grad_fn.name() == "AddcdivBackward0"
    i_f, i_t = _pair([1, 2, 3], np.int64)
    _same(fg.addcmul(i_f, i_f, i_f, value=2), torch.addcmul(i_t, i_t, i_t, value=2))
    _same(fg.addcmul(i_f, i_f, i_f, value=0.5), torch.addcmul(i_t, i_t, i_t, value=0.5))
    _same(fg.addcdiv(i_f, i_f.float(), i_f), torch.addcdiv(i_t, i_t.float(), i_t))
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        fg.addcdiv(i_f, i_f, i_f)
    f, t = _pair(c)
    f.addcmul_(f, f, value=2), t.addcmul_(t, t, value=2)
    f.addcdiv_(f, f + 1, value=3), t.addcdiv_(t, t + 1, value=3)
    _same(f, t)
    o = fg.empty(0, dtype=fg.float64)
    _same(fg.addcmul(f, f, f, out=o), torch.addcmul(t, t, t))


# ---------------------------------------------------------------- cumprod
def test_cumprod_values_dtypes_and_gradients_with_zeros():
    x = np.array([[2.0, 0.0, 3.0, 0.0, 4.0, -1.5, 0.5], [1.5, -2.0, 0.0, 3.0, 0.5, 2.0, 1.0],
                  [0.9, 1.1, -0.7, 2.0, 0.0, 0.0, 3.0]])
    for dim in (0, 1, -1):
        _grads(lambda a: fg.cumprod(a, dim), lambda a: torch.cumprod(a, dim), x, atol=1e-12)
    _grads(lambda a: a.cumprod(dim=1), lambda a: a.cumprod(dim=1), np.random.default_rng(2).uniform(-2, 2, (2, 33)))
    # second order, where the input has a zero
    f = fg.tensor([2.0, 0.0, 3.0, 5.0], dtype=fg.float64, requires_grad=True)
    t = torch.tensor([2.0, 0.0, 3.0, 5.0], dtype=torch.float64, requires_grad=True)
    gf, = fg.autograd.grad(fg.cumprod(f, 0).sum(), f, create_graph=True)
    gt, = torch.autograd.grad(torch.cumprod(t, 0).sum(), t, create_graph=True)
    _same(gf, gt)
    _same(fg.autograd.grad(gf.pow(2).sum(), f)[0], torch.autograd.grad(gt.pow(2).sum(), t)[0])
    assert fg.cumprod(f, 0).grad_fn.name() == "CumprodBackward0"
    for dt in (np.int32, np.int64, np.bool_):
        fi, ti = _pair([[1, 2, 3], [1, 0, 2]], dt)
        _same(fg.cumprod(fi, 1), torch.cumprod(ti, 1))
    fi, ti = _pair([1, 2, 3], np.int64)
    _same(fg.cumprod(fi, 0, dtype=fg.float32), torch.cumprod(ti, 0, dtype=torch.float32))
    _same(fg.cumprod(fg.tensor(3.0), 0), torch.cumprod(torch.tensor(3.0), 0))
    _same(fg.cumprod(fg.ones(2, 0), 1), torch.cumprod(torch.ones(2, 0), 1))
    f, t = _pair([1.0, 2.0, 3.0])
    f.cumprod_(0), t.cumprod_(0)
    _same(f, t)
    with pytest.raises(IndexError, match="Dimension out of range"):
        fg.cumprod(f, 2)


# ---------------------------------------------------------------- quantile / nanquantile
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_torch(interpolation):
    a = np.random.default_rng(3).standard_normal((3, 5, 4))
    q = np.array([0.0, 0.1, 0.25, 0.5, 0.875, 1.0])
    for dim, keepdim in ((None, False), (None, True), (1, False), (-1, True), (0, False)):
        _grads(lambda x: fg.quantile(x, fg.tensor(q), dim, keepdim, interpolation=interpolation),
               lambda x: torch.quantile(x, torch.tensor(q), dim, keepdim, interpolation=interpolation), a)
        _grads(lambda x: x.quantile(0.3, dim=dim, keepdim=keepdim, interpolation=interpolation),
               lambda x: x.quantile(0.3, dim=dim, keepdim=keepdim, interpolation=interpolation), a)
    f32, t32 = _pair(a, np.float32)
    _same(fg.quantile(f32, fg.tensor(0.4), 1, interpolation=interpolation),
          torch.quantile(t32, torch.tensor(0.4), 1, interpolation=interpolation))


def test_quantile_nan_and_nanquantile():
    a = np.random.default_rng(4).standard_normal((4, 6))
    a[1, 2] = np.nan
    a[3, :] = np.nan
    q = np.array([0.2, 0.5, 0.9])
    for fn in ("quantile", "nanquantile"):
        for dim in (None, 1, 0):
            f, t = _pair(a)
            _same(getattr(fg, fn)(f, fg.tensor(q), dim), getattr(torch, fn)(t, torch.tensor(q), dim))
    a[3, :] = 1.0
    _grads(lambda x: fg.nanquantile(x, fg.tensor(q), 1), lambda x: torch.nanquantile(x, torch.tensor(q), 1), a)
    _grads(lambda x: x.nanquantile(0.5), lambda x: x.nanquantile(0.5), a)


def test_quantile_errors():
    f = fg.rand(3)
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        fg.quantile(f, 1.5)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        fg.quantile(f, fg.tensor([0.5, 1.5]))
    with pytest.raises(RuntimeError, match="q tensor must be same dtype as the input tensor"):
        fg.quantile(f, fg.tensor([0.5], dtype=fg.float64))
    with pytest.raises(RuntimeError, match="input tensor must be either float or double dtype"):
        fg.quantile(fg.tensor([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match="q must be a scalar or 1D tensor"):
        fg.quantile(f, fg.tensor([[0.5]]))
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        fg.nanquantile(f, 0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="input tensor must be non-empty"):
        fg.quantile(fg.zeros(0), 0.5)


# ---------------------------------------------------------------- take / tensor_split / stacking
def test_take():
    a = np.arange(12.0).reshape(3, 4) / 3
    idx = np.array([[0, -1], [5, 5], [11, -12]])
    _grads(lambda x: fg.take(x, fg.tensor(idx)), lambda x: torch.take(x, torch.tensor(idx)), a)
    _grads(lambda x: x.t().take(fg.tensor([1, 2])), lambda x: x.t().take(torch.tensor([1, 2])), a)
    _same(fg.take(fg.tensor(5.0), fg.tensor(0)), torch.take(torch.tensor(5.0), torch.tensor(0)))
    with pytest.raises(IndexError, match="out of range: tried to access index 12 on a tensor of 12 elements."):
        fg.take(fg.tensor(a), fg.tensor([1, 12]))
    with pytest.raises(RuntimeError, match="Expected a long tensor for index, but got Int"):
        fg.take(fg.tensor(a), fg.tensor([1], dtype=fg.int32))


def test_tensor_split():
    a = np.arange(7 * 3, dtype=np.float64).reshape(7, 3)
    f, t = _pair(a)
    for spec in (1, 3, 7, 9, [1, 5], (2, -1), [4, 2], [0, 10], [], fg.tensor(3), fg.tensor([1, 5])):
        tspec = torch.tensor(spec.tolist()) if isinstance(spec, fg.Tensor) else spec
        _same(fg.tensor_split(f, spec), torch.tensor_split(t, tspec))
    _same(f.tensor_split(2, dim=1), t.tensor_split(2, dim=1))
    _same(fg.tensor_split(f, indices=[1, 2], dim=-1), torch.tensor_split(t, indices=[1, 2], dim=-1))
    fr = fg.tensor(a, requires_grad=True)
    parts = fg.tensor_split(fr, 3)
    assert parts[0]._base is fr and parts[1].grad_fn.name() == "SliceBackward0"
    with pytest.raises(RuntimeError, match="number of sections must be larger than 0, got 0"):
        fg.tensor_split(f, 0)
    with pytest.raises(RuntimeError, match="expected at least a 1-dimensional tensor"):
        fg.tensor_split(fg.tensor(1.0), 2)
    with pytest.raises(RuntimeError, match="to have dtype of long"):
        fg.tensor_split(f, fg.tensor([1.0]))


def test_stacking_and_atleast():
    r = np.random.default_rng(5)
    a, b, c = r.standard_normal(3), r.standard_normal((3, 2)), r.standard_normal(3)
    _grads(lambda x, y, z: fg.column_stack([x, y, z]), lambda x, y, z: torch.column_stack([x, y, z]), a, b, c)
    _grads(lambda x, z: fg.row_stack([x, z]), lambda x, z: torch.row_stack([x, z]), a, c)
    _same(fg.column_stack([fg.tensor(1.0), fg.tensor([2.0])]), torch.column_stack([torch.tensor(1.0),
                                                                                     torch.tensor([2.0])]))
    shapes = [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)]
    for n in (1, 2, 3):
        ff = getattr(fg, f"atleast_{n}d")
        tf = getattr(torch, f"atleast_{n}d")
        for s in shapes:
            _same(ff(fg.zeros(s)), tf(torch.zeros(s)))
        _same(ff(fg.zeros(()), fg.zeros(3)), tf(torch.zeros(()), torch.zeros(3)))
        _same(ff([fg.zeros(2)]), tf([torch.zeros(2)]))
        with pytest.raises(TypeError):
            ff(1.0)


def test_tril_triu_indices():
    for row, col, off in ((3, 3, 0), (3, 5, 1), (5, 3, -2), (4, 4, 10), (0, 3, 0), (3, 4, -10)):
        _same(fg.tril_indices(row, col, off), torch.tril_indices(row, col, off))
        _same(fg.triu_indices(row, col, offset=off, dtype=fg.int32),
              torch.triu_indices(row, col, offset=off, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="row must be non-negative"):
        fg.tril_indices(-1, 3)


def test_isin():
    e = np.array([[1, 5, 2], [7, 2, 0]])
    for test in ([2, 7, 9], [[0]], [], [5, 5, 1, 1]):
        tt = np.array(test, dtype=np.int64)
        _same(fg.isin(fg.tensor(e), fg.tensor(tt)), torch.isin(torch.tensor(e), torch.tensor(tt)))
        _same(fg.isin(fg.tensor(e), fg.tensor(tt), invert=True), torch.isin(torch.tensor(e), torch.tensor(tt),
                                                                           invert=True))
    nan = [1.0, np.nan, 2.5]
    _same(fg.isin(fg.tensor(nan), fg.tensor([np.nan, 1])), torch.isin(torch.tensor(nan), torch.tensor([np.nan, 1])))
    _same(fg.isin(fg.tensor(e), fg.tensor([2.0, 0.5])), torch.isin(torch.tensor(e), torch.tensor([2.0, 0.5])))
    _same(fg.isin(2, fg.tensor(e)), torch.isin(2, torch.tensor(e)))
    _same(fg.isin(fg.tensor(e), 2), torch.isin(torch.tensor(e), 2))
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin"):
        fg.isin(fg.tensor([True, False]), fg.tensor([True]))
    with pytest.raises(TypeError):
        fg.isin(1, 2)


# ---------------------------------------------------------------- logaddexp / baddbmm / addbmm
def test_logaddexp():
    r = np.random.default_rng(6)
    a, b = r.standard_normal((3, 4)) * 30, r.standard_normal(4) * 30
    b[0] = a[0, 0]  # a tie: the gradient is shared
    for name in ("logaddexp", "logaddexp2"):
        _grads(getattr(fg, name), getattr(torch, name), a, b)
        inf = [np.inf, -np.inf, np.inf, -np.inf, 1.0, np.nan]
        other = [np.inf, -np.inf, -np.inf, 3.0, -np.inf, 1.0]
        _same(getattr(fg, name)(fg.tensor(inf), fg.tensor(other)),
              getattr(torch, name)(torch.tensor(inf), torch.tensor(other)))
    f, t = fg.tensor(a).float(), torch.tensor(a).float()
    _same(fg.logaddexp(f, fg.tensor([1, 2, 3, 4])), torch.logaddexp(t, torch.tensor([1, 2, 3, 4])), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fg.logaddexp(fg.tensor([1]), fg.tensor([2]))
    with pytest.raises(TypeError, match="must be Tensor, not float"):
        fg.logaddexp(f, 1.0)


def test_baddbmm_addbmm():
    r = np.random.default_rng(7)
    x, b1, b2 = r.standard_normal((3, 1)), r.standard_normal((2, 3, 4)), r.standard_normal((2, 4, 5))
    for beta, alpha in ((1, 1), (0.5, -2.0)):
        _grads(lambda i, a, b: fg.baddbmm(i, a, b, beta=beta, alpha=alpha),
               lambda i, a, b: torch.baddbmm(i, a, b, beta=beta, alpha=alpha), x, b1, b2)
        _grads(lambda i, a, b: i.addbmm(a, b, beta=beta, alpha=alpha),
               lambda i, a, b: i.addbmm(a, b, beta=beta, alpha=alpha), x, b1, b2)
    nan_in = np.full((3, 5), np.nan)
    _same(fg.baddbmm(fg.tensor(nan_in), fg.tensor(b1), fg.tensor(b2), beta=0),
          torch.baddbmm(torch.tensor(nan_in), torch.tensor(b1), torch.tensor(b2), beta=0))
    f, t = _pair(r.standard_normal((2, 3, 5)))
    f.baddbmm_(fg.tensor(b1), fg.tensor(b2), alpha=2), t.baddbmm_(torch.tensor(b1), torch.tensor(b2), alpha=2)
    _same(f, t)
    f, t = _pair(r.standard_normal((3, 5)))
    f.addbmm_(fg.tensor(b1), fg.tensor(b2)), t.addbmm_(torch.tensor(b1), torch.tensor(b2))
    _same(f, t)
    fx = fg.tensor(x, requires_grad=True)
    assert fg.baddbmm(fx, fg.tensor(b1), fg.tensor(b2)).grad_fn.name() == "BaddbmmBackward0"
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        fg.baddbmm(fx, fg.tensor(b1[0]), fg.tensor(b2))
    with pytest.raises(RuntimeError, match="Input dtypes must be the same"):
        fg.baddbmm(fx.float(), fg.tensor(b1), fg.tensor(b2))
    with pytest.raises(RuntimeError, match="Expected size for first two dimensions of batch2"):
        fg.addbmm(fx, fg.tensor(b1), fg.tensor(b2[:, :3]))


# ---------------------------------------------------------------- trapezoid
def test_trapezoid_and_cumulative():
    r = np.random.default_rng(8)
    y, x1, x2 = r.standard_normal((3, 5)), np.sort(r.uniform(0, 4, 5)), np.sort(r.uniform(0, 4, (3, 5)), 1)
    for name in ("trapezoid", "trapz", "cumulative_trapezoid"):
        ff, tf = getattr(fg, name), getattr(torch, name)
        _grads(lambda a: ff(a), lambda a: tf(a), y)
        _grads(lambda a: ff(a, dx=0.5, dim=0), lambda a: tf(a, dx=0.5, dim=0), y)
        _grads(lambda a, b: ff(a, b), lambda a, b: tf(a, b), y, x1)
        _grads(lambda a, b: ff(a, b, dim=-1), lambda a, b: tf(a, b, dim=-1), y, x2)
        _grads(lambda a, b: ff(a, b, dim=0), lambda a, b: tf(a, b, dim=0), y, x1[:3])
        i = fg.tensor([1, 2, 4])
        ti = torch.tensor([1, 2, 4])
        _same(ff(i), tf(ti))
        _same(ff(i, i), tf(ti, ti))
        _same(ff(fg.zeros(2, 0)), tf(torch.zeros(2, 0)))
        with pytest.raises(RuntimeError, match="There must be one `x` value for each sample point"):
            ff(fg.tensor(y), fg.tensor(x1[:4]))
    with pytest.raises(IndexError, match="tensor has no dimensions"):
        fg.trapezoid(fg.tensor(1.0))
    with pytest.raises(RuntimeError, match="bool is not supported"):
        fg.trapezoid(fg.tensor([True, False]))


# ---------------------------------------------------------------- bernoulli
def test_bernoulli():
    p = fg.tensor(np.linspace(0, 1, 4000, dtype=np.float32).reshape(40, 100), requires_grad=True)
    s = fg.bernoulli(p)
    assert s.dtype == fg.float32 and tuple(s.shape) == (40, 100)
    v = s.detach().numpy()
    assert set(np.unique(v)) <= {0.0, 1.0} and v[0, 0] == 0 and v[-1, -1] == 1
    assert abs(v.mean() - 0.5) < 0.03
    assert s.grad_fn.name() == "BernoulliBackward0"
    s.sum().backward()
    assert p.grad.abs().sum().item() == 0
    g = fg.Generator().manual_seed(3)
    a = fg.bernoulli(fg.full((50,), 0.5), generator=g)
    g.manual_seed(3)
    assert a.equal(fg.full((50,), 0.5).bernoulli(generator=g))
    assert abs(fg.bernoulli(fg.zeros(5000, dtype=fg.float64), 0.25).mean().item() - 0.25) < 0.03
    z = fg.zeros(2000, dtype=fg.int64)
    assert z.bernoulli_(0.75) is z and z.dtype == fg.int64 and abs(z.float().mean().item() - 0.75) < 0.04
    z = fg.zeros(2000)
    z.bernoulli_(fg.full((2000,), 0.1))
    assert abs(z.mean().item() - 0.1) < 0.03
    with pytest.raises(RuntimeError, match=r"Expected p_in >= 0 && p_in <= 1"):
        fg.bernoulli(fg.tensor([1.5]))
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=3"):
        fg.zeros(2).bernoulli_(3)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fg.bernoulli(fg.tensor([1]))


# ---------------------------------------------------------------- out= and keywords, compiled
def test_out_and_torch_keywords():
    a = np.random.default_rng(9).uniform(0.1, 0.9, (4,))
    f, t = _pair(a)
    o = fg.empty(0, dtype=fg.float64)
    _same(fg.cumprod(f, 0, out=o), torch.cumprod(t, 0))
    o = fg.empty(0, dtype=fg.float64)
    fg.quantile(f, 0.5, out=o)
    _same(o, torch.quantile(t, 0.5))
    _same(fg.logaddexp(input=f, other=f), torch.logaddexp(input=t, other=t))
    _same(fg.take(input=f, index=fg.tensor([1])), torch.take(input=t, index=torch.tensor([1])))
    _same(fg.quantile(f, q=0.25, axis=0, keepdims=True), torch.quantile(t, q=0.25, axis=0, keepdims=True))


def test_compiled_function_of_new_ops():
    def fn(x, y):
        a = fg.cumprod(x, 1) + fg.asin(y * 0.5) + fg.acosh(x.abs() + 1)
        b = fg.logaddexp(x, y) + fg.addcmul(x, x, y, value=0.5) + fg.atanh(y * 0.3) + fg.asinh(x)
        c = fg.quantile(a + b, fg.tensor([0.25, 0.5], dtype=fg.float64), dim=1)
        return c.sum() + fg.trapezoid(b, dx=0.5).sum() + fg.take(a, fg.tensor([0, 5])).sum()

    def tfn(x, y):
        a = torch.cumprod(x, 1) + torch.asin(y * 0.5) + torch.acosh(x.abs() + 1)
        b = torch.logaddexp(x, y) + torch.addcmul(x, x, y, value=0.5) + torch.atanh(y * 0.3) + torch.asinh(x)
        c = torch.quantile(a + b, torch.tensor([0.25, 0.5], dtype=torch.float64), dim=1)
        return c.sum() + torch.trapezoid(b, dx=0.5).sum() + torch.take(a, torch.tensor([0, 5])).sum()

    r = np.random.default_rng(10)
    xa, ya = r.uniform(-1.5, 1.5, (3, 6)), r.uniform(-1, 1, (3, 6))
    xa[1, 2] = 0.0
    cf = fg.compile(fn)
    fx, fy = fg.tensor(xa, requires_grad=True), fg.tensor(ya, requires_grad=True)
    tx, ty = torch.tensor(xa, requires_grad=True), torch.tensor(ya, requires_grad=True)
    fo, to = cf(fx, fy), tfn(tx, ty)
    assert cf.cache_info()["fallbacks"] == 0  # (compiled in segments: sorting breaks the graph)
    _same(fo, to)
    fo.backward(), to.backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(fy.grad.numpy(), ty.grad.numpy(), rtol=1e-6, atol=1e-9)
