"""Differential checks for one generated program (and for a batch of them compiled together)."""
from __future__ import annotations

import numpy as np

import fusegrad as fg

try:  # PyTorch is optional: the reference when installed
    import torch as _torch
    _torch.set_num_threads(1)
except Exception:  # pragma: no cover
    _torch = None

RTOL = {"eager": 1e-6, "cpu": 1e-5, "cuda": 1e-5}


class Mismatch(AssertionError):
    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def _np(t):
    if t is None:
        return None
    if _torch is not None and isinstance(t, _torch.Tensor):
        return t.detach().numpy()
    return t.detach().numpy()


def _close(kind, got, want, rtol, what):
    if want is None or got is None:
        if (want is None) != (got is None):
            # a missing gradient equals zeros where the other side produced zeros
            other = want if got is None else got
            if np.all(np.asarray(other) == 0):
                return
            raise Mismatch(kind, f"{what}: one side has no gradient (got {got is None}, want {want is None})")
        return
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise Mismatch(kind, f"{what}: shape {got.shape} != {want.shape}")
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    if not np.allclose(got, want, rtol=rtol, atol=rtol * 1e-2 * scale, equal_nan=True):
        err = np.abs(got - want).max() if got.size else 0
        raise Mismatch(kind, f"{what}: max abs err {err:.3g}\n got={got.tolist()}\nwant={want.tolist()}")


def _one_graph(cf, backend):
    """Generated programs are straight-line tensor code: compiling one must not break the graph."""
    breaks = cf.cache_info()["graph_breaks"]
    if breaks:
        raise Mismatch(f"compile[{backend}]-graph-break", "; ".join(breaks))


def cotangents(p, out_shapes):
    r = np.random.default_rng(p.seed + 104729)
    return [r.standard_normal(s) for s in out_shapes]


def run_fusegrad(fn, arrays, ws):
    xs = [fg.tensor(a, requires_grad=True) for a in arrays]
    outs = fn(*xs)
    fg.autograd.backward(list(outs), [fg.tensor(w) for w in ws])
    return [_np(o) for o in outs], [_np(x.grad) for x in xs]


def run_torch(p, arrays, ws):
    xs = [_torch.tensor(a, requires_grad=True) for a in arrays]
    outs = p.make(_torch)(*xs)
    _torch.autograd.backward(list(outs), [_torch.tensor(w) for w in ws])
    return [_np(o) for o in outs], [_np(x.grad) for x in xs]


def reference(p):
    """Eager fusegrad values and gradients: what every other path is compared against."""
    arrays = p.inputs()
    with np.errstate(all="ignore"):
        fn = p.make(fg)
        xs = [fg.tensor(a) for a in arrays]
        shapes = [tuple(o.shape) for o in fn(*xs)]
        ws = cotangents(p, shapes)
        outs, grads = run_fusegrad(fn, arrays, ws)
    return arrays, ws, outs, grads


