"""Attention and transformer layers against PyTorch (weights copied across), gradchecks, vmap and compile."""
import itertools

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.autograd import gradcheck, gradgradcheck

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")


def np_of(t) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def both(array, requires_grad=True):
    array = np.asarray(array)
    rg = requires_grad and array.dtype.kind == "f"
    return fg.tensor(array, requires_grad=rg), torch.tensor(array, requires_grad=rg)


def copy_weights(fg_module, pt_module) -> None:
    sd = pt_module.state_dict()
    assert list(sd) == list(fg_module.state_dict())
    fg_module.load_state_dict({k: fg.tensor(v.numpy()) for k, v in sd.items()})


def check_grads(fo, po, fg_leaves, pt_leaves, rtol=1e-8, atol=1e-9):
    w = np.random.default_rng(5).standard_normal(tuple(po.shape))
    (fo * fg.tensor(w)).sum().backward()
    (po * torch.tensor(w)).sum().backward()
    for f, p in zip(fg_leaves, pt_leaves):
        if p.grad is None:
            assert f.grad is None or not np.any(np_of(f.grad))
            continue
        np.testing.assert_allclose(np_of(f.grad), np_of(p.grad), rtol=rtol, atol=atol)


MASKS = ["none", "causal", "bool", "float", "bool-dead-row", "bool-broadcast"]


def make_mask(kind, rng, L, S):
    if kind == "bool":
        m = rng.random((L, S)) < 0.7
        m[:, 0] = True
        return m
    if kind == "bool-dead-row":
        m = rng.random((L, S)) < 0.7
        m[L - 1] = False  # the last query may attend nothing: PyTorch gives zeros there
        return m
    if kind == "bool-broadcast":
        return rng.random((2, 1, L, S)) < 0.8
    if kind == "float":
        return rng.standard_normal((L, S))
    return None


@pytest.mark.parametrize("mask, L, S, scale", itertools.product(MASKS, [1, 4], [4, 6], [None, 0.3]))
def test_sdpa_matches_torch(mask, L, S, scale):
    rng = np.random.default_rng(0)
    fq, pq = both(rng.standard_normal((2, 3, L, 5)))
    fk, pk = both(rng.standard_normal((2, 3, S, 5)))
    fv, pv = both(rng.standard_normal((2, 3, S, 7)))
    m = make_mask(mask, rng, L, S)
    kw = dict(is_causal=mask == "causal", scale=scale)
    fo = F.scaled_dot_product_attention(fq, fk, fv, attn_mask=None if m is None else fg.tensor(m), **kw)
    po = torch.nn.functional.scaled_dot_product_attention(pq, pk, pv, attn_mask=None if m is None else
                                                          torch.tensor(m), **kw)
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=1e-10, atol=1e-12)
    check_grads(fo, po, [fq, fk, fv], [pq, pk, pv])


def test_sdpa_dropout_and_errors():
    fg.manual_seed(0)
    q = fg.randn(2, 8, 4, dtype=fg.float64)
    plain = F.scaled_dot_product_attention(q, q, q)
    ones_v = fg.ones(2, 8, 4, dtype=fg.float64)
    dropped = F.scaled_dot_product_attention(q, q, ones_v, dropout_p=0.5)
    # each output row is the sum of the kept, rescaled weights: mean 1, not all equal to 1
    assert abs(np_of(dropped).mean() - 1.0) < 0.25 and np.std(np_of(dropped)) > 0.1
    assert np.allclose(np_of(F.scaled_dot_product_attention(q, q, ones_v)), 1.0)
    assert plain.shape == (2, 8, 4)
    with pytest.raises(RuntimeError, match="query"):
        F.scaled_dot_product_attention(q, fg.randn(2, 8, 3), q)


