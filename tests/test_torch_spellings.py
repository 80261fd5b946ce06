"""Keyword options and checks of PyTorch's API that programs spell out, against PyTorch:
checkpoint's own options (not passed on to the function), torch.compile(disable=, model=),
a custom Function's gradient count, functional_call's repeated keys, misuses refused with its errors."""
import contextlib

import numpy as np
import pytest

import fusegrad as fg
from helpers import errors_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _ck(lib):
    return fg.utils.checkpoint if lib is fg else torch.utils.checkpoint


def _raise_alike(cases) -> None:
    """Each case (a function of the library) raises in fusegrad what it raises in torch: the
    exception's type and message (fusegrad's dtype names printed as torch's)."""
    for case in cases:
        raised = []
        for lib in (fg, torch):
            try:
                case(lib)
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                raised.append((type(e).__name__, str(e).replace("fusegrad.", "torch.")))
        assert len(raised) == 2 and raised[0] == raised[1], raised


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_checkpoint_options_are_its_own():
    log = []

    @contextlib.contextmanager
    def mark(name):
        log.append(name)
        yield

    results = []
    for lib in (torch, fg):
        ck = _ck(lib)
        x = lib.linspace(-1, 1, 4, requires_grad=True)
        del log[:]

        def f(a, **extra):
            return a.exp() * 2 + len(extra)
        y = ck.checkpoint(f, x, use_reentrant=False, determinism_check="none", debug=False, early_stop=True,
                          context_fn=lambda: (mark("forward"), mark("recompute")))
        y.sum().backward()
        results.append((y.tolist(), x.grad.tolist(), list(log)))
        with pytest.raises(ValueError):
            ck.checkpoint(f, x, use_reentrant=False, determinism_check="strict")
        with pytest.raises(ValueError):
            ck.checkpoint(f, x, use_reentrant=True, debug=True)
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] == results[1][2] == ["forward", "recompute"]


def test_compile_disable_and_model_keywords():
    m = fg.nn.Linear(2, 2)
    assert fg.compile(m, disable=True) is m
    f = fg.compile(model=lambda t: t * 2)
    assert f(fg.ones(2)).tolist() == [2.0, 2.0] and f.cache_info()["compiles"] == 1
    assert fg.compile(disable=True)(m) is m


def test_function_backward_with_extra_gradients_and_repeated_functional_call_keys_raise():
    for lib in (torch, fg):
        class Sq(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * x

            @staticmethod
            def backward(ctx, g):
                return g * 2, g

        class SqNone(Sq):
            @staticmethod
            def backward(ctx, g):
                return g * 2, None
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="incorrect number of gradients"):
            Sq.apply(x).sum().backward()
        SqNone.apply(x).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
        func = fg.func if lib is fg else torch.func
        m = lib.nn.Linear(2, 2)
        with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
            func.functional_call(m, ({"weight": lib.ones(2, 2)}, {"weight": lib.zeros(2, 2)}), (lib.ones(2),))


def test_grad_fn_metadata_is_a_dict_kept_by_the_node():
    for lib in (torch, fg):
        a = lib.ones(2, requires_grad=True)
        y = (a * 2).sum()
        y.grad_fn.metadata["step"] = 3
        assert y.grad_fn.metadata == {"step": 3} and y.grad_fn.next_functions[0][0].metadata == {}


def test_detach_in_place_of_a_view_raises_as_torch():
    for lib in (torch, fg):
        a = lib.ones(3, requires_grad=True)
        for view in ((a * 1)[1:], lib.ones(3)[1:]):
            with pytest.raises(RuntimeError, match="Can't detach views in-place"):
                view.detach_()
        b = a * 2
        assert b.detach_() is b and not b.requires_grad and b.grad_fn is None


