"""More torch-namespace, Tensor, ``linalg``, ``nn`` and ``autograd.graph`` API gaps
(``runtime/api_gaps_top.py``, ``runtime/linalg_more.py``, BatchNorm3d/InstanceNorm3d,
``nn.Buffer``): values, dtypes and float64 gradients against PyTorch, the oracle."""
import functools
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg

RNG = np.random.default_rng(0)


def _close(f, t, atol=1e-8):
    """A fusegrad result equal to PyTorch's: shape, dtype and values (NaN where PyTorch's is)."""
    assert tuple(f.shape) == tuple(t.shape)
    assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), atol=atol, rtol=1e-7)


def _grads(fg_fn, torch_fn, arrays, atol=1e-7):
    """Values and gradients (for a random cotangent) of each float64 array, fusegrad against PyTorch;
    ``fg_fn``/``torch_fn`` return a tensor or a tuple whose first element is differentiated."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fs = [fg.tensor(a, requires_grad=True) for a in arrays]
    rt, rf = torch_fn(*ts), fg_fn(*fs)
    rt, rf = (rt[0], rf[0]) if isinstance(rt, tuple) else (rt, rf)
    _close(rf, rt, atol)
    g = RNG.standard_normal(tuple(rt.shape))
    gt = torch.autograd.grad(rt, ts, torch.tensor(g), allow_unused=True)
    gf = fg.autograd.grad(rf, fs, fg.tensor(g), allow_unused=True)
    for a, b in zip(gf, gt):
        if a is None or b is None:
            assert all(v is None or np.allclose(v.numpy(), 0) for v in (a, b))
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=atol, rtol=1e-6)


def _errors_alike(fg_fn, torch_fn):
    """Both raise, with the same built-in exception type (PyTorch's LinAlgError is its own RuntimeError)."""
    with pytest.raises(Exception) as et:
        torch_fn()
    with pytest.raises(next(c for c in type(et.value).__mro__ if c.__module__ == "builtins")):
        fg_fn()


# ---------------------------------------------------------------- factories
def test_asarray_shares_or_copies_as_torch():
    a = np.arange(3.0)
    t = fg.asarray(a)
    a[0] = 7.0  # an ndarray is shared
    assert t.tolist() == [7.0, 1.0, 2.0]
    for args, kw in [(([1, 2],), {}), (([1.0, 2.0],), {}), ((3,), {}), (([1, 2],), {"dtype": "float64"})]:
        kw_t = {k: getattr(torch, v) for k, v in kw.items()}
        kw_f = {k: getattr(fg, v) for k, v in kw.items()}
        _close(fg.asarray(*args, **kw_f), torch.asarray(*args, **kw_t))
    x = fg.ones(2)
    assert fg.asarray(x) is x and fg.asarray(x, copy=True) is not x
    _errors_alike(lambda: fg.asarray(np.ones(2), dtype=fg.float32, copy=False),
                  lambda: torch.asarray(np.ones(2), dtype=torch.float32, copy=False))


def test_empty_strided_and_new_empty_strided():
    for size, stride in [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((0, 4), (4, 1))]:
        f, t = fg.empty_strided(size, stride), torch.empty_strided(size, stride)
        assert (tuple(f.shape), f.stride()) == (tuple(t.shape), t.stride())
        assert str(f.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]  # (values: uninitialized in PyTorch)
    f = fg.ones(2, dtype=fg.float64).new_empty_strided((3, 2), (1, 3))
    assert f.stride() == (1, 3) and f.dtype == fg.float64


def test_frombuffer_shares_memory():
    b = bytearray(np.array([1, 2, 3], dtype=np.int32).tobytes())
    for kw in [{}, {"count": 1, "offset": 4}]:
        _close(fg.frombuffer(b, dtype=fg.int32, **kw), torch.frombuffer(b, dtype=torch.int32, **kw))
    f = fg.frombuffer(b, dtype=fg.int32)
    b[0] = 9
    assert f[0].item() == 9
    _errors_alike(lambda: fg.frombuffer(b, dtype=fg.int64), lambda: torch.frombuffer(b, dtype=torch.int64))


def test_range_is_inclusive_and_deprecated():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args, kw in [((0, 3), {}), ((1, 2, 0.3), {}), ((5, 1, -2), {}), ((0, 3), {"dtype": "int64"})]:
            _close(fg.range(*args, **{k: getattr(fg, v) for k, v in kw.items()}),
                   torch.range(*args, **{k: getattr(torch, v) for k, v in kw.items()}))
        _errors_alike(lambda: fg.range(0, 3, -1), lambda: torch.range(0, 3, -1))
    with pytest.warns(UserWarning, match="deprecated"):
        fg.range(0, 1)


# ---------------------------------------------------------------- element writes and reads
def test_fill_values_and_gradients():
    _close(fg.fill(fg.ones(2, dtype=fg.int64), 3.7), torch.fill(torch.ones(2, dtype=torch.int64), 3.7))
    _grads(lambda x, v: fg.fill(x, v), lambda x, v: torch.fill(x, v), [RNG.standard_normal(3), np.array(2.5)])
    _errors_alike(lambda: fg.fill(fg.ones(2), fg.ones(2)), lambda: torch.fill(torch.ones(2), torch.ones(2)))


def test_put_and_put_():
    idx = np.array([[0, -1], [4, 2]])
    _grads(lambda x, s: fg.put(x, fg.tensor(idx), s), lambda x, s: torch.put(x, torch.tensor(idx), s),
           [RNG.standard_normal((2, 3)), RNG.standard_normal((2, 2))])
    _grads(lambda x, s: fg.put(x, fg.tensor([1, 1]), s, accumulate=True),
           lambda x, s: torch.put(x, torch.tensor([1, 1]), s, accumulate=True),
           [RNG.standard_normal(3), RNG.standard_normal(2)])
    f, t = fg.zeros(2, 2), torch.zeros(2, 2)
    assert f.put_(fg.tensor([3]), fg.tensor([5.0])) is f
    t.put_(torch.tensor([3]), torch.tensor([5.0]))
    _close(f, t)
    _errors_alike(lambda: fg.put(fg.zeros(2), fg.tensor([2]), fg.ones(1)),
                  lambda: torch.put(torch.zeros(2), torch.tensor([2]), torch.ones(1)))


@pytest.mark.parametrize("view", ["plain", "transposed", "sliced"])
def test_as_strided_gathers_as_torch(view):
    pick = {"plain": lambda a: a, "transposed": lambda a: a.t(), "sliced": lambda a: a[1:]}[view]
    for size, stride, off in [((2, 2), (1, 2), None), ((3,), (2,), 5), ((2, 3), (1, 1), None)]:
        _grads(lambda x: pick(x).as_strided(size, stride, off), lambda x: pick(x).as_strided(size, stride, off),
               [RNG.standard_normal((3, 4))])
    # storage before a slice's first element: a view of it, as torch's; fusegrad's gradient, a
    # gather of the slice's own elements, cannot reach it
    _close(fg.arange(6.0)[2:].as_strided((2,), (1,), 0), torch.arange(6.0)[2:].as_strided((2,), (1,), 0))
    with pytest.raises(RuntimeError):
        fg.arange(6.0, requires_grad=True)[2:].as_strided((2,), (1,), 0)


def _strided_views(T):
    """Writes through unfold and as_strided views reach their base and the reverse."""
    out = []
    x = T.arange(12.).reshape(3, 4)
    w = x.unfold(1, 2, 1)
    w[0, 1, 0] = 100.
    out += [x.clone(), w.clone()]
    x.add_(1)
    out += [w.sum(), T.tensor([float(w.is_contiguous()), float(w.storage_offset())])]
    z = T.arange(24.).reshape(2, 3, 4).transpose(1, 2)
    u = z.unfold(2, 2, 1)
    out.append(u.clone())
    u[1, 2, 0, 1] = -5
    out.append(z.clone())
    c = T.arange(8.)
    c.unfold(0, 4, 4)[1] = 7
    out.append(c)
    base = T.arange(6.)
    s = base.as_strided((2, 2), (1, 2), 1)
    s[0, 0] = 50
    out += [base.clone(), s.clone()]
    base2 = T.arange(10.)
    s2 = base2[2:5].as_strided((4,), (2,), 0)
    out.append(s2.clone())
    s2[3] = -1
    out.append(base2)
    st = T.empty_strided((3, 4), (1, 3))  # (a strided storage of its own)
    st.copy_(T.arange(12.).reshape(3, 4))
    st.unfold(1, 2, 2)[0, 1, 0] = 99
    out += [st.clone(), st.as_strided((2,), (3,), 1).clone()]
    a = T.arange(8., requires_grad=True)
    ((a * 1).unfold(0, 3, 2) * T.arange(9.).reshape(3, 3)).sum().backward()
    p = T.arange(6., requires_grad=True)
    (p.as_strided((2, 2), (2, 1), 1) * T.tensor([[1., 2.], [3., 4.]])).sum().backward()
    return out + [a.grad, p.grad]


def test_unfold_and_as_strided_are_views_as_torch():
    for f, t in zip(_strided_views(fg), _strided_views(torch)):
        _close(f, t)


# ---------------------------------------------------------------- numerical gradient
@pytest.mark.parametrize("kw", [{}, {"edge_order": 2}, {"spacing": 2.0, "dim": 1}, {"spacing": [0.5, 3]},
                                {"dim": [1]}, {"spacing": "coords"}, {"spacing": "coords", "edge_order": 2}])
def test_gradient(kw):
    def call(T, x):
        k = dict(kw)
        if k.get("spacing") == "coords":
            k["spacing"] = (T.tensor([0.0, 0.5, 2.0], dtype=T.float64), T.tensor([0.0, 1.0, 1.5, 3.5, 4.0],
                                                                               dtype=T.float64))
        return T.gradient(x, **k)
    a = RNG.standard_normal((3, 5))
    ft, tt = call(fg, fg.tensor(a)), call(torch, torch.tensor(a))
    assert len(ft) == len(tt)
    for f, t in zip(ft, tt):
        _close(f, t)
    _grads(lambda x: call(fg, x), lambda x: call(torch, x), [a])


def test_gradient_integer_input_and_errors():
    _close(fg.gradient(fg.tensor([1, 2, 4]))[0], torch.gradient(torch.tensor([1, 2, 4]))[0])
    _errors_alike(lambda: fg.gradient(fg.ones(1)), lambda: torch.gradient(torch.ones(1)))
    _errors_alike(lambda: fg.gradient(fg.ones(3, 4), dim=[0, 0]), lambda: torch.gradient(torch.ones(3, 4), dim=[0, 0]))
    _errors_alike(lambda: fg.gradient(fg.ones(3, 4), spacing=[1.0, 2.0, 3.0]),
                  lambda: torch.gradient(torch.ones(3, 4), spacing=[1.0, 2.0, 3.0]))


# ---------------------------------------------------------------- deprecated linear algebra
def test_cholesky_and_nuclear_norm():
    m = RNG.standard_normal((2, 3, 3))
    spd = m @ m.transpose(0, 2, 1) + np.eye(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for upper in (False, True):
            _grads(lambda x: fg.cholesky(x, upper), lambda x: torch.cholesky(x, upper), [spd])
        _grads(lambda x: fg.nuclear_norm(x), lambda x: torch.nuclear_norm(x), [m[0, :, :2]])
        _grads(lambda x: fg.nuclear_norm(x, (1, 2), True), lambda x: torch.nuclear_norm(x, (1, 2), True), [m])
        _close(fg.nuclear_norm(fg.tensor(m[0]), True), torch.nuclear_norm(torch.tensor(m[0]), True))


# ---------------------------------------------------------------- settings and Tensor extras
def test_settings():
    assert fg.get_num_interop_threads() >= 1
    assert fg.set_flush_denormal(False) is False  # (fusegrad's kernels keep denormals: unsupported)
    fg.set_warn_always(True)
    assert fg.is_warn_always_enabled()
    fg.set_warn_always(False)
    assert not fg.is_warn_always_enabled()
    with pytest.raises(RuntimeError):
        fg.set_num_interop_threads(0)
    x = fg.ones(2)
    assert fg.is_storage(x.untyped_storage()) and fg.is_storage(x.storage()) and not fg.is_storage(x)


def test_set_default_tensor_type():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fg.set_default_tensor_type("torch.DoubleTensor")
            assert fg.get_default_dtype() == fg.float64
            fg.set_default_tensor_type(fg.FloatTensor)
            assert fg.get_default_dtype() == fg.float32
            with pytest.raises(TypeError):
                fg.set_default_tensor_type(fg.LongTensor)
    finally:
        fg.set_default_dtype(fg.float32)


def test_tensor_extras():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    p = x.pin_memory()
    assert p.tolist() == [1.0, 2.0] and not x.is_pinned() and not p.is_pinned()
    assert x.output_nr == 0 and x.name is None
    with pytest.warns(UserWarning):
        r = x.resize_as(fg.ones(2, 1))
    assert tuple(r.shape) == (2, 1)


# ---------------------------------------------------------------- linalg
def test_linalg_matmul_diagonal_vander():
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 2))
    _grads(fg.linalg.matmul, torch.linalg.matmul, [a, b])
    _grads(lambda x: fg.linalg.diagonal(x, offset=1), lambda x: torch.linalg.diagonal(x, offset=1), [a])
    v = np.array([0.0, 1.5, -2.0])
    _grads(fg.linalg.vander, torch.linalg.vander, [v])
    _grads(lambda x: fg.linalg.vander(x, N=5), lambda x: torch.linalg.vander(x, N=5), [v])
    _close(fg.linalg.vander(fg.tensor([1, 2, 3])), torch.linalg.vander(torch.tensor([1, 2, 3])))
    _errors_alike(lambda: fg.linalg.vander(fg.tensor([True])), lambda: torch.linalg.vander(torch.tensor([True])))


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (4, 3), (3, 5)])
def test_lu_factor_and_lu(shape):
    a = RNG.standard_normal(shape)
    fl, tl = fg.linalg.lu_factor(fg.tensor(a)), torch.linalg.lu_factor(torch.tensor(a))
    _close(fl.LU, tl.LU)
    _close(fl.pivots, tl.pivots)
    _grads(lambda x: fg.linalg.lu_factor(x).LU, lambda x: torch.linalg.lu_factor(x).LU, [a])
    _close(fg.linalg.lu(fg.tensor(a)).P, torch.linalg.lu(torch.tensor(a)).P)
    for i in (1, 2):  # (L and U; P is constant)
        _grads(lambda x: fg.linalg.lu(x)[i], lambda x: torch.linalg.lu(x)[i], [a])