def test_sdpa_gradcheck_gradgradcheck_vmap():
    fg.manual_seed(0)
    q, k, v = (fg.randn(1, 3, 2, dtype=fg.float64, requires_grad=True) for _ in range(3))
    mask = fg.tensor([[True, False, True], [True, True, False], [False, False, True]])
    for kw in (dict(is_causal=True), dict(attn_mask=mask), dict(attn_mask=fg.randn(3, 3, dtype=fg.float64))):
        f = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)  # noqa: E731
        assert gradcheck(f, (q, k, v))
        assert gradgradcheck(f, (q, k, v))
    qs = fg.randn(4, 3, 2, dtype=fg.float64)
    got = fg.func.vmap(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True))(qs)
    want = fg.stack([F.scaled_dot_product_attention(q, q, q, is_causal=True) for q in qs.unbind(0)])
    np.testing.assert_allclose(np_of(got), np_of(want), rtol=1e-12, atol=1e-13)


MHA_GRID = list(itertools.product([False, True], ["none", "bool", "float", "3d"], [False, True],
                                  [True, False], [True, False]))


@pytest.mark.parametrize("batch_first, attn_mask, key_padding, need_weights, average", MHA_GRID)
def test_multihead_attention_matches_torch(batch_first, attn_mask, key_padding, need_weights, average):
    pt = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=torch.float64)
    fm = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=fg.float64)
    copy_weights(fm, pt)
    rng = np.random.default_rng(0)
    L, S, N = 3, 4, 2
    shape = lambda T: (N, T, 8) if batch_first else (T, N, 8)  # noqa: E731
    fq, pq = both(rng.standard_normal(shape(L)))
    fk, pk = both(rng.standard_normal(shape(S)))
    fv, pv = both(rng.standard_normal(shape(S)))
    kw_f, kw_p = {}, {}
    if attn_mask != "none":
        m = {"bool": rng.random((L, S)) < 0.3, "float": rng.standard_normal((L, S)),
             "3d": rng.standard_normal((N * 2, L, S))}[attn_mask]
        if attn_mask == "bool":
            m[:, 0] = False
        kw_f["attn_mask"], kw_p["attn_mask"] = fg.tensor(m), torch.tensor(m)
    if key_padding:
        kpm = np.array([[False, False, True, True], [False, True, False, False]])
        kw_f["key_padding_mask"], kw_p["key_padding_mask"] = fg.tensor(kpm), torch.tensor(kpm)
    fo, fw = fm(fq, fk, fv, need_weights=need_weights, average_attn_weights=average, **kw_f)
    po, pw = pt(pq, pk, pv, need_weights=need_weights, average_attn_weights=average, **kw_p)
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=1e-10, atol=1e-12)
    assert (fw is None) == (pw is None)
    if pw is not None:
        np.testing.assert_allclose(np_of(fw), np_of(pw), rtol=1e-10, atol=1e-12)
    check_grads(fo, po, [fq, fk, fv, *fm.parameters()], [pq, pk, pv, *pt.parameters()])


@pytest.mark.parametrize("kw", [dict(kdim=3, vdim=5), dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(bias=False)])
def test_multihead_attention_options(kw):
    pt = torch.nn.MultiheadAttention(6, 3, dtype=torch.float64, **kw)
    fm = nn.MultiheadAttention(6, 3, dtype=fg.float64, **kw)
    assert [(k, tuple(v.shape)) for k, v in fm.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in pt.state_dict().items()]
    copy_weights(fm, pt)
    rng = np.random.default_rng(1)
    fq, pq = both(rng.standard_normal((3, 2, 6)))
    fk, pk = both(rng.standard_normal((4, 2, kw.get("kdim", 6))))
    fv, pv = both(rng.standard_normal((4, 2, kw.get("vdim", 6))))
    fo, fw = fm(fq, fk, fv)
    po, pw = pt(pq, pk, pv)
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np_of(fw), np_of(pw), rtol=1e-10, atol=1e-12)
    check_grads(fo, po, [fq, fk, fv, *fm.parameters()], [pq, pk, pv, *pt.parameters()])


