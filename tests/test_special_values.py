"""Special values (inf, -inf, nan, +-0.0, denormals, extreme finite values) through every
elementwise primitive: eager and compiled (backend="cpu", ONE graph per dtype holding every op)
against NumPy, values and NaN positions."""
import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import fusegrad as fg
from fusegrad.ir.primitive import PRIMS


def _values(dt):
    fi = np.finfo(dt)
    v = [np.inf, -np.inf, np.nan, 0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, -fi.tiny,
         fi.max, -fi.max, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30 if dt == np.float64 else 1e-20]
    return np.array(v, dtype=dt)


def _pair(dt):
    v = _values(dt)
    return np.repeat(v, len(v)), np.tile(v, len(v))


def _sign(x):
    """PyTorch's sign, NumPy's but 0 at NaN."""
    return np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype)


def _sigmoid(x):
    with np.errstate(all="ignore"):
        return 1 / (1 + np.exp(-x))


# name -> (fusegrad call, NumPy reference); unary take (x,), binary (x, y)
UNARY = {
    "neg": (lambda x: -x, np.negative), "exp": (fg.exp, np.exp), "log": (fg.log, np.log),
    "stop_gradient": (lambda x: x.detach() + 0.0, lambda x: x + 0.0),
    "log1p": (fg.log1p, np.log1p), "expm1": (fg.expm1, np.expm1), "sin": (fg.sin, np.sin),
    "cos": (fg.cos, np.cos), "tan": (fg.tan, np.tan), "tanh": (fg.tanh, np.tanh),
    "sigmoid": (fg.sigmoid, _sigmoid), "relu": (fg.relu, lambda x: np.maximum(x, np.zeros_like(x))),
    "abs": (fg.abs, np.abs), "sign": (fg.sign, _sign), "sqrt": (fg.sqrt, np.sqrt),
    "rsqrt": (fg.rsqrt, lambda x: 1 / np.sqrt(x)), "erf": (fg.erf, sp.erf), "floor": (fg.floor, np.floor),
    "ceil": (fg.ceil, np.ceil), "round": (fg.round, np.round), "trunc": (fg.trunc, np.trunc),
    "logical_not": (fg.logical_not, np.logical_not), "isnan": (fg.isnan, np.isnan),
    "cast": (lambda x: x.to(fg.bool), lambda x: x.astype(bool)),
    # a round trip through a half dtype: what the cpu backend computes as reduce_precision
    "reduce_precision": (lambda x: x.to(fg.float16).to(x.dtype), lambda x: x.astype(np.float16).astype(x.dtype)),
    "reduce_precision_bf16": (lambda x: x.to(fg.bfloat16).to(x.dtype),
                              lambda x: x.astype(ml_dtypes.bfloat16).astype(x.dtype)),
}
BINARY = {
    "add": (lambda x, y: x + y, np.add), "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply), "div": (lambda x, y: x / y, np.divide),
    "pow": (lambda x, y: x ** y, np.power), "atan2": (fg.atan2, np.arctan2),
    "eq": (lambda x, y: x == y, np.equal), "ne": (lambda x, y: x != y, np.not_equal),
    "lt": (lambda x, y: x < y, np.less), "le": (lambda x, y: x <= y, np.less_equal),
    "gt": (lambda x, y: x > y, np.greater), "ge": (lambda x, y: x >= y, np.greater_equal),
    "logical_and": (fg.logical_and, np.logical_and), "logical_or": (fg.logical_or, np.logical_or),
    "logical_xor": (fg.logical_xor, np.logical_xor), "maximum": (fg.maximum, np.maximum),
    "minimum": (fg.minimum, np.minimum), "where": (lambda x, y: fg.where(x > y, x, y), lambda x, y: np.where(x > y, x, y)),
    "floordiv": (lambda x, y: x // y, np.floor_divide), "mod": (fg.remainder, np.remainder),
    "fmod": (fg.fmod, np.fmod),
    "straight_through": (PRIMS["straight_through"], lambda x, y: y),
    "fma": (lambda x, y: PRIMS["fma"](x, y, x), lambda x, y: (x.astype(np.float64) * y + x).astype(x.dtype)),
}
DTYPES = {"float32": (np.float32, fg.float32), "float64": (np.float64, fg.float64)}


def test_every_elementwise_primitive_is_covered():
    """(The special functions without a kernel lowering have their special values checked
    against PyTorch in tests/test_special.py.)"""
    elementwise = {n for n, p in PRIMS.items() if p.kind == "elementwise" and p.no_lowering is None}
    assert elementwise <= set(UNARY) | set(BINARY), elementwise - set(UNARY) - set(BINARY)


def _compare(name, got, want, rtol, inputs):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, name
    if want.dtype == bool or got.dtype == bool:
        bad = got != want
    else:
        gn, wn = np.isnan(got), np.isnan(want)
        bad = gn != wn
        with np.errstate(all="ignore"):
            fin = ~gn & ~wn
            close = np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=0)
            # denormal results: either flushed or kept is acceptable to within the subnormal range
            tiny = np.abs(want.astype(np.float64)) < np.finfo(want.dtype).tiny
            close |= tiny & (np.abs(got.astype(np.float64)) < np.finfo(want.dtype).tiny)
        bad |= fin & ~close
    if bad.any():
        i = np.flatnonzero(bad)[:6]
        rows = [f"  in={[a.ravel()[j] for a in inputs]} got={got.ravel()[j]!r} want={want.ravel()[j]!r}" for j in i]
        return f"{name}: {int(bad.sum())} mismatches\n" + "\n".join(rows)
    return None


def _all_ops(x, y, x2, y2):
    outs = [f(x) for f, _ in UNARY.values()] + [f(x2, y2) for f, _ in BINARY.values()]
    return tuple(outs)


