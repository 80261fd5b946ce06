"""Regressions found by running modern training programs (speech CTC models, adaptive-softmax
LM heads, bfloat16 autocast with normalization layers) under fusegrad, checked against
PyTorch: values, dtypes and gradients, eagerly."""
import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytestmark = pytest.mark.torch

RNG = np.random.default_rng(52)


def _ctc_case():
    x = RNG.standard_normal((12, 4, 6)).astype(np.float32)
    targets = RNG.integers(1, 6, (4, 5))
    targets[0, :4] = [2, 2, 3, 3]  # repeated labels need a blank between them
    return x, targets, [12, 10, 7, 3], [4, 3, 0, 3]


def _ctc(lib, x, targets, in_lens, tg_lens, **kw):
    logits = lib.tensor(x, requires_grad=True)
    loss = lib.nn.functional.ctc_loss(logits.log_softmax(-1), targets, lib.tensor(in_lens), lib.tensor(tg_lens), **kw)
    loss.sum().backward()
    return loss.detach().numpy(), logits.grad.numpy()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_torch(reduction, concatenated):
    x, targets, in_lens, tg_lens = _ctc_case()
    if concatenated:
        targets = np.concatenate([targets[i, :n] for i, n in enumerate(tg_lens)])
    want = _ctc(torch, x, torch.tensor(targets), in_lens, tg_lens, reduction=reduction)
    got = _ctc(fg, x, fg.tensor(targets), in_lens, tg_lens, reduction=reduction)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], atol=1e-5)


def test_ctc_loss_gradient_on_log_probs_leaf_is_torchs():
    """PyTorch's CTC backward adds exp(log_probs) on each sample's frames (the gradient as if a
    log_softmax followed); fusegrad's matches it on a leaf of log-probabilities too."""
    x = np.log(RNG.dirichlet(np.ones(5), (6, 2))).astype(np.float32)
    grads = []
    for lib in (torch, fg):
        lp = lib.tensor(x, requires_grad=True)
        lib.nn.functional.ctc_loss(lp, lib.tensor([[1, 2], [3, 3]]), [6, 4], [2, 2]).backward()
        grads.append(lp.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("zero_infinity", [True, False])
def test_ctc_loss_zero_infinity_and_module(zero_infinity):
    """An infeasible sample: zero loss and gradient with zero_infinity; without, an infinite
    loss and NaN gradients on its frames (the feasible sample's unchanged), as torch."""
    x = RNG.standard_normal((4, 2, 5)).astype(np.float32)
    targets = np.array([[2, 2, 2], [1, 3, 0]])  # the first needs 5 frames: infeasible in 4
    results = []
    for lib in (torch, fg):
        logits = lib.tensor(x, requires_grad=True)
        loss = lib.nn.CTCLoss(zero_infinity=zero_infinity, reduction="none")(
            logits.log_softmax(-1), lib.tensor(targets), [4, 3], [3, 2])
        loss.sum().backward()
        results.append((loss.detach().numpy(), logits.grad.numpy()))
    assert results[1][0][0] == (0.0 if zero_infinity else np.inf)
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], atol=1e-6)



def test_ctc_loss_targets_shorter_than_their_lengths_raise_as_torch():
    """Padded targets narrower than a target length, or concatenated ones not as long as the
    lengths' sum: torch's RuntimeError (a NumPy broadcasting error leaked)."""
    cases = [(np.ones((2, 3), np.int64), [3, 7]), (np.ones(5, np.int64), [3, 3])]
    for targets, lengths in cases:
        raised = []
        for lib in (fg, torch):
            lp = lib.zeros(5, 2, 4).log_softmax(-1)
            try:
                lib.nn.functional.ctc_loss(lp, lib.tensor(targets), lib.tensor([5, 5]), lib.tensor(lengths))
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                raised.append((type(e).__name__, str(e)))
        assert len(raised) == 2 and raised[0] == raised[1], raised

