"""The W2 kernel paths of the cpu backend: matmuls whose operands are transposes (read by
BLAS with a transpose flag, never copied), ``X +/- c * (A @ B)`` folded into one GEMM
(an SGD update), column sums reduced row by row, stop_gradient read through, and a whole
training step whose returned loss was already backpropagated (no compiled backward)."""
import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen.cpu import generate
from fusegrad.passes.fusion import CallGroup, fuse
from helpers import check, graph_of, sgd_update


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_transposed_operands_and_gemm_epilogues(dt):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 5)).astype(dt)
    b = rng.standard_normal((7, 3)).astype(dt)
    c = rng.standard_normal((3, 5)).astype(dt)
    w = rng.standard_normal((5, 3)).astype(dt)
    v = rng.standard_normal((7, 7)).astype(dt)

    def fn(a, b, c, w, v):
        return (a.T @ b,                     # T, N
                b @ w.T,                     # N, T
                c.T @ b.T,                   # T, T
                w - 0.01 * (a.T @ b),        # SGD update: one GEMM, alpha=-0.01
                (a @ w) * 2.0 + b,           # add with the product first
                v + 0.5 * (a @ a.T))         # X + c * (A @ A.T)

    tol = dict(rtol=2e-5, atol=2e-6) if dt == np.float32 else dict(rtol=1e-12, atol=1e-13)
    g = check(fn, [a, b, c, w, v], tol=tol)._graph
    fused = fuse(g)
    calls = [grp.eqn for grp in fused.groups if isinstance(grp, CallGroup)]
    assert all(e.prim.name == "matmul" for e in calls)
    assert sum(len(e.inputs) == 3 for e in calls) == 3  # the three scalar-times-product epilogues
    record = generate(g, fused)
    assert "np.ascontiguousarray" not in "".join([record["entry"], *record["kernels"]])
    assert record["listing"].count("gemm(") == len(calls)  # one gemm per product, none batched or split
    # no loop group copies a transposed operand before a matmul
    assert not any(not isinstance(grp, CallGroup) and any(e.prim.name == "copy" for e in grp.eqns)
                   for grp in fused.groups)


def test_transposed_product_comes_out_in_its_readers_layout():
    """``(a @ b).T`` used only transposed is computed as ``b.T @ a.T`` (simplify): the
    weight gradient of ``x @ W.T`` comes out of the GEMM in W's layout, so an SGD update of
    W folds into that GEMM and no loop reads a product through a transpose."""
    rng = np.random.default_rng(5)
    x, dy, w = (rng.standard_normal(s).astype(np.float32) for s in ((7, 5), (7, 3), (3, 5)))

    def fn(x, dy, w):
        return w - 0.01 * (x.T @ dy).T, (dy.T @ x).T.sin()

    check(fn, [x, dy, w], tol=dict(rtol=2e-5, atol=2e-6))
    fused = fuse(graph_of(fn, [x, dy, w], optimize=True))
    calls = [grp.eqn for grp in fused.groups if isinstance(grp, CallGroup)]
    # the update is the epilogue of the GEMM that computes W's gradient in W's layout
    assert sorted((len(e.inputs), e.out.shape) for e in calls) == [(2, (5, 3)), (3, (3, 5))]
    assert not any(v.inputs[0] is c.out for v in fused.aliases.values() for c in calls)
    loops = [grp for grp in fused.groups if not isinstance(grp, CallGroup)]
    assert len(loops) == 1 and [e.prim for e in loops[0].eqns] == [fg.ir.prims.sin]

    # an operand that is a transpose under a stop_gradient (a no_grad update's) is read in
    # place too: one GEMM, no copy of a transpose of a transpose
    z = rng.standard_normal((4, 7)).astype(np.float32)

    def blocked(dy, z):
        return (dy.T @ fg.ir.prims.stop_gradient(z.T)).T

    check(blocked, [dy, z], tol=dict(rtol=2e-5, atol=2e-6))
    fused = fuse(graph_of(blocked, [dy, z], optimize=True))
    assert [type(grp) for grp in fused.groups] == [CallGroup]
    assert fused.groups[0].eqn.inputs[:2] == (fused.graph.inputs[1], fused.graph.inputs[0])


