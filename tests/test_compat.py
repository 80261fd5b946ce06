"""PyTorch compatibility of the surface programs meet first: the legacy ``Tensor(...)``
constructor, ``contiguous()`` layouts, keyword names, printing, the no-GPU namespaces."""
import numpy as np
import pytest

import fusegrad as fg


@pytest.mark.torch
@pytest.mark.parametrize("args", [(), (40, 1), (3,), ([1, 2],), ([[1.5, 2], [3, 4]],), (np.arange(3),),
                                  ("size",)])
def test_legacy_tensor_constructor_matches_torch(pt, args):
    def build(lib):
        a = tuple(lib.Size([2, 3]) if isinstance(x, str) else x for x in args)
        return lib.Tensor(*a)

    ours, theirs = build(fg), build(pt)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1] == "float32"
    if args and not isinstance(args[0], (int, str)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.torch
def test_legacy_tensor_types_variable_and_generator_device_match_torch(pt):
    """torch.LongTensor(...) and the other legacy types (seq2seq and char-RNN tutorials),
    isinstance checks and x.type(torch.DoubleTensor); autograd.Variable (the spatial
    transformer tutorial); Generator(device=...) (the name classification tutorial)."""
    for lib in (fg, pt):
        ones = lib.ones(2)
        assert lib.LongTensor([1.7, -2]).tolist() == [1, -2] and lib.LongTensor([1]).dtype == lib.int64
        assert tuple(lib.FloatTensor(2, 3).shape) == (2, 3) and lib.DoubleTensor([1]).dtype == lib.float64
        assert lib.BoolTensor([0, 1]).tolist() == [False, True] and lib.ByteTensor([3]).dtype == lib.uint8
        assert isinstance(ones, lib.FloatTensor) and not isinstance(ones, lib.LongTensor)
        assert ones.type(lib.LongTensor).dtype == lib.int64 and ones.type(lib.IntTensor).type() == "torch.IntTensor"
        assert lib.FloatTensor.dtype == lib.float32 and repr(lib.LongTensor) == "<class 'torch.LongTensor'>"
        with pytest.raises(TypeError):
            lib.LongTensor(ones)
        v = lib.autograd.Variable(ones, requires_grad=True)
        assert v is not ones and v.requires_grad and v.is_leaf and not ones.requires_grad
        assert v.data_ptr() == ones.data_ptr() and isinstance(ones, lib.autograd.Variable)
        g = lib.Generator(device="cpu").manual_seed(7)
        assert str(g.device) == "cpu" and g.initial_seed() == 7
        assert str(lib.Generator(lib.device("cpu")).device) == "cpu"


@pytest.mark.torch
def test_legacy_tensor_constructor_errors_and_alias(pt):
    for args in [(3.5,), ([1], [2])]:
        with pytest.raises(TypeError):
            pt.Tensor(*args)
        with pytest.raises(TypeError):
            fg.Tensor(*args)
    x = fg.ones(2, requires_grad=True)
    y = fg.Tensor(x)  # an alias that stays in the graph, as in torch
    assert y.requires_grad
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3, 3])
    fg.set_default_dtype(fg.float64)
    assert fg.Tensor([1, 2]).dtype is fg.float64 and fg.Tensor(2, 2).dtype is fg.float64


@pytest.mark.torch
@pytest.mark.parametrize("perm", [(0, 2, 1), (2, 1, 0), (1, 0, 2)])
def test_contiguous_after_transpose_views(pt, perm):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = fg.tensor(a, requires_grad=True)
    y = x.permute(*perm).contiguous()
    assert y.is_contiguous()
    v = y.view(-1)
    expect = pt.tensor(a).permute(*perm).contiguous().view(-1)
    np.testing.assert_array_equal(v.detach().numpy(), expect.numpy())
    (v * fg.arange(24.0)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(24.0, dtype=np.float32).reshape(
        [a.shape[p] for p in perm]).transpose(np.argsort(perm)))
    t = fg.tensor(a).transpose(1, 2).contiguous().view(2, 12)
    np.testing.assert_array_equal(t.numpy(), a.transpose(0, 2, 1).reshape(2, 12))
    b = fg.tensor(a > 5).transpose(0, 2).contiguous()
    assert b.view(-1).tolist() == (a > 5).transpose(2, 1, 0).reshape(-1).tolist()