def test_adaptive_log_softmax_matches_torch():
    torch.manual_seed(0)
    ref = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 40, cutoffs=[8, 20], div_value=2.0)
    mod = fg.nn.AdaptiveLogSoftmaxWithLoss(16, 40, cutoffs=[8, 20], div_value=2.0)
    mod.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    h = RNG.standard_normal((10, 16)).astype(np.float32)
    y = np.array([0, 5, 9, 12, 25, 39, 7, 19, 20, 30])
    outs = []
    for lib, m in ((torch, ref), (fg, mod)):
        x = lib.tensor(h, requires_grad=True)
        res = m(x, lib.tensor(y))
        res.loss.backward()
        outs.append([res.output.detach().numpy(), res.loss.detach().numpy(), x.grad.numpy(),
                     m.head.weight.grad.numpy(), m.tail[1][0].weight.grad.numpy(),
                     m.log_prob(x[:3]).detach().numpy(), m.predict(x).numpy()])
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="cutoffs should be a sequence"):
        fg.nn.AdaptiveLogSoftmaxWithLoss(16, 40, cutoffs=[20, 8])


@pytest.mark.parametrize("norm", ["layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm"])
def test_norms_keep_low_precision_input_dtype(norm):
    """A bfloat16 input with float32 weights (what bf16 autocast feeds LayerNorm) stays bfloat16,
    computed in float32 as PyTorch's CPU kernels do (rms_norm's default eps is float32's too)."""
    x = RNG.standard_normal((4, 8, 3)).astype(np.float32)
    w = RNG.standard_normal(8).astype(np.float32)
    outs = []
    for lib in (torch, fg):
        F = lib.nn.functional
        xb, wt = lib.tensor(x).to(lib.bfloat16), lib.tensor(w)
        call = {"layer_norm": lambda: F.layer_norm(xb.transpose(1, 2), (8,), wt, wt),
                "batch_norm": lambda: F.batch_norm(xb, lib.zeros(8), lib.ones(8), wt, wt, training=True),
                "group_norm": lambda: F.group_norm(xb, 2, wt, wt),
                "rms_norm": lambda: F.rms_norm(xb.transpose(1, 2), (8,), wt),
                "instance_norm": lambda: F.instance_norm(xb, weight=wt, bias=wt)}[norm]
        out = call()
        outs.append((str(out.dtype).split(".")[-1], out.float().numpy()))
    assert outs[1][0] == outs[0][0] == "bfloat16"
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-2, atol=1e-2)


def test_bf16_autocast_linear_layer_norm_gelu_stays_bf16():
    """Under CPU bfloat16 autocast a Linear -> LayerNorm -> GELU chain stays bfloat16 throughout."""
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    dtypes = []
    for lib in (torch, fg):
        lib.manual_seed(0)
        lin, ln = lib.nn.Linear(8, 8), lib.nn.LayerNorm(8)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = lib.nn.functional.gelu(ln(lin(lib.tensor(x))))
        dtypes.append(str(y.dtype).split(".")[-1])
    assert dtypes == ["bfloat16", "bfloat16"]


@pytest.mark.parametrize("name", ["silu", "softplus", "mish", "hardsigmoid", "hardswish", "elu", "logsigmoid",
                                  "gelu"])
def test_bf16_composite_activations_round_once(name):
    """A bfloat16 activation built from several primitives is computed in float32 and rounded
    once, as PyTorch's single kernel: the result equals PyTorch's (GELU's erf to one bf16 ulp)."""
    x = (RNG.standard_normal((16, 32)) * 3).astype(np.float32)
    outs = []
    for lib in (torch, fg):
        xx = lib.tensor(x).to(lib.bfloat16).requires_grad_(True)
        y = getattr(lib.nn.functional, name)(xx)
        y.sum().backward()
        outs.append((str(y.dtype).split(".")[-1], y.float().detach().numpy(), str(xx.grad.dtype).split(".")[-1]))
    assert outs[1][0] == outs[1][2] == "bfloat16"
    tol = 2.0 ** -7 if name == "gelu" else 0.0
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=tol, atol=1e-6 if tol else 0.0)