def test_lu_singular():
    s = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]])
    fx, tx = fg.linalg.lu_factor_ex(fg.tensor(s)), torch.linalg.lu_factor_ex(torch.tensor(s))
    for f, t in zip(fx, tx):
        _close(f, t)
    _errors_alike(lambda: fg.linalg.lu_factor(fg.tensor(s)), lambda: torch.linalg.lu_factor(torch.tensor(s)))
    for f, t in zip(fg.linalg.lu(fg.tensor(s)), torch.linalg.lu(torch.tensor(s))):
        _close(f, t)


@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False), (False, True)])
def test_lu_solve(left, adjoint):
    a, b = RNG.standard_normal((2, 4, 4)), RNG.standard_normal((2, 4, 3) if left else (2, 3, 4))

    def run(T, x, y):
        lu_, piv = T.linalg.lu_factor(x)
        return T.linalg.lu_solve(lu_, piv, y, left=left, adjoint=adjoint)
    _grads(lambda x, y: run(fg, x, y), lambda x, y: run(torch, x, y), [a, b])


@pytest.mark.parametrize("shape", [(2, 4, 4), (3, 5), (5, 3)])
def test_deprecated_lu_lu_unpack_and_lu_solve(shape):
    """torch.lu (a plain tuple, info with get_infos, a deprecation warning), lu_unpack (each part
    or empty ones) and torch.lu_solve(B, LU, pivots) / Tensor.lu_solve: values and gradients."""
    a = RNG.standard_normal(shape)
    for kw in ({}, {"unpack_data": False}, {"unpack_pivots": False}):
        for f, t in zip(fg.lu_unpack(*fg.linalg.lu_factor(fg.tensor(a)), **kw),
                        torch.lu_unpack(*torch.linalg.lu_factor(torch.tensor(a)), **kw)):
            _close(f, t)
    for i in (1, 2):  # (L and U: P carries no gradient)
        _grads(lambda x: fg.lu_unpack(*fg.linalg.lu_factor(x))[i], lambda x: torch.lu_unpack(*torch.linalg.lu_factor(x))[i],
               [a])
    if shape[-1] != shape[-2]:
        return
    b = RNG.standard_normal(shape[:-1] + (2,))
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        packed = fg.lu(fg.tensor(a))
    assert type(packed) is tuple and len(packed) == 2 and len(fg.tensor(a).lu(get_infos=True)) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _grads(lambda x, y: fg.lu_solve(y, *fg.lu(x)), lambda x, y: torch.lu_solve(y, *torch.lu(x)), [a, b])
        _grads(lambda x, y: y.lu_solve(*x.lu()), lambda x, y: y.lu_solve(*x.lu()), [a, b])


