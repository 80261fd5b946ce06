"""W8: one AdamW training step of a small GPT (2 layers, 4 heads, n_embd 128, block 64, batch 8,
vocab 512): token and position embeddings, causal self-attention, LayerNorm, GELU MLP, cross-entropy.

The model is written once against the ``torch`` API and built with fusegrad or PyTorch. The step
(forward, ``loss.backward()``, ``AdamW.step()``, ``zero_grad``) is one function, compiled whole where the
system can: fusegrad compiles it into one graph (``fullgraph=True``), torch.compile breaks it at
``backward``. Both systems start from identical weights, so the loss and the updated weights compare.

fusegrad compiled's first call is the eager call that creates AdamW's state (compile's optimizer
warm-up); the trace and compile happen on the second call, which the harness adds to the first-call
time (see systems.FusegradCompiled), and the first-step check compares the eager step.
tests/test_compiled_gpt.py checks the compiled steps themselves.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import fusegrad

from . import systems as S
from .common import rng
from .harness import Entry, Results, Task, Timing, run_tasks

TITLE = "one AdamW step of a GPT: 2 layers, 4 heads, n_embd 128, block 64, batch 8, vocab 512"
# (batch, block, vocab, n_embd, heads, layers)
SIZES = {"full": (8, 64, 512, 128, 4, 2), "quick": (2, 8, 32, 16, 4, 2)}
LR = 1e-3


def build_gpt(T: Any, vocab: int, block: int, n_embd: int, heads: int, layers: int) -> Any:
    """A nanoGPT-style model from the ``torch``-like module ``T`` (fusegrad or torch)."""
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            # no bias: a key bias shifts a query's scores equally, so its true gradient is zero and AdamW
            # would turn rounding noise into lr-sized steps that differ between systems
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
            self.attn_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

        def attention(self, x: Any) -> Any:
            B, L, C = x.shape
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q, k, v = (t.view(B, L, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.attn_proj(y.transpose(1, 2).reshape(B, L, C))

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.wte(idx) + self.wpe(T.arange(idx.shape[1]))
            for blk in self.blocks:
                x = blk(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def make_step(T: Any, model: Any, opt: Any) -> Callable:
    """Forward, cross-entropy over every position, backward, AdamW update; returns the loss."""
    def step(idx: Any, targets: Any) -> Any:
        logits = model(idx)
        loss = T.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step


def inputs(size: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """Initial weights (from a seeded fusegrad model, by parameter name) and a batch of tokens."""
    batch, block, vocab, n_embd, heads, layers = SIZES[size]
    fusegrad.manual_seed(0)
    weights = {k: v.numpy().copy() for k, v in build_gpt(fusegrad, vocab, block, n_embd, heads, layers)
               .state_dict().items()}
    g = rng(8)
    idx = g.integers(0, vocab, (batch, block)).astype(np.int64)
    targets = g.integers(0, vocab, (batch, block)).astype(np.int64)
    return weights, idx, targets


def prepare(T: Any, size: str) -> tuple[Any, Callable, Any, Any]:
    """A model of ``T`` with the shared initial weights, its step, and the batch."""
    weights, idx_np, tgt_np = inputs(size)
    _, block, vocab, n_embd, heads, layers = SIZES[size]
    model = build_gpt(T, vocab, block, n_embd, heads, layers)
    model.load_state_dict({k: T.tensor(v) for k, v in weights.items()})
    opt = T.optim.AdamW(model.parameters(), lr=LR)
    return model, make_step(T, model, opt), T.tensor(idx_np), T.tensor(tgt_np)


def _torchlike(T: Any, wrap: Callable[[Callable], Callable], size: str) -> S.Prepared:
    model, step, idx, tgt = prepare(T, size)
    step = wrap(step)
    return S.Prepared(lambda: (step(idx, tgt), list(model.parameters())))


def _fusegrad_compiled(size: str) -> S.Prepared:
    model, step, idx, tgt = prepare(fusegrad, size)
    return S.fusegrad_compiled(lambda c: lambda: (c(idx, tgt), list(model.parameters())), step, fullgraph=True)


def tasks(size: str) -> list[Task]:
    entries = [
        Entry(S.FG_EAGER, lambda: _torchlike(fusegrad, lambda f: f, size)),
        Entry(S.FG_COMPILED, lambda: _fusegrad_compiled(size)),
        Entry(S.TORCH_EAGER, lambda: _torchlike(S.torch(), lambda f: f, size)),
        Entry(S.TORCH_COMPILE, lambda: _torchlike(S.torch(), S.torch_compile, size)),
    ]
    # compared: the loss and every parameter after the first step from identical weights
    return [Task("W8", "step", entries, rtol=2e-3, atol=2e-4)]


def run(size: str, timing: Timing) -> Results:
    return run_tasks(tasks(size), timing)