def test_misuses_raise_torchserrors_of():
    """What PyTorch refuses is refused with its exception type and message: a buffer
    registered over a parameter (and the reverse), masked_fill with a non-bool mask,
    bincount of floats or bools, nanmean of integers."""
    def buffer_over_parameter(lib):
        lib.nn.Linear(2, 2).register_buffer("weight", lib.zeros(2))

    def parameter_over_buffer(lib):
        lib.nn.BatchNorm1d(2).register_parameter("running_mean", lib.nn.Parameter(lib.zeros(2)))

    cases = [buffer_over_parameter, parameter_over_buffer,
             lambda lib: lib.zeros(2, 2).masked_fill(lib.eye(2), 1.0),
             lambda lib: lib.zeros(2, 2).masked_fill_(lib.eye(2).long(), 1.0),
             lambda lib: lib.bincount(lib.tensor([1.0, 2.0])), lambda lib: lib.bincount(lib.tensor([True])),
             lambda lib: lib.bincount(lib.tensor([[1, 2]])), lambda lib: lib.tensor([1, 2]).nanmean()]
    _raise_alike(cases)
    ok = fg.nn.Linear(2, 2)
    ok.register_buffer("weight_scale", fg.ones(1))  # (a new name, and a buffer re-registered, still pass)
    ok.register_buffer("weight_scale", fg.zeros(1))
    assert fg.zeros(2).masked_fill(fg.tensor([True, False]), 1.0).tolist() == [1.0, 0.0]


def test_deprecation_warnings_name_the_callers_line():
    """Warnings of ops behind autocast's and the keyword wrappers point at the user's line
    (as torch's do), whether called as functions or methods."""
    import warnings
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fg.nn.functional.kl_div(fg.zeros(2, 2), fg.ones(2, 2))
        fg.cholesky(fg.eye(2))
        fg.eye(2).cholesky()
        fg.nn.functional.grid_sample(fg.zeros(1, 1, 2, 2), fg.zeros(1, 1, 1, 2))
        with fg.autocast("cpu", dtype=fg.bfloat16):
            fg.nn.functional.mse_loss(fg.ones(2, 1), fg.ones(2, 3))
            fg.nn.functional.softmax(fg.ones(2, 3))
            fg.nn.Softmax(dim=None)(fg.ones(2, 3))
            fg.nn.functional.dropout2d(fg.ones(2, 3, 4))
            fg.nn.functional.upsample(fg.ones(1, 1, 2, 2), scale_factor=2)
            fg.nn.functional.affine_grid(fg.eye(2, 3)[None], [1, 1, 2, 2])
    assert [r.filename for r in rec] == [__file__] * 10, [(r.filename, str(r.message)[:30]) for r in rec]


def test_dynamo_and_inductor_config_as_programs_set_them():
    """gpt-fast/nanoGPT-style start-up: ``torch._dynamo.config.cache_size_limit`` (alias of
    ``recompile_limit``) limits the signatures of functions compiled afterwards; Inductor's
    knobs are accepted; ``torch.compiler.cudagraph_mark_step_begin`` is callable."""
    import importlib
    cfg = importlib.import_module("fusegrad._dynamo.config")
    importlib.import_module("fusegrad._inductor.config").coordinate_descent_tuning = True
    fg._inductor.config.triton.unique_kernel_names = True
    assert cfg.cache_size_limit == torch._dynamo.config.cache_size_limit == cfg.recompile_limit
    with pytest.raises(AttributeError):
        cfg.no_such_setting = 1
    before = cfg.recompile_limit
    cfg.cache_size_limit = 2
    try:
        f = fg.compile(lambda x: x * 2, dynamic=False)
        for n in range(1, 5):
            f(fg.ones(n, 2, n))
    finally:
        cfg.recompile_limit = before
    info = f.cache_info()
    assert info["compiles"] == 2 and info["fallbacks"] == 2, info
    fg.compiler.cudagraph_mark_step_begin()