def test_ex_variants():
    a, b = RNG.standard_normal((2, 3, 3)), RNG.standard_normal((2, 3))
    _grads(lambda x, y: fg.linalg.solve_ex(x, y), lambda x, y: torch.linalg.solve_ex(x, y), [a, b])
    _grads(lambda x: fg.linalg.inv_ex(x), lambda x: torch.linalg.inv_ex(x), [a])
    spd = a @ a.transpose(0, 2, 1) + np.eye(3)
    _grads(lambda x: fg.linalg.cholesky_ex(x, upper=True), lambda x: torch.linalg.cholesky_ex(x, upper=True), [spd])
    s = np.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[2.0, 1.0], [1.0, 3.0]]])
    fs, ts = fg.tensor(s), torch.tensor(s)
    _close(fg.linalg.inv_ex(fs).info, torch.linalg.inv_ex(ts).info)
    _close(fg.linalg.inv_ex(fs).inverse[2], torch.linalg.inv_ex(ts).inverse[2])
    _close(fg.linalg.solve_ex(fs, fg.ones(3, 2, dtype=fg.float64)).info,
           torch.linalg.solve_ex(ts, torch.ones(3, 2, dtype=torch.float64)).info)
    nd = np.array([[[4.0, 2.0], [2.0, -3.0]], [[1.0, 0.0], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]]])
    _close(fg.linalg.cholesky_ex(fg.tensor(nd)).info, torch.linalg.cholesky_ex(torch.tensor(nd)).info)
    for name in ("inv_ex", "cholesky_ex"):
        _errors_alike(lambda: getattr(fg.linalg, name)(fg.tensor(nd * 0), check_errors=True),
                      lambda: getattr(torch.linalg, name)(torch.tensor(nd * 0), check_errors=True))


