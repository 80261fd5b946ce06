"""A GPT training step (embeddings, causal self-attention, LayerNorm, GELU MLP, cross-entropy, AdamW)
compiles into one graph and trains like eager; the model is W8's (benchmarks/w8_gpt.py) at a tiny size."""
import copy

import numpy as np

import fusegrad as fg
from benchmarks.w8_gpt import build_gpt, make_step


def test_gpt_training_step_compiles_to_one_graph_and_matches_eager_for_10_steps():
    fg.manual_seed(0)
    eager_model = build_gpt(fg, vocab=24, block=8, n_embd=16, heads=4, layers=2)
    compiled_model = copy.deepcopy(eager_model)
    eager = make_step(fg, eager_model, fg.optim.AdamW(eager_model.parameters(), lr=1e-2))
    compiled = fg.compile(make_step(fg, compiled_model, fg.optim.AdamW(compiled_model.parameters(), lr=1e-2)),
                          fullgraph=True)
    g = np.random.default_rng(0)
    idx, targets = (fg.tensor(g.integers(0, 24, (3, 8))) for _ in range(2))
    losses = []
    for _ in range(10):
        le, lc = eager(idx, targets), compiled(idx, targets)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-4)
        losses.append(le.item())
    for (name, pe), pc in zip(eager_model.named_parameters(), compiled_model.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-3, atol=1e-4, err_msg=name)
    assert losses[-1] < losses[0]  # it learns the batch
    info = compiled.cache_info()
    assert info["compiles"] == 1 and info["fallbacks"] == 0 and info["graph_breaks"] == []
    # the first call runs eagerly to create AdamW's state; the second compiles; the other eight reuse it
    assert info["warmups"] == 1 and info["hits"] == 8, info