def test_inference_tensors_as_torch():
    """Tensors made inside inference_mode are inference tensors (views of them too, not views
    of normal tensors nor results computed outside); outside it they refuse in-place updates
    (through views, setitem, copy_, even under no_grad), requires_grad_() and being saved for a
    backward (linear, mul, matmul, softmax, mse_loss; not add or cat), as torch's."""
    def program(lib):
        out = []
        lin = lib.nn.Linear(2, 2)
        with lib.inference_mode():
            y = lin(lib.ones(1, 2))
            z = lib.zeros(3)
            z.add_(1)
            out.append([y.is_inference(), z.is_inference(), lin.weight.view(4).is_inference(),
                        lin.weight.is_inference()])
        out.append([y.is_inference(), y.detach().is_inference(), y[0].is_inference(), y.clone().is_inference(),
                    (y * 2).is_inference(), lib.is_inference(y)])
        for f in (lambda: y.add_(1), lambda: y.__setitem__(0, 1.0), lambda: y.requires_grad_(),
                  lambda: z.copy_(lib.ones(3)), lambda: y[0].add_(1), lambda: z.zero_()):
            try:
                f()
                out.append(None)
            except RuntimeError as e:
                out.append(str(e))
        with lib.no_grad():
            with pytest.raises(RuntimeError):
                y.mul_(2)
        w = lib.ones(2, requires_grad=True)
        F = lib.nn.functional
        for f in (lambda: lin(y), lambda: y + w, lambda: y * w, lambda: y @ lib.ones(2, 2, requires_grad=True),
                  lambda: lib.softmax(y * w, -1), lambda: F.mse_loss(w[None], y), lambda: lib.cat([y, w[None]]),
                  lambda: F.cross_entropy(w[None] * y, lib.tensor([1]))):
            try:
                out.append(f().requires_grad)
            except RuntimeError as e:  # (saved for the backward)
                out.append(str(e))
        before = y.tolist()[0]
        with lib.inference_mode():
            y.add_(1)
        out.append([b + 1 for b in before] == y.tolist()[0])
        return out
    assert program(fg) == program(torch)


def test_index_softmax_and_repeat_misuses_raise_torchserrors_of():
    """index_copy with a non-int64 index, index_fill with an int32 one, (log_)softmax of
    integers without a dtype, repeat_interleave with a wrong number of counts: torch's
    exception types and messages (they computed, or leaked NumPy's ValueError)."""
    cases = [lambda L: L.zeros(3, 2).index_copy_(0, L.tensor([0, 1], dtype=L.int32), L.ones(2, 2)),
             lambda L: L.zeros(3, 2).index_copy(0, L.tensor([0.0, 1.0]), L.ones(2, 2)),
             lambda L: L.zeros(3, 2).index_fill_(0, L.tensor([0, 1], dtype=L.int32), 1.0),
             lambda L: L.softmax(L.tensor([1, 2]), 0), lambda L: L.softmax(L.tensor([[1, 2]]), 0),
             lambda L: L.nn.functional.log_softmax(L.tensor([[True]]), 1),
             lambda L: L.repeat_interleave(L.ones(3), L.tensor([1, 2])),
             lambda L: L.repeat_interleave(L.ones(3, 2), L.tensor([1, 2, 3]), dim=1),
             lambda L: L.repeat_interleave(L.ones(3), L.tensor([[1, 1, 1]]))]
    _raise_alike(cases)
    assert fg.softmax(fg.tensor([1, 2]), 0, dtype=fg.float32).dtype == fg.float32
    assert fg.repeat_interleave(fg.ones(3), fg.tensor([2])).shape == (6,)
    assert fg.zeros(3, 2).index_add_(0, fg.tensor([0, 1], dtype=fg.int32), fg.ones(2, 2)).sum().item() == 4