@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss", "gels"])
def test_lstsq_fields(driver):
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))
    fr = fg.linalg.lstsq(fg.tensor(a), fg.tensor(b), driver=driver)
    tr = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        _close(getattr(fr, name), getattr(tr, name))


@pytest.mark.parametrize("shapes", [((2, 5, 3), (2, 5, 2)), ((3, 5), (3, 2)), ((4, 4), (4,))])
def test_lstsq_gradients(shapes):
    _grads(lambda x, y: fg.linalg.lstsq(x, y), lambda x, y: torch.linalg.lstsq(x, y),
           [RNG.standard_normal(s) for s in shapes], atol=1e-6)


def test_lstsq_rank_deficient():
    a = RNG.standard_normal((4, 4))
    a[:, 3] = a[:, 0] + a[:, 1]
    b = RNG.standard_normal((4, 2))
    fr = fg.linalg.lstsq(fg.tensor(a), fg.tensor(b), driver="gelsd")
    tr = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver="gelsd")
    for f, t in zip(fr, tr):
        _close(f, t, atol=1e-7)


def test_tensorinv_and_tensorsolve():
    _grads(fg.linalg.tensorinv, torch.linalg.tensorinv, [RNG.standard_normal((4, 6, 8, 3))], atol=1e-6)
    _grads(lambda x: fg.linalg.tensorinv(x, ind=1), lambda x: torch.linalg.tensorinv(x, ind=1),
           [RNG.standard_normal((4, 2, 2))])
    _grads(fg.linalg.tensorsolve, torch.linalg.tensorsolve, [RNG.standard_normal((2, 3, 6)),
                                                             RNG.standard_normal((2, 3))])
    _grads(lambda x, y: fg.linalg.tensorsolve(x, y, dims=(0,)), lambda x, y: torch.linalg.tensorsolve(x, y, dims=(0,)),
           [RNG.standard_normal((6, 2, 3)), RNG.standard_normal((2, 3))])
    _errors_alike(lambda: fg.linalg.tensorinv(fg.ones(2, 3)), lambda: torch.linalg.tensorinv(torch.ones(2, 3)))


# ---------------------------------------------------------------- nn and autograd.graph
@pytest.mark.parametrize("name", ["BatchNorm3d", "InstanceNorm3d"])
def test_norm3d_modules(name):
    kw = {"affine": True, "track_running_stats": True}
    mf, mt = getattr(fg.nn, name)(3, **kw).double(), getattr(torch.nn, name)(3, **kw).double()
    x = RNG.standard_normal((2, 3, 2, 3, 2))
    for train in (True, False):
        mf.train(train)
        mt.train(train)
        _grads(mf, mt, [x], atol=1e-6)
    _close(mf.running_mean, mt.running_mean)
    _close(mf.running_var, mt.running_var)
    assert sorted(mf.state_dict()) == sorted(mt.state_dict())
    with pytest.raises(ValueError):
        mf(fg.ones(2, 3, 4))


def test_instancenorm3d_unbatched():
    x = RNG.standard_normal((3, 2, 2, 3))
    _close(fg.nn.InstanceNorm3d(3)(fg.tensor(x)), torch.nn.InstanceNorm3d(3)(torch.tensor(x)))


def test_buffer_registers_on_assignment():
    for T in (fg, torch):
        m = T.nn.Module()
        m.a = T.nn.Buffer(T.ones(2))
        m.b = T.nn.Buffer(T.zeros(1), persistent=False)
        m.a = T.ones(3)  # (a plain tensor assigned to a buffer's name stays a buffer)
        assert sorted(n for n, _ in m.named_buffers()) == ["a", "b"]
        assert list(m.state_dict()) == ["a"] and tuple(m.a.shape) == (3,)
        m.p = T.nn.Parameter(T.ones(1))
        with pytest.raises(TypeError):  # (a parameter's name takes no Buffer)
            m.p = T.nn.Buffer(T.ones(1))
    x = fg.ones(2)
    b = fg.nn.Buffer(x)
    x.add_(1)  # shares memory
    assert b.tolist() == [2.0, 2.0] and isinstance(b, fg.Tensor) and b.persistent


def test_gradient_edge_and_increment_version():
    x = fg.ones(2, requires_grad=True)
    y = x * 2
    e = fg.autograd.graph.get_gradient_edge(y)
    assert e.node is y.grad_fn and e.output_nr == 0 and e == (e.node, 0, None)
    assert fg.autograd.graph.get_gradient_edge(x).node is not None
    with pytest.raises(RuntimeError):
        fg.autograd.graph.get_gradient_edge(fg.ones(1))
    v = y._version
    fg.autograd.graph.increment_version(y)
    fg.autograd.graph.increment_version([y])
    assert y._version == v + 2


