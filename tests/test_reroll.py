"""Loop rerolling (codegen/cpu_reroll.py): long chains of repeated steps become loops over
the steps with the lanes innermost. Random chains (forward and gradient) run as generated
source in plain Python (Numba's decorator stubbed out, so no compile per program) against
eager; a few run compiled by Numba, including W3's shape and sin's exact-path rerun."""
import re
import sys
import types

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import cpu_reroll
from fusegrad.codegen.cpu import CpuBackend, generate
from fusegrad.func import grad
from fusegrad.passes.fusion import fuse
from fusegrad.runtime.kernel_cache import module_name
from helpers import graph_of


def _plain(src: str) -> types.ModuleType:
    """Generated module source executed as plain Python (no Numba compile)."""
    mod = types.ModuleType("plain_kernel")
    src = src.replace("from numba import njit, prange", "njit = lambda *a, **k: (lambda f: f)\nprange = range")
    exec(compile(src, "<kernel>", "exec"), mod.__dict__)
    return mod


def _run_source(generated: tuple, arrays: list, g) -> tuple:
    """The generated entry of graph ``g`` (``generate``'s result) run as plain Python, with
    the loop kernels it imports: the same statements, no Numba compile. Arguments:
    ``arrays`` then the graph's captured consts."""
    src, _, kernels = generated
    arrays = list(arrays) + [np.asarray(h._data) for _, h in g.consts]
    names = {module_name(k): _plain(k) for k in kernels}
    sys.modules.update(names)
    try:
        entry = _plain(src)
    finally:
        for n in names:
            del sys.modules[n]
    return entry.kernel(*[np.ascontiguousarray(a).reshape(-1).copy() for a in arrays])


STEPS = {
    "affine": lambda h, w, b, h0, hp: h * w + b,
    "tanh": lambda h, w, b, h0, hp: (h * w + b).tanh(),
    "sin": lambda h, w, b, h0, hp: (h * w).sin() + b,
    "invariant": lambda h, w, b, h0, hp: h * w + h0 * b,
    "two_back": lambda h, w, b, h0, hp: (h * w + hp * b).tanh(),
    "max": lambda h, w, b, h0, hp: fg.maximum(h * w, b),
    "where": lambda h, w, b, h0, hp: fg.where(h > 0, h * w, b * h),
    "exp": lambda h, w, b, h0, hp: (h - (w * 0.1).exp() * 0.05) * w + b,
    "scalar": lambda h, w, b, h0, hp: h * w + b[:1],  # one element of b's row, broadcast
}


def _chain(kinds, order, out):
    def fn(W, b, h):
        h0, hp, hs = h, h, []
        n = W.shape[0]
        for i in range(n):
            k = i if order == "up" else n - 1 - i
            new = h
            for kind in kinds:
                new = STEPS[kind](new, W[k], b[k], h0, hp)
            h, hp = new, h
            hs.append(h)
        return {"sum": h.sum(), "last": h * 2.0, "all": fg.stack(hs) * 0.5}[out]
    return fn


def _case(seed):
    rng = np.random.default_rng(seed)
    kinds = list(rng.choice(sorted(STEPS), size=int(rng.integers(1, 3)), replace=False))
    steps, lanes = int(rng.integers(16, 30)), int(rng.integers(2, 7))
    dt = np.float64 if seed % 2 else np.float32
    W = (1.0 + 0.1 * rng.standard_normal((steps, lanes))).astype(dt)
    b = (0.1 * rng.standard_normal((steps, lanes))).astype(dt)
    h = rng.standard_normal(lanes).astype(dt)
    order = "up" if seed % 5 else "down"
    out = ("sum", "last", "all")[seed % 3]
    return _chain(kinds, order, out), [W, b, h], (kinds, steps, lanes, dt.__name__, order, out)


@pytest.mark.parametrize("seed", range(30))
def test_random_chains_rerolled_match_eager(seed):
    fn, arrays, desc = _case(seed)
    gfn = grad(lambda W, b, h: fn(W, b, h).sum(), argnums=(0, 1))
    tol = dict(rtol=2e-4, atol=2e-5) if arrays[0].dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)
    for f in (fn, gfn):
        g = graph_of(f, arrays, optimize=True)
        gen = generate(g, fuse(g))
        src = gen[0]
        assert "for zq in range(" in src, (desc, src)
        got = _run_source(gen, arrays, g)
        if "ntrig" in src:  # the fast sin/cos kernel's trailing count of out-of-range arguments
            assert got[-1] == 0, desc
            got = got[:-1]
        ref = f(*[fg.tensor(a) for a in arrays])
        ref = ref if isinstance(ref, tuple) else (ref,)
        assert len(got) == len(ref), desc
        for x, r in zip(got, ref):
            np.testing.assert_allclose(x.reshape(r.shape), r.numpy(), err_msg=str(desc), **tol)