def test_multihead_attention_unbatched_and_init():
    pt = torch.nn.MultiheadAttention(4, 2, dtype=torch.float64)
    fm = nn.MultiheadAttention(4, 2, dtype=fg.float64)
    assert not np.any(np_of(fm.in_proj_bias)) and not np.any(np_of(fm.out_proj.bias))
    bound = np.sqrt(6 / (4 + 12))  # xavier-uniform over the (3E, E) in_proj_weight
    assert np.abs(np_of(fm.in_proj_weight)).max() <= bound
    copy_weights(fm, pt)
    x = np.random.default_rng(2).standard_normal((5, 4))
    fo, fw = fm(fg.tensor(x), fg.tensor(x), fg.tensor(x))
    po, pw = pt(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np_of(fw), np_of(pw), rtol=1e-10, atol=1e-12)
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(5, 2)


ENC_GRID = list(itertools.product([False, True], [False, True], ["relu", "gelu"], ["none", "causal", "pad"]))


@pytest.mark.parametrize("norm_first, batch_first, activation, mask", ENC_GRID)
def test_encoder_layer_matches_torch(norm_first, batch_first, activation, mask):
    kw = dict(dim_feedforward=16, dropout=0.0, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    pt = torch.nn.TransformerEncoderLayer(8, 2, dtype=torch.float64, **kw)
    fm = nn.TransformerEncoderLayer(8, 2, dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    pt.train()  # the training path is PyTorch's reference math (the fast path only runs in eval)
    rng = np.random.default_rng(0)
    fx, px = both(rng.standard_normal((2, 5, 8) if batch_first else (5, 2, 8)))
    kw_f, kw_p = {}, {}
    if mask == "causal":
        m = nn.Transformer.generate_square_subsequent_mask(5, dtype=fg.float64)
        kw_f = dict(src_mask=m, is_causal=True)
        kw_p = dict(src_mask=torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64),
                    is_causal=True)
        np.testing.assert_array_equal(np_of(m), kw_p["src_mask"].numpy())
    elif mask == "pad":
        kpm = np.array([[False] * 5, [False, False, False, True, True]])
        kw_f, kw_p = dict(src_key_padding_mask=fg.tensor(kpm)), dict(src_key_padding_mask=torch.tensor(kpm))
    fo, po = fm(fx, **kw_f), pt(px, **kw_p)
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=1e-9, atol=1e-10)
    check_grads(fo, po, [fx, *fm.parameters()], [px, *pt.parameters()], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch(norm_first):
    torch.manual_seed(0)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
              norm_first=norm_first, batch_first=True)
    pt = torch.nn.Transformer(dtype=torch.float64, **kw)
    fm = nn.Transformer(dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    rng = np.random.default_rng(0)
    fs, ps = both(rng.standard_normal((2, 5, 8)))
    ft, ptg = both(rng.standard_normal((2, 4, 8)))
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    kpm = np.array([[False] * 5, [False, False, False, False, True]])
    fo = fm(fs, ft, tgt_mask=fg.tensor(tmask.numpy()), src_key_padding_mask=fg.tensor(kpm),
            memory_key_padding_mask=fg.tensor(kpm))
    po = pt(ps, ptg, tgt_mask=tmask, src_key_padding_mask=torch.tensor(kpm),
            memory_key_padding_mask=torch.tensor(kpm))
    np.testing.assert_allclose(np_of(fo), np_of(po), rtol=1e-9, atol=1e-10)
    check_grads(fo, po, [fs, ft, *fm.parameters()], [ps, ptg, *pt.parameters()], rtol=1e-7, atol=1e-9)


def test_encoder_stack_default_init_and_dropout_modes():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(8))
    pt = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), 3,
                                     norm=torch.nn.LayerNorm(8), enable_nested_tensor=False)
    assert [(k, tuple(v.shape)) for k, v in enc.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in pt.state_dict().items()]
    # deep copies: the layers do not share parameters
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    x = fg.randn(5, 2, 8)
    enc.eval()
    np.testing.assert_array_equal(np_of(enc(x)), np_of(enc(x)))
    enc.train()
    assert not np.allclose(np_of(enc(x)), np_of(enc(x)))