def test_compiled_writes_through_strided_views_run_eagerly():
    """A compiled function that writes through an unfold/as_strided view, or reads one after
    its base changed, gives eager's (torch's) result and says why it ran eagerly."""
    def write(T, x):
        x.unfold(0, 2, 2)[1, 0] = 9.
        x.as_strided((2, 2), (1, 2), 1).add_(1)
        return x * 1

    def stale(T, x):
        w = x.unfold(0, 3, 1)
        x.mul_(2)
        return w.sum(-1)

    for fn, why in ((write, "in-place update of a strided view"), (stale, "a strided view (unfold, as_strided) read")):
        f = fg.compile(functools.partial(fn, fg))
        xf, xt = fg.arange(6.), torch.arange(6.)
        for _ in range(2):
            _close(f(xf), fn(torch, xt))
            _close(xf, xt)
        assert any(r.startswith(why) for r in f.cache_info()["graph_breaks"])
    x = RNG.standard_normal((3, 8))
    vm = fg.func.vmap(lambda r: (r.unfold(0, 3, 2) ** 2).sum(-1))(fg.tensor(x))
    _close(vm, torch.func.vmap(lambda r: (r.unfold(0, 3, 2) ** 2).sum(-1))(torch.tensor(x)))


def test_linspace_gives_torchs_values_to_the_last_bit():
    """linspace's float32 values decide which pixels affine_grid + grid_sample read (the
    spatial transformer tutorial trains differently on a 1-ulp difference): every dtype's
    values equal PyTorch's exactly."""
    for fd, td in [(fg.float32, torch.float32), (fg.float64, torch.float64), (fg.float16, torch.float16),
                   (fg.bfloat16, torch.bfloat16), (fg.int64, torch.int64)]:
        for a, b in [(-1, 1), (-3.7, 12.1), (5, -2), (0.1, 0.7), (0, 10)]:
            for n in [0, 1, 2, 7, 13, 14, 33, 34, 100, 1001]:
                f, t = fg.linspace(a, b, n, dtype=fd), torch.linspace(a, b, n, dtype=td)
                np.testing.assert_array_equal(f.float().numpy(), t.float().numpy(), err_msg=f"{fd} {a} {b} {n}")
    grid = fg.nn.functional.affine_grid(fg.eye(2, 3)[None], (1, 1, 14, 14), align_corners=False)
    want = torch.nn.functional.affine_grid(torch.eye(2, 3)[None], (1, 1, 14, 14), align_corners=False)
    np.testing.assert_array_equal(grid.numpy(), want.numpy())


def test_conjugation_ops_are_identities_on_real_tensors_and_unsafe_splits_split():
    for lib in (torch, fg):
        x = lib.ones(3, requires_grad=True)
        assert x.conj() is x and lib.conj(x) is x and x.resolve_conj() is x and x.resolve_neg() is x
        assert x.conj_physical() is x and not x.is_conj() and not lib.is_neg(x)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            x.conj_physical_()
        y = lib.arange(6.0)
        v = y._version
        assert lib.conj_physical_(y) is y and y._version == v + 1
    a, t = fg.arange(7.0).reshape(7, 1), torch.arange(7.0).reshape(7, 1)
    for f, w in ((fg.unsafe_chunk(a, 3), torch.unsafe_chunk(t, 3)), (a.unsafe_split(4), t.unsafe_split(4)),
                 (fg.unsafe_split_with_sizes(a, [2, 5]), torch.unsafe_split_with_sizes(t, [2, 5]))):
        assert len(f) == len(w)
        for p, q in zip(f, w):
            _close(p, q)


def test_cond_and_while_loop_run_the_branch_and_loop_eager_and_compiled():
    def branchy(lib, x):
        y = lib.cond(x.sum() > 0, lambda v: v.sin() * 2, lambda v: v.cos() - 1, (x,))
        _, z = lib.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 1.5 + y), (lib.tensor(0), y))
        return z
    compiled = fg.compile(lambda x: branchy(fg, x))
    for sign in (1.0, -1.0):
        xs = np.array([0.3, 0.7, 1.1]) * sign
        want_x = torch.tensor(xs, requires_grad=True)
        want = branchy(torch, want_x)
        want.sum().backward()
        for fn in (lambda x: branchy(fg, x), compiled):
            x = fg.tensor(xs, requires_grad=True)
            got = fn(x)
            got.sum().backward()
            _close(got, want)
            _close(x.grad, want_x.grad)
    with pytest.raises(RuntimeError, match="single-element tensor"):
        fg.cond(fg.tensor([True, False]), lambda: 1, lambda: 2)


def test_the_imports_vision_model_files_make(tmp_path, monkeypatch):
    """``nn.modules.utils._pair``, ``nn.common_types``, ``hub.load_state_dict_from_url`` /
    ``utils.model_zoo.load_url`` (a checkpoint in the hub's cache loads without the network),
    ``nn.modules.activation.MultiheadAttention``, ``torch.cpu`` and its deprecated amp."""
    from fusegrad.nn.common_types import _size_2_t  # noqa: F401
    from fusegrad.nn.modules.activation import MultiheadAttention
    from fusegrad.nn.modules.utils import _ntuple, _pair, _reverse_repeat_tuple, _single, _triple
    from fusegrad.utils.model_zoo import load_url
    from torch.nn.modules import utils as tu
    assert MultiheadAttention is fg.nn.MultiheadAttention
    for ours, theirs in ((_single, tu._single), (_pair, tu._pair), (_triple, tu._triple), (_ntuple(4), tu._ntuple(4))):
        assert ours(3) == theirs(3) and ours([1, 2]) == theirs([1, 2])
    assert _reverse_repeat_tuple((1, 2), 2) == tu._reverse_repeat_tuple((1, 2), 2)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    lin = fg.nn.Linear(3, 2)
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    fg.save(lin.state_dict(), tmp_path / "hub" / "checkpoints" / "lin-0123abcd.pth")
    url = "https://example.invalid/models/lin-0123abcd.pth"
    for sd in (fg.hub.load_state_dict_from_url(url), load_url(url)):
        np.testing.assert_array_equal(sd["weight"].numpy(), lin.weight.detach().numpy())
    assert fg.hub.get_dir() == str(tmp_path / "hub")
    assert fg.cpu.is_available() and fg.cpu.device_count() == 1 and fg.cpu.synchronize() is None
    a = fg.randn(4, 4)
    with pytest.warns(FutureWarning, match="torch.cpu.amp.autocast"):
        ctx = fg.cpu.amp.autocast()
    with ctx:
        assert (a @ a).dtype == fg.bfloat16