def _mlp_pair():
    torch.manual_seed(1)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    mod = fg.nn.Sequential(fg.nn.Linear(6, 8), fg.nn.Tanh(), fg.nn.Linear(8, 3))
    mod.load_state_dict({k: fg.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    return ref, mod


@pytest.mark.parametrize("kwargs", [{}, {"lr": 0.05, "weight_decay": 0.1, "d": 1.5, "eps": (1e-20, 1e-3)},
                                    {"maximize": True, "beta2_decay": -0.5}])
def test_adafactor_follows_torch(kwargs):
    x = RNG.standard_normal((10, 6)).astype(np.float32)
    trajectories = []
    for lib, model in zip((torch, fg), _mlp_pair()):
        opt = lib.optim.Adafactor(model.parameters(), **kwargs)
        for _ in range(4):
            opt.zero_grad()
            (model(lib.tensor(x)) ** 2).mean().backward()
            opt.step()
        trajectories.append([p.detach().numpy().copy() for p in model.parameters()]
                            + [opt.state[model[0].weight]["row_var"].numpy()])
    for got, want in zip(trajectories[1], trajectories[0]):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_get_total_norm_and_clip_grads_with_norm():
    x = RNG.standard_normal((10, 6)).astype(np.float32)
    got = []
    for lib, model in zip((torch, fg), _mlp_pair()):
        (model(lib.tensor(x)) ** 2).sum().backward()
        grads = [p.grad for p in model.parameters()]
        norms = [float(lib.nn.utils.get_total_norm(grads, t)) for t in (2.0, 1.0, float("inf"))]
        lib.nn.utils.clip_grads_with_norm_(model.parameters(), 0.5, lib.nn.utils.get_total_norm(grads))
        got.append((norms, [g.numpy().copy() for g in grads]))
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-5)
    for a, b in zip(got[1][1], got[0][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def _layer_and_bn(lib, kind):
    nn = lib.nn
    layer = {"conv": lambda: nn.Conv2d(3, 4, 3, padding=1), "linear": lambda: nn.Linear(3, 4),
             "conv_transpose": lambda: nn.ConvTranspose2d(3, 4, 3, bias=False)}[kind]()
    return nn.Sequential(layer, nn.BatchNorm1d(4) if kind == "linear" else nn.BatchNorm2d(4))


@pytest.mark.parametrize("kind", ["conv", "conv_transpose", "linear"])
def test_fuse_bn_eval_matches_torch(kind):
    x = RNG.standard_normal((4, 3) if kind == "linear" else (2, 3, 5, 5)).astype(np.float32)
    state = {k: np.abs(RNG.standard_normal(tuple(v.shape))).astype(np.float32) + 0.1 if v.is_floating_point()
             else v.numpy() for k, v in _layer_and_bn(torch, kind).state_dict().items()}
    outs = []
    for lib in (torch, fg):
        seq = _layer_and_bn(lib, kind)
        seq.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
        seq.eval()
        if kind == "linear":
            fused = lib.nn.utils.fuse_linear_bn_eval(seq[0], seq[1])
        else:
            fused = lib.nn.utils.fuse_conv_bn_eval(seq[0], seq[1], transpose=kind == "conv_transpose")
        with lib.no_grad():
            outs.append((fused(lib.tensor(x)).numpy(), seq(lib.tensor(x)).numpy()))
    # (float32 sums of outputs up to ~20: the order of the additions differs from torch's)
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs[1][0], outs[1][1], rtol=1e-4, atol=1e-5)


def test_ctc_loss_edge_lengths_blank_labels_and_refusals_as_pytorch():
    """An utterance with no frames left (loss 0 for an empty transcript, else inf, no
    gradient), a target holding the blank id (a label to PyTorch's kernel), and PyTorch's
    refusals: negative lengths, half-precision inputs outside autocast."""
    lp = np.random.default_rng(3).standard_normal((6, 3, 5)).astype(np.float32)
    targets = np.array([[1, 2, 3], [1, 0, 2], [4, 4, 0]])
    res = []
    for T in (fg, torch):
        x = T.tensor(lp, requires_grad=True)
        logp = x.log_softmax(2)
        vals = []
        for in_lens, tg_lens, zi in (([6, 0, 5], [3, 0, 2], False), ([6, 0, 6], [3, 2, 3], True), ([5, 6, 0], [3, 3, 2], True)):
            loss = T.nn.functional.ctc_loss(logp, T.tensor(targets), T.tensor(in_lens), T.tensor(tg_lens),
                                            reduction="none", zero_infinity=zi)
            vals.append(loss.detach().numpy())
        x.grad = None
        T.nn.functional.ctc_loss(logp, T.tensor(targets), T.tensor([6, 0, 4]), T.tensor([3, 2, 2]),
                                 zero_infinity=True).backward()
        res.append(vals + [x.grad.numpy()])
        with pytest.raises(RuntimeError, match="input_lengths to have value at least 0"):
            T.nn.functional.ctc_loss(logp, T.tensor(targets), T.tensor([6, -1, 5]), T.tensor([3, 3, 2]))
        with pytest.raises(NotImplementedError, match="ctc_loss_cpu"):
            T.nn.functional.ctc_loss(logp.detach().bfloat16(), T.tensor(targets), T.tensor([6, 6, 5]), T.tensor([3, 3, 2]))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
