"""Connectionist Temporal Classification as two primitives, as PyTorch's ``ctc_loss`` and
``ctc_loss_backward`` kernels: ``ctc_nll`` (each sample's negative log-likelihood, from the
forward (alpha) recursion over time) and ``ctc_grad`` (its gradient with respect to the
log-probabilities, from the alpha and beta recursions: ``-exp(log(sum of alpha * beta over
the label's positions) + nll - lp)``, or in PyTorch's form, which backward uses, the gradient
as if log_softmax came next, ``exp(lp)`` more, equal to it through log_softmax).

Operands: log-probabilities ``(T, N, C)``, the blank-interleaved label lattice ``(N, W)``
(W = 2 * max target length + 1, padded with blanks), input lengths and target lengths
``(N,)``, all integer tensors but the first. A recursion over time has no loop kernel: both
run in NumPy (float64), under compile as a graph break or, with ``fullgraph=True``, on the
interpreter."""
from __future__ import annotations

import numpy as np

from ..primitive import Primitive

__all__ = ["ctc_nll", "ctc_grad"]

NO_LOWERING = "CTC's recursion over time runs in NumPy; it has no loop kernel"
_NEG_INF = -np.inf


def _skips(ext: np.ndarray) -> np.ndarray:
    """Which lattice positions may be entered by skipping the blank before them: a label
    unlike the one two back (a label equal to the blank id counts as a label, as in PyTorch)."""
    skip = np.zeros(ext.shape, dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    skip[:, ::2] = False
    return skip


def _lse(*terms: np.ndarray) -> np.ndarray:
    """log(sum(exp(term))), -inf where every term is."""
    m = terms[0]
    for t in terms[1:]:
        m = np.maximum(m, t)
    safe = np.where(np.isfinite(m), m, 0.0)
    total = sum(np.exp(t - safe) for t in terms)
    with np.errstate(divide="ignore"):
        return np.log(total) + safe


def _shift(x: np.ndarray, k: int) -> np.ndarray:
    """``x`` moved ``k`` lattice positions along dim 1 (right for k > 0, left for k < 0), -inf entering."""
    out = np.full_like(x, _NEG_INF)
    if k > 0:
        out[:, k:] = x[:, :-k]
    else:
        out[:, :k] = x[:, -k:]
    return out


def _recursions(lp, ext, il, tl, beta: bool):
    """(alpha, beta or None, each sample's nll, the lattice's log-probs (T, N, W))."""
    lp = lp.astype(np.float64)
    T, N, _ = lp.shape
    lpe = lp[:, np.arange(N)[:, None], ext]
    skip = np.where(_skips(ext), 0.0, _NEG_INF)
    alpha = np.full(lpe.shape, _NEG_INF)
    if T:
        alpha[0, :, 0] = lpe[0, :, 0]
        alpha[0, tl > 0, 1] = lpe[0, tl > 0, 1]
    for t in range(1, T):
        a = alpha[t - 1]
        alpha[t] = _lse(a, _shift(a, 1), _shift(a, 2) + skip) + lpe[t]
    n = np.arange(N)
    last = np.maximum(il - 1, 0)
    end = alpha[last, n, 2 * tl] if T else np.full(N, _NEG_INF)
    before = np.where(tl > 0, alpha[last, n, np.maximum(2 * tl - 1, 0)], _NEG_INF) if T else end
    nll = -_lse(end, before)
    nll = np.where(il == 0, np.where(tl == 0, 0.0, np.inf), nll)  # no frames: the empty alignment alone
    if not beta:
        return alpha, None, nll, lpe
    b = np.full(lpe.shape, _NEG_INF)
    skip_back = _shift(skip, -2)  # (moving back from s + 2 to s where s + 2 may be entered by a skip)
    has = tl > 0
    for t in range(T - 1, -1, -1):
        step = np.full_like(skip, _NEG_INF)
        if t + 1 < T:
            later = b[t + 1]
            step = _lse(later, _shift(later, -1), _shift(later, -2) + skip_back) + lpe[t]
        start = np.full_like(skip, _NEG_INF)  # each sample's last frame: end in the last label or blank
        start[n, 2 * tl] = lpe[t, n, 2 * tl]
        start[n[has], 2 * tl[has] - 1] = lpe[t, n[has], 2 * tl[has] - 1]
        b[t] = np.where((t == il - 1)[:, None], start, np.where((t < il - 1)[:, None], step, _NEG_INF))
    return alpha, b, nll, lpe


def _nll_impl(log_probs, ext, input_lengths, target_lengths, zero_infinity):
    nll = _recursions(log_probs, ext, input_lengths, target_lengths, beta=False)[2]
    if zero_infinity:
        nll = np.where(np.isinf(nll), 0.0, nll)
    return nll.astype(log_probs.dtype)


def _grad_impl(log_probs, ext, input_lengths, target_lengths, zero_infinity, as_pytorch):
    alpha, beta, nll, _ = _recursions(log_probs, ext, input_lengths, target_lengths, beta=True)
    lp = log_probs.astype(np.float64)
    T, N, C = lp.shape
    lcab = np.full((T, N, C), _NEG_INF)
    with np.errstate(invalid="ignore"):
        np.logaddexp.at(lcab, (np.arange(T)[:, None, None], np.arange(N)[None, :, None], ext[None]), alpha + beta)
        grad = -np.exp(lcab + nll[None, :, None] - lp)
        if as_pytorch:  # (PyTorch's form: the gradient as if log_softmax came next)
            grad += np.exp(lp)
    frames = np.arange(T)[:, None] < input_lengths[None, :]
    grad = np.where(frames[:, :, None], grad, 0.0)
    if zero_infinity:
        grad = np.where(np.isinf(nll)[None, :, None], 0.0, grad)
    return grad.astype(log_probs.dtype)


def _nll_vjp(g, ins, out, needs, zero_infinity):
    from .elementwise import mul
    from .layout import reshape
    lp, ext, il, tl = ins
    grad = ctc_grad(lp, ext, il, tl, zero_infinity=zero_infinity, as_pytorch=True)
    return (mul(grad, reshape(g, shape=(1, tuple(g.shape)[0], 1))), None, None, None)


def _nll_jvp(ts, ins, out, zero_infinity):
    from .elementwise import mul
    from .reduce import reduce_sum
    if ts[0] is None:
        return None
    lp, ext, il, tl = ins
    grad = ctc_grad(lp, ext, il, tl, zero_infinity=zero_infinity, as_pytorch=False)  # (the exact derivative)
    return reduce_sum(mul(grad, ts[0]), axes=(0, 2), keepdims=False)


ctc_nll = Primitive("ctc_nll", _nll_impl, abstract=lambda a, p: ((a[0][0][1],), a[0][1]), vjp=_nll_vjp, jvp=_nll_jvp,
                    saves="in", checked=slice(0, 1), node_name="CtcLossBackward0", no_lowering=NO_LOWERING)
ctc_grad = Primitive("ctc_grad", _grad_impl, abstract=lambda a, p: (a[0][0], a[0][1]), nondiff=True,
                     no_lowering=NO_LOWERING)