def test_irregular_bodies_stay_unrolled():
    """Offsets that do not advance by a fixed step (rows 0, 1, 3, 6, ...) leave no loop;
    a short body is not touched."""
    def fn(W, h):
        for i in range(12):
            h = (h * W[i * (i + 1) // 2 % 40]).tanh()
        return h
    arrays = [np.random.default_rng(0).standard_normal((40, 3)), np.ones(3)]
    g = graph_of(fn, arrays, optimize=True)
    gen = generate(g, fuse(g))
    assert "zq" not in gen[0]
    np.testing.assert_allclose(_run_source(gen, arrays, g)[0], fn(*map(fg.tensor, arrays)).numpy(), rtol=1e-12)
    lines = ["    for i0 in range(4):"] + [f"        m{k + 1} = (m{k} * x0[np.uint64(i0 + {4 * k})])" for k in range(8)]
    assert cpu_reroll.reroll(lines, {}, lambda name: np.dtype(np.float64)) == lines


def _run_lines(lines: list, arrays: list, lanes: int) -> np.ndarray:
    src = "\n".join(["def kernel(x0, x1):", f"    b0 = np.zeros({lanes})"] + lines + ["    return b0"])
    ns = {"np": np}
    exec(src, ns)
    return ns["kernel"](*arrays)


def test_blocks_reading_two_back_peel_two_blocks():
    """m_k = m_(k-1) * x1[row k] + m_(k-2) * x1[k]: the loop starts at block 2 and reads
    block zq - 2 from a stack; constant-index loads advance too."""
    lanes, n = 3, 40
    lines = [f"    for i0 in range({lanes}):", "        m0 = x0[np.uint64(i0)]",
             f"        m1 = x0[np.uint64(i0 + {lanes})]"]
    lines += [f"        m{k} = (m{k - 1} * x1[np.uint64(i0 + {lanes * k})] + m{k - 2} * x1[{k}])" for k in range(2, n)]
    lines.append(f"        b0[np.uint64(i0)] = m{n - 1}")
    new = cpu_reroll.reroll(lines, {}, lambda name: np.dtype(np.float64))
    assert any(ln.strip().startswith("for zq in range(") for ln in new) and len(new) < 20, new
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(2 * lanes), 0.5 * rng.standard_normal(lanes * n)]
    np.testing.assert_allclose(_run_lines(new, arrays, lanes), _run_lines(lines, arrays, lanes), rtol=1e-13)


def test_foreign_statements_stay_unrolled():
    """A body using another loop's index (here i1) is left as it is."""
    lines = ["    for i0 in range(4):"]
    lines += [f"        m{k + 1} = (m{k} * x0[np.uint64(i0 + {4 * k})] + i1)" for k in range(40)]
    assert cpu_reroll.reroll(lines, {}, lambda name: np.dtype(np.float64)) == lines


def _w3(T, W, b, h):
    for i in range(W.shape[0]):
        h = T.tanh(h * W[i] + b[i])
    return h.sum()


def test_w3_shape_compiled_forward_and_gradient():
    """W3's chain (here 60 steps on 16 lanes, float32) compiled by Numba: one rerolled
    loop per chain, the fastmath tanh inlined again, values and gradients as eager."""
    rng = np.random.default_rng(3)
    W = (1.0 + 0.1 * rng.standard_normal((60, 16))).astype(np.float32)
    b = (0.1 * rng.standard_normal((60, 16))).astype(np.float32)
    h = rng.standard_normal(16).astype(np.float32)

    def both(W, b, h):
        val = _w3(fg, W, b, h)
        gW, gb = grad(lambda W, b: _w3(fg, W, b, h), argnums=(0, 1))(W, b)
        return val, gW, gb

    g = graph_of(both, [W, b, h], optimize=True)
    exe = CpuBackend().compile(g)
    consts = [np.asarray(c._data) for _, c in g.consts]
    src = exe.kernel_source()
    assert src.count("for zq in range(") >= 3 and "_fmc_" not in src.split("def kernel")[1]
    ref = both(*map(fg.tensor, (W, b, h)))
    for x, r in zip(exe(W, b, h, *consts), ref):
        np.testing.assert_allclose(x, r.numpy(), rtol=2e-5, atol=2e-6)


def test_w3_prelude_binds_only_what_the_kernels_use():
    """W3's 200 steps: the chain's loop body calls the outlined tanh (too many to inline)
    until rerolling makes it short and inlines it again, as the "scalar" variant since the
    16-lane loop stays scalar; the module binds only the fastmath names its kernels still call."""
    rng = np.random.default_rng(4)
    W = (1.0 + 0.1 * rng.standard_normal((200, 16))).astype(np.float32)
    b = (0.1 * rng.standard_normal((200, 16))).astype(np.float32)
    h = rng.standard_normal(16).astype(np.float32)
    cf = fg.compile(lambda W, b, h: _w3(fg, W, b, h))
    args = [fg.tensor(a) for a in (W, b, h)]
    head, body = cf.lower(*args).kernel_source().split("@njit", 1)
    bound = re.findall(r"^(_fm\w*) = ", head, re.M)
    assert "_fm_tanh_float32_scalar" in bound and "for zq in range(" in body
    assert set(bound) <= set(re.findall(r"\b\w+\b", body)), bound
    np.testing.assert_allclose(cf(*args).numpy(), _w3(fg, *args).numpy(), rtol=2e-5, atol=2e-5)


def test_sin_chain_with_huge_arguments_compiled():
    """sin's fast path counts arguments past its exact range inside the rerolled loop; a
    huge one reruns the exact kernel, as without rerolling."""
    rng = np.random.default_rng(5)
    W = (1.0 + 0.1 * rng.standard_normal((40, 5))).astype(np.float64)
    h = rng.standard_normal(5)

    def fn(W, h):
        for i in range(W.shape[0]):
            h = (h * W[i]).sin() * 0.9 + 0.1  # contracting: rounding does not grow
        return h

    exe = CpuBackend().compile(graph_of(fn, [W, h], optimize=True))
    assert "for zq in range(" in exe.kernel_source()
    for scale in (1.0, 1e12):
        Ws = W * scale
        Ws[1:] = W[1:]  # only the first step sees huge arguments
        np.testing.assert_allclose(exe(Ws, h)[0], fn(fg.tensor(Ws), fg.tensor(h)).numpy(), rtol=1e-10, atol=1e-12)