def _refs(x, x2, y2):
    with np.errstate(all="ignore"):
        return [r(x) for _, r in UNARY.values()] + [r(x2, y2) for _, r in BINARY.values()]


NAMES = list(UNARY) + list(BINARY)


@pytest.mark.parametrize("dt", DTYPES)
def test_special_values_eager(dt):
    npdt, fdt = DTYPES[dt]
    x = _values(npdt)
    x2, y2 = _pair(npdt)
    rtol = 1e-6 if dt == "float32" else 1e-13
    with np.errstate(all="ignore"):
        outs = _all_ops(fg.tensor(x), None, fg.tensor(x2), fg.tensor(y2))
    errs = []
    for name, o, r in zip(NAMES, outs, _refs(x, x2, y2)):
        assert o.dtype in (fdt, fg.bool), (name, o.dtype)
        errs.append(_compare(name, o.numpy(), r, rtol, [x] if name in UNARY else [x2, y2]))
    errs = [e for e in errs if e]
    assert not errs, "\n".join(errs)


@pytest.mark.parametrize("dt", DTYPES)
# huge_trig: sin/cos/tan of |x| near the largest finite value, past fastmath's range reduction
# (the cpu backend reruns such a call with libm for those arguments; see codegen.cpu._entry)
@pytest.mark.parametrize("huge_trig", [False, True])
def test_special_values_compiled_cpu(dt, huge_trig):
    npdt, _ = DTYPES[dt]
    x = _values(npdt)
    x2, y2 = _pair(npdt)
    f = fg.compile(lambda a, b, c: _all_ops(a, None, b, c), backend="cpu")
    with np.errstate(all="ignore"):
        outs = f(fg.tensor(x), fg.tensor(x2), fg.tensor(y2))
    info = f.cache_info()
    assert not info["fallbacks"], info["graph_breaks"]
    rtol = 1e-5 if dt == "float32" else 1e-12   # fastmath-level reassociation allowed
    errs = []
    huge = np.abs(x) > 1e30
    for name, o, r in zip(NAMES, outs, _refs(x, x2, y2)):
        got = o.numpy()
        if name in ("sin", "cos", "tan"):
            sel = huge if huge_trig else ~huge
            got, r, ins = got[sel], r[sel], [x[sel]]
        elif huge_trig:
            continue
        else:
            ins = [x] if name in UNARY else [x2, y2]
        errs.append(_compare(name, got, r, rtol, ins))
    errs = [e for e in errs if e]
    assert not errs, "\n".join(errs)


def test_nan_to_num_is_differentiable_and_traced_as_torchs():
    """nan_to_num passes the gradient where a value is kept and 0 where it replaced it
    (PyTorch's NanToNumBackward), eagerly and compiled (no break), in every float dtype."""
    torch = pytest.importorskip("torch")
    a = np.array([np.nan, np.inf, -np.inf, 1.5, -2.0])
    for lib in (torch, fg):
        w = lib.tensor(a, requires_grad=True)
        y = lib.nan_to_num(w * 2, nan=0.0, posinf=1.0, neginf=-1.0)
        (y * lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=lib.float64)).sum().backward()
        if lib is torch:
            want_y, want_g = y.detach().numpy(), w.grad.numpy()
    np.testing.assert_array_equal(y.detach().numpy(), want_y)
    np.testing.assert_array_equal(w.grad.numpy(), want_g)
    f = fg.compile(lambda x: fg.nan_to_num(x * 2), backend="eager")
    for dt in ("float32", "bfloat16", "float16"):
        x = fg.tensor(a).to(getattr(fg, dt))
        got = f(x).float().numpy()
        want = torch.nan_to_num(torch.tensor(a).to(getattr(torch, dt)) * 2).float().numpy()
        np.testing.assert_array_equal(got, want)
    assert f.cache_info()["graph_breaks"] == []


def test_softmax_of_a_row_of_minus_infinity_is_nan_without_a_warning():
    """A fully masked row: NaN, as PyTorch's softmax and log_softmax, and no NumPy warning."""
    import warnings
    x = fg.tensor([[0.0, 1.0], [-np.inf, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s, ls = fg.softmax(x, -1).numpy(), fg.log_softmax(x, -1).numpy()
    assert np.isnan(s[1]).all() and np.isnan(ls[1]).all()
    np.testing.assert_allclose(s[0], [1 / (1 + np.e), np.e / (1 + np.e)], rtol=1e-6)


def test_reductions_of_infinities_and_overflow_are_silent_and_var_without_dof_as_torch():
    """sum/cumsum of inf and -inf, prod and cumprod overflowing give torch's values without
    NumPy's RuntimeWarning; var/std with no degrees of freedom left are inf (0/0: nan), as
    PyTorch's, not nan; histc over a NaN range raises torch's RuntimeError."""
    import warnings
    torch = pytest.importorskip("torch")
    inf = float("inf")
    cases = [lambda t: t.tensor([inf, -inf, 1.0]).sum(), lambda t: t.tensor([inf, -inf, 1.0]).cumsum(0),
             lambda t: t.tensor([3e38, 3e38, 3e38]).prod(), lambda t: t.tensor([3e38, 3e38]).cumprod(0),
             lambda t: t.var(t.tensor([1.0, 2.0], dtype=t.float64), 0, correction=2),
             lambda t: t.tensor([1.0, 1.0]).var(correction=3),
             lambda t: t.std_mean(t.tensor([1.0, 2.0]), correction=2)[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = [f(fg).numpy() for f in cases]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [f(torch).numpy() for f in cases]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    for lib in (fg, torch):
        with pytest.raises(RuntimeError, match="not finite"):
            lib.histc(lib.tensor([float("nan"), 1.0]))
