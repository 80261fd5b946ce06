"""Compiles every kernel the cuda backend generates for a set of programs, rendered for a
real device (libdevice math, device launch geometry), to PTX for sm_90 with numba-cuda's
compiler: no GPU needed, only libnvvm (the pip wheels nvidia-cuda-nvcc, nvidia-cuda-nvrtc
and nvidia-nvvm installed with ``--target DIR``, found through ``CUDA_HOME=DIR/nvidia/cu13``;
or the -cu12 ones). The simulator runs
the kernels' Python; this checks that Numba's CUDA target types and lowers them.

Run as a script (tests/test_cuda_codegen.py does, in a subprocess); exits 77 when
libnvvm is not available."""
import sys

import numpy as np

NO_COMPILER = 77


def main() -> int:
    from numba import cuda, from_dtype, types
    try:
        cuda.compile_ptx(lambda x: None, (types.float32[::1],), cc=(9, 0))
    except Exception as exc:  # noqa: BLE001 - no libnvvm/libnvrtc: nothing to check here
        print(f"no CUDA compiler: {type(exc).__name__}: {str(exc)[:200]}")
        return NO_COMPILER
    import fusegrad as fg
    import fusegrad.codegen.cuda as C
    from fusegrad.codegen.cuda_render import DEVICE
    from fusegrad.ir import prims as P
    from fusegrad.ir.dtypes import _BF16
    from fusegrad.ir.prims import elementwise as E
    from fusegrad.ir.prims import reduce as R
    from helpers import graph_of
    from test_kernel_ir import _elementwise_all, _softmax_mix

    C.config = lambda: DEVICE  # render for a device although this process has none
    cuda.is_available = lambda: True
    # a kernel calling a device function compiles it for the current device's capability:
    # without a driver, name the one compile_ptx targets
    import types as pytypes
    from numba.cuda import dispatcher
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))

    def arr(dt):
        return types.Array(from_dtype(np.dtype(dt)), 1, "C")

    def signature(st) -> tuple:
        if isinstance(st, C._Loop):
            scratch = st.rendered.scratch
            return tuple([arr(v.dtype) for v in st.binds] + [types.int64] * len(st.syms)
                         + [arr(dt) for dt in scratch] + ([arr(np.int32)] if scratch else []))
        if isinstance(st, C._Matmul):
            return tuple([arr(st.out.dtype)] * 4 + [arr(np.int64)] * 2 + [types.int64] * 3)
        if isinstance(st, C.Indexed):
            return tuple([arr(st.eqn.out.dtype)] + [arr(v.dtype) for v in st.operands] + [arr(np.int32)])
        return (arr(st.eqn.out.dtype),) + tuple(arr(v.dtype) for v in st.eqn.inputs)

    def check(fn, arrays, **kw) -> int:
        exe = C.CudaBackend().compile(graph_of(fn, arrays, optimize=True), **kw)
        for st in exe._steps:
            try:
                cuda.compile_ptx(st.fn.py_func, signature(st), cc=(9, 0))
            except Exception:
                print(f"kernel {st.title} of {fn.__name__} does not compile:\n{st.source()}")
                raise
        return len(exe._steps)

    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    i = np.array([2, 0, -1], np.int64)

    def reductions(x, k, y):
        m = R.reduce_max(x, axes=(1,), keepdims=True)
        e = E.exp(E.sub(x, m))
        return (E.div(e, R.reduce_sum(e, axes=(1,), keepdims=True)), R.reduce_sum(k, axes=(1,), keepdims=False),
                R.reduce_max(E.gt(k, 3), axes=(1,), keepdims=False), R.reduce_sum(y, axes=(0, 1), keepdims=False),
                R.reduce_min(y, axes=(0, 1), keepdims=False))

    def calls(a, b, i):
        c, d = a * 1.0, a * 1.0
        c[i % 3] = 5.0
        d.index_put_((i % 3,), a[0] * 2, accumulate=True)
        return (fg.cat([a, b], dim=1), fg.nn.functional.pad(a, (1, 2, 0, 1), value=3.0), a[i], a[:, i], a[1, i],
                fg.gather(a, 1, (i % 2).reshape(3, 1).expand(3, 2)), c, d,
                (a * 0).scatter_add(1, (i % 4).reshape(3, 1).expand(3, 2), b), fg.cumsum(a, 1), fg.argmax(a, 1),
                fg.cumsum(i, 0), fg.rand(3, 4) + a, fg.randn(5), a.T @ b @ b.T, a.T @ a, (a.double() @ a.T.double()),
                b - 0.5 * (a @ a.T @ b))

    def mlp_grad(w, x):
        return fg.func.grad(lambda w: (fg.relu(x @ w) ** 2).mean())(w)

    def solves(a, b, s):
        spd = a @ a.mT + 3.0
        low = P.cholesky(spd)
        return (fg.argsort(a, 1), fg.argsort(a, 0, descending=True), fg.searchsorted(s, b), low,
                P.triangular_solve(low, b, upper=False), P.triangular_solve(low.mT, b, upper=True),
                E.reduce_precision(a, dtype=np.dtype(np.float16)), E.reduce_precision(a, dtype=_BF16))

    n = check(_elementwise_all, [f32(2, 3, 4), rng.random((2, 3, 4)).astype(np.float32)])
    n += check(_softmax_mix, [f32(5, 7), f32(5, 7)])
    n += check(reductions, [f32(3, 300), rng.integers(0, 5, (3, 300)).astype(np.int32), f32(7, 400)])
    n += check(lambda x: fg.tanh(x) * 3 - x, [f32(4, 6)], symbolic=True)
    n += check(calls, [f32(3, 4), f32(3, 2), i])
    n += check(mlp_grad, [f32(6, 3), f32(5, 6)])
    n += check(solves, [f32(3, 3), f32(3, 2), np.sort(f32(3, 5), axis=1)])
    n += check(lambda h: ((h * 3).exp().sum(1), h.to(fg.bfloat16) * 2), [f32(4, 5).astype(np.float16)])
    from fusegrad.codegen import cuda_half
    u16, i64 = arr(np.uint16), types.int64
    cuda.compile_ptx(cuda_half._widen.py_func, (arr(np.float32), u16, i64, i64), cc=(9, 0))
    cuda.compile_ptx(cuda_half._narrow.py_func, (u16, arr(np.float32), i64, i64, i64, types.float64), cc=(9, 0))
    n += 2
    print(f"{n} kernels compiled to PTX")
    return 0


if __name__ == "__main__":
    sys.exit(main())