def test_unbatched_nll_targets_and_roll_argument_forms_as_torch():
    """nll_loss/cross_entropy of a (C,) input take a 0-d or a (1,) target (the latter
    raised); roll takes shifts and dims as ints, tuples or lists in any mix (some forms
    raised TypeError); mismatched lengths raise torch's errors."""
    logits = np.array([0.5, 1.0, -0.3])
    cases = [lambda L: L.nn.functional.nll_loss(L.log_softmax(L.tensor(logits), 0), L.tensor([2])),
             lambda L: L.nn.functional.cross_entropy(L.tensor(logits), L.tensor([2]), reduction="none"),
             lambda L: L.nn.functional.nll_loss(L.tensor(logits), L.tensor([0, 1, 2])),
             lambda L: L.nn.functional.nll_loss(L.tensor(logits), L.tensor([[1]]))]
    x = np.arange(24.0).reshape(2, 3, 4)
    cases += [lambda L, a=a: L.roll(L.tensor(x), *a) for a in
              ((1, [2]), ((1,), 1), ((1, 1), (0, 1)), ([1], [2]), (1, (1, 2)), ((1, 2), (1,)), (2,))]
    for case in cases:
        got = []
        for lib in (fg, torch):
            try:
                r = case(lib)
                got.append((tuple(r.shape), np.round(r.numpy(), 6).tolist()))
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                got.append((type(e).__name__, str(e)))
        assert got[0] == got[1], got


def test_dtype_misuses_raise_torchserrors_of():
    """An int32 class target, a binary cross entropy whose target dtype differs, Adam's
    betas given as ints, ``~`` of a float tensor, an RNN fed another dtype than its weights,
    antialiased nearest resizing and repeated flip dims: torch's exception and message (they
    computed, or raised another type)."""
    cases = [lambda L: L.nn.functional.cross_entropy(L.zeros(2, 3), L.tensor([0, 1], dtype=L.int32)),
             lambda L: L.nn.functional.nll_loss(L.zeros(2, 3), L.tensor([0, 1], dtype=L.int32)),
             lambda L: L.nn.functional.binary_cross_entropy(L.full((2,), 0.5, dtype=L.float64), L.ones(2)),
             lambda L: L.optim.Adam([L.zeros(1, requires_grad=True)], betas=(0, 0.999)),
             lambda L: ~L.ones(2),
             lambda L: L.nn.GRU(2, 3).double()(L.zeros(4, 1, 2)),
             lambda L: L.nn.functional.interpolate(L.zeros(1, 1, 4, 4), scale_factor=2, antialias=True),
             lambda L: L.flip(L.zeros(2, 3), (0, -2)),
             lambda L: L.linalg.solve_triangular(L.eye(2).bfloat16(), L.ones(2, 1).bfloat16(), upper=True)]
    _raise_alike(cases)
    assert fg.nn.functional.nll_loss(fg.zeros(2, 3), fg.tensor([0, 1], dtype=fg.uint8)).item() == 0.0
    assert (~fg.tensor([1, 2])).tolist() == [-2, -3]


def test_dynamo_markers_programs_use():
    """torch._dynamo.graph_break() (with its message) breaks a compiled function there and
    does nothing eagerly; allow_in_graph and assume_constant_result return the function;
    values as eager's."""
    def f(x):
        y = x.sin() * 2
        fg._dynamo.graph_break("log here")
        return y.cos() + 1
    cf = fg.compile(f)
    x = fg.linspace(-1, 1, 5)
    for _ in range(3):
        np.testing.assert_allclose(cf(x).numpy(), f(x).numpy(), rtol=1e-6)
    (reason,) = cf.cache_info()["graph_breaks"]
    assert reason.startswith("torch._dynamo.graph_break('log here') at ") and __file__ in reason
    g = fg.compiler.allow_in_graph(lambda t: t * 3)
    np.testing.assert_allclose(g(x).numpy(), (x * 3).numpy())
    assert fg.compiler.assume_constant_result(f) is f and fg._dynamo.allow_in_graph(f) is f
    np.testing.assert_allclose(fg.compile(lambda x: g(x) + 1)(x).numpy(), (x * 3 + 1).numpy())


