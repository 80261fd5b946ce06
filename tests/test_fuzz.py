"""Differential fuzzing (issue 6). CI: 200 programs checked eager vs compile(backend="eager") vs
PyTorch, jvp vs finite differences and jacrev vs jacfwd, plus one small batch of programs compiled
together with backend="cpu" (Numba compiles are the expensive part). ``FUSEGRAD_FUZZ=N`` runs N
programs through every backend, cpu included (``FUSEGRAD_FUZZ_BACKENDS=eager`` to skip cpu),
starting at ``FUSEGRAD_FUZZ_START``."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fuzz.check import Mismatch, check_batch, check_program  # noqa: E402
from fuzz.generator import generate  # noqa: E402
from fuzz.shrink import shrink  # noqa: E402

N = int(os.environ.get("FUSEGRAD_FUZZ", "0"))
START = int(os.environ.get("FUSEGRAD_FUZZ_START", "0"))
BACKENDS = tuple(os.environ.get("FUSEGRAD_FUZZ_BACKENDS", "eager,cpu" if N else "eager").split(","))
CPU_LACKS = ()  # op families the cpu backend has no lowering for (they would fall back to eager)


def _report(p, m, check):
    q = shrink(p, check, m.kind)
    return f"fuzz seed {p.seed} failed ({m}).\nShrunk reproduction:\n\n{q.script(m.kind)}"


def _run(seeds, backends):
    failures = []
    for s in seeds:
        p = generate(s)
        chk = lambda q: check_program(q, backends=backends)  # noqa: E731
        try:
            chk(p)
        except Mismatch as m:
            failures.append(_report(p, m, chk))
            if len(failures) >= 3:
                break
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("block", range(4))
def test_fuzz_programs(block):
    """200 programs (4 blocks of 50) against the eager IR backend, PyTorch, FD and jacobians."""
    if N:
        pytest.skip("FUSEGRAD_FUZZ set: test_fuzz_many runs instead")
    _run(range(block * 50, block * 50 + 50), ("eager",))


def test_fuzz_cpu_batch():
    """Four programs compiled as ONE function with backend="cpu", values and gradients."""
    progs = [generate(s, n_ops=4, exclude=CPU_LACKS) for s in range(1000, 1004)]
    try:
        check_batch(progs, "cpu")
    except Mismatch as m:
        p = getattr(m, "program", None)
        if p is None:
            raise
        raise AssertionError(_report(p, m, lambda q: check_program(q, backends=("cpu",)))) from None


def test_fuzz_reproducible():
    a, b = generate(12345), generate(12345)
    assert a.body() == b.body() and a.in_shapes == b.in_shapes
    assert all((x == y).all() for x, y in zip(a.inputs(), b.inputs()))


def test_fuzz_catches_a_wrong_gradient(monkeypatch):
    """The harness itself: a deliberately wrong tanh VJP is found, shrunk and printed."""
    from fusegrad.ir.primitive import PRIMS
    monkeypatch.setattr(PRIMS["tanh"], "vjp", lambda g, ins, out, needs: (g * (1 - out * out) * 1.001,))
    for s in range(100):
        p = generate(s)
        if "tanh" not in p.body():
            continue
        try:
            check_program(p, backends=(), fd=False, jac=False)
        except Mismatch as m:
            msg = _report(p, m, lambda q: check_program(q, backends=(), fd=False, jac=False))
            assert "def prog(" in msg and "tanh" in msg
            return
    pytest.fail("an injected gradient bug went unnoticed")


@pytest.mark.skipif(not N, reason="set FUSEGRAD_FUZZ=N for a long run")
def test_fuzz_many():
    if "cpu" in BACKENDS:
        # cpu: batches of 10 programs per compiled function, the rest per program on eager
        progs = [generate(s, exclude=CPU_LACKS) for s in range(START, START + N)]
        for i in range(0, len(progs), 10):
            try:
                check_batch(progs[i:i + 10], "cpu")
            except Mismatch as m:
                p = getattr(m, "program", None)
                if p is None:
                    raise
                raise AssertionError(_report(p, m, lambda q: check_program(q, backends=("cpu",)))) from None
    _run(range(START, START + N), tuple(b for b in BACKENDS if b != "cpu"))