def test_encoder_in_inference_zeroes_padded_rows_as_torchs_nested_path():
    """In eval under no_grad with a key padding mask that pads at the ends, PyTorch's
    TransformerEncoder runs its layers on a nested tensor and pads the result with zeros:
    the padded rows leave as 0 (then the final norm's bias); in training, or with padding
    not at the end, they are computed as the others."""
    torch.manual_seed(0)
    pt = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                                      batch_first=True, dtype=torch.float64),
                                     2, norm=torch.nn.LayerNorm(8, dtype=torch.float64))
    fm = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                                          dtype=fg.float64), 2, norm=nn.LayerNorm(8, dtype=fg.float64))
    copy_weights(fm, pt)
    assert fm.use_nested_tensor and pt.use_nested_tensor
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    for train, pad in ((False, [[False] * 5, [False] * 3 + [True] * 2]), (True, [[False] * 5, [False] * 3 + [True] * 2]),
                       (False, [[False] * 5, [True] + [False] * 4])):
        pt.train(train), fm.train(train)
        with torch.no_grad(), fg.no_grad():
            want = pt(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).numpy()
            got = fm(fg.tensor(x), src_key_padding_mask=fg.tensor(pad)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10, err_msg=f"train={train}, pad={pad}")
    with pytest.warns(UserWarning, match="batch_first was not True"):
        assert not nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1).use_nested_tensor


@pytest.mark.parametrize("kw", [dict(add_zero_attn=True), dict(add_bias_kv=True)])
def test_multihead_attention_causal_hint_over_extra_keys(kw):
    """is_causal=True with need_weights=False and no key padding: PyTorch drops attn_mask
    and masks causally over the keys bias_k or the zero key extend too."""
    torch.manual_seed(0)
    pt = torch.nn.MultiheadAttention(6, 2, batch_first=True, dtype=torch.float64, **kw)
    fm = nn.MultiheadAttention(6, 2, batch_first=True, dtype=fg.float64, **kw)
    copy_weights(fm, pt)
    x = np.random.default_rng(0).standard_normal((2, 3, 6))
    causal = np.triu(np.ones((3, 3), bool), 1)
    want = pt(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(causal), is_causal=True, need_weights=False)[0]
    got = fm(*[fg.tensor(x)] * 3, attn_mask=fg.tensor(causal), is_causal=True, need_weights=False)[0]
    np.testing.assert_allclose(np_of(got), want.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("train", [True, False])
def test_encoder_layer_rows_with_every_key_padded_as_torch(train):
    """A sample whose every key is padded: PyTorch's scaled_dot_product_attention path (need_weights=False,
    training) gives its rows zero attention, its fused inference path (eval, no_grad) NaN."""
    torch.manual_seed(0)
    pt = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    fm = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=fg.float64)
    copy_weights(fm, pt)
    pt.train(train), fm.train(train)
    x = np.random.default_rng(0).standard_normal((2, 4, 8))
    pad = np.array([[False] * 4, [True] * 4])
    with torch.set_grad_enabled(train), fg.set_grad_enabled(train):
        want = pt(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).detach().numpy()
        got = np_of(fm(fg.tensor(x), src_key_padding_mask=fg.tensor(pad)))
    assert np.isnan(want).any() != train
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10, equal_nan=True)