def test_a_compiled_backward_refuses_to_save_an_inference_tensor():
    """Samples made under inference_mode fed to a compiled step whose parameters require grad
    (a GAN's discriminator): torch's RuntimeError, as eagerly (it trained on them)."""
    def case(lib):
        lin = lib.nn.Linear(3, 2)
        with lib.inference_mode():
            x = lib.ones(4, 3)
        step = lib.compile(lambda t: lin(t).sum()) if lib is fg else (lambda t: lin(t).sum())
        step(x).backward()
    _raise_alike([case])


def test_half_precision_linear_algebra_raises_torchserrors_of():
    """bfloat16/float16 matrices outside autocast: the LU-, SVD-, QR- and Cholesky-based
    functions raise NotImplementedError naming torch's kernel, inv/slogdet/logdet torch's
    RuntimeError."""
    fns = ["linalg.det", "linalg.lu_factor", "linalg.inv", "linalg.slogdet", "linalg.svd", "linalg.qr",
           "linalg.cholesky", "det", "logdet", "linalg.lu", "linalg.eigh"]

    def call(name, half):
        def case(lib):
            mod = lib.linalg if name.startswith("linalg.") else lib
            getattr(mod, name.split(".")[-1])(lib.eye(3).to(getattr(lib, half)))
        return case
    _raise_alike([call(name, half) for name in fns for half in ("bfloat16", "float16")])


def test_dynamo_errors_explain_and_compile_stances():
    """``torch._dynamo.exc.Unsupported`` is what fullgraph=True raises (a RuntimeError);
    ``_dynamo.explain`` reports the breaks; ``compiler.set_stance``: force_eager runs the
    Python at every call (also as a context manager and decorator), fail_on_recompile raises
    on a new signature, eager_on_recompile runs it eagerly, an unknown stance is refused."""
    def f(x):
        print("logged")
        return x.sin() + 1
    with pytest.raises(fg._dynamo.exc.Unsupported, match="print"):
        fg.compile(f, fullgraph=True)(fg.ones(2))
    assert issubclass(fg._dynamo.exc.Unsupported, RuntimeError)
    report = fg._dynamo.explain(f)(fg.ones(2))
    assert report.graph_break_count == 1 and "print() at" in report.break_reasons[0].reason
    calls = []

    def g(x):
        calls.append(1)
        return x * 2
    cg = fg.compile(g)
    with fg.compiler.set_stance("force_eager"):
        for _ in range(3):
            cg(fg.ones(2))
    assert len(calls) == 3 and cg.cache_info()["misses"] == 0
    cg(fg.ones(2))
    fg.compiler.set_stance("fail_on_recompile")
    try:
        with pytest.raises(RuntimeError, match="fail_on_recompile"):
            cg(fg.ones(3, 3))
        assert cg(fg.ones(2)).tolist() == [2.0, 2.0]
        fg.compiler.set_stance("eager_on_recompile")
        n = len(calls)
        assert cg(fg.ones(3, 3)).shape == (3, 3) and len(calls) == n + 1
    finally:
        fg.compiler.set_stance("default")
    eager_run = fg.compiler.set_stance("force_eager")(lambda: cg(fg.ones(4)))
    before = len(calls)
    eager_run()
    assert len(calls) == before + 1 and fg.runtime.stance.STANCE.name == "default"
    with pytest.raises(RuntimeError, match="invalid torch.compile stance"):
        fg.compiler.set_stance("bogus")