def check_program(p, backends=("eager",), torch=True, fd=True, jac=True):
    """Raises Mismatch naming the first disagreement."""
    try:
        arrays, ws, outs, grads = reference(p)
    except Exception as e:
        raise Mismatch("eager-error", f"{type(e).__name__}: {e}") from e
    for b in backends:
        try:
            cf = fg.compile(p.make(fg), backend=b)
            with np.errstate(all="ignore"):
                co, cg = run_fusegrad(cf, arrays, ws)
        except Exception as e:
            raise Mismatch(f"compile[{b}]-error", f"{type(e).__name__}: {e}") from e
        _one_graph(cf, b)
        for i, (a, r) in enumerate(zip(co, outs)):
            _close(f"compile[{b}]-value", a, r, RTOL[b], f"output {i}")
        for i, (a, r) in enumerate(zip(cg, grads)):
            _close(f"compile[{b}]-grad", a, r, RTOL[b], f"grad of x{i}")
    if torch and _torch is not None:
        try:
            to, tg = run_torch(p, arrays, ws)
        except Exception as e:
            raise Mismatch("torch-error", f"{type(e).__name__}: {e}") from e
        for i, (a, r) in enumerate(zip(outs, to)):
            _close("torch-value", a, r, 1e-6, f"output {i}")
        for i, (a, r) in enumerate(zip(grads, tg)):
            _close("torch-grad", a, r, 1e-6, f"grad of x{i}")
    if fd or jac:
        from fusegrad.func import jacfwd, jacrev, jvp
        prog = p.make(fg)

        def flat(*xs):
            return fg.cat([o.reshape(-1) for o in prog(*xs)])
        xs = [fg.tensor(a) for a in arrays]
        if fd and p.smooth:
            r = np.random.default_rng(p.seed + 31337)
            ts = [r.standard_normal(a.shape) for a in arrays]
            try:
                _, jt = jvp(flat, tuple(xs), tuple(fg.tensor(t) for t in ts))
            except Exception as e:
                raise Mismatch("jvp-error", f"{type(e).__name__}: {e}") from e
            eps = 1e-6
            with fg.no_grad():
                hi = flat(*[fg.tensor(a + eps * t) for a, t in zip(arrays, ts)]).numpy()
                lo = flat(*[fg.tensor(a - eps * t) for a, t in zip(arrays, ts)]).numpy()
            fdv = (hi - lo) / (2 * eps)
            jt = _np(jt)
            scale = max(1.0, float(np.abs(fdv).max()) if fdv.size else 1.0)
            if not np.allclose(jt, fdv, rtol=1e-4, atol=1e-5 * scale):
                raise Mismatch("jvp-vs-fd", f"max abs err {np.abs(jt - fdv).max():.3g}\n jvp={jt.tolist()}\n  fd={fdv.tolist()}")
        if jac:
            argn = tuple(range(len(xs)))
            try:
                jr = jacrev(flat, argnums=argn)(*xs)
                jf = jacfwd(flat, argnums=argn)(*xs)
            except Exception as e:
                raise Mismatch("jac-error", f"{type(e).__name__}: {e}") from e
            for i, (a, b) in enumerate(zip(jr, jf)):
                _close("jacrev-vs-jacfwd", _np(a), _np(b), 1e-6, f"d/dx{i}")


def batch_source(progs):
    """One function computing every program of ``progs``: its source and per-program arg slices."""
    parts, args, calls, slices, k = [], [], [], [], 0
    for j, p in enumerate(progs):
        parts.append(p.body(f"prog_{j}"))
        names = [f"a{k + i}" for i in range(p.n_in)]
        slices.append((k, k + p.n_in))
        k += p.n_in
        args += names
        calls.append(f"*prog_{j}({', '.join(names)})")
    src = "\n\n".join(parts) + f"\n\ndef batch({', '.join(args)}):\n    return ({', '.join(calls)},)\n"
    return src, slices


def check_batch(progs, backend="cpu"):
    """Compiles all of ``progs`` as one function; raises Mismatch on the first disagreement with
    each program's eager reference (values and gradients)."""
    src, slices = batch_source(progs)
    ns = {"torch": fg}
    exec(compile(src, "<fuzz batch>", "exec"), ns)
    refs = [reference(p) for p in progs]
    arrays = [a for r in refs for a in r[0]]
    ws = [w for r in refs for w in r[1]]
    cf = fg.compile(ns["batch"], backend=backend)
    try:
        with np.errstate(all="ignore"):
            co, cg = run_fusegrad(cf, arrays, ws)
    except Exception as e:
        raise Mismatch(f"compile[{backend}]-error", f"{type(e).__name__}: {e}") from e
    _one_graph(cf, backend)
    o = 0
    for p, (lo, hi), (_, _, outs, grads) in zip(progs, slices, refs):
        try:
            for i, r in enumerate(outs):
                _close(f"compile[{backend}]-value", co[o + i], r, RTOL[backend], f"output {i}")
            for i, r in enumerate(grads):
                _close(f"compile[{backend}]-grad", cg[lo + i], r, RTOL[backend], f"grad of x{i}")
        except Mismatch as m:
            m.program = p
            raise
        o += len(outs)
