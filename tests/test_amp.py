"""Mixed precision: autocast's per-op dtypes and GradScaler's scale sequence, against PyTorch."""
import warnings

import numpy as np
import pytest

import fusegrad as fg


def _inputs(lib):
    rng = np.random.default_rng(0)
    f = lambda *s: lib.tensor(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    return dict(x=f(4, 3), w=f(3, 3), v=f(3), b=f(3), bx=f(2, 4, 3), bw=f(2, 3, 5),
                y=lib.tensor([0, 2, 1, 1]), p=lib.tensor(rng.uniform(0.1, 0.9, (4, 3)).astype(np.float32)),
                img=f(2, 3, 6, 6), k2=f(4, 3, 3, 3), seq=f(2, 3, 7), k1=f(4, 3, 3), q=f(2, 2, 3, 4))


# each op gets the library and the inputs; `low` is the output of a low-precision matmul,
# so that float32-policy and pass-through ops see a low-precision operand
OPS = {
    "matmul": lambda L, F, d: d["x"] @ d["w"],
    "mm": lambda L, F, d: L.mm(d["x"], d["w"]),
    "bmm": lambda L, F, d: L.bmm(d["bx"], d["bw"]),
    "addmm": lambda L, F, d: L.addmm(d["b"], d["x"], d["w"]),
    "matmul_vec": lambda L, F, d: L.matmul(d["x"], d["v"]),
    "mv": lambda L, F, d: L.mv(d["x"], d["v"]),
    "dot": lambda L, F, d: L.dot(d["v"], d["v"]),
    "einsum": lambda L, F, d: L.einsum("ij,jk->ik", d["x"], d["w"]),
    "linear": lambda L, F, d: F.linear(d["x"], d["w"], d["b"]),
    "conv1d": lambda L, F, d: F.conv1d(d["seq"], d["k1"], padding=1),
    "conv2d": lambda L, F, d: F.conv2d(d["img"], d["k2"], d["k2"][:, 0, 0, 0], stride=2),
    "conv_transpose1d": lambda L, F, d: F.conv_transpose1d(d["seq"], d["k1"].transpose(0, 1)),
    "conv_transpose2d": lambda L, F, d: F.conv_transpose2d(d["img"], d["k2"].transpose(0, 1)),
    "conv2d_module": lambda L, F, d: L.nn.Conv2d(3, 4, 3)(d["img"]),
    "sdpa": lambda L, F, d: F.scaled_dot_product_attention(d["q"], d["q"], d["q"], is_causal=True),
    "linear_module_f64": lambda L, F, d: F.linear(d["x"].double(), d["w"].double()),
    "int_mm": lambda L, F, d: L.mm(d["y"][None], d["y"][:, None]),
    "softmax": lambda L, F, d: L.softmax(d["low"], 1),
    "log_softmax": lambda L, F, d: F.log_softmax(d["low"], 1),
    "sum": lambda L, F, d: d["low"].sum(),
    "mean": lambda L, F, d: d["low"].mean(1),
    "prod": lambda L, F, d: d["low"].prod(),
    "trace": lambda L, F, d: d["low"].trace() if d["low"].shape[0] == d["low"].shape[1] else L.trace(d["low"][:3]),
    "exp": lambda L, F, d: d["low"].exp(),
    "relu": lambda L, F, d: F.relu(d["low"]),
    "scalar_mul": lambda L, F, d: d["low"] * 0.5,
    "add_f32": lambda L, F, d: d["low"] + d["x"],
    "cat": lambda L, F, d: L.cat([d["low"], d["x"]]),
    "layer_norm": lambda L, F, d: F.layer_norm(d["low"], (3,)),
    "mse_loss": lambda L, F, d: F.mse_loss(d["low"], d["x"]),
    "mse_loss_both_low": lambda L, F, d: F.mse_loss(d["low"], d["low"].flip(0), reduction="none"),
    "l1_loss_both_low": lambda L, F, d: F.l1_loss(d["low"], d["low"].flip(0)),
    "l1_loss": lambda L, F, d: F.l1_loss(d["low"], d["x"]),
    "smooth_l1_loss": lambda L, F, d: F.smooth_l1_loss(d["low"], d["x"]),
    "huber_loss": lambda L, F, d: F.huber_loss(d["low"], d["x"]),
    "cross_entropy": lambda L, F, d: F.cross_entropy(d["low"], d["y"]),
    "nll_loss": lambda L, F, d: F.nll_loss(F.log_softmax(d["low"], 1), d["y"]),
    "bce": lambda L, F, d: F.binary_cross_entropy(d["low"].sigmoid(), d["p"]),
    "bce_logits": lambda L, F, d: F.binary_cross_entropy_with_logits(d["low"], d["p"]),
    # PyTorch's CPU fp32 list beyond the common losses: distances, ranking losses, solvers, 3-d pooling,
    # the sampler, quantiles and the copying pads (interpolate is on no list: it keeps a low input's dtype)
    "cdist": lambda L, F, d: L.cdist(d["low"], d["low"]),
    "cosine_embedding_loss": lambda L, F, d: F.cosine_embedding_loss(d["low"], d["x"], d["pm"]),
    "margin_ranking_loss": lambda L, F, d: F.margin_ranking_loss(d["low"][:, 0], d["low"][:, 1], d["pm"]),
    "triplet_margin_loss": lambda L, F, d: F.triplet_margin_loss(d["low"], d["x"], d["low"].flip(0)),
    "kl_div": lambda L, F, d: F.kl_div(d["low"], d["p"], reduction="batchmean"),
    "soft_margin_loss": lambda L, F, d: F.soft_margin_loss(d["low"][:, 0], d["pm"]),
    "hinge_embedding_loss": lambda L, F, d: F.hinge_embedding_loss(d["low"][:, 0], d["pm"]),
    "poisson_nll_loss": lambda L, F, d: F.poisson_nll_loss(d["low"], d["p"]),
    "multi_margin_loss": lambda L, F, d: F.multi_margin_loss(d["low"], d["y"]),
    "multilabel_margin_loss": lambda L, F, d: F.multilabel_margin_loss(d["low"], L.tensor([[0, 2, -1]] * 4)),
    "grid_sample": lambda L, F, d: F.grid_sample(d["lowimg"], d["lowimg"][:, :2].permute(0, 2, 3, 1).tanh(),
                                                 align_corners=False),
    "quantile": lambda L, F, d: L.quantile(d["low"], 0.3),
    "nanquantile": lambda L, F, d: L.nanquantile(d["low"], 0.3, dim=1),
    "inverse": lambda L, F, d: L.inverse(d["sq"]),
    "linalg_inv": lambda L, F, d: L.linalg.inv(d["sq"]),
    "pinverse": lambda L, F, d: L.pinverse(d["sq"]),
    "cholesky": lambda L, F, d: L.linalg.cholesky(d["sq"]),
    "linalg_solve": lambda L, F, d: L.linalg.solve(d["sq"], d["low"][:3]),
    "linalg_qr": lambda L, F, d: L.linalg.qr(d["sq"])[1],
    "linalg_svd": lambda L, F, d: L.linalg.svd(d["sq"])[1],
    "linalg_eigh": lambda L, F, d: L.linalg.eigh(d["sq"])[0],
    "linalg_lstsq": lambda L, F, d: L.linalg.lstsq(d["sq"], d["low"][:3]).solution,
    "cholesky_solve": lambda L, F, d: L.cholesky_solve(d["low"][:3], L.linalg.cholesky(d["sq"])),
    "max_pool3d": lambda L, F, d: F.max_pool3d(d["lowimg"][:, None], 2),
    "avg_pool3d": lambda L, F, d: F.avg_pool3d(d["lowimg"][:, None], 2),
    "adaptive_max_pool3d": lambda L, F, d: F.adaptive_max_pool3d(d["lowimg"][:, None], 2),
    "pad_reflect": lambda L, F, d: F.pad(d["lowimg"], (1, 1, 1, 1), mode="reflect"),
    "pad_replicate": lambda L, F, d: F.pad(d["lowimg"], (1, 1, 1, 1), mode="replicate"),
    "pad_circular": lambda L, F, d: F.pad(d["lowimg"], (1, 1, 1, 1), mode="circular"),
    "interpolate_bilinear": lambda L, F, d: F.interpolate(d["lowimg"], scale_factor=2, mode="bilinear"),
    "interpolate_nearest": lambda L, F, d: F.interpolate(d["lowimg"], scale_factor=2),
    "svdvals": lambda L, F, d: L.linalg.svdvals(d["sq"]),
    "svd": lambda L, F, d: L.svd(d["sq"]).S,
    "cholesky_ex": lambda L, F, d: L.linalg.cholesky_ex(d["sq"]).L,
    "inv_ex": lambda L, F, d: L.linalg.inv_ex(d["sq"]).inverse,
    "triangular_solve": lambda L, F, d: L.triangular_solve(d["low"][:3], d["sq"].triu()).solution,
    "max_unpool2d": lambda L, F, d: F.max_unpool2d(*F.max_pool2d(d["lowimg"], 2, return_indices=True), 2),
    "fractional_max_pool2d": lambda L, F, d: F.fractional_max_pool2d(d["lowimg"], 2, output_size=3),
}


def _dtypes(lib, F, dtype, enabled=True):
    d = _inputs(lib)
    out = {}
    with lib.autocast("cpu", dtype=dtype, enabled=enabled):
        d["low"] = d["x"] @ d["w"]
        d["sq"] = d["w"] @ d["w"].mT
        d["lowimg"] = F.conv2d(d["img"], d["k2"], padding=1)
        d["pm"] = lib.tensor([1.0, -1.0, 1.0, 1.0])
        for name, op in OPS.items():
            out[name] = str(op(lib, F, d).dtype).split(".")[-1]
    return out


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("enabled", [True, False])
def test_autocast_dtype_per_op_matches_torch(pt, dtype, enabled):
    import fusegrad.nn.functional as F
    import torch.nn.functional as TF
    got = _dtypes(fg, F, getattr(fg, dtype), enabled)
    want = _dtypes(pt, TF, getattr(pt, dtype), enabled)
    assert got == want


@pytest.mark.torch
def test_autocast_nesting_state_and_values_match_torch(pt):
    for L in (fg, pt):
        x, w = L.ones(2, 3), L.ones(3, 2)
        with L.autocast("cpu"):
            assert str((x @ w).dtype).endswith("bfloat16")
            assert L.is_autocast_enabled("cpu") and not L.is_autocast_enabled()
            with L.autocast("cpu", dtype=L.float16):
                assert str((x @ w).dtype).endswith("float16")
                with L.autocast("cpu", enabled=False):
                    assert str((x @ w).dtype).endswith("float32")
                    assert not L.is_autocast_enabled("cpu")
                assert str(L.get_autocast_dtype("cpu")).endswith("float16")
            assert str((x @ w).dtype).endswith("bfloat16")
        assert str((x @ w).dtype).endswith("float32") and not L.is_autocast_enabled("cpu")
        assert L.amp.autocast is L.autocast

    @fg.autocast("cpu")
    def f(a, b):
        return a @ b
    assert f(fg.ones(2, 3), fg.ones(3, 2)).dtype == fg.bfloat16

    # values and gradients of a low-precision forward: float32 leaves get float32 grads
    rng = np.random.default_rng(1)
    xa, wa = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    res = []
    for L in (fg, pt):
        x, w = L.tensor(xa), L.tensor(wa, requires_grad=True)
        with L.autocast("cpu", dtype=L.bfloat16):
            h = (x @ w).relu()
            loss = (h * h).sum()
        loss.float().backward()
        assert str(w.grad.dtype).endswith("float32")
        res.append((h.float().detach().numpy(), w.grad.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=2e-2, atol=5e-2)


def test_autocast_cuda_and_bad_dtype_disable_with_a_warning():
    x = fg.ones(2, 2)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = fg.autocast("cuda")
    with ctx:
        assert (x @ x).dtype == fg.float32
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        ctx = fg.autocast("cpu", dtype=fg.float64)
    with ctx:
        assert (x @ x).dtype == fg.float32


def test_autocast_inside_compile_is_part_of_the_signature():
    @fg.compile
    def f(a, b):
        return (a @ b).sum(1)

    a, b = fg.randn(4, 3), fg.randn(3, 2)
    assert f(a, b).dtype == fg.float32
    with fg.autocast("cpu"):
        out = f(a, b)
        assert out.dtype == fg.bfloat16
        # computed in float32 between the casts and the output (as torch.compile): eager rounds each op
        np.testing.assert_allclose(out.float().numpy(), (a.bfloat16() @ b.bfloat16()).sum(1).float().numpy(),
                                   rtol=2e-2, atol=2e-2)
        f(a, b)
    assert f(a, b).dtype == fg.float32
    assert f.cache_info()["compiles"] == 2, "each autocast state traces once"

    @fg.compile
    def g(a, b):
        with fg.autocast("cpu", dtype=fg.float16):
            return a @ b
    assert g(a, b).dtype == fg.float16 and g(a, b).dtype == fg.float16
    assert not f.cache_info()["notes"] and not g.cache_info()["notes"], "compiled, not run eagerly"


# ---------------------------------------------------------------- GradScaler
def _scaler_run(L, scaler, inf_steps, steps=14):
    w = L.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = L.optim.SGD([w], lr=0.1)
    x = L.tensor([0.5, 1.5, -1.0])
    scales, skipped, trackers = [], [], []
    for i in range(steps):
        opt.zero_grad()
        loss = (w * x).sum() ** 2
        scaler.scale(loss).backward()
        if i in inf_steps:
            with L.no_grad():
                w.grad[1] = float("inf") if i % 2 else float("nan")
        before = w.detach().clone()
        if i % 3 == 0:  # unscale_ explicitly (as for gradient clipping) on some steps
            scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        skipped.append(bool((w.detach() == before).all()))
        scales.append(scaler.get_scale())
        trackers.append(scaler.state_dict()["_growth_tracker"])
    return scales, skipped, trackers, w.detach().numpy(), scaler.state_dict()


@pytest.mark.torch
def test_grad_scaler_scale_sequence_and_skipped_steps_match_torch(pt):
    kw = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.25, growth_interval=3)
    inf_steps = {2, 3, 9}
    got = _scaler_run(fg, fg.amp.GradScaler("cpu", **kw), inf_steps)
    want = _scaler_run(pt, pt.amp.GradScaler("cpu", **kw), inf_steps)
    assert got[0] == want[0]  # scales
    assert got[1] == want[1] and got[1][2] and got[1][9] and not got[1][0]  # skipped steps
    assert got[2] == want[2]
    np.testing.assert_allclose(got[3], want[3], rtol=1e-6)
    assert got[4] == want[4]


@pytest.mark.torch
def test_grad_scaler_state_dict_round_trip_and_errors(pt):
    s = fg.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    w = fg.tensor([1.0], requires_grad=True)
    opt = fg.optim.SGD([w], lr=0.1)
    s.scale(w.sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    s.update()
    t = fg.amp.GradScaler("cpu")
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict() == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                                "growth_interval": 2, "_growth_tracker": 1}
    ref = pt.amp.GradScaler("cpu")
    ref.load_state_dict(s.state_dict())
    assert ref.state_dict() == s.state_dict()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        off = fg.amp.GradScaler()  # device "cuda": disabled without a GPU, as PyTorch
    assert any("CUDA is not available" in str(c.message) for c in caught)
    assert not off.is_enabled() and off.scale(w) is w and off.state_dict() == {} and off.get_scale() == 1.0


@pytest.mark.torch
def test_cuda_amp_spellings_warn_and_disable_as_torch(pt):
    for L in (fg, pt):
        x = L.ones(2, 2)
        with pytest.warns(FutureWarning, match="torch.cuda.amp.autocast"):
            with pytest.warns(UserWarning, match="Disabling autocast"):
                ctx = L.cuda.amp.autocast()
        with ctx:
            assert str((x @ x).dtype).endswith("float32")
        with pytest.warns(FutureWarning, match="torch.cuda.amp.GradScaler"):
            with pytest.warns(UserWarning, match="CUDA is not available"):
                s = L.cuda.amp.GradScaler()
        assert not s.is_enabled() and s.scale(x) is x and s.get_scale() == 1.0
        assert isinstance(s, L.amp.GradScaler) and isinstance(ctx, L.amp.autocast)


def test_grad_scaler_inside_a_compiled_step_trains_as_eagerly():
    """scaler.scale(loss).backward(), scaler.step, scaler.update inside ``compile``: one graph
    (the scaler's state is tensors; ``step`` reads its inf flag, a guarded read), following
    the eager run: losses to float16 rounding, the same scales and growth trackers, and the
    same skipped steps where a gradient is made inf or nan inside the step."""
    poisoned = {3: float("inf"), 4: float("nan"), 8: float("inf")}

    def run(compiled):
        r = np.random.default_rng(1)
        model = fg.nn.Sequential(fg.nn.Linear(16, 32), fg.nn.ReLU(), fg.nn.Linear(32, 1))
        with fg.no_grad():
            for p in model.parameters():
                p.copy_(fg.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        opt = fg.optim.SGD(model.parameters(), lr=0.05)
        scaler = fg.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        x, y = fg.tensor(r.standard_normal((64, 16)).astype(np.float32)), fg.tensor(r.standard_normal((64, 1)).astype(np.float32))

        def step(x, y, poison):
            opt.zero_grad()
            with fg.autocast("cpu", dtype=fg.float16):
                loss = fg.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            if poison is not None:
                model[0].weight.grad[0, 0] = poison
            scaler.step(opt)
            scaler.update()
            return loss.item()
        f = fg.compile(step) if compiled else step
        out = []
        for i in range(10):
            before = model[2].bias.detach().clone()
            loss = f(x, y, poisoned.get(i))
            out.append((loss, scaler.get_scale(), scaler.state_dict()["_growth_tracker"],
                        bool((model[2].bias == before).all())))
        return out, f
    (eager, _), (compiled, f) = run(False), run(True)
    np.testing.assert_allclose([o[0] for o in compiled], [o[0] for o in eager], rtol=2e-3)
    assert [o[1:] for o in compiled] == [o[1:] for o in eager]
    assert [o[1] for o in eager] == [4.0, 8.0, 8.0, 4.0, 2.0, 2.0, 4.0, 4.0, 2.0, 2.0]
    assert [i for i, o in enumerate(eager) if o[3]] == sorted(poisoned)
    info = f.cache_info()
    # (the poison, a float argument, compiles per value beside the guarded read: a note says so)
    assert info["segments"] == 0 and not info["graph_breaks"], info
    assert all("float argument" in n for n in info["notes"]), info


def test_low_precision_addmm_and_linear_round_once_as_torch():
    """addmm (and linear, which calls it) on bfloat16/float16 compute in float32 and round
    once, as PyTorch's CPU kernel: the product rounded before adding the bias differed in
    one ulp on a third of the elements."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (12, 16), (12,)))
    for dt in ("bfloat16", "float16"):
        outs = []
        for m in (torch, fg):
            cast = lambda a: m.tensor(a).to(getattr(m, dt))  # noqa: E731
            outs.append([m.addmm(cast(b), cast(x), cast(w).t(), beta=0.5, alpha=2.0).float().numpy(),
                         m.nn.functional.linear(cast(x), cast(w), cast(b)).float().numpy()])
        for got, want in zip(outs[1], outs[0]):
            np.testing.assert_array_equal(got, want)


def test_custom_fwd_and_bwd_run_a_function_as_torch_does(pt):
    """amp.custom_fwd(cast_inputs=float32): in a bf16 region the forward gets float32 inputs
    with autocast off; without cast_inputs it runs under the region, and custom_bwd runs
    the backward under the forward's state (the dtypes each sees, as PyTorch's)."""
    def make(lib, cast):
        seen = []

        class Scale(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu", cast_inputs=cast)
            def forward(ctx, x, w):
                seen.append((str(x.dtype), lib.is_autocast_enabled("cpu")))
                ctx.save_for_backward(w)
                return x @ w

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                w, = ctx.saved_tensors
                seen.append((str(g.dtype), lib.is_autocast_enabled("cpu")))
                return g @ w.t(), None
        return Scale, seen

    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((4, 2)).astype(np.float32)
    for cast in ("float32", None):
        results = []
        for lib in (pt, fg):
            fn, seen = make(lib, getattr(lib, cast) if cast else None)
            x = lib.tensor(a, requires_grad=True)
            with lib.autocast("cpu", dtype=lib.bfloat16):
                out = fn.apply(x, lib.tensor(b))
            out.float().sum().backward()
            results.append((str(out.dtype).split(".")[-1], [(d.split(".")[-1], on) for d, on in seen],
                            x.grad.float().numpy()))
        assert results[0][:2] == results[1][:2], (cast, results[0][:2], results[1][:2])
        np.testing.assert_allclose(results[1][2], results[0][2], rtol=1e-2)


def test_autocast_casts_prelu_bmm_sums_vecdot_down_and_resizing_up_as_torch():
    """PyTorch's CPU lists: prelu, addbmm, baddbmm and linalg.vecdot run in the low dtype;
    upsampling (interpolate's linear modes) and adaptive_avg_pool3d in float32 (they came out
    float32, and in the low dtype from their internal matmuls, respectively)."""
    torch = pytest.importorskip("torch")

    def ops(lib, x, b, v):
        F = lib.nn.functional
        return [F.prelu(x, lib.full((3,), 0.25)), lib.addbmm(v[0], b, b), lib.baddbmm(b, b, b),
                lib.linalg.vecdot(v, v), F.interpolate(x, scale_factor=2, mode="bilinear"),
                F.interpolate(x[..., 0], scale_factor=2, mode="linear"), F.adaptive_avg_pool3d(x[:, None], 2)]
    rng = np.random.default_rng(0)
    x, b, v = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 4))
    for low in ("bfloat16", "float16"):
        got, want = [], []
        for lib, out in ((torch, want), (fg, got)):
            with lib.autocast("cpu", dtype=getattr(lib, low)):
                out += [str(t.dtype).split(".")[1] for t in ops(lib, *(lib.tensor(a, dtype=lib.float32) for a in (x, b, v)))]
        assert got == want, (low, got, want)


def test_autocast_recurrent_layers_output_dtypes_and_values_as_torch():
    """Under CPU bfloat16 autocast PyTorch's LSTM (oneDNN's, on the low-precision list) takes
    and returns bfloat16 (output and both states, with or without initial states, 2 layers
    bidirectional too); RNN's matmuls make it bfloat16; GRU, the cells and a projected LSTM
    end in float32; bfloat16 inputs are taken too (autocast exempts them from the dtype check). Values agree to bfloat16's precision and the float32 weights get float32
    gradients."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 4))
    h0 = rng.standard_normal((1, 2, 3)) * 0.5

    def run(lib):
        lib.manual_seed(0)
        nn = lib.nn
        mods = [nn.LSTM(4, 3), nn.LSTM(4, 3, num_layers=2, bidirectional=True, batch_first=True), nn.GRU(4, 3),
                nn.RNN(4, 3), nn.LSTMCell(4, 3), nn.LSTM(4, 3, proj_size=2)]
        for m in mods:
            for p in m.parameters():
                p.data.copy_(lib.tensor(rng_p.uniform(-0.5, 0.5, tuple(p.shape)), dtype=lib.float32))
        xs, hs = lib.tensor(x, dtype=lib.float32), lib.tensor(h0, dtype=lib.float32)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            outs = [*mods[0](xs)[0:1], *mods[0](xs, (hs, hs))[1], mods[1](xs)[0], mods[2](xs)[0], mods[3](xs)[0],
                    *mods[4](xs[0]), *mods[5](xs)[1]]
            low = xs.to(lib.bfloat16)  # (a convolution's output under autocast: the layers take it too)
            outs += [mods[0](low)[0], mods[2](low)[0], mods[3](low)[0]]
        sum(o.float().sum() for o in outs).backward()
        return ([str(o.dtype).split(".")[1] for o in outs], [o.detach().float().numpy() for o in outs],
                [(str(p.grad.dtype), p.grad.numpy()) for m in mods for p in m.parameters()])

    rng_p = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch: projections are not supported by oneDNN)
        try:
            want = run(torch)
        except RuntimeError as e:  # (a CPU without oneDNN's bfloat16 LSTM, as some AMD hosts: no oracle)
            if "primitive descriptor" not in str(e):
                raise
            pytest.skip(f"PyTorch's bfloat16 LSTM does not run on this CPU: {e}")
    rng_p = np.random.default_rng(1)
    got = run(fg)
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=0.05, atol=0.05)
    for (da, a), (db, b) in zip(got[2], want[2]):
        assert da.split(".")[1] == db.split(".")[1] == "float32"
        np.testing.assert_allclose(a, b, rtol=0.1, atol=0.1)