def test_sdpa_kernel_chooses_backends_as_torch():
    """``torch.nn.attention.sdpa_kernel``/``SDPBackend`` (programs pin the math kernel for
    exact comparisons): the backends' flags inside and after the block as torch's, and
    attention inside it unchanged."""
    from fusegrad.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention import SDPBackend as TB, sdpa_kernel as tk
    assert {b.name: int(b) for b in SDPBackend} == {n: int(b) for n, b in TB.__members__.items()}

    def flags(lib):
        c = lib.backends.cuda
        return c.math_sdp_enabled(), c.flash_sdp_enabled(), c.mem_efficient_sdp_enabled(), c.cudnn_sdp_enabled()
    q = np.random.default_rng(0).standard_normal((1, 2, 3, 4))
    for choice in (["MATH"], ["FLASH_ATTENTION", "EFFICIENT_ATTENTION"], ["CUDNN_ATTENTION"]):
        seen = []
        for lib, kernel, backend in ((fg, sdpa_kernel, SDPBackend), (torch, tk, TB)):
            chosen = [getattr(backend, n) for n in choice]
            with kernel(chosen if len(chosen) > 1 else chosen[0]):
                inside = flags(lib)
                try:
                    out = lib.nn.functional.scaled_dot_product_attention(*[lib.tensor(q)] * 3, is_causal=True)
                    out = np.round(out.numpy(), 12).tolist()
                except RuntimeError as e:  # (no kernel for the CPU chosen)
                    out = str(e)
            seen.append((inside, flags(lib), out))
        assert seen[0] == seen[1]
    with pytest.raises(AssertionError):
        with sdpa_kernel("math"):
            pass


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_attention_keeps_scores_in_float32(dtype):
    """float16/bfloat16 attention as PyTorch's CPU flash kernel: scores, maxima and sums in
    float32, the unnormalized weights rounded to the low dtype for the product with v (it
    rounded each step to the low dtype, 1.6x torch's error; then computed all in float32,
    an ulp off in a fifth of the outputs): bit for bit with torch's AVX-512 kernel, causal,
    masked (a fully masked row gives zeros) and plain; gradients flow in the low dtype."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 8, 16)) for _ in range(3))
    mask = rng.random((8, 8)) > 0.4
    mask[2] = False
    dt, tdt = getattr(fg, dtype), getattr(torch, dtype)
    fq, fk, fv = (fg.tensor(a, dtype=dt, requires_grad=True) for a in (q, k, v))
    for kw, tkw in ((dict(is_causal=True), dict(is_causal=True)), (dict(attn_mask=fg.tensor(mask)),
                                                                   dict(attn_mask=torch.tensor(mask))), ({}, {})):
        got = F.scaled_dot_product_attention(fq, fk, fv, **kw)
        assert got.dtype == dt
        want = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a, dtype=tdt) for a in (q, k, v)),
                                                                **tkw)
        g, w = got.detach().float().numpy(), want.float().numpy()
        if torch.backends.cpu.get_cpu_capability() == "AVX512":
            np.testing.assert_array_equal(g, w)
        else:  # (PyTorch's AVX2 kernels round differently: within a few ulps of the largest output)
            np.testing.assert_allclose(g, w, rtol=0, atol=4 * float(torch.finfo(tdt).eps) * np.abs(w).max())
    got.float().sum().backward()
    assert fq.grad.dtype == dt and np.isfinite(fq.grad.float().numpy()).all()


def test_sdpa_with_a_mask_and_is_causal_applies_both_as_torch():
    """attn_mask together with is_causal=True (it raised): the causal mask and the given one
    (boolean or additive) both apply, as torch 2.13's CPU kernel; gradients too."""
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((1, 2, 4, 8)), rng.standard_normal((1, 2, 5, 8)), rng.standard_normal((1, 2, 5, 8))
    for mask in (rng.random((4, 5)) > 0.3, rng.standard_normal((4, 5))):
        res = []
        for lib in (fg, torch):
            ts = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
            out = lib.nn.functional.scaled_dot_product_attention(*ts, attn_mask=lib.tensor(mask), is_causal=True)
            out.pow(2).sum().backward()
            res.append([out.detach().numpy()] + [t.grad.numpy() for t in ts])
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_sdpa_refuses_masks_torch_refuses():
    """An attn_mask of another dtype than bool, float32 or the query's, and one that requires
    grad together with is_causal: torch's RuntimeError (they were computed)."""
    cases = [lambda L: L.zeros(3, 3, dtype=L.int64), lambda L: L.zeros(3, 3, dtype=L.float64),
             lambda L: L.zeros(1, 1, 3, 3, requires_grad=True)]
    for make, causal in zip(cases, (False, False, True)):
        got = []
        for lib in (fg, torch):
            q = lib.ones(1, 1, 3, 2)
            with pytest.raises(RuntimeError) as e:
                lib.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=make(lib), is_causal=causal)
            got.append(str(e.value))
        assert got[0] == got[1]
    q = fg.ones(1, 1, 3, 2, dtype=fg.bfloat16)
    assert F.scaled_dot_product_attention(q, q, q, attn_mask=fg.zeros(3, 3)).dtype == fg.bfloat16