def test_consume_prefix_in_state_dict_strips_a_wrappers_prefix_as_torch():
    """A compiled model's checkpoint (``_orig_mod.`` keys) loads into the plain model after
    ``consume_prefix_in_state_dict_if_present``; keys and metadata keys as torch's."""
    from fusegrad.nn.modules.utils import consume_prefix_in_state_dict_if_present as ours
    from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present as theirs
    got, want = [], []
    for lib, consume, out in ((fg, ours, got), (torch, theirs, want)):
        net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        sd = lib.compile(net).state_dict()
        sd["other.weight"] = lib.zeros(1)
        consume(sd, "_orig_mod.")
        out.append(list(sd))
        out.append(sorted(getattr(sd, "_metadata", {"": None, "0": None, "1": None})))
        del sd["other.weight"]
        lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3)).load_state_dict(sd)
    assert got == want


def test_int_mm_and_causal_bias_masks_as_torch():
    """torch._int_mm (int8 GEMM, exact in int32) and torch.nn.attention.bias's causal masks
    as scaled_dot_product_attention's attn_mask (both were missing: int8 inference, a chunk
    of queries attending to a longer KV cache)."""
    import importlib
    rng = np.random.default_rng(0)
    a, w = rng.integers(-128, 127, (17, 8)), rng.integers(-128, 127, (8, 5))
    q, k = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 5, 4))
    out = []
    for T in (fg, torch):
        bias = importlib.import_module(f"{T.__name__}.nn.attention.bias")
        r = T._int_mm(T.tensor(a, dtype=T.int8), T.tensor(w, dtype=T.int8))
        with pytest.raises(RuntimeError, match="Expected self dtype to be int8 or uint8 but got float"):
            T._int_mm(T.tensor(a, dtype=T.float32), T.tensor(w, dtype=T.int8))
        masks = [bias.causal_lower_right(3, 5), bias.causal_upper_left(3, 5)]
        out.append([str(r.dtype).split(".")[1], r.numpy()] + [m._materialize().numpy() for m in masks] + [
            T.nn.functional.scaled_dot_product_attention(T.tensor(q), T.tensor(k), T.tensor(k), attn_mask=m).numpy()
            for m in masks])
    assert out[0][0] == out[1][0] == "int32"
    for g, want in zip(out[0][1:], out[1][1:]):
        np.testing.assert_allclose(g, want, rtol=1e-12)


def test_library_custom_op_with_registered_autograd_as_torch():
    """torch.library.custom_op with register_fake and register_autograd (its forward leaves
    the tensor world through NumPy): values, the registered gradient, torch.ops.<ns>.<name>,
    a compiled caller and a mutating op, as torch's (torch.library was missing)."""
    got = []
    for T in (fg, torch):
        @T.library.custom_op("apigaps::scaled_sin", mutates_args=())
        def scaled_sin(x: T.Tensor, scale: float = 2.0) -> T.Tensor:
            return T.from_numpy(np.sin(x.detach().numpy()) * scale)

        scaled_sin.register_fake(lambda x, scale=2.0: T.empty_like(x))

        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.scale = inputs[1]

        def backward(ctx, g):
            return g * ctx.saved_tensors[0].cos() * ctx.scale, None
        scaled_sin.register_autograd(backward, setup_context=setup_context)

        @T.library.custom_op("apigaps::add_one_", mutates_args=("x",))
        def add_one_(x: T.Tensor) -> None:
            x.add_(1)
        x = T.tensor([0.1, 0.5, 1.0], dtype=T.float64, requires_grad=True)
        y = scaled_sin(x, scale=3.0)
        y.sum().backward()
        g1 = x.grad.clone()
        x.grad = None
        out = T.compile(lambda t: (scaled_sin(t) * t).sum())(x)
        out.backward()
        t = T.zeros(2)
        add_one_(t)
        got.append([y.detach().numpy(), g1.numpy(), T.ops.apigaps.scaled_sin(x.detach(), 1.5).numpy(),
                    out.detach().numpy(), x.grad.numpy(), t.numpy()])
    for g, w in zip(*got):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_library_opcheck_as_torch():
    """torch.library.opcheck (was missing; PyTorch's custom-op tutorial ends with it): the
    same checks pass and fail as torch's, with its messages: an undeclared mutation, no
    fake implementation, a fake one of the wrong shape, no registered autograd under a
    backward, an unknown check's name."""
    got = []
    for T in (fg, torch):
        ns = f"opcheck_{T.__name__}"

        @T.library.custom_op(f"{ns}::numpy_sin", mutates_args=())
        def numpy_sin(x: T.Tensor, scale: float) -> T.Tensor:
            return T.from_numpy(np.sin(x.detach().numpy()) * scale)
        numpy_sin.register_fake(lambda x, scale: T.empty_like(x))
        numpy_sin.register_autograd(lambda ctx, g: (g * ctx.saved_tensors[0].cos() * ctx.scale, None),
                                    setup_context=lambda ctx, inputs, output: (
                                        ctx.save_for_backward(inputs[0]), setattr(ctx, "scale", inputs[1])))

        def op(name, body, fake=None):
            defined = T.library.custom_op(f"{ns}::{name}", body, mutates_args=())
            if fake is not None:
                defined.register_fake(fake)
            return defined

        def add_in_place(x: T.Tensor) -> T.Tensor:
            x.add_(1)
            return x.clone()

        def sine(x: T.Tensor) -> T.Tensor:
            return x.sin()
        mutating = op("mutating", add_in_place, lambda x: T.empty_like(x))
        unfaked = op("unfaked", sine)
        misfaked = op("misfaked", sine, lambda x: x.new_empty(x.shape[0] + 1))
        no_autograd = op("no_autograd", sine, lambda x: T.empty_like(x))
        x = T.tensor([0.3, -1.2, 2.0], dtype=T.float64)
        leaf = x.clone().requires_grad_()
        row = [T.library.opcheck(numpy_sin, (leaf, 2.0)),
               T.library.opcheck(getattr(getattr(T.ops, ns), "numpy_sin").default, (x,), {"scale": 0.5},
                                 test_utils=("test_schema", "test_aot_dispatch_static")),
               {k: type(v).__name__ if isinstance(v, Exception) else v
                for k, v in T.library.opcheck(unfaked, (x,), raise_exception=False).items()}]
        for defined, args, kw in ((mutating, (x,), {}), (unfaked, (x,), {}),
                                  (misfaked, (x,), {"test_utils": "test_faketensor"}), (no_autograd, (leaf,), {}),
                                  (numpy_sin, (leaf, 1.0), {"test_utils": ("bogus",)})):
            with pytest.raises(Exception) as info:
                T.library.opcheck(defined, args, **kw)
            text = str(info.value).replace("fusegrad.Size", "torch.Size")
            row.append((type(info.value).__name__, text.replace(ns, "NS").split(" (scroll")[0]))
        row.append(x.tolist())  # copies were checked: the argument itself is untouched

        def sin_out(x: T.Tensor, out: T.Tensor) -> None:  # (returns nothing: needs no fake impl)
            out.copy_(x.sin())
        row.append(T.library.opcheck(T.library.custom_op(f"{ns}::sin_out", sin_out, mutates_args={"out"}),
                                     (x, T.empty(3, dtype=T.float64))))
        got.append(row)
    assert got[0] == got[1]


