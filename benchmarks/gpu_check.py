"""The CUDA check for a machine with a GPU (no network needed): runs the CUDA correctness
tests on the device, then times W1 (grad and forward) and W2 (an SGD step) compiled with
``backend="cuda"`` against PyTorch on CUDA (eager, and torch.compile when it works), and
prints a table (median milliseconds per call, synchronized).

    python benchmarks/gpu_check.py                 # on the GPU, W1 at 2^22, W2 at batch 128
    python benchmarks/gpu_check.py --sim --tiny    # Numba's simulator, tiny sizes (a dry run)

``--sim`` sets ``FUSEGRAD_CUDA_SIM=1`` (before fusegrad is imported); ``--tiny`` uses the
benchmarks' "quick" sizes; ``--no-tests`` skips the tests; ``--reps N`` timed calls."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = ["tests/test_cuda_device.py", "tests/test_cuda_codegen.py", "tests/test_cuda_prims.py"]


def run_tests(sim: bool) -> bool:
    """The CUDA test modules run in-process on the device (``FUSEGRAD_CUDA_TESTS=device``),
    or on the simulator with ``--sim``."""
    env = dict(os.environ, **({"FUSEGRAD_CUDA_SIM": "1"} if sim else {"FUSEGRAD_CUDA_TESTS": "device"}))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT, env=env)
    return r.returncode == 0


def timed(call: Callable[[], Any], sync: Callable[[], None], reps: int) -> float:
    """Median milliseconds of ``call`` (after two warm-up calls, the first compiles)."""
    for _ in range(2):
        call()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def fusegrad_rows(size: str, reps: int) -> dict:
    import fusegrad
    from benchmarks import w1_elementwise as W1, w2_mlp as W2
    import numpy as np
    sync = fusegrad.cuda.synchronize
    x_np = W1.rng(1).standard_normal(W1.SIZES[size]).astype("float32")
    x = fusegrad.tensor(x_np, device="cuda")
    f = lambda x: W1.fn(fusegrad, x)  # noqa: E731
    grad = fusegrad.compile(fusegrad.func.grad(f), backend="cuda")
    fwd = fusegrad.compile(f, backend="cuda")
    params_np, xb_np, onehot_np = W2.inputs(size)
    params = [fusegrad.tensor(p, device="cuda", requires_grad=True) for p in params_np]
    xb, onehot = fusegrad.tensor(xb_np, device="cuda"), fusegrad.tensor(onehot_np, device="cuda")
    step = fusegrad.compile(W2.make_step(fusegrad), backend="cuda")
    rows = {"W1 grad": timed(lambda: grad(x), sync, reps), "W1 forward": timed(lambda: fwd(x), sync, reps),
            "W2 step": timed(lambda: step(params, xb, onehot), sync, reps)}
    # values: W1's gradient against the hand-derived NumPy one
    np.testing.assert_allclose(grad(x).cpu().numpy(), W1.numpy_grad(x_np)[0], rtol=1e-4, atol=1e-5)
    for name, fn in (("W1 grad", grad), ("W1 forward", fwd), ("W2 step", step)):
        info = fn.cache_info()
        if info["fallbacks"] or info["graph_breaks"]:
            rows[name] = f"{rows[name]:.3f} (not all compiled: {info['graph_breaks'] or info['notes']})"
    return rows


def torch_rows(size: str, reps: int) -> Optional[dict]:
    """PyTorch CUDA eager and torch.compile, when torch with CUDA is importable."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    from benchmarks import w1_elementwise as W1, w2_mlp as W2
    out: dict = {}
    for label, wrap in (("torch eager", lambda f: f), ("torch.compile", torch.compile)):
        x = torch.tensor(W1.rng(1).standard_normal(W1.SIZES[size]).astype("float32"), device="cuda")
        f = lambda x: W1.fn(torch, x)  # noqa: E731
        params_np, x_np, onehot_np = W2.inputs(size)
        params = [torch.tensor(p, device="cuda", requires_grad=True) for p in params_np]
        xb, onehot = torch.tensor(x_np, device="cuda"), torch.tensor(onehot_np, device="cuda")
        calls = {"W1 grad": (wrap(torch.func.grad(f)), (x,)), "W1 forward": (wrap(f), (x,)),
                 "W2 step": (wrap(W2.make_step(torch)), (params, xb, onehot))}
        for name, (fn, args) in calls.items():
            try:
                out.setdefault(name, {})[label] = timed(lambda: fn(*args), torch.cuda.synchronize, reps)
            except Exception as e:  # noqa: BLE001  (torch.compile without Triton, say: reported, not fatal)
                out.setdefault(name, {})[label] = f"failed: {type(e).__name__}"
    return out


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", action="store_true", help="run on Numba's CUDA simulator (FUSEGRAD_CUDA_SIM=1)")
    ap.add_argument("--tiny", action="store_true", help="the benchmarks' quick sizes")
    ap.add_argument("--no-tests", action="store_true", help="skip the correctness tests")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per row (default 20, 2 with --sim)")
    a = ap.parse_args(argv)
    if a.sim:
        os.environ["FUSEGRAD_CUDA_SIM"] = "1"
    sys.path.insert(0, ROOT)
    import fusegrad
    if not fusegrad.cuda.is_available():
        print("no CUDA device (install the cuda extra; --sim for the simulator)")
        return 2
    size, reps = ("quick" if a.tiny else "full"), a.reps or (2 if a.sim else 20)
    ok = True if a.no_tests else run_tests(a.sim)
    name = fusegrad.cuda.get_device_name()
    print(f"\ndevice: {name}; sizes: {size}; tests: "
          f"{'skipped' if a.no_tests else 'passed' if ok else 'FAILED'}")
    fg = fusegrad_rows(size, reps)
    pt = torch_rows(size, reps) if not a.sim else None
    cols = ["fusegrad cuda"] + (["torch eager", "torch.compile"] if pt else [])
    print(f"{'workload':<12}" + "".join(f"{c:>18}" for c in cols) + "   (median ms)")
    for row, ms in fg.items():
        cells = [ms] + ([pt[row].get(c, "-") for c in cols[1:]] if pt else [])
        print(f"{row:<12}" + "".join(f"{c:>18.3f}" if isinstance(c, float) else f"{c:>18}" for c in cells))
    if pt is None and not a.sim:
        print("(PyTorch with CUDA is not importable here: no comparison)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