def test_epilogue_not_folded_when_product_is_reused():
    rng = np.random.default_rng(1)
    a, b, w = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6, 3), (4, 3)))

    def fn(a, b, w):
        p = a @ b
        return w - 0.1 * p, p

    g = check(fn, [a, b, w], tol=dict(rtol=2e-5, atol=2e-6))._graph
    assert not any(isinstance(grp, CallGroup) and len(grp.eqn.inputs) == 3 for grp in fuse(g).groups)


def test_stop_gradients_read_through():
    """no_grad marks every op with a stop_gradient (the SGD update of a training step):
    fusion reads through them, so the update still folds into one GEMM, and outputs that
    become an input or another output come back right."""
    rng = np.random.default_rng(4)
    a, b, w = (rng.standard_normal(s).astype(np.float32) for s in ((7, 5), (7, 3), (5, 3)))

    def fn(a, b, w):
        with fg.no_grad():
            upd = w - 0.1 * (a.T @ b)
        return upd, upd.detach(), w.detach()

    exe = check(fn, [a, b, w], tol=dict(rtol=2e-5, atol=2e-6))
    assert any(e.prim.name == "stop_gradient" for e in exe._graph.eqns)
    fused = fuse(exe._graph)
    assert [len(grp.eqn.inputs) for grp in fused.groups if isinstance(grp, CallGroup)] == [3]
    assert not any(e.prim.name == "stop_gradient" for grp in fused.groups if not isinstance(grp, CallGroup)
                   for e in grp.eqns)
    assert not np.shares_memory(exe(a, b, w)[2], w)


def test_column_sums_next_to_matmul():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((33, 20)).astype(np.float32), rng.standard_normal((20, 17)).astype(np.float32)

    def fn(x, w):
        h = x @ w
        r = fg.relu(h) * h
        return r.sum(0), r, (r * 2).sum(0, keepdim=True) + 1.0

    check(fn, [x, w], tol=dict(rtol=2e-5, atol=2e-5))