def test_low_precision_interpolation_is_computed_in_float32_and_rounded_once():
    """A float16/bfloat16 input is resized in float32 and rounded once (PyTorch's kernels
    accumulate in float32; trilinear is then bit for bit with torch's): it was resized in the
    low dtype, each separable pass rounded."""
    rng = np.random.default_rng(0)
    img, vol = rng.standard_normal((2, 3, 5, 7)), rng.standard_normal((1, 2, 3, 4, 5))
    F = fg.nn.functional
    for low in (fg.bfloat16, fg.float16):
        for x, kw in ((img, dict(size=(4, 9), mode="bilinear")),
                      (img, dict(size=(8, 9), mode="bicubic", align_corners=True)),
                      (vol, dict(scale_factor=2, mode="trilinear")), (img[:, :, 0], dict(size=11, mode="linear"))):
            t = fg.tensor(x, dtype=low)
            got = F.interpolate(t, **kw)
            assert got.dtype == low
            np.testing.assert_array_equal(got.float().numpy(), F.interpolate(t.float(), **kw).to(low).float().numpy())


def test_pools_keep_their_dtype_under_autocast_and_round_half_results_once():
    """Average pools are not on autocast's lists (a float32 input stays float32, as an ASPP
    branch's image pool), and of bfloat16/float16 inputs they accumulate in float32 and round
    once, as PyTorch's kernels: the same values."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((1, 2, 9, 9)).astype(np.float32) * 3
    calls = (lambda F, t: F.adaptive_avg_pool2d(t, 3), lambda F, t: F.adaptive_avg_pool2d(t, 1),
             lambda F, t: F.interpolate(t, size=(5, 5), mode="area"), lambda F, t: F.avg_pool2d(t, 3),
             lambda F, t: F.adaptive_avg_pool1d(t.flatten(2), 4), lambda F, t: F.interpolate(t, size=(4, 4), mode="bilinear"))
    for T in (fg, torch):
        with T.autocast("cpu", dtype=T.bfloat16):
            assert all(c(T.nn.functional, T.tensor(x)).dtype == T.float32 for c in calls)
    for dt in ("bfloat16", "float16"):
        for c in calls:
            got = c(fg.nn.functional, fg.tensor(x).to(getattr(fg, dt)))
            want = c(torch.nn.functional, torch.tensor(x).to(getattr(torch, dt)))
            assert str(got.dtype).endswith(dt)
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_autocast_cache_flags_module_type_and_cpu_capability_as_torch():
    """PyTorch's autocast cache switches (reported: fusegrad keeps no cast cache),
    Module.type(dtype) and torch.backends.cpu.get_cpu_capability()."""
    torch = pytest.importorskip("torch")
    assert fg.is_autocast_cache_enabled()
    with fg.autocast("cpu", cache_enabled=False):
        assert not fg.is_autocast_cache_enabled()
    assert fg.is_autocast_cache_enabled()
    fg.set_autocast_cache_enabled(False)
    try:
        assert not fg.is_autocast_cache_enabled()
    finally:
        fg.set_autocast_cache_enabled(True)
    fg.clear_autocast_cache()
    m = fg.nn.Linear(2, 2).type(fg.float64)
    assert m.weight.dtype == fg.float64 and m.bias.dtype == fg.float64
    assert fg.backends.cpu.get_cpu_capability() == torch.backends.cpu.get_cpu_capability()


@pytest.mark.torch
def test_autocast_promotes_index_copy_operands_to_the_widest(pt):
    """index_copy is on PyTorch's CPU autocast promote list: a float32 tensor takes a bfloat16
    source (and the reverse) as float32; outside autocast, and in place, mixed dtypes raise."""
    def run(lib):
        x, s, i = lib.zeros(3, 2), lib.ones(2, 2).bfloat16(), lib.tensor([0, 2])
        out = []
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out += [x.index_copy(0, i, s), lib.index_copy(x.bfloat16(), 0, i, s.float()),
                    lib.index_copy(x.bfloat16(), 0, i, s)]
        with pytest.raises(RuntimeError, match="expected to have the same dtype"):
            x.index_copy(0, i, s)
        return [(str(t.dtype).split(".")[-1], t.float().tolist()) for t in out]
    assert run(fg) == run(pt)