@pytest.mark.torch
def test_softplus_gradient_at_zero_matches_torch(pt):
    v = np.array([0.0, -0.0, 1e-8, -3.0, 5.0, 25.0, -30.0], dtype=np.float32)
    for beta in (1.0, 2.0):
        x, t = fg.tensor(v, requires_grad=True), pt.tensor(v, requires_grad=True)
        a, b = fg.nn.functional.softplus(x, beta=beta), pt.nn.functional.softplus(t, beta=beta)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=0)
        a.sum().backward()
        b.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ keyword names, out=
def _both(pt, fn):
    """``fn(lib, x, y)`` in both libraries on the same data, as NumPy (tuples elementwise)."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 + 0.25
    b = np.arange(12, dtype=np.float32).reshape(4, 3) / 5 - 1
    out = []
    for lib in (fg, pt):
        r = fn(lib, lib.tensor(a), lib.tensor(b))
        out.append([np.asarray(v.numpy()) for v in r] if isinstance(r, (tuple, list)) else np.asarray(r.numpy()))
    return out


KEYWORD_CALLS = {
    "matmul": lambda L, x, y: L.matmul(input=x, other=y),
    "add": lambda L, x, y: L.add(input=x, other=x, alpha=2),
    "sub": lambda L, x, y: L.sub(x, other=x * 2),
    "mul_method": lambda L, x, y: x.mul(other=x),
    "sum_axis": lambda L, x, y: L.sum(x, axis=0),
    "sum_keepdims": lambda L, x, y: x.sum(axis=1, keepdims=True),
    "mean_input": lambda L, x, y: L.mean(input=x, dim=1),
    "argmax_axis": lambda L, x, y: L.argmax(x, axis=1),
    "argmax_input": lambda L, x, y: L.argmax(input=x, dim=0, keepdim=True),
    "max_dim": lambda L, x, y: L.max(x, dim=1),
    "softmax": lambda L, x, y: L.softmax(input=x, dim=-1),
    "transpose": lambda L, x, y: L.transpose(x, dim0=0, dim1=1),
    "reshape": lambda L, x, y: L.reshape(x, shape=(4, 3)),
    "reshape_method": lambda L, x, y: x.reshape(shape=(2, 6)),
    "view_size": lambda L, x, y: x.view(size=(6, 2)),
    "permute": lambda L, x, y: L.permute(x, dims=(1, 0)),
    "pow": lambda L, x, y: L.pow(x, exponent=2),
    "clamp": lambda L, x, y: L.clamp(x, min=0.5, max=1.5),
    "cat": lambda L, x, y: L.cat(tensors=[x, x], dim=0),
    "where": lambda L, x, y: L.where(condition=x > 1, input=x, other=-x),
    "exp": lambda L, x, y: L.exp(input=x),
    "randn_size": lambda L, x, y: L.randn(size=(2, 3)) * 0,
    "zeros_size": lambda L, x, y: L.zeros(size=(2, 3)),
    "full_size": lambda L, x, y: L.full(size=(2, 2), fill_value=3.0),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(KEYWORD_CALLS))
def test_pytorch_keyword_names(pt, name):
    ours, theirs = _both(pt, KEYWORD_CALLS[name])
    if isinstance(ours, list):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def _out_call(L, x, y, name):
    o = L.empty(0)
    calls = {"add": lambda: L.add(x, x, out=o), "exp": lambda: L.exp(x, out=o), "matmul": lambda: L.matmul(x, y, out=o),
             "sum": lambda: L.sum(x, 1, out=o), "cat": lambda: L.cat([x, x], 1, out=o),
             "zeros": lambda: L.zeros(2, 3, out=o), "mul": lambda: L.mul(x, 3, out=o)}
    r = calls[name]()
    assert r is o
    return o


@pytest.mark.torch
@pytest.mark.parametrize("name", ["add", "exp", "matmul", "sum", "cat", "zeros", "mul"])
def test_out_argument(pt, name):
    ours, theirs = _both(pt, lambda L, x, y: _out_call(L, x, y, name))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.torch
def test_hot_ops_take_pytorch_keywords_without_an_adapter(pt):
    """add, sub, mul, div and the unary math functions take PyTorch's names and out= in their
    own signatures: a call passes through no keyword adapter (runtime/keywords.py)."""
    for name in ("add", "sub", "mul", "div", "exp", "tanh", "sin", "sqrt", "log"):
        assert not getattr(getattr(fg, name), "torch_keywords", False), name
    ours, theirs = _both(pt, lambda L, x, y: [
        L.div(input=x, other=x + 1, rounding_mode="floor"), L.sub(input=x, other=2, alpha=3),
        L.tanh(input=x), x.add(other=x, alpha=0.5), L.div(x, 3, out=L.empty(0)), L.sqrt(x, out=L.empty(3, 4))])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.torch
def test_out_argument_errors_match_torch(pt):
    for lib in (fg, pt):
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            lib.exp(x, out=lib.empty(3))
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
            lib.exp(lib.ones(3), out=lib.empty(3, dtype=lib.int64))
        o = lib.zeros(2)
        with pytest.warns(UserWarning, match="was resized"):
            lib.add(lib.ones(3), 1, out=o)
        assert o.tolist() == [2.0, 2.0, 2.0]
        o = lib.zeros(3, dtype=lib.float64)  # a wider output dtype is allowed
        lib.add(lib.ones(3), 1, out=o)
        assert o.dtype == lib.float64 and o.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.torch
def test_methods_refuse_out_where_functions_take_it(pt):
    """PyTorch's methods take no out= (its functions do); fusegrad's hot ops take out= in
    their own signatures, so the method has to refuse it itself."""
    for lib in (fg, pt):
        x = lib.ones(3)
        for call in (lambda o: x.add(x, out=o), lambda o: x.mul(2, out=o), lambda o: x.div(x, out=o),
                     lambda o: x.exp(out=o), lambda o: x.sqrt(out=o), lambda o: x.relu(out=o),
                     lambda o: x.sum(out=o), lambda o: x.matmul(x, out=o),
                     lambda o: x.clone().add_(x, out=o), lambda o: x.clone().exp_(out=o)):
            o = lib.zeros(3)
            with pytest.raises(TypeError):
                call(o)
            assert o.tolist() == [0.0, 0.0, 0.0]
        o = lib.zeros(3)
        assert lib.add(x, x, out=o) is o and lib.exp(x, out=lib.zeros(3)).tolist() == pytest.approx([2.718282] * 3)
        assert o.tolist() == [2.0, 2.0, 2.0] and x.add(x, alpha=2).tolist() == [3.0, 3.0, 3.0]


# ------------------------------------------------------------- meshgrid, type, indexing
@pytest.mark.torch
def test_meshgrid_type_and_range_indexing_match_torch(pt):
    for indexing in ("ij", "xy"):
        ours = _both(pt, lambda L, x, y: L.meshgrid(L.arange(2), L.arange(3), L.arange(4), indexing=indexing))
        for a, b in zip(*ours):
            np.testing.assert_array_equal(a, b)
        ours = _both(pt, lambda L, x, y: L.meshgrid([L.arange(3.0), L.arange(2.0)], indexing=indexing))
        for a, b in zip(*ours):
            np.testing.assert_array_equal(a, b)
    with pytest.warns(UserWarning, match="indexing argument"):
        fg.meshgrid(fg.arange(2), fg.arange(2))
    for lib in (fg, pt):
        x = lib.arange(12.0).reshape(3, 4)
        assert x.type() == "torch.FloatTensor" and x.long().type() == "torch.LongTensor"
        assert x.type(lib.int32).dtype == lib.int32 and x.type("torch.DoubleTensor").dtype == lib.float64
        assert x.to(lib.float16).dtype == lib.float16 and x.to("cpu", lib.float64).dtype == lib.float64
        assert x.to(dtype=lib.bfloat16).dtype == lib.bfloat16 and x.to(lib.ones(1, dtype=lib.int64)).dtype == lib.int64
    for key in [range(2), (range(2), range(1, 3)), ([0, 2], [1, 3]), [[0, 1], [1, 2]], (slice(None), range(0, 4, 2)),
                range(0), ([0, 2],)]:
        ours, theirs = _both(pt, lambda L, x, y: x[key])
        np.testing.assert_array_equal(ours, theirs)

    def set_range(L, x, y):
        x[range(1, 3)] = 0.0
        x[[0, 0], [1, 2]] = -1.0
        return x
    ours, theirs = _both(pt, set_range)
    np.testing.assert_array_equal(ours, theirs)


# ------------------------------------------------------------------ devices and switches
@pytest.mark.torch
def test_no_gpu_namespaces_match_torch(pt):
    for lib in (fg, pt):
        assert lib.cuda.is_available() is False and lib.cuda.device_count() == 0
        assert lib.cuda.memory_allocated() == 0 and lib.cuda.max_memory_allocated() == 0
        lib.cuda.manual_seed(0), lib.cuda.manual_seed_all(0), lib.cuda.empty_cache()
        assert lib.accelerator.is_available() is False and lib.accelerator.device_count() == 0
        assert lib.accelerator.current_accelerator() is None
        assert lib.backends.mps.is_available() is False and lib.backends.cudnn.is_available() is False
        assert lib.xpu.is_available() is False and lib.mps.is_available() is False and lib.xpu.device_count() == 0
        lib.backends.cudnn.benchmark = True
        lib.backends.cudnn.deterministic = True
        lib.backends.cudnn.benchmark = False
        lib.backends.cudnn.deterministic = False
        for fn in (lambda: lib.ones(2).cuda(), lambda: lib.ones(2).to("cuda"), lambda: lib.ones(2, device="cuda"),
                   lambda: lib.zeros(2, device=lib.device("cuda")), lambda: lib.nn.Linear(2, 2).cuda(),
                   lambda: lib.nn.Linear(2, 2).to("cuda"), lambda: lib.cuda.current_device(),
                   lambda: lib.cuda.synchronize(), lambda: lib.tensor([1.0], device="cuda:0")):
            with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
                fn()
        assert str(lib.get_default_device()) == "cpu"
        assert lib.ones(2, device="cpu").tolist() == [1.0, 1.0]
    # process-wide switches: set on fusegrad only (torch's would leak into other tests)
    fg.set_default_device("cuda")  # accepted; the factories that use it raise (as torch's CPU build)
    try:
        with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
            fg.zeros(1)
    finally:
        fg.set_default_device("cpu")
    fg.use_deterministic_algorithms(True, warn_only=True)
    assert fg.are_deterministic_algorithms_enabled() and fg.is_deterministic_algorithms_warn_only_enabled()
    fg.use_deterministic_algorithms(False)
    assert not fg.are_deterministic_algorithms_enabled()
    n = fg.get_num_threads()
    fg.set_num_threads(1)
    assert fg.get_num_threads() == 1
    fg.set_num_threads(n)


@pytest.mark.torch
def test_vmap_stack_module_state_and_compile_keywords(pt):
    def ensemble(lib):
        lib.manual_seed(0)
        models = [lib.nn.Linear(3, 2) for _ in range(4)]
        for i, m in enumerate(models):  # equal weights in both libraries
            with lib.no_grad():
                m.weight.copy_(lib.arange(6.0).reshape(2, 3) * (i + 1) / 10)
                m.bias.fill_(float(i))
        params, buffers = lib.func.stack_module_state(models)
        assert params["weight"].shape == (4, 2, 3) and params["weight"].requires_grad and params["weight"].is_leaf
        x = lib.ones(5, 3)
        return lib.vmap(lambda p, b: lib.func.functional_call(models[0], (p, b), (x,)))(params, buffers)
    np.testing.assert_allclose(ensemble(fg).detach().numpy(), ensemble(pt).detach().numpy(), rtol=1e-6)
    f = fg.compile(lambda a: a * 2, mode="reduce-overhead", dynamic=False)
    assert f(fg.ones(2)).tolist() == [2.0, 2.0]
    fg.compile(lambda a: a, options={"trace.enabled": False}, dynamic=None)
    for kw in (dict(mode="bogus"), dict(mode="default", options={})):
        with pytest.raises(RuntimeError) as ours:
            fg.compile(lambda a: a, **kw)
        with pytest.raises(RuntimeError) as theirs:
            pt.compile(lambda a: a, **kw)
        assert str(ours.value).split(",")[0] == str(theirs.value).split(",")[0]


def test_benchmark_timer_measures_honestly():
    import time
    from fusegrad.utils.benchmark import Timer
    m = Timer("sleep(0.002)", globals={"sleep": time.sleep}, label="sleep").timeit(20)
    assert 0.002 <= m.mean < 0.02 and m.number_per_run == 20 and "sleep" in repr(m)
    m = Timer("x * 2", setup="x = torch.ones(100)").blocked_autorange(min_run_time=0.05)
    assert len(m.times) >= 2 and sum(m.raw_times) >= 0.05 and 0 < m.median < 1e-3
    f = fg.compile(lambda a: (a * 2).sum())
    m = Timer("f(x)", globals={"f": f, "x": fg.ones(50)}).timeit(10)  # the warm-up compiles; 10 runs are timed
    assert m.mean < 0.05 and f.cache_info()["compiles"] == 1


@pytest.mark.torch
def test_keyword_table_is_current(pt):
    """runtime/torch_keywords.py is what tools/gen_torch_keywords.py makes from the installed
    PyTorch and today's ops (a new op gets PyTorch's keyword names once it is rerun)."""
    import importlib.util
    import os
    root = os.path.join(os.path.dirname(__file__), "..")
    spec = importlib.util.spec_from_file_location("gen_torch_keywords", os.path.join(root, "tools",
                                                                                    "gen_torch_keywords.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with open(os.path.join(root, "fusegrad", "runtime", "torch_keywords.py")) as f:
        assert f.read() == gen.render(*gen.table())


# ---------------------------------------------------------------------------- printing
def _print_cases():
    rng = np.random.default_rng(7)
    f32 = np.float32
    cases = [np.array(3.5, f32), np.array(7), np.array(True), np.array([1., 2., 3.], f32),
             np.array([1.5, -2.25, 1e-5], f32), np.array([1e10, 1.0], f32), np.array([0.1, 0.2, 1 / 3], f32),
             np.arange(12, dtype=f32).reshape(3, 4), np.array([1, 2, 3]), np.array([True, False]),
             np.array([1., 2.]), np.array([np.nan, np.inf, -np.inf, 1.], f32), np.array([np.nan, 0.5], f32),
             np.array([123456789., 1.], f32), np.array([1e-10, 1e-12], f32), np.zeros((0,), f32),
             np.zeros((2, 0), f32), np.zeros((0,), np.int64), np.array([1, 2], np.int32), np.array([-7], np.int8),
             np.array([1.5, 2.5], np.float16), np.array([-0.0, 0.0], f32), np.array([1e-4, 1e4], f32),
             np.array([100., 200.5], f32), np.arange(2000, dtype=f32), np.arange(1200).reshape(40, 30),
             np.arange(30, dtype=f32) * 1.37, np.array([0.0, 0.0], f32), np.array([1e8, 2e8], f32),
             rng.standard_normal((2, 3, 4)).astype(f32), (rng.standard_normal((3, 5)) * 1e5).astype(f32),
             rng.standard_normal((4, 4, 4, 20)).astype(f32), rng.integers(-1000, 1000, (6, 7))]
    for scale in (1e-6, 1e-3, 1.0, 1e3, 1e6, 1e9):
        cases.append((rng.standard_normal(7) * scale).astype(f32))
        cases.append(np.round(rng.standard_normal(5) * scale).astype(np.float64))
    return cases


def _same_print(pt, fg_str, t):
    """fusegrad's print equals PyTorch's, dtypes named fusegrad.X instead of torch.X (a
    longer name, which can move a suffix to its own line: suffix breaks are compared
    apart)."""
    import re

    def norm(s):
        return re.sub(r",\s+(dtype|grad_fn|requires_grad|size)=", r", \1=", s)
    assert norm(fg_str) == norm(str(t).replace("dtype=torch.", "dtype=fusegrad."))


@pytest.mark.torch
@pytest.mark.parametrize("i", range(len(_print_cases())))
def test_printed_tensors_match_torch(pt, i):
    a = _print_cases()[i]
    _same_print(pt, str(fg.tensor(a)), pt.tensor(a))
    _same_print(pt, repr(fg.tensor(a)), pt.tensor(a))


@pytest.mark.torch
def test_printed_suffixes_and_options_match_torch(pt):
    from fusegrad.runtime import printing
    a = np.array([[0.5, -1.25, 3.0], [2.0, 1e-3, 7.5]], np.float32)
    for lib_x in [(lambda L: L.tensor(a, requires_grad=True)), (lambda L: L.tensor(a, requires_grad=True) * 2),
                  (lambda L: (L.tensor(a, requires_grad=True) * 2).sum()),
                  (lambda L: L.tensor(a.astype(np.float64), requires_grad=True).exp()),
                  (lambda L: L.tensor(np.arange(50, dtype=np.float32), requires_grad=True) + 1),
                  (lambda L: L.nn.Parameter(L.tensor(a)))]:
        _same_print(pt, str(lib_x(fg)), lib_x(pt))
    for opts in (dict(precision=2), dict(sci_mode=True), dict(sci_mode=False), dict(profile="short"),
                 dict(threshold=5, edgeitems=2), dict(linewidth=30), dict(profile="full")):
        with printing.printoptions(**opts):
            ours = [str(fg.tensor(x)) for x in (a, np.arange(20, dtype=np.float32) / 3, np.arange(12))]
        with pt._tensor_str.printoptions(**opts):
            theirs = [str(pt.tensor(x)) for x in (a, np.arange(20, dtype=np.float32) / 3, np.arange(12))]
        assert ours == theirs, opts
    assert printing.get_printoptions()["precision"] == 4
    fg.set_default_dtype(fg.float64)  # the default dtype loses its suffix, float32 gains one
    pt.set_default_dtype(pt.float64)
    try:
        for dt in ("float64", "float32"):
            _same_print(pt, str(fg.tensor([1.5, 2.0], dtype=getattr(fg, dt))),
                        pt.tensor([1.5, 2.0], dtype=getattr(pt, dt)))
    finally:
        pt.set_default_dtype(pt.float32)


# ---------------------------------------------------------------------------- LazyLinear
@pytest.mark.torch
def test_lazy_linear_matches_torch(pt):
    """Built and handed to an optimizer before its input size is known, as in PyTorch;
    the first call materializes the same parameter objects, and the module becomes a
    Linear. From torch's initial weights, training matches torch's."""
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    initial, final = None, []
    for lib in (pt, fg):
        model = lib.nn.Sequential(lib.nn.LazyLinear(4), lib.nn.Tanh(), lib.nn.LazyLinear(2, bias=False))
        assert repr(model[0]) == "LazyLinear(in_features=0, out_features=4, bias=True)"
        params = list(model.parameters())
        opt = lib.optim.SGD(params, lr=0.1)
        model(lib.tensor(x))
        assert type(model[0]).__name__ == "Linear" and tuple(model[0].weight.shape) == (4, 5)
        assert tuple(model[2].weight.shape) == (2, 4) and model[2].bias is None
        assert all(p is q for p, q in zip(params, model.parameters())) and len(params) == 3
        assert type(params[0]).__name__ == "Parameter"
        assert float(params[0].detach().abs().max()) <= 1 / np.sqrt(5)  # Linear's initialization bound
        if initial is None:
            initial = [p.detach().numpy().copy() for p in params]
        else:
            with fg.no_grad():
                for p, q in zip(params, initial):
                    p.copy_(fg.tensor(q))
        for _ in range(5):
            opt.zero_grad()
            (model(lib.tensor(x)) ** 2).mean().backward()
            opt.step()
        final.append(model(lib.tensor(x)).detach().numpy())
    np.testing.assert_allclose(final[1], final[0], rtol=1e-5, atol=1e-6)



def _bf16_with_scalar(L, name, s):
    v = np.random.default_rng(0).standard_normal(64).astype(np.float32) * 4
    r = getattr(L, name)(L.tensor(v).bfloat16(), s)
    assert r.dtype == L.bfloat16 and getattr(L, name)(s, L.tensor(v).bfloat16()).dtype == L.bfloat16
    return r.float().numpy()


@pytest.mark.torch
@pytest.mark.parametrize("name, s", [("add", 0.3), ("sub", 1.7), ("mul", 2.9), ("div", 0.7), ("add", 3)])
def test_bfloat16_with_python_scalars_matches_torch(pt, name, s):
    """PyTorch rounds an add's or sub's scalar to bfloat16 first, and computes a product or a
    quotient with the scalar as it is (2.9, not 2.90625): both bit for bit."""
    np.testing.assert_array_equal(_bf16_with_scalar(fg, name, s), _bf16_with_scalar(pt, name, s))


def test_bfloat16_scalars_leave_other_dtypes_alone():
    """The bfloat16 handling of binary primitives changes nothing for other dtypes: float32
    with a scalar stays float32, and bfloat16 operands on both sides keep bfloat16."""
    from fusegrad.ir.prims import elementwise as E
    v = np.linspace(-2, 2, 8).astype(np.float32)
    assert E.mul.impl(v, 0.3).dtype == np.float32 and E.add.impl(0.3, v).dtype == np.float32
    b = fg.tensor(v).bfloat16()._data
    assert E.sub.impl(0.3, b).dtype == b.dtype and E.mul.impl(b, b).dtype == b.dtype


def test_compiled_module_forward_is_the_compiled_call():
    """``compiled.forward(x)`` on a compiled module runs the compiled code, as torch.compile's
    module does (the name classification tutorial calls ``rnn.forward``); it ran the module
    eagerly."""
    m = fg.nn.Linear(3, 2)
    cm = fg.compile(m, backend="eager")
    x = fg.randn(4, 3)
    np.testing.assert_allclose(cm.forward(x).detach().numpy(), m(x).detach().numpy())
    cm.forward(x)
    info = cm.cache_info()
    assert info["misses"] == 1 and info["hits"] == 1, info


@pytest.mark.torch
def test_finfo_iinfo_memory_formats_sequences_and_always_called_hooks_match_torch(pt):
    """torch.finfo/iinfo (RL examples' eps), memory formats (PyTorch's prune code asks for
    contiguous_format), torch.tensor of a deque (REINFORCE's returns) and forward hooks with
    always_call=True, which also run when forward raises."""
    from collections import deque
    attrs = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution")
    for name in ("float16", "bfloat16", "float32", "float64"):
        ours, theirs = fg.finfo(getattr(fg, name)), pt.finfo(getattr(pt, name))
        assert [getattr(ours, a) for a in attrs] == [getattr(theirs, a) for a in attrs], name
        assert repr(ours) == repr(theirs)
    assert repr(fg.finfo()) == repr(pt.finfo())
    for name in ("uint8", "int8", "int16", "int32", "int64"):
        ours, theirs = fg.iinfo(getattr(fg, name)), pt.iinfo(getattr(pt, name))
        assert (ours.bits, ours.min, ours.max, repr(ours)) == (theirs.bits, theirs.min, theirs.max, repr(theirs))
    for lib in (fg, pt):
        with pytest.raises(TypeError, match="requires a floating point"):
            lib.finfo(lib.int32)
        with pytest.raises(TypeError, match="requires an integer"):
            lib.iinfo(lib.float32)
        x = lib.ones(2, 3)
        assert repr(lib.contiguous_format) == "torch.contiguous_format"
        assert lib.empty_like(x, memory_format=lib.contiguous_format).shape == x.clone(
            memory_format=lib.preserve_format).shape == x.contiguous(memory_format=lib.contiguous_format).shape
        assert lib.tensor(deque([1.0, 0.5])).tolist() == [1.0, 0.5] and lib.tensor(range(3)).dtype == lib.int64
        m, calls = lib.nn.Linear(2, 2), []
        m.register_forward_hook(lambda mod, args, out: calls.append(("always", out)), always_call=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: calls.append("kw"), with_kwargs=True)
        m(lib.ones(1, 2))
        with pytest.raises(RuntimeError):
            m(lib.ones(1, 3))
        assert [c if isinstance(c, str) else c[0] for c in calls] == ["always", "kw", "always"]
        assert calls[-1][1] is None


@pytest.mark.torch
def test_scatter_std_mean_printed_results_and_data_parallel_match_torch(pt):
    """scatter/scatter_ (the transforms tutorial's one-hot ``zeros(10).scatter_(0, tensor(y),
    value=1)``), std_mean, the printed max/min results and load_state_dict's, and
    nn.DataParallel (the saving recipe): values, gradients, printed forms, state-dict keys."""
    def run(lib):
        out = [lib.zeros(10).scatter_(0, lib.tensor(3), value=1)]
        w = lib.ones(3, 4, dtype=lib.float64, requires_grad=True)
        s = lib.arange(6.0, dtype=lib.float64).reshape(3, 2).requires_grad_()
        idx = lib.tensor([[0, 1], [3, 2], [1, 0]])
        y = w.scatter(1, idx, s)
        (y * lib.arange(12.0, dtype=lib.float64).reshape(3, 4)).sum().backward()
        out += [y, w.grad, s.grad, lib.scatter(w.detach(), 1, idx, 7.5), w.detach().scatter(1, idx, s.detach(),
                                                                                          reduce="add")]
        x = lib.tensor([[1.0, 5.0], [3.0, 2.0]])
        out += list(lib.std_mean(x, 0)) + list(lib.std_mean(x, dim=1, keepdim=True, correction=0))
        texts = [repr(x.max(dim=1)).replace("torch.", "T."), repr(lib.min(x, 0)).replace("fusegrad.", "T.")
                 .replace("torch.", "T."),
                 repr(lib.nn.Linear(2, 2).load_state_dict({}, strict=False)),
                 repr(lib.nn.Linear(2, 2).load_state_dict(lib.nn.Linear(2, 2).state_dict()))]
        dp = lib.nn.DataParallel(lib.nn.Linear(2, 3))
        texts += [list(dp.state_dict()), dp.device_ids, tuple(dp(lib.ones(4, 2)).shape)]
        return [o.detach().numpy() for o in out], texts
    (got, gt), (want, wt) = run(fg), run(pt)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    gt[0] = gt[0].replace("fusegrad.", "T.")
    assert gt == wt


@pytest.mark.torch
def test_tensor_unfold_and_hub_tqdm_match_torch(pt):
    """Tensor.unfold's sliding windows (the vision transformer example's patches): values,
    gradients and errors against torch; ``from torch.hub import tqdm`` imports."""
    xa = np.arange(2 * 3 * 10, dtype=np.float64).reshape(2, 3, 10) / 7.0
    for dim, size, step in ((2, 3, 2), (2, 4, 4), (1, 2, 1), (-1, 10, 1), (0, 1, 3)):
        x, tx = fg.tensor(xa, requires_grad=True), pt.tensor(xa, requires_grad=True)
        y, ty = x.unfold(dim, size, step), tx.unfold(dim, size, step)
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        (y.sin() * y).sum().backward()
        (ty.sin() * ty).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    for args, msg in (((2, 11, 1), "maximum size for tensor at dimension 2 is 10 but size is 11"),
                      ((2, 3, 0), "step is 0 but must be > 0")):
        for lib in (fg, pt):
            with pytest.raises(RuntimeError, match=msg):
                lib.ones(2, 3, 10).unfold(*args)
    from fusegrad.hub import tqdm
    with tqdm(total=2, disable=True) as bar:
        bar.update(2)
