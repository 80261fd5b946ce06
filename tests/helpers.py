"""Helpers shared by test modules (pytest puts this folder on sys.path)."""
import numpy as np

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def tensors(x, lib):
    """``x`` (NumPy arrays nested in dicts, tuples and lists) with every array made a tensor
    of ``lib`` (fusegrad or torch), other leaves kept."""
    if isinstance(x, np.ndarray):
        return lib.tensor(x)
    if isinstance(x, dict):
        return {k: tensors(v, lib) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(tensors(v, lib) for v in x)
    return x


def graph_of(fn, arrays, *, optimize: bool = False):
    """The graph traced from ``fn`` on ``arrays`` (its outputs set to ``fn``'s results),
    run through the optimization pipeline when ``optimize``."""
    import fusegrad as fg
    from fusegrad.tracer import trace_function
    tr, _, out = trace_function(fn, [fg.tensor(a) for a in arrays])
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    tr.graph.outputs = [o._data for o in outs]
    if optimize:
        from fusegrad.passes.pipeline import optimize as run_pipeline
        return run_pipeline(tr.graph)
    return tr.graph


def check(fn, arrays, tol=None):
    """Compile ``fn`` on ``arrays`` with the cpu backend; compare every output with eager.
    Returns the executable (its graph is ``exe._graph``)."""
    import fusegrad as fg
    from fusegrad.codegen.cpu import CpuBackend
    exe = CpuBackend().compile(graph_of(fn, arrays))
    got = exe(*arrays)
    ref = fn(*[fg.tensor(a) for a in arrays])
    ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        r = r.numpy()
        assert g.shape == r.shape and g.dtype == r.dtype, (k, g.shape, r.shape, g.dtype, r.dtype)
        t = tol or TOL.get(r.dtype.type, dict(rtol=0, atol=0))
        np.testing.assert_allclose(g, r, err_msg=f"output {k}", equal_nan=True, **t)
    return exe


def sgd_update(params, lr: float = 0.1) -> None:
    """``p -= lr * p.grad`` in place under no_grad, then drop the gradients (the update of
    the whole-step training tests, traced through when called inside compiled code)."""
    import fusegrad
    with fusegrad.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


def subprocess_env(**extra: str) -> dict:
    """This environment plus ``extra``, for a subprocess that imports the fusegrad this session
    tests, wherever it is installed from (its root leads PYTHONPATH)."""
    import os
    import fusegrad
    root = os.path.dirname(os.path.dirname(os.path.abspath(fusegrad.__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def run_on_cuda_simulator(test_file: str) -> None:
    """Run the test module ``test_file`` in a subprocess with ``FUSEGRAD_CUDA_SIM=1``: Numba's
    CUDA simulator must be chosen before numba.cuda is first imported, which this session
    may have done already. Fails with the subprocess's output unless every test passed."""
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test_file],
                       env=subprocess_env(FUSEGRAD_CUDA_SIM="1"), capture_output=True, text=True,
                       cwd=os.path.dirname(test_file))
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-3000:]


def mse_step(model, opt):
    """A whole training step of ``model`` with ``opt``: forward, mean squared error, backward,
    update; returns the loss (for fusegrad and torch modules alike)."""
    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def np_of(t) -> np.ndarray:
    """A tensor's (fusegrad's or torch's) values as a NumPy array, detached."""
    return np.asarray(t.detach().numpy())


def copy_weights(fg_module, pt_module) -> None:
    """Load the torch module's state_dict into the fusegrad one (same names and shapes)."""
    import fusegrad as fg
    sd = pt_module.state_dict()
    assert list(sd) == list(fg_module.state_dict())
    fg_module.load_state_dict({k: fg.tensor(v.numpy()) for k, v in sd.items()})


def both(array, requires_grad=True):
    """``array`` as a fusegrad tensor and as a torch tensor."""
    import fusegrad as fg
    import torch
    return fg.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad)


def compiled_matches_eager(step, array, rtol=1e-10, atol=1e-12) -> None:
    """``step`` on a leaf made from ``array``, eagerly and compiled with the cpu backend: the
    same value and the same gradient from ``backward()``."""
    import fusegrad as fg
    results = []
    for f in (step, fg.compile(step, backend="cpu")):
        x = fg.tensor(array, requires_grad=True)
        out = f(x)
        out.backward()
        results.append((out.detach().numpy(), x.grad.numpy()))
    for e, c in zip(*results):
        np.testing.assert_allclose(c, e, rtol=rtol, atol=atol)


def check_breaks_at(f, x, op: str) -> None:
    """Compile ``f`` (the cpu backend) and call it on float64 ``x``: it must break the graph at
    ``op`` (a primitive without a kernel lowering) and match eager's values and gradients."""
    import fusegrad as fg
    cf = fg.compile(f, backend="cpu")
    a1, a2 = fg.tensor(x, requires_grad=True), fg.tensor(x, requires_grad=True)
    got, want = cf(a1), f(a2)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(a1.grad.numpy(), a2.grad.numpy(), rtol=1e-12)
    breaks = cf.cache_info()["graph_breaks"]
    assert any(f"{op} has no kernel lowering" in b for b in breaks), breaks


def errors_of(cases) -> list:
    """What each case (a function of no arguments) raises, as 'Type: message' with fusegrad's
    name printed as torch's, or 'no error': for comparing refusals with PyTorch's."""
    out = []
    for case in cases:
        try:
            case()
            out.append("no error")
        except Exception as e:  # noqa: BLE001 - the type and message are what is compared
            out.append(f"{type(e).__name__}: {str(e).replace('fusegrad', 'torch')}")
    return out