def test_copies_of_expanded_tensors_and_argument_checks_as_torch():
    """.float()/.to()/.clone() of an expanded tensor are laid out densely in C order (YOLO's
    ``grid.expand(...).float().view(1, -1, 2)`` raised: NumPy's "K" order put the expanded
    dims innermost); arange's step checks, repeat_interleave's negative counts, where's
    non-boolean condition and torch._assert as PyTorch's."""
    for T in (fg, torch):
        yv, xv = T.meshgrid(T.arange(3), T.arange(5), indexing="ij")
        grid = T.stack((xv, yv), 2).expand((1, 4, 3, 5, 2))
        for copy in (grid.float(), grid.to(T.float64), grid.clone(), grid.type_as(T.ones(1))):
            assert copy.is_contiguous() and copy.stride() == (120, 30, 10, 2, 1)
            assert tuple(copy.view(1, -1, 2).shape) == (1, 60, 2)
        for call, message in ((lambda: T.arange(0, 10, 0), "step must be nonzero"),
                              (lambda: T.arange(10, 0, 1), "inconsistent with step sign"),
                              (lambda: T.arange(0.0, -1.0, 0.5), "inconsistent with step sign"),
                              (lambda: T.repeat_interleave(T.tensor([-1, 2])), "repeats can not be negative"),
                              (lambda: T.where(T.tensor([1, 0]), T.ones(2), T.zeros(2)),
                               "where expected condition to be a boolean tensor")):
            with pytest.raises(RuntimeError, match=message):
                call()
        assert T.arange(end=4).tolist() == [0, 1, 2, 3] and T.arange(start=1, end=3).tolist() == [1, 2]
        T._assert(T.tensor(True), "fine")
        with pytest.raises(AssertionError, match="bad shape"):
            T._assert(T.tensor(1) > 2, "bad shape")


def test_sobol_engine_draws_pytorchs_unscrambled_sequence():
    """torch.quasirandom.SobolEngine (was missing): the unscrambled points, fast_forward,
    reset, draw_base2's power-of-two rule, dtypes and the dimension limit as PyTorch's; a
    scrambled draw lies in [0, 1) and repeats with its seed."""
    out = []
    for T in (fg, torch):
        e = T.quasirandom.SobolEngine(5)
        a = e.draw(6)
        f = T.quasirandom.SobolEngine(3).fast_forward(5)
        b = f.draw(2, dtype=T.float64)
        with pytest.raises(ValueError, match="power of 2"):
            f.draw_base2(2)
        with pytest.raises(ValueError, match="Supported range of dimensionality"):
            T.quasirandom.SobolEngine(30000)
        s = T.quasirandom.SobolEngine(4, scramble=True, seed=1).draw(8)
        assert bool(((s >= 0) & (s < 1)).all())
        assert T.equal(s, T.quasirandom.SobolEngine(4, scramble=True, seed=1).draw(8))
        out.append([a.numpy(), b.numpy(), e.reset().draw_base2(3).numpy(), e.num_generated, str(b.dtype)[-7:]])
    for g, w in zip(*out):
        np.testing.assert_array_equal(g, w)


def test_collate_extension_api_optimizer_decorator_and_conv_memory_format_as_torch():
    """torch.utils.data._utils.collate's ``collate`` with an extended ``default_collate_fn_map``
    (PyTorch's documented way to batch a custom type), dataloader.get_worker_info,
    optim.optimizer._use_grad_for_differentiable (optimizers written after torch's own) and
    nn.utils.convert_conv2d_weight_memory_format: each was missing (found by yp)."""
    import importlib
    got = []
    for T in (fg, torch):
        collate_mod = importlib.import_module(f"{T.__name__}.utils.data._utils.collate")

        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y

        def collate_point(batch, *, collate_fn_map=None):
            return T.tensor([[p.x, p.y] for p in batch])
        rules = {**collate_mod.default_collate_fn_map, Point: collate_point}
        b = collate_mod.collate([{"p": Point(1, 2), "v": np.float32(0.5), "t": T.ones(2)},
                                 {"p": Point(3, 4), "v": np.float32(1.5), "t": T.zeros(2)}], collate_fn_map=rules)
        row = [b["p"].tolist(), b["v"].tolist(), str(b["v"].dtype).split(".")[-1], b["t"].tolist(),
               importlib.import_module(f"{T.__name__}.utils.data.dataloader").get_worker_info()]

        class MySGD(T.optim.Optimizer):
            def __init__(self, params, lr=0.1, differentiable=False):
                super().__init__(params, dict(lr=lr, differentiable=differentiable))

            @importlib.import_module(f"{T.__name__}.optim.optimizer")._use_grad_for_differentiable
            def step(self, closure=None):
                for g in self.param_groups:
                    for p in g["params"]:
                        p.add_(p.grad, alpha=-g["lr"])
                        row.append(T.is_grad_enabled())
        w = T.nn.Parameter(T.ones(2))
        (w * 3).sum().backward()
        MySGD([w]).step()
        net = T.nn.Sequential(T.nn.Conv2d(2, 4, 3), T.nn.ConvTranspose2d(4, 2, 3))
        out = T.nn.utils.convert_conv2d_weight_memory_format(net, T.channels_last)
        row += [w.tolist(), out is net, [m.weight.is_contiguous(memory_format=T.channels_last) for m in net]]
        got.append(row)
    assert got[0] == got[1]