def test_whole_step_loss_is_spent():
    rng = np.random.default_rng(3)
    ws = [fg.tensor(rng.standard_normal((6, 4)).astype(np.float32), requires_grad=True)]
    x = fg.tensor(rng.standard_normal((5, 6)).astype(np.float32))

    def step(ws, x):
        loss = (x @ ws[0]).relu().sum() / x.shape[0]  # div saves its inputs: spent after backward
        loss.backward()
        sgd_update(ws)
        return loss

    eager = [fg.tensor(w.detach().numpy().copy(), requires_grad=True) for w in ws]
    cstep = fg.compile(step)
    for _ in range(3):
        lc, le = cstep(ws, x), step(eager, x)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5)
    np.testing.assert_allclose(ws[0].detach().numpy(), eager[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert lc.requires_grad and type(lc.grad_fn).__name__ == type(le.grad_fn).__name__
    for loss in (lc, le):
        with pytest.raises(RuntimeError, match="second time"):
            loss.backward()


def test_kernels_share_numpys_blas():
    """Compiled matmuls call the OpenBLAS NumPy links (one library, one pool of threads for
    eager and compiled code), so a plain product equals NumPy's bit for bit."""
    from fusegrad.codegen import cpu_blas
    bundled = cpu_blas._libraries("numpy")
    if not bundled:
        pytest.skip("this NumPy bundles no OpenBLAS")
    assert cpu_blas.BLAS.path in bundled and cpu_blas.BLAS.ilp64
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((37, 300)).astype(np.float32), rng.standard_normal((300, 41)).astype(np.float32)
    c, d = rng.standard_normal((2, 3, 37, 300)), rng.standard_normal((300, 41))  # batched, float64
    exe = check(lambda a, b, c, d: (a @ b, c @ d), [a, b, c, d])
    assert "#   sgemm(" in exe.kernel_source() and "#   dgemm(" in exe.kernel_source()
    np.testing.assert_array_equal(exe(a, b, c, d)[0], a @ b)


_REGISTERED: list = []


@pytest.mark.parametrize("fallback", ["scipy", "numba"])
def test_blas_fallback_bindings(fallback):
    """The LP64 entries take the same call whether they are SciPy's OpenBLAS (when NumPy
    bundles none) or the adapters over Numba's own gemm (when neither does)."""
    import numba
    from fusegrad.codegen import cpu_blas
    found = cpu_blas._open("scipy", "scipy_cblas_{}gemm", False) if fallback == "scipy" else cpu_blas._via_numba()
    if found is None:
        pytest.skip(f"no {fallback} fallback here")
    _REGISTERED.append(found)  # its symbols stay registered after the test: keep their code alive
    sgemm, dgemm = cpu_blas.sgemm_i32, cpu_blas.dgemm_i32

    @numba.njit
    def products(a, b, c, d):  # c = a @ b.T (float32); d = 2 * a.T @ a + d (float64)
        sgemm(101, 111, 112, 5, 4, 3, np.float32(1.0), a.ctypes, 3, b.ctypes, 3, np.float32(0.0), c.ctypes, 4)
        a64 = a.astype(np.float64)
        dgemm(101, 112, 111, 3, 3, 5, 2.0, a64.ctypes, 3, a64.ctypes, 3, 1.0, d.ctypes, 3)

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    c, d = np.empty((5, 4), np.float32), np.ones((3, 3))
    try:
        products(a, b, c, d)
    finally:
        _REGISTERED.append(cpu_blas._resolve())  # the process's own registration again, for later kernels
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(d, 2 * a.T.astype(np.float64) @ a + 1, rtol=1e-12)


def _blas_with_threads():
    """NumPy's OpenBLAS and a reader of its thread count; skips where it cannot be set."""
    from fusegrad.codegen.cpu_blas import BLAS
    if BLAS is None or BLAS.set_threads is None:
        pytest.skip("no OpenBLAS thread-count setter")

    def current() -> int:
        n = BLAS.set_threads(1)
        BLAS.set_threads(n)
        return n
    return BLAS, current


def test_tuned_blas_tries_both_thread_counts_and_restores_the_callers():
    from fusegrad.runtime.blas_threads import TunedBlas, tuned
    BLAS, current = _blas_with_threads()

    seen = []

    class Exe:  # stands in for a compiled executable whose graph calls BLAS (on more than one thread)
        _graph = graph_of(lambda a, b: a @ b, [np.ones((96, 96), np.float32)] * 2)

        def __call__(self):
            seen.append(current())
            return ()

    callers = BLAS.set_threads(2)
    try:
        if current() != 2:
            pytest.skip("OpenBLAS runs one thread here")
        # OpenBLAS runs these on one thread anyway: a GEMM of m*n*k <= 2**18, a GEMV of a
        # matrix under 9216 elements
        for x, y in [((16, 16), (16, 16)), ((64, 64), (64, 64)), ((2, 20, 20), (20, 20)), ((128, 64), (64,)),
                     ((64,), (64, 100))]:
            small = Exe()
            small._graph = graph_of(lambda a, b: a @ b, [np.ones(x, np.float32), np.ones(y, np.float32)])
            assert tuned(small) is small, (x, y)
        for x, y in [((256, 64), (64,)), ((4, 40, 40), (40, 60))]:  # a GEMV of 16384; a batch as 160 rows
            big = Exe()
            big._graph = graph_of(lambda a, b: a @ b, [np.ones(x, np.float32), np.ones(y, np.float32)])
            assert isinstance(tuned(big), TunedBlas), (x, y)
        exe = tuned(Exe())
        assert isinstance(exe, TunedBlas)
        for _ in range(8):
            exe()
            assert current() == 2  # the caller's count, back after every call
        assert set(seen) == {1, 2}
        BLAS.set_threads(1)
        assert not isinstance(tuned(Exe()), TunedBlas)  # one thread by default: nothing to tune
    finally:
        BLAS.set_threads(callers)


def test_tuned_blas_chooses_per_argument_shapes():
    """A shape-symbolic executable's sizes each get the thread count that is fastest for them
    (timing every size together let a small size's speed decide for a large one)."""
    import time

    from fusegrad.runtime.blas_threads import TunedBlas
    BLAS, current = _blas_with_threads()

    seen: dict = {}

    class Exe:  # big arguments run faster on two threads, small ones on one
        def __call__(self, a):
            n = current()
            seen.setdefault(a.shape, []).append(n)
            time.sleep(0.004 if (n == 2) == (a.shape[0] > 1) else 0.02)
            return ()

    callers = BLAS.set_threads(2)
    try:
        if current() != 2:
            pytest.skip("OpenBLAS runs one thread here")
        exe = TunedBlas(Exe(), BLAS.set_threads)
        for _ in range(10):
            exe(np.ones(4))
            exe(np.ones(1))
        assert seen[(4,)][-3:] == [2, 2, 2] and seen[(1,)][-3:] == [1, 1, 1], seen
    finally:
        BLAS.set_threads(callers)


def test_eager_matmuls_choose_their_blas_threads_per_operand_shapes():
    """Eager matmuls big enough for OpenBLAS to thread run with the count that has been
    fastest for their shapes (one thread where two lose under load), the count as it is
    included (what the user set); small ones run untouched."""
    import time

    from fusegrad.ir.prims import linalg
    from fusegrad.runtime.blas_threads import EagerBlas
    BLAS, current = _blas_with_threads()
    seen: dict = {}

    def gemm(a, b):  # (128, 784) products run faster on two threads, (64, 784) ones on one
        n = current()
        seen.setdefault(a.shape, []).append(n)
        time.sleep(0.002 if (n == 2) == (a.shape[0] == 128) else 0.06)
        return a @ b

    callers = BLAS.set_threads(2)
    try:
        if current() != 2:
            pytest.skip("OpenBLAS runs one thread here")
        assert isinstance(linalg._GEMM_CALL[0], EagerBlas)  # installed at import
        call = EagerBlas(BLAS.set_threads)
        big, small, w = np.ones((128, 784), np.float32), np.ones((64, 784), np.float32), np.ones((784, 512), np.float32)
        for _ in range(10):
            call(gemm, big, w)
            call(gemm, small, w)
        # the choice (0: the count as set, two threads here); a probe slowed by other load may
        # run the other count now and then without changing it
        choices = {k[0]: c._best for k, c in call._choices.items()}
        assert choices == {(128, 784): 0, (64, 784): 1}, (choices, seen)
        assert current() == 2  # restored after each call
        call(gemm, np.ones((4, 4)), np.ones((4, 4)))
        assert (4, 4) not in call._choices  # too small to thread: not timed
        x = fg.tensor(big)
        np.testing.assert_allclose((x @ fg.tensor(w)).numpy(), big @ w)
    finally:
        BLAS.set_threads(callers)


def test_zero_or_infinite_scale_is_not_folded_into_the_gemm():
    """w - 0 * (a @ b) keeps NumPy's nan where the product is infinite (BLAS would skip a
    zero alpha), and an infinite scale compiles too."""
    a = np.array([[np.inf, 1.0], [1.0, 2.0]])
    b = np.eye(2)
    w = np.ones((2, 2))
    exe = check(lambda a, b, w: (w - 0.0 * (a @ b), w + np.inf * (a @ b)), [a, b, w])
    assert np.isnan(exe(a, b, w)[0][0, 0])