def test_dynamo_recompile_settings_and_markers_as_torchs():
    """``config.error_on_recompile`` raises RecompileError at a second signature,
    ``fail_on_recompile_limit_hit`` FailOnRecompileLimitHit (not a RuntimeError) at the limit,
    the fail_on_recompile stance a plain RuntimeError; maybe_mark_dynamic and the other markers
    HF-style code calls exist and keep the values."""
    torch = pytest.importorskip("torch")
    import torch._dynamo  # noqa: F401

    def program(lib):
        out = []
        f = lib.compile(lambda t: t.sin() * 2, dynamic=False)
        f(lib.ones(2))
        lib._dynamo.config.error_on_recompile = True
        try:
            f(lib.ones(3))
        except Exception as e:  # noqa: BLE001 - its kind is the result
            out.append(type(e).__name__)
        finally:
            lib._dynamo.config.error_on_recompile = False
        g = lib.compile(lambda t: t.cos() + 1, dynamic=False)
        g(lib.ones(2))
        try:
            with lib.compiler.set_stance("fail_on_recompile"):
                g(lib.ones(5))
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        old = lib._dynamo.config.recompile_limit
        lib._dynamo.config.recompile_limit, lib._dynamo.config.fail_on_recompile_limit_hit = 1, True
        try:
            h = lib.compile(lambda t: t.exp(), dynamic=False)
            h(lib.ones(1))
            h(lib.ones(2))
        except Exception as e:  # noqa: BLE001
            out.append((type(e).__name__, isinstance(e, RuntimeError)))
        finally:
            lib._dynamo.config.recompile_limit, lib._dynamo.config.fail_on_recompile_limit_hit = old, False
        lib._dynamo.config.recompile_limit = 2
        try:  # (fullgraph=True fails at the limit too: it raised a RuntimeError)
            k = lib.compile(lambda t, s: t.sum() + len(s), fullgraph=True)
            for n in range(3):
                k(lib.ones(1), "r" * n)
        except Exception as e:  # noqa: BLE001
            out.append((type(e).__name__, isinstance(e, RuntimeError), "fullgraph=True" in str(e)))
        finally:
            lib._dynamo.config.recompile_limit = old
        x = lib.ones(3, 4)
        lib._dynamo.maybe_mark_dynamic(x, 0)
        lib._dynamo.mark_static_address(x)
        triple = lib._dynamo.forbid_in_graph(lambda u: u * 3)
        try:
            lib.compile(lambda t: triple(t) + 1)(x)
        except AssertionError as e:
            out.append(type(e).__name__)
        out.append(triple(x).sum().item())
        out.append(lib._dynamo.nonstrict_trace(abs)(-2) + lib._dynamo.dont_skip_tracing(abs)(-1))
        out.append(lib.compiler.substitute_in_graph(abs, skip_signature_check=True)(lambda v: v)(5))
        return out
    assert program(fg) == program(torch)


def test_loader_settings_fixed_and_non_leaf_deepcopy_refused_as_torch():
    """A DataLoader's batch_size, drop_last and sampler cannot be set after construction, and
    deepcopy of a non-leaf tensor (or a module holding one: a pruned layer) raises, as in torch."""
    import copy
    import importlib

    def program(lib):
        data, prune = importlib.import_module(lib.__name__ + ".utils.data"), \
            importlib.import_module(lib.__name__ + ".nn.utils.prune")
        dl = data.DataLoader(data.TensorDataset(lib.arange(6.0)), batch_size=2)
        cases = [lambda attr=attr, v=v: setattr(dl, attr, v) for attr, v in (("batch_size", 4), ("drop_last", True),
                                                                          ("sampler", [0, 1]))]
        dl.num_workers = 0  # (others may change)
        b = lib.ones(2, requires_grad=True) * 2
        cases += [lambda: copy.deepcopy(b), lambda: copy.deepcopy(prune.l1_unstructured(lib.nn.Linear(3, 2),
                                                                                         "weight", 0.5))]
        return errors_of(cases) + [len(list(dl)), copy.deepcopy(lib.ones(2, requires_grad=True)).requires_grad]
    assert program(fg) == program(torch)


