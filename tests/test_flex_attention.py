"""FlexAttention (``nn.attention.flex_attention``) against PyTorch's CPU implementation: score
and mask mods, block masks, their bookkeeping and slices, GQA, lse, fully masked rows, dtypes, errors;
gradients (which PyTorch's CPU kernel refuses) by float64 gradcheck and against SDPA's, compiled."""
import importlib
import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.nn.attention import flex_attention as ffa

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _program(lib):
    """One program of flex attention calls written against ``lib``; its results as arrays,
    the printed masks and the errors raised (type and message)."""
    fa = importlib.import_module(lib.__name__ + ".nn.attention.flex_attention")
    rng = np.random.default_rng(0)

    def t(*shape):
        return lib.tensor(rng.standard_normal(shape), dtype=lib.float32)

    q, k, v, k2, v2, bias = t(2, 4, 10, 8), t(2, 4, 10, 8), t(2, 4, 10, 6), t(2, 2, 10, 8), t(2, 2, 10, 6), t(4, 10, 10)
    doc, slopes = lib.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2]), lib.tensor([0.5, 0.25, 0.125, 0.0625])

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= 2

    def same_doc(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    def rel_bias(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx, kv_idx]

    def first_row_empty(b, h, q_idx, kv_idx):
        return (q_idx > 0) & (kv_idx <= q_idx)

    out = {}
    bm = fa.create_block_mask(causal, None, None, 10, 10, device="cpu")
    bm2 = fa.create_block_mask(fa.and_masks(causal, window, same_doc), 2, 4, 10, 10, BLOCK_SIZE=4)
    bm3 = fa.create_block_mask(fa.or_masks(window, same_doc), None, 4, 10, 10, BLOCK_SIZE=(2, 4))
    out["plain"] = fa.flex_attention(q, k, v)
    out["causal"] = fa.flex_attention(q, k, v, block_mask=bm)
    out["alibi"] = fa.flex_attention(q, k, v, score_mod=alibi, block_mask=bm)
    out["rel_bias"] = fa.flex_attention(q, k, v, score_mod=rel_bias, scale=0.3)
    out["softcap"] = fa.flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: 5 * lib.tanh(s / 5))
    out["and"] = fa.flex_attention(q, k, v, block_mask=bm2)
    out["or"] = fa.flex_attention(q, k, v, block_mask=bm3)
    out["empty"], out["empty_lse"] = fa.flex_attention(
        q, k, v, block_mask=fa.create_block_mask(first_row_empty, None, None, 10, 10), return_lse=True)
    out["gqa"], aux = fa.flex_attention(q, k2, v2, enable_gqa=True, block_mask=bm, return_aux=fa.AuxRequest(lse=True))
    out["gqa_lse"] = aux.lse
    out["float64"] = fa.flex_attention(q.double(), k.double(), v.double(), score_mod=alibi)
    out["bfloat16"] = fa.flex_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), block_mask=bm).float()
    out["mask"] = fa.create_mask(causal, 1, 1, 5, 6, device="cpu")
    out["mask_of_score_mod"] = fa.create_mask(lambda s, b, h, i, j: lib.where(i >= j, s, -float("inf")), 2, 1, 4, 4)
    text = []
    for name, m in (("bm", bm), ("bm2", bm2), ("bm3", bm3)):
        out[name] = m.to_dense()
        for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                      "q_indices"):
            out[f"{name}.{field}"] = getattr(m, field)
        text.append(f"{m.shape} {m.sparsity():.4f} {m.numel()} {m}")
    text.append(repr(bm2).replace("torch.Size", "Size").replace("fusegrad.Size", "Size"))
    for name, sliced in (("b1", bm2[1]), ("q1", bm2[:, :, 1]), ("bh", bm2[0, 1]), ("last", bm2[-1, :, 2]),
                         ("t", bm2[0:2, 1:2, lib.tensor([0, 2])])):
        text.append(f"{list(sliced.shape)} {sliced.sparsity():.4f}")
        for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks"):
            out[f"{name}.{field}"] = getattr(sliced, field)
    for call in (lambda: fa.flex_attention(q, k2, v2), lambda: fa.flex_attention(q[:, :3], k2, v2, enable_gqa=True),
                 lambda: fa.flex_attention(q[:, :, :8], k, v, block_mask=bm),
                 lambda: fa.flex_attention(q[0], k[0], v[0]),
                 lambda: fa.flex_attention(q, k, v, return_lse=True, return_aux=fa.AuxRequest(lse=True)),
                 lambda: fa.flex_attention(q, k, v, block_mask=bm2[:, :, 0])):
        try:
            call()
            text.append("no error")
        except Exception as e:  # noqa: BLE001 - the type and message are what is compared
            text.append(f"{type(e).__name__}: {e}")
    return {name: x.numpy() for name, x in out.items()}, text


def test_flex_attention_matches_torch():
    mine, my_text = _program(fg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch's advice to compile, return_lse's deprecation)
        ref, ref_text = _program(torch)
    assert my_text == ref_text
    assert mine.keys() == ref.keys()
    for name in ref:
        assert mine[name].dtype == ref[name].dtype, name
        np.testing.assert_allclose(mine[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_flex_attention_gradients_and_compile():
    """Gradients: float64 gradcheck through a score_mod and a block mask, equal to SDPA's for the
    causal mask, and the same under compile of grad (PyTorch's CPU kernel has no backward)."""
    rng = np.random.default_rng(1)
    q, k, v = (fg.tensor(rng.standard_normal((1, 2, 6, 4)), requires_grad=True) for _ in range(3))
    causal = ffa.create_block_mask(lambda b, h, i, j: i >= j, None, None, 6, 6)

    def heads_scaled(s, b, h, i, j):
        return s * (1 + 0.1 * h)

    assert fg.autograd.gradcheck(lambda a, b, c: ffa.flex_attention(a, b, c, score_mod=heads_scaled,
                                                                    block_mask=causal), (q, k, v))

    def loss(q, k, v):
        return (ffa.flex_attention(q, k, v, block_mask=causal) ** 2).sum()

    def sdpa_loss(q, k, v):
        return (fg.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) ** 2).sum()

    mine, sdpa = fg.autograd.grad(loss(q, k, v), (q, k, v)), fg.autograd.grad(sdpa_loss(q, k, v), (q, k, v))
    compiled = fg.compile(fg.func.grad(loss, argnums=(0, 1, 2)))(q.detach(), k.detach(), v.detach())
    for a, b, c in zip(mine, sdpa, compiled):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(c.numpy(), a.numpy(), rtol=1e-12, atol=1e-12)