def test_encoder_layer_inference_reads_a_float_padding_mask_as_pytorchs_fused_kernel_and_int_masks_refused():
    """In eval under no_grad PyTorch's TransformerEncoderLayer runs its fused kernel, which
    reads a float 0/1 key padding mask as boolean (padded where non-zero); elsewhere the float
    mask is added. Integer masks are refused, as PyTorch's attention refuses them."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    params = None
    outs = []
    for T in (fg, torch):
        layer = T.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        params = params or [rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3 for p in layer.parameters()]
        with T.no_grad():
            for p, v in zip(layer.parameters(), params):
                p.copy_(T.tensor(v))
        m = T.tensor([[0.0, 0, 0, 1], [0, 0, 1, 1]])
        layer.eval()
        with T.no_grad():
            fused = layer(T.tensor(x), src_key_padding_mask=m)
        added = layer(T.tensor(x), src_key_padding_mask=m)
        outs.append((fused.numpy(), added.detach().numpy()))
        with pytest.raises(AssertionError, match="only bool and floating types of key_padding_mask"):
            layer.self_attn(T.tensor(x), T.tensor(x), T.tensor(x), key_padding_mask=m.long())
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_multihead_attention_key_value_mismatch_raises_assertion_error_as_torch():
    """Keys and values of different lengths: PyTorch's AssertionError (a matmul's RuntimeError
    before), batched and unbatched, from the module and from the functional form."""
    mha = nn.MultiheadAttention(4, 2)
    with pytest.raises(AssertionError, match="key shape .* does not match value shape"):
        mha(fg.zeros(3, 2, 4), fg.zeros(5, 2, 4), fg.zeros(6, 2, 4))
    with pytest.raises(AssertionError, match="does not match value shape"):
        mha(fg.zeros(3, 4), fg.zeros(5, 4), fg.zeros(6, 4))
    with pytest.raises(AssertionError):
        F.multi_head_attention_forward(fg.zeros(3, 2, 4), fg.zeros(5, 2, 4), fg.zeros(6, 2, 4), 4, 2,
                                       mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0,
                                       mha.out_proj.weight, mha.out_proj.bias)


def test_mismatched_mask_types_warn_as_pytorch():
    """A float attn_mask beside a bool key_padding_mask works and warns (PyTorch's deprecation);
    masks of one type do not."""
    import warnings
    mha = fg.nn.MultiheadAttention(4, 1)
    q = fg.zeros(2, 1, 4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mha(q, q, q, key_padding_mask=fg.tensor([[False, True]]), attn_mask=fg.zeros(2, 2).bool())
        assert not [x for x in w if "mismatched" in str(x.message)]
        mha(q, q, q, key_padding_mask=fg.tensor([[False, True]]), attn_mask=fg.zeros(2, 2))
    assert [x.category for x in w if "mismatched key_padding_mask and attn_mask" in str(x.message)] == [UserWarning]