def test_deprecated_autocast_queries_and_checked_arguments_as_torch():
    """``is_autocast_cpu_enabled``/``get_autocast_cpu_dtype`` (deprecated, warning as torch's);
    MultiheadAttention's key_padding_mask of the wrong length (AssertionError) and a per-channel
    fake quantization's int64 zero point (RuntimeError) refused as torch's."""
    import warnings

    def program(lib):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            out = [lib.is_autocast_cpu_enabled()]
            with lib.autocast("cpu", dtype=lib.bfloat16):
                out += [lib.is_autocast_cpu_enabled(), str(lib.get_autocast_cpu_dtype()).split(".")[-1]]
        out.append(sorted({str(r.message).split(" (Triggered")[0] for r in rec}))
        m, x = lib.nn.MultiheadAttention(4, 2, batch_first=True), lib.ones(2, 3, 4)
        return out + errors_of([lambda: m(x, x, x, key_padding_mask=lib.zeros(2, 5, dtype=lib.bool)),
                              lambda: lib.fake_quantize_per_channel_affine(lib.ones(2, 2), lib.ones(2),
                                                                           lib.zeros(2, dtype=lib.long), 0, 0, 255)])
    assert program(fg) == program(torch)


def test_context_values_formats_fill_overflow_and_batched_grad_dtypes_as_torch():
    """``with no_grad() as x`` gives None and ``with autocast(...) as a`` the autocast; a
    format spec on a tensor that is not 0-d raises TypeError; a half-precision fill that
    overflows raises; is_grads_batched gradients take the output's dtype."""
    torch = pytest.importorskip("torch")

    def program(lib):
        out = []
        for cm in (lib.no_grad(), lib.enable_grad(), lib.set_grad_enabled(True), lib.inference_mode()):
            with cm as v:
                out.append(v is None)
        with lib.autocast("cpu") as a:
            out.append(type(a).__name__)
        out.append(f"{lib.tensor(1.5):.2f}")
        for f in (lambda: f"{lib.tensor([1.0, 2.0]):.2f}", lambda: f"{lib.tensor([1.5]):.1f}",
                  lambda: lib.zeros(2, dtype=lib.half).fill_(1e6),
                  lambda: lib.zeros(2, dtype=lib.half).masked_fill(lib.tensor([True, False]), -1e9),
                  lambda: lib.zeros(2, dtype=lib.bfloat16).masked_fill(lib.tensor([True, False]), 1e39)):
            try:
                f()
                out.append("no error")
            except (TypeError, RuntimeError) as e:
                out.append(f"{type(e).__name__}: {e}")
        out.append(str(lib.zeros(2, dtype=lib.half).masked_fill(lib.tensor([True, False]), float("-inf"))))
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        g, = lib.autograd.grad(x * 2, x, lib.eye(2, dtype=lib.float64), is_grads_batched=True)
        out.append(str(g.dtype))
        with lib._dynamo.config.patch(recompile_limit=3):
            out.append(lib._dynamo.config.recompile_limit)
        out.append(lib._dynamo.config.recompile_limit)
        return [str(v).replace("fusegrad.", "torch.") for v in out]
    assert program(fg) == program(torch)


def test_recompile_checks_fire_where_a_new_shape_would_go_symbolic():
    """A second shape, which compiles a symbolic graph: the fail_on_recompile stance raises
    (plain RuntimeError), error_on_recompile raises RecompileError, eager_on_recompile runs it
    eagerly; a third size after a symbolic graph exists is no recompile."""
    f = fg.compile(lambda t: t.sin() * 2)
    f(fg.ones(2, 4))
    fg.compiler.set_stance("fail_on_recompile")
    try:
        with pytest.raises(RuntimeError, match="fail_on_recompile") as e:
            f(fg.ones(3, 4))
        assert type(e.value) is RuntimeError
        fg.compiler.set_stance("eager_on_recompile")
        np.testing.assert_allclose(f(fg.ones(3, 4)).numpy(), np.sin(np.ones((3, 4))) * 2, rtol=1e-6)
    finally:
        fg.compiler.set_stance("default")
    with fg._dynamo.config.patch(error_on_recompile=True):
        with pytest.raises(fg._dynamo.exc.RecompileError):
            f(fg.ones(5, 4))
    f(fg.ones(5, 4))  # (now symbolic)
    with fg._dynamo.config.patch(error_on_recompile=True):
        np.testing.assert_allclose(f(fg.ones(6, 4)).numpy(), np.sin(np.ones((6, 4))) * 2, rtol=1e-6)