def test_training_script_misuses_raise_torchs_errors():
    """fused with foreach, a multiprocessing_context without workers or of an unknown method,
    a checkpoint cut short, mmap of a buffer, an IterableDataset without __iter__, a gradient
    of another dtype, a dict given to a Linear: torch's error types and messages (fusegrad
    accepted them, or raised another type; found by yp)."""
    import importlib
    import io
    got = []
    for T in (fg, torch):
        data = importlib.import_module(f"{T.__name__}.utils.data")
        buf = io.BytesIO()
        T.save({"w": T.ones(100)}, buf)
        raw = buf.getvalue()
        p = T.nn.Parameter(T.ones(2))
        calls = [lambda: T.optim.Adam([T.nn.Parameter(T.ones(1))], fused=True, foreach=True),
                 lambda: data.DataLoader([1], num_workers=1, multiprocessing_context="nope"),
                 lambda: data.DataLoader([1], multiprocessing_context="fork"),
                 lambda: T.load(io.BytesIO(raw[:len(raw) // 2])), lambda: T.load(io.BytesIO(raw), mmap=True),
                 lambda: data.IterableDataset(), lambda: setattr(p, "grad", T.ones(2, dtype=T.float16)),
                 lambda: setattr(p, "grad", T.ones(2, dtype=T.float64)),
                 lambda: T.nn.Linear(2, 1)({"x": T.ones(1, 2)})]
        row = []
        for call in calls:
            with pytest.raises(Exception) as info:
                call()
            row.append((type(info.value).__name__, str(info.value)[:80]))
        got.append(row)
    assert got[0] == got[1]


def test_interpolate_conv_and_rnn_argument_checks_as_torch():
    """A scale_factor of the wrong length (fusegrad scaled some dims and dropped the rest),
    F.conv1d's padding strings, an integer input or proj_size to a GRU/RNN, nearest
    interpolation of int64, non-constant padding of a tensor without batch and channel dims:
    torch's errors (found by yt)."""
    got = []
    for T in (fg, torch):
        F, nn = T.nn.functional, T.nn
        calls = [lambda: F.interpolate(T.ones(1, 1, 4, 4), scale_factor=(2.0,), mode="bilinear"),
                 lambda: F.interpolate(T.ones(1, 1, 4), scale_factor=(2.0, 2.0)),
                 lambda: nn.Upsample(scale_factor=(2.0, 3.0))(T.ones(1, 1, 4)),
                 lambda: F.conv1d(T.ones(1, 1, 8), T.ones(1, 1, 3), padding="same", stride=2),
                 lambda: F.conv1d(T.ones(1, 1, 8), T.ones(1, 1, 3), padding="foo"),
                 lambda: nn.GRU(3, 5)(T.ones(4, 2, 3, dtype=T.int64)),
                 lambda: nn.LSTM(3, 5)(T.ones(4, 2, 3, dtype=T.bool)),
                 lambda: nn.GRU(3, 5, proj_size=2), lambda: nn.RNN(3, 5, proj_size=2),
                 lambda: F.interpolate(T.arange(4).view(1, 1, 4), size=7, mode="nearest"),
                 lambda: F.pad(T.arange(4.0), (2, 0), mode="replicate"),
                 lambda: F.pad(T.ones(2, 4), (1, 1, 1, 1), mode="reflect")]
        row = []
        for call in calls:
            with pytest.raises(Exception) as info:
                call()
            row.append((type(info.value).__name__, str(info.value).replace("fusegrad.", "torch.")[:60]))
        row.append(tuple(F.interpolate(T.ones(1, 1, 4, 4), scale_factor=(2.0, 0.5), mode="bilinear").shape))
        row.append(F.interpolate(T.arange(4).view(1, 1, 4).to(T.uint8), size=7, mode="nearest").tolist())
        got.append(row)
    assert got[0] == got[1]


def test_pca_lowrank_and_svd_lowrank_as_torch():
    """With q at least the rank the randomized decomposition is exact: singular values, principal
    directions up to sign, the reconstruction and gradients equal PyTorch's (whose random
    projection differs); q's check and batched shapes too."""
    a = RNG.standard_normal((8, 5)) @ np.diag([5, 3, 2, 1, .5]) + 1.0
    w = RNG.standard_normal((4, 7))
    got = []
    for T in (fg, torch):
        x = T.tensor(a, requires_grad=True)
        u, s, v = T.pca_lowrank(x, q=5)
        s.sum().backward()
        row = [s.detach().numpy(), v.detach().numpy() * np.sign(v.detach().numpy()[0]),
               (u @ T.diag(s) @ v.mT).detach().numpy(), x.grad.numpy()]
        u, s, v = T.svd_lowrank(T.tensor(w), q=4)
        row += [s.numpy(), (u @ T.diag(s) @ v.mT).numpy(), T.svd_lowrank(T.tensor(w), q=4, M=T.tensor(w).mean(0))[1].numpy()]
        row += [tuple(t.shape) for t in T.pca_lowrank(T.tensor(RNG.standard_normal((3, 6, 4))))]
        got.append(row)
        with pytest.raises(ValueError, match="must be non-negative integer and not greater than"):
            T.pca_lowrank(T.tensor(w), q=9)
    for g, t in zip(*got):
        np.testing.assert_allclose(g, t, rtol=1e-9, atol=1e-10)
