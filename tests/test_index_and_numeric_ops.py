"""index_fill/index_add/index_copy (and their in-place methods), repeat_interleave,
argwhere, bincount, hypot, xlogy, frac, sgn, float_power, nansum, nanmean, diff, aminmax,
median, rot90, fliplr, flipud and fill_diagonal_ against PyTorch: values and float64
gradients, edge cases (repeated indices, zero repeats, NaNs, empty differences, wrapped
diagonals), and the same ops compiled."""
import warnings

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

A = np.random.default_rng(4).standard_normal((3, 4))
B = np.random.default_rng(5).standard_normal((3, 4))


def _cases(lib, x, y):
    """Each op's result on ``x`` (3x4, requires grad) and ``y`` (3x4)."""
    i = lib.tensor([0, 2])
    dup = lib.tensor([0, 2, 0])
    out = [
        x.index_fill(1, i, 1.5), lib.index_fill(x, 0, lib.tensor([2]), -2.0),
        x.index_add(0, dup, y, alpha=2.0), lib.index_add(x, 1, lib.tensor([3, 1, 3, 0]), y),
        x.index_copy(1, lib.tensor([3, 1]), y[:, :2]), x.repeat_interleave(2), x.repeat_interleave(3, dim=1),
        lib.repeat_interleave(x, lib.tensor([1, 0, 2]), dim=0), lib.hypot(x, y), lib.xlogy(x, y.abs()),
        x.frac() * 3.0, lib.sgn(x) * x, lib.float_power(x.abs(), 1.5), lib.diff(x), lib.diff(x, n=2, dim=0),
        lib.diff(x, dim=1, prepend=y[:, :1], append=y), lib.rot90(x), lib.rot90(x, 2), lib.rot90(x, -1, (1, 0)),
        lib.fliplr(x), lib.flipud(x), x.median(), x.median(1).values, x.median(0, keepdim=True).values,
    ]
    mn, mx = lib.aminmax(x, dim=1)
    out += [mn, mx]
    z = x * 1.0
    z.index_fill_(0, i, 0.5)
    w = x * 1.0
    w.index_add_(1, dup, y[:, :3])
    v = x * 1.0
    v.fill_diagonal_(7.0)
    u = (x * 1.0).repeat(2, 1)
    u.fill_diagonal_(-1.0, wrap=True)
    return out + [z, w, v, u]


def test_ops_match_torch_values_and_gradients():
    def run(lib):
        x = lib.tensor(A, requires_grad=True)
        outs = _cases(lib, x, lib.tensor(B))
        weight = sum((o * (k + 1.0)).sum() for k, o in enumerate(outs))
        weight.backward()
        return [o.detach().numpy() for o in outs] + [x.grad.numpy()]

    got, want = run(fg), run(torch)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"case {k}")


def test_edge_cases_match_torch():
    nan = float("nan")

    def run(lib):
        x = lib.tensor([[1.0, nan, 3.0], [2.0, 0.5, -1.0]], dtype=lib.float64)
        med = x.median(1)
        zero = lib.tensor([0.0, 0.0, 2.0])
        out = [x.nansum(), lib.nansum(x, 1), x.nanmean(0), lib.nanmean(x), x.median(), med.values, med.indices,
               lib.xlogy(zero, lib.tensor([0.0, nan, 3.0])), lib.diff(lib.tensor([True, False, False])),
               lib.diff(lib.zeros(0)), lib.repeat_interleave(lib.tensor([2, 0, 1])),
               lib.bincount(lib.tensor([0, 3, 3, 1])), lib.bincount(lib.tensor([1, 1]), minlength=4),
               lib.bincount(lib.tensor([0, 2, 2]), weights=lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64)),
               lib.argwhere(lib.tensor([[0, 1], [2, 0]])), lib.tensor([0.0, 1.0]).repeat_interleave(0)]
        for shape, wrap in (((3, 3), False), ((5, 2), False), ((5, 2), True), ((2, 5), True), ((3, 3, 3), False)):
            t = lib.zeros(shape)
            t.fill_diagonal_(1.0, wrap=wrap)
            out.append(t)
        return [np.asarray(o.numpy()) for o in out]

    got, want = run(fg), run(torch)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g, w)
        np.testing.assert_array_equal(g, w, err_msg=f"case {k}")
    for bad in (lambda: fg.bincount(fg.tensor([-1, 2])), lambda: fg.zeros(3, 4, 5).fill_diagonal_(1.0),
                lambda: fg.repeat_interleave(fg.zeros(3), fg.tensor([1, -1, 1])), lambda: fg.fliplr(fg.zeros(3)),
                lambda: fg.rot90(fg.zeros(2, 2), 1, (0, 0)), lambda: fg.zeros(2, 3).index_add(0, fg.tensor([0]),
                                                                                              fg.zeros(2, 3))):
        with pytest.raises((RuntimeError, IndexError)):
            bad()


def test_ops_compiled_match_eager():
    """One compiled graph of the differentiable ops (gradient included) against eager."""
    def f(x, y):
        return sum((o * (k + 1.0)).sum() for k, o in enumerate(_cases(fg, x, y)[:21]))

    x, y = fg.tensor(A, requires_grad=True), fg.tensor(B)
    f(x, y).backward()
    want = x.grad.numpy().copy()
    x.grad = None
    g = fg.compile(f)
    g(x, y).backward()
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-10)
    # the counts of a tensor of repeats (as torch.compile's); median's sort compiles
    (brk,) = g.cache_info()["graph_breaks"]
    assert brk.startswith("repeat_interleave() (data-dependent output shape)"), brk


def test_integer_floor_and_trunc_division_stay_integers_as_pytorch():
    torch = pytest.importorskip("torch")
    a_np, b_np = np.array([7, -7, 5, -9, 0]), np.array([2, 2, -3, -4, 5], dtype=np.int32)
    for mode in ("floor", "trunc"):
        got = fg.div(fg.tensor(a_np), fg.tensor(b_np), rounding_mode=mode)
        want = torch.div(torch.tensor(a_np), torch.tensor(b_np), rounding_mode=mode)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    x, xt = fg.tensor(a_np), torch.tensor(a_np)
    np.testing.assert_array_equal((x // 2).numpy(), (xt // 2).numpy())
    assert (x // 2).dtype is fg.int64 and (x // 2.0).dtype is fg.float32
    np.testing.assert_array_equal(fg.floor_divide(7, fg.tensor(b_np)).numpy(),
                                  torch.floor_divide(7, torch.tensor(b_np)).numpy())
    assert fg.floor_divide(7, fg.tensor(b_np)).dtype is fg.int32
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        x // 0
    cf = fg.compile(lambda v: v // 3 + fg.div(v, -2, rounding_mode="trunc"))
    np.testing.assert_array_equal(cf(x).numpy(), (xt // 3 + torch.div(xt, -2, rounding_mode="trunc")).numpy())


def test_integer_division_and_remainders_are_exact_beyond_float64s_53_bits():
    """Hashing code (``(x * 2654435761) % 2**32``) divides int64 values above 2**53, where a
    float64 division rounds: eager and compiled match PyTorch exactly, narrow ints too."""
    torch = pytest.importorskip("torch")
    a_np = np.array([2**60 + 1, -(2**62) - 5, 7, -7, 0, 9, -9, 2**53 + 1])
    b_np = np.array([7, 3, -2, 2, 5, -4, 4, 1])
    n_np = np.array([-100, -7, 0, 7, 100, 127], np.int8)

    def calls(lib, a, b, n):
        return (a // b, a % b, lib.fmod(a, b), lib.div(a, b, rounding_mode="trunc"),
                (a * 2654435761) % 2**32, n // 3, n % -3, lib.fmod(n, 3), n.div(-2, rounding_mode="trunc"),
                7 // n.clamp(min=1), 300 % n.clamp(min=1), n.to(lib.uint8) // 3, n.to(lib.uint8) % 7)
    want = calls(torch, torch.tensor(a_np), torch.tensor(b_np), torch.tensor(n_np))
    for fn in (lambda *t: calls(fg, *t), fg.compile(lambda *t: calls(fg, *t))):
        got = fn(fg.tensor(a_np), fg.tensor(b_np), fg.tensor(n_np))
        for g, w in zip(got, want):
            assert str(g.dtype).split(".")[1] == str(w.dtype).split(".")[1]
            np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_median_without_dim_shares_its_gradient_among_ties_as_pytorch():
    torch = pytest.importorskip("torch")
    for vals in ([1., 2., 2., 3., 2.], [1., float("nan"), 2., float("nan")], [4., 1., 3., 2.]):
        x, xt = fg.tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
        y, yt = x.median(), xt.median()
        (y * 3).backward()
        (yt * 3).backward()
        np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)
        assert type(y.grad_fn).__name__ == type(yt.grad_fn).__name__


EINSUMS = [  # (equation, operand shapes): repeated letters, ellipses, implicit outputs, broadcasting
    ("ii", [(3, 3)]), ("ii->i", [(3, 3)]), ("iij->j", [(3, 3, 2)]), ("...ij->...ji", [(2, 3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]), ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("...i,...i", [(1, 3, 4), (2, 1, 4)]), ("ij,jk", [(3, 4), (4, 2)]), ("ij,ij->", [(3, 4), (3, 4)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]), ("i,i,i->", [(3,), (3,), (3,)]), ("ii,i->i", [(3, 3), (3,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS)
def test_einsum_forms_match_torch(eq, shapes):
    """einsum's equation forms against PyTorch: values and float64 gradients."""
    arrays = [np.random.default_rng(k).standard_normal(s) for k, s in enumerate(shapes)]

    def run(lib):
        ops = [lib.tensor(a, requires_grad=True) for a in arrays]
        out = lib.einsum(eq, *ops)
        (out * lib.arange(out.numel(), dtype=lib.float64).reshape(out.shape)).sum().backward()
        return [out.detach().numpy()] + [o.grad.numpy() for o in ops]

    for g, w in zip(run(fg), run(torch), strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_einsum_sublist_form_and_errors():
    c = np.arange(24.0).reshape(2, 3, 4)
    d = np.arange(12.0).reshape(4, 3)
    got = [fg.einsum(fg.tensor(c), [0, 1, 2], [0, 2]).numpy(),
           fg.einsum(fg.tensor(c), [Ellipsis, 2], fg.tensor(d), [2, 1], [Ellipsis, 1]).numpy()]
    want = [torch.einsum(torch.tensor(c), [0, 1, 2], [0, 2]).numpy(),
            torch.einsum(torch.tensor(c), [Ellipsis, 2], torch.tensor(d), [2, 1], [Ellipsis, 1]).numpy()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
    with pytest.raises(RuntimeError, match="subscripts"):
        fg.einsum("ij->i", fg.zeros(2, 3, 4))
    # (PyTorch's RuntimeErrors: an output letter no input has, too few or too many operands)
    with pytest.raises(RuntimeError, match="output subscript l does not appear"):
        fg.einsum("ij,jk->il", fg.ones(2, 3), fg.ones(3, 4))
    for eq, ops in (("ij,jk->ik", [fg.ones(2, 3)]), ("...j,jk->...k", [fg.ones(2, 3)])):
        with pytest.raises(RuntimeError, match="fewer operands were provided"):
            fg.einsum(eq, *ops)
    with pytest.raises(RuntimeError, match="more operands were provided"):
        fg.einsum("ij->ij", fg.ones(2, 3), fg.ones(3, 4))
    with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
        fg.diff(fg.tensor(1.0))


def test_scatter_multiply_round_decimals_and_int_pow_match_torch():
    def run(lib):
        base = lib.full((2, 4), 2.0)
        idx = lib.tensor([[2], [3]])
        x = lib.tensor([1.2345, -2.5551, 1234.5, 0.125], dtype=lib.float64)
        out = [base.clone().scatter_(1, idx, 1.5, reduce="multiply"),
               base.clone().scatter_(1, idx, lib.full((2, 1), 3.0), reduce="multiply"),
               lib.scatter(base, 1, idx, lib.full((2, 1), -1.0), reduce="multiply"),
               lib.round(x, decimals=2), x.round(decimals=-2), lib.round(x, decimals=1),
               2 ** lib.tensor([2, 3]), lib.pow(3, lib.tensor([0, 4])), 2.0 ** lib.tensor([2, 3]),
               2 ** lib.tensor([0.5])]
        return [(str(o.dtype), o.numpy()) for o in out]

    for (gd, g), (wd, w) in zip(run(fg), run(torch), strict=True):
        assert gd.split(".")[-1] == wd.split(".")[-1]
        np.testing.assert_array_equal(g, w)
    with pytest.raises(RuntimeError, match="add or multiply"):
        fg.zeros(3).scatter_(0, fg.tensor([1]), 1.0, reduce="max")


def test_python_bool_index_matches_torch():
    """A Python bool in an index is a new dimension of size 1 (True) or 0 (False); it was
    read as the integer 1 or 0."""
    keys = [(True,), (False,), (0, True), (slice(None), False, 1), (Ellipsis, True), (None, True, 1), True, False]
    a = np.arange(24.0).reshape(2, 3, 4)
    for key in keys:
        x, tx = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        got, want = x[key], tx[key]
        assert tuple(got.shape) == tuple(want.shape), key
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())



def test_an_empty_list_index_selects_nothing_as_torch():
    """``x[0, []] = v`` (a logits processor banning no token) and ``x[[]]``: an empty int64
    index, read and written; it was built as a float32 tensor and refused."""
    a = np.arange(10.0).reshape(2, 5)
    for lib in (fg, torch):
        x = lib.tensor(a, requires_grad=True)
        y = x * 1
        y[0, []] = -1.0
        outs = [y, x[[]], x[:, []], x[[], 1]]
        sum(o.sum() for o in outs).backward()
        if lib is fg:
            got = [o.detach().numpy() for o in outs] + [x.grad.numpy()]
        else:
            want = [o.detach().numpy() for o in outs] + [x.grad.numpy()]
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)

def test_masked_fill_keeps_the_tensors_dtype():
    def run(lib):
        t, m = lib.tensor([1, 2]), lib.tensor([True, False])
        u = lib.tensor([1, 2])
        u.masked_fill_(~m, 2.9)
        out = [t.masked_fill(m, 3.7), u, lib.tensor([True, False]).masked_fill(~m, 1),
               lib.tensor([1.5, 2.5]).masked_fill(m, 3), t.masked_fill(m, lib.tensor(-4.2))]
        return [(str(o.dtype).split(".")[-1], o.tolist()) for o in out]

    assert run(fg) == run(torch)


def test_storages_and_inner_match_torch():
    """untyped_storage()/storage() shared by views (the Tensor Views docs' check), is_set_to,
    and inner over the last dimensions of n-d inputs."""
    def run(lib):
        t = lib.arange(16.0).reshape(4, 4)
        v, c = t.view(2, 8), t.clone()
        a = lib.arange(6.0).reshape(3, 2)
        b = lib.arange(8.0).reshape(2, 2, 2)
        return [t.untyped_storage().data_ptr() == v.untyped_storage().data_ptr(),
                t.untyped_storage().data_ptr() == c.untyped_storage().data_ptr(),
                t[1:].untyped_storage().nbytes(), len(t.storage()), t.storage().size(), t.is_set_to(t),
                t.is_set_to(v), t.is_set_to(t.view(4, 4)), lib.inner(a, b).tolist(), lib.inner(a, lib.tensor(2.0)).tolist(),
                lib.inner(a[0], a[1]).item()]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's TypedStorage deprecation)
        assert run(fg) == run(torch)


def test_integer_remainder_by_zero_raises_as_torch():
    for lib in (fg, torch):
        for f in (lambda: lib.tensor([5]) % lib.tensor([0]), lambda: lib.remainder(lib.tensor([5, 3]), 0),
                  lambda: lib.fmod(lib.tensor([5]), lib.tensor([0]))):
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                f()
    np.testing.assert_array_equal(fg.remainder(fg.tensor([5, -3]), 2).numpy(), [1, 1])


def test_compiled_integer_division_by_a_zero_tensor_raises_as_torch():
    """A compiled call whose integer divisor holds a zero raises as eager does (the compiled
    kernel itself would give 0); other divisors still run compiled."""
    f = fg.compile(lambda a, b: a // b + a % b + a.fmod(b) + a.div(b, rounding_mode="trunc"))
    a = [7, -7, 9]
    for b in ([2, 3, -4], [2, 0, 1], [5, 5, 5]):
        try:
            want = (torch.tensor(a) // torch.tensor(b) + torch.tensor(a) % torch.tensor(b)
                    + torch.tensor(a).fmod(torch.tensor(b)) + torch.tensor(a).div(torch.tensor(b), rounding_mode="trunc"))
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=str(e)):
                f(fg.tensor(a), fg.tensor(b))
        else:
            assert f(fg.tensor(a), fg.tensor(b)).tolist() == want.tolist()
    assert f.cache_info()["compiles"] == 1 and f.cache_info()["fallbacks"] == 0


def test_size_arithmetic_stays_a_size():
    for lib in (fg, torch):
        s = lib.zeros(2, 3).shape
        for r, want in ((s + (5,), [2, 3, 5]), ((1,) + s, [1, 2, 3]), (s * 2, [2, 3, 2, 3]), (2 * s, [2, 3, 2, 3])):
            assert type(r) is type(s) and list(r) == want


def test_take_along_dim_broadcasts_as_torch():
    """take_along_dim broadcasts input and indices over the dims other than ``dim`` (an index
    column picks a row across every column), flattens both without ``dim``, and raises
    PyTorch's error where the shapes do not broadcast; float64 gradients match."""
    cases = [(lambda m, e: m.take_along_dim(e, m.tensor([[1], [3], [0]]), dim=0)),
             (lambda m, e: m.take_along_dim(e, m.tensor([5, 1, 0, 11]))),
             (lambda m, e: e.take_along_dim(m.tensor([[0, 2]]), dim=-1)),
             (lambda m, e: m.take_along_dim(e.reshape(4, 1, 3), m.tensor([[[0], [1]]]), dim=2)),
             (lambda m, e: m.take_along_dim(e, m.argsort(e, dim=1), dim=1))]
    for case in cases:
        res = []
        for m in (fg, torch):
            e = m.tensor(np.arange(12.0).reshape(4, 3) ** 1.5, requires_grad=True)
            out = case(m, e)
            (out * m.arange(out.numel(), dtype=m.float64).reshape(out.shape)).sum().backward()
            res.append((out.detach().numpy(), e.grad.numpy()))
        for ours, theirs in zip(*res):
            assert ours.shape == theirs.shape
            np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    for m in (fg, torch):
        with pytest.raises(RuntimeError, match=r"size of tensor a \(6\) must match the size of tensor b \(2\)"):
            m.take_along_dim(m.zeros(10, 6), m.zeros(3, 2, dtype=m.long), dim=0)


def test_cumulative_ops_accumulate_as_torchs_cpu_kernels():
    """cumsum, cumprod and logcumsumexp of bfloat16/float16 accumulate in float32 (a running
    sum past 512 stalled in bfloat16), float32 cumsum in float64: PyTorch's values, eager and
    compiled."""
    rng = np.random.default_rng(7)
    x = rng.random((3, 1000)) * 2
    p = 1.0 + 0.002 * rng.standard_normal((3, 200))
    cf = fg.compile(lambda a, b: (a.cumsum(1), b.cumprod(1), a.logcumsumexp(1)))
    for dt in ("bfloat16", "float16"):
        want = [t.float().numpy() for t in (torch.tensor(x).to(getattr(torch, dt)).cumsum(1),
                                            torch.tensor(p).to(getattr(torch, dt)).cumprod(1),
                                            torch.tensor(x).to(getattr(torch, dt)).logcumsumexp(1))]
        a, b = fg.tensor(x).to(getattr(fg, dt)), fg.tensor(p).to(getattr(fg, dt))
        for got in ((a.cumsum(1), b.cumprod(1), a.logcumsumexp(1)), cf(a, b)):
            for g, w in zip(got, want):
                assert g.dtype == getattr(fg, dt)
                np.testing.assert_allclose(g.float().numpy(), w, rtol=1e-2)
    x32 = rng.standard_normal((4, 3000)).astype(np.float32)
    exact = np.cumsum(x32.astype(np.float64), 1)
    err = {name: np.abs(r.numpy() - exact).max() for name, r in
           (("torch", torch.tensor(x32).cumsum(1)), ("eager", fg.tensor(x32).cumsum(1)),
            ("compiled", fg.compile(lambda t: t.cumsum(1) + 0)(fg.tensor(x32))))}
    assert err["eager"] <= 2 * err["torch"] and err["compiled"] <= 2 * err["torch"], err


def test_half_precision_scatters_accumulate_as_torch():
    """Sums into bfloat16/float16 as PyTorch's CPU kernels make them: scatter_add, index_add
    of whole slices and the backward of index_select/gather in float32, rounded once (a
    bfloat16 index_add of 500 values per row stalled); index_put(accumulate=True), index_add
    of single elements and the backward of indexing and embedding one value at a time, each
    sum rounded (820 where the sum is 900, as in PyTorch)."""
    rng = np.random.default_rng(8)
    src = np.abs(rng.standard_normal((1000, 5))) + 1
    idx = np.arange(1000) % 2

    def program(m, dt):
        s, i, out = m.tensor(src).to(getattr(m, dt)), m.tensor(idx), []
        out.append(m.zeros(2, 5, dtype=getattr(m, dt)).index_add(0, i, s))
        out.append(m.zeros(2, dtype=getattr(m, dt)).index_add(0, i, s[:, 0].contiguous()))
        out.append(m.zeros(5, 2, dtype=getattr(m, dt)).scatter_add(1, i.reshape(1, -1).expand(5, -1), s.T))
        out.append(m.zeros(2, 5, dtype=getattr(m, dt)).index_put((i,), s, accumulate=True))
        for use in (lambda w: w[i], lambda w: m.nn.functional.embedding(i, w), lambda w: w.index_select(0, i),
                    lambda w: m.gather(w, 0, i.view(-1, 1).expand(-1, 5))):
            w = m.zeros(2, 5, dtype=getattr(m, dt), requires_grad=True)
            (use(w) * s).sum().backward()
            out.append(w.grad)
        return [t.float().numpy() for t in out]
    for dt in ("bfloat16", "float16"):
        for g, w in zip(program(fg, dt), program(torch, dt)):
            np.testing.assert_array_equal(g, w)


def test_median_of_integers_keeps_the_dtype():
    a = np.array([[3, 25, 0, 9], [5, 7, 1, 1]])
    for dt in (np.uint8, np.int8, np.int16, np.int32, np.int64):
        for f in (lambda m, x: m.median(x), lambda m, x: x.median(1).values, lambda m, x: x.median(0).indices):
            g, w = f(fg, fg.tensor(a.astype(dt))), f(torch, torch.tensor(a.astype(dt)))
            assert str(g.dtype).split(".")[1] == str(w.dtype).split(".")[1] and g.tolist() == w.tolist()


def test_out_of_range_indices_raise_torchs_error_types_and_messages():
    cases = [lambda m: m.zeros(2, 3).index_add_(1, m.tensor([5]), m.ones(2, 1)),
             lambda m: m.zeros(3).index_add_(0, m.tensor([5]), m.ones(1)),
             lambda m: m.zeros(3, 2).index_copy_(0, m.tensor([-4]), m.ones(1, 2)),
             lambda m: m.nn.functional.embedding_bag(m.tensor([1, 3]), m.ones(3, 2), m.tensor([0]))]
    for case in cases:
        raised = []
        for m in (torch, fg):
            with pytest.raises(Exception) as e:
                case(m)
            raised.append((type(e.value), str(e.value)))
        assert raised[0] == raised[1]


def test_segment_reduce_matches_torch():
    """Every reduction over lengths and offsets, empty segments, ``initial``, 2-d data;
    values and float64 gradients (ties in max/min share theirs as torch's)."""
    data = np.array([[1.0, -2.0], [2.0, 5.0], [3.0, 3.0], [4.0, 0.5], [4.0, 6.0], [-6.0, 1.5]])
    for reduce in ("sum", "mean", "prod", "max", "min"):
        for kw in ({"lengths": [2, 0, 4]}, {"offsets": [0, 1, 1, 6]}, {"lengths": [3, 3], "initial": 2.0}):
            res = []
            for m in (torch, fg):
                d = m.tensor(data, requires_grad=True)
                args = {k: (m.tensor(v) if k != "initial" else v) for k, v in kw.items()}
                out = m.segment_reduce(d, reduce, **args)
                finite = m.where(out.isfinite(), out, m.zeros_like(out))
                (finite * m.arange(1.0, out.numel() + 1, dtype=m.float64).reshape(out.shape)).sum().backward()
                res.append((out.detach().numpy(), d.grad.numpy()))
            np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-12, err_msg=f"{reduce} {kw}")
            np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-12, err_msg=f"{reduce} {kw}")
    for m in (torch, fg):
        with pytest.raises(RuntimeError, match="sum to data.size"):
            m.segment_reduce(m.ones(4), "sum", lengths=m.tensor([1, 2]))


def _indexed_as_torch(x0: np.ndarray, keys, second) -> None:
    """``x[k]`` for every key of ``keys(lib)``: values, gradients, a write of a full value and one
    of ``second(lib, x[k])`` match torch's, eager and compiled."""
    def run(lib, index=lambda x, k: x[k]):
        out = []
        for k in keys(lib):
            x = lib.tensor(x0, requires_grad=True)
            y = index(x, k)
            y.backward(lib.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape))))
            full, other = lib.tensor(x0), lib.tensor(x0)
            full[k] = -lib.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)))
            other[k] = second(lib, y)
            out += [y.detach().numpy(), x.grad.numpy(), full.numpy(), other.numpy()]
        return out
    compiled = fg.compile(lambda x, k: x[k] * 1)
    for got in (run(fg), run(fg, compiled)):
        for g, w in zip(got, run(torch)):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def test_integers_between_index_tensors_keep_their_dims_in_place_as_torch():
    """PyTorch applies integer indices first: ``x[0, :, idx]`` is (4, 3), not NumPy's (3, 4)
    (an integer counts as an advanced index there, separating idx from the front). Values,
    gradients and writes (a full value and a broadcast row), eager and compiled."""
    x0 = np.arange(120.).reshape(2, 3, 4, 5)

    def keys(lib):
        idx, idx2 = lib.tensor([3, 0, 2]), lib.tensor([1, 0, 1])
        mask = lib.tensor([True, False, True, False, True])
        return [(0, slice(None), slice(None), idx), (1, slice(None), 0, idx), (0, slice(None), idx),
                (0, idx2, slice(None), idx), (None, 1, Ellipsis, None, idx), (1, slice(None), slice(None), mask),
                (idx2[:2, None], 0, slice(None), idx[None, :2]), (0, idx2, 1, idx), (slice(None), 0, idx)]
    _indexed_as_torch(x0, keys, lambda lib, y: lib.tensor(np.arange(y.shape[-1], dtype=np.float64)))


def test_python_bools_and_0d_bool_tensors_anywhere_in_an_index_as_torch():
    """A Python bool or a 0-d bool tensor in an index adds a dimension of size 1 (True) or 0
    (False), wherever it stands, beside other index tensors too: reads, gradients and writes
    (``x[:, True] = v`` wrote column 1, ``x[:, False] = v`` column 0, ``x[True, idx]`` read row 1;
    a 0-d tensor past the front raised), eager and compiled; and a None after an index tensor
    (``x[:, idx, None]`` dropped it)."""
    x0 = np.arange(24.).reshape(2, 3, 4)

    def keys(lib):
        t, f = lib.tensor(True), lib.tensor(False)
        return [(slice(None), True), (slice(None), False), (slice(None), t), (1, t, slice(0, 2)),
                (Ellipsis, f), (Ellipsis, t, None), (0, slice(None), t, 2), t, f,
                (True, lib.tensor([0, -1])), (t, True), (lib.tensor([False, True]), True, [-1, 1]),
                (t, lib.tensor([[0], [-2]])), (lib.tensor([1]), 1, slice(1, None), True), (f, f, None, [0], -1),
                (slice(None), [0, 1], None), (Ellipsis, lib.tensor([0, 2]), None)]
    _indexed_as_torch(x0, keys, lambda lib, y: 7.0)
    for lib in (fg, torch):
        with pytest.raises(RuntimeError, match="shape mismatch"):
            lib.zeros(2, 3)[:, lib.tensor(False)] = lib.ones(5)


def test_writes_into_an_expanded_tensor_check_only_the_written_elements_as_torch():
    """``e = zeros(3).expand(2, 3)``: ``e[0, 1] = v``, ``e[0] = row``, ``e[0] += 1`` and an indexed
    write go through (every row shares the memory), ``e[:, 1] = v`` writes one element twice
    and raises; scatter's position out of range is a RuntimeError (indexing's an IndexError)."""
    writes = [lambda e, T: e.__setitem__((0, 1), 1.0), lambda e, T: e.__setitem__(0, T.tensor([1., 2., 3.])),
              lambda e, T: e[0].add_(1), lambda e, T: e.__setitem__((T.tensor([0, 1]), 2), 7.0)]
    for write in writes:
        got = []
        for T in (fg, torch):
            e = T.zeros(3).expand(2, 3)
            write(e, T)
            got.append(e.numpy().tolist())
        assert got[0] == got[1]
    for T in (fg, torch):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            T.zeros(3).expand(2, 3)[:, 1] = 5.0
        for scatter in (lambda: T.zeros(3).scatter_(0, T.tensor([3]), 1.0),
                        lambda: T.zeros(3).scatter(0, T.tensor([3]), T.ones(1))):
            with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 0 with size 3"):
                scatter()


def test_indexed_writes_of_another_dtype_raise_as_torch():
    cases = [lambda m, x, s, i: x.index_add_(0, i, s), lambda m, x, s, i: x.index_copy_(0, i, s),
             lambda m, x, s, i: x.scatter_add_(0, i.view(1, 1).expand(1, 2), s),
             lambda m, x, s, i: x.scatter_(0, i.view(1, 1).expand(1, 2), s),
             lambda m, x, s, i: x.index_put_((i,), s[0], accumulate=True), lambda m, x, s, i: m.index_add(x, 0, i, s)]
    for case in cases:
        raised = []
        for m in (torch, fg):
            with pytest.raises(RuntimeError) as e:
                case(m, m.zeros(3, 2), m.ones(1, 2, dtype=m.float64), m.tensor([0]))
            raised.append(str(e.value))
        assert raised[0] == raised[1]


def test_setitem_with_an_index_tensor_refuses_another_dtype_as_torch():
    """``x[idx] = v`` with a tensor index: v of another dtype raises, but a one-element v at
    exactly one boolean mask (with basic parts beside it: a masked fill) is cast, as with
    basic indexing or a Python number; index_put_ alike."""
    def program(m):
        out = []
        mask3, mask2 = m.tensor([True, False, True]), m.tensor([True, False])
        for v in (m.tensor(5.0, dtype=m.float64), m.tensor([5.0, 6.0], dtype=m.float64), m.tensor([1, 2]), 3,
                  m.tensor([2.5], dtype=m.float64), m.tensor(True)):
            for key in (m.tensor([0, 1]), m.tensor([True, False, True, False]), slice(0, 2),
                        [True, False, True, False], np.array([True, False, True, False])):
                y = m.zeros(4)
                try:
                    y[key] = v
                    out.append(y.tolist())
                except RuntimeError as e:
                    out.append(str(e))
            for key in ((mask3, 0), (mask3, slice(None)), (slice(None), mask2), (Ellipsis, mask2), (1, mask2),
                        (mask3, m.tensor([0, 1]))) if not isinstance(v, m.Tensor) or v.numel() == 1 else ():
                y = m.zeros(3, 2)
                try:
                    y[key] = v
                    out.append(y.tolist())
                except (RuntimeError, IndexError) as e:
                    out.append(str(e)[:50])
            try:
                out.append(m.zeros(4).index_put_((m.tensor([True, False, True, False]),), v).tolist())
            except (RuntimeError, TypeError, AttributeError) as e:
                out.append(type(e).__name__)
        return out
    assert program(fg) == program(torch)


def test_roll_of_an_empty_dimension_and_cat_of_nothing_as_torch():
    for m in (fg, torch):
        assert tuple(m.roll(m.zeros(0, 3), 1, 0).shape) == (0, 3) and tuple(m.roll(m.zeros(0, 3), 2).shape) == (0, 3)
        with pytest.raises(ValueError, match="non-empty list"):
            m.cat([])


def test_lerp_branches_as_torch_and_refuses_mixed_dtypes():
    """lerp as PyTorch's kernel: ``a + w (b - a)`` below a weight of 0.5, ``b - (b - a)(1 - w)``
    from it (an EMA's ``lerp_(p, 1.0)`` copies p exactly; elsewhere within one unit in the last
    place: PyTorch fuses the multiply-add); an ``end`` of another dtype is refused."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(20000).astype(np.float32), rng.standard_normal(20000).astype(np.float32)
    w = rng.random(20000).astype(np.float32)

    def program(m):
        A, B = m.tensor(a), m.tensor(b)
        out = [m.lerp(A, B, v) for v in (0.3, 0.9, 1.0, -0.7)] + [m.lerp(A, B, m.tensor(w))]
        out += [m.lerp(A.bfloat16(), B.bfloat16(), v).float() for v in (0.3, 0.9)]
        out.append(A.clone().lerp_(B, 1.0))
        with pytest.raises(RuntimeError, match="expected dtype c10::BFloat16 for `end` but got dtype float"):
            A.bfloat16().lerp_(B, 0.5)
        return [t.numpy() for t in out]
    mine, ref = program(fg), program(torch)
    np.testing.assert_array_equal(mine[2], b)
    np.testing.assert_array_equal(mine[-1], b)
    for got, want in zip(mine[:5] + mine[-1:], ref[:5] + ref[-1:]):
        np.testing.assert_allclose(got, want, rtol=0, atol=5e-7)
    for got, want in zip(mine[5:7], ref[5:7]):  # (bfloat16: one unit of its last place)
        np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-6)
    # a compiled EMA whose decay changes per call: the weight read at each call, not a compile per value
    ema = fg.compile(lambda p, q, decay: p.lerp(q, 1 - decay))
    A, B = fg.tensor(a), fg.tensor(b)
    for decay in (0.1, 0.01, 0.6, 0.001):
        np.testing.assert_allclose(ema(A, B, decay).numpy(), A.lerp(B, 1 - decay).numpy(), rtol=0, atol=5e-7)
    assert ema.cache_info()["compiles"] <= 2 and not ema.cache_info()["notes"]


def test_float_remainders_and_floor_division_are_exact_as_pytorchs():
    """fmod and remainder of floats are the exact remainders, floor division the exact
    quotient's floor (3.0 // 0.3 is 9), eagerly and compiled; gradients as PyTorch's."""
    a = np.concatenate([np.arange(24, dtype=np.float32) / 7, -np.arange(24, dtype=np.float32) / 7, [-1e-20]])
    ops = (lambda T, x: T.fmod(x, 0.4), lambda T, x: T.remainder(x, 0.4), lambda T, x: x // 0.3,
           lambda T, x: T.div(x, -0.3, rounding_mode="floor"), lambda T, x: T.fmod(x, -0.3))
    f = lambda T, x: [op(T, x) for op in ops]  # noqa: E731
    want = [r.numpy() for r in f(torch, torch.tensor(a))]
    for got in (f(fg, fg.tensor(a)), fg.compile(lambda x: f(fg, x))(fg.tensor(a))):
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g.numpy(), w)
            assert k not in (0, 4) or (np.signbit(g.numpy()) == np.signbit(w)).all()  # (fmod(-0.0, b) is -0.0)
    for dt in ("float16", "bfloat16"):  # (a Python scalar rounded to the half dtype first, as PyTorch's)
        for g, w in zip(f(fg, fg.tensor(a[:48]).to(getattr(fg, dt))), f(torch, torch.tensor(a[:48]).to(getattr(torch, dt)))):
            assert str(g.dtype).split(".")[1] == str(w.dtype).split(".")[1]
            np.testing.assert_array_equal(g.float().numpy(), w.float().numpy())
    grads = []
    for T in (fg, torch):
        x = T.tensor([0.3, 1.7, -0.6], requires_grad=True)
        y = T.tensor([0.7, -0.8, 0.9], requires_grad=True)
        (T.fmod(x, y) * 2 + T.remainder(x, y) * 3 + T.div(x, y, rounding_mode="floor")).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for g, w in zip(*grads):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_integer_inputs_to_float_losses_and_huge_ints_raise_as_pytorch():
    for T in (fg, torch):
        a, b = T.tensor([1, 2]), T.tensor([2, 2])
        for f, kernel in ((T.nn.functional.mse_loss, "mse_cpu"), (T.nn.functional.smooth_l1_loss, "smooth_l1_cpu"),
                          (T.nn.functional.huber_loss, "huber_cpu")):
            with pytest.raises(NotImplementedError, match=kernel):
                f(a, b)
        assert abs(T.nn.functional.mse_loss(a, b.float()).item() - 0.5) < 1e-7  # (promoted: a float loss)
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
            T.nn.functional.huber_loss(a, b.float())  # (huber's output takes the input's dtype)
        assert abs(T.nn.functional.huber_loss(a.float(), b).item() - 0.25) < 1e-7
        with pytest.raises(ValueError, match="Overflow"):
            T.tensor([2 ** 70])
        assert T.tensor([2 ** 63 - 1]).tolist() == [2 ** 63 - 1]


def test_loss_weight_and_target_dtypes_and_integer_var_refused_as_pytorch():
    for T in (fg, torch):
        x, y = T.ones(4, 3), T.tensor([0, 1, 2, 1])
        F = T.nn.functional
        for call in (lambda: F.cross_entropy(x, y, weight=T.ones(3, dtype=T.float64)),
                     lambda: F.nll_loss(x, y, weight=T.ones(3, dtype=T.float64))):
            with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
                call()
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
            F.binary_cross_entropy_with_logits(x, (x > 0).long())
        for call in (lambda: T.tensor([1, 2, 3]).std(), lambda: T.var(T.tensor([1, 2]), 0)):
            with pytest.raises(RuntimeError, match="std and var only support floating point"):
                call()
