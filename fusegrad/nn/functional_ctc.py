"""``ctc_loss``: Connectionist Temporal Classification as the forward (alpha) recursion.

The recursion runs over time in log space on a ``(batch, 2 * max_target + 1)`` lattice of
blank-interleaved labels, all samples at once; autograd through it gives the gradient, so
no beta pass is written. The lattice layout (which label, which skip is allowed) depends
only on the integer targets and lengths, so it is built on the host with NumPy."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from ..runtime import ops as O
from ..runtime.autocast_state import float32_policy
from ..runtime.factory import tensor as _tensor
from ..runtime.tensor import Tensor

__all__ = ["ctc_loss"]

_NEG_INF = float("-inf")


def _ints(x: Union[Tensor, Sequence[int]]) -> list:
    return [int(v) for v in np.atleast_1d(x.tolist() if isinstance(x, Tensor) else x)]


def _lattice(targets: Tensor, target_lengths: list, blank: int):
    """Per sample the blank-interleaved label sequence (padded with blanks) and the mask of
    positions that may be entered by skipping one (a label that differs from the one two back;
    a label equal to the blank id counts as a label, as PyTorch's kernel takes it)."""
    tg = np.asarray(targets.tolist(), dtype=np.int64)
    n, width = len(target_lengths), 2 * max(target_lengths, default=0) + 1
    ext = np.full((n, width), blank, dtype=np.int64)
    offset = 0
    for i, length in enumerate(target_lengths):
        labels = tg[i, :length] if tg.ndim == 2 else tg[offset:offset + length]
        offset += length
        ext[i, 1:2 * length:2] = labels
    skip = np.zeros((n, width), dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    skip[:, ::2] = False  # (the blanks between labels are entered from the one before only)
    return ext, skip


def _shift(x: Tensor, k: int) -> Tensor:
    """``x`` moved ``k`` lattice positions right along dim 1, ``-inf`` entering."""
    return O.pad(O.narrow(x, 1, 0, x.shape[1] - k), [k, 0], value=_NEG_INF)


def _logaddexp(*terms: Tensor) -> Tensor:
    """``log(sum(e^term))``, ``-inf`` (with a zero gradient, not NaN) where all are ``-inf``."""
    m = terms[0]
    for t in terms[1:]:
        m = O.maximum(m, t)
    m = O.where(O.eq(m, _NEG_INF), 0.0, m.detach())
    s = O.exp(O.sub(terms[0], m))
    for t in terms[1:]:
        s = O.add(s, O.exp(O.sub(t, m)))
    alive = O.gt(s, 0.0)
    return O.where(alive, O.add(O.log(O.where(alive, s, 1.0)), m), _NEG_INF)


@float32_policy
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Union[Tensor, Sequence[int]],
             target_lengths: Union[Tensor, Sequence[int]], blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
    """The CTC loss of ``log_probs`` (``(T, N, C)`` or unbatched ``(T, C)`` log-softmax
    outputs) against ``targets`` (``(N, S)`` padded or 1-D concatenated labels): the negative
    log-likelihood of all alignments; ``'mean'`` divides each by its target length first."""
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = O.unsqueeze(log_probs, 1)
        targets = O.unsqueeze(targets, 0) if targets.ndim == 1 else targets
    if log_probs._data.dtype.itemsize == 2:  # (under autocast the float32 policy cast it already)
        from ..runtime.keywords import _type_name
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for '{_type_name(log_probs._data.dtype)}'")
    in_lens, tg_lens = _ints(input_lengths), _ints(target_lengths)
    T, N, C = log_probs.shape
    for what, lens in (("input_lengths", in_lens), ("target_lengths", tg_lens)):
        if min(lens, default=0) < 0:
            raise RuntimeError(f"Expected {what} to have value at least 0, but got value {min(lens)} (while "
                               "checking arguments for ctc_loss_allocate_outputs)")
    if len(in_lens) != N or len(tg_lens) != N:
        raise RuntimeError(f"input_lengths must be of size batch_size ({N}) and target_lengths too")
    if max(in_lens, default=0) > T:
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {max(in_lens)}")
    checking = "for argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)"
    if targets.ndim == 1 and targets.shape[0] != sum(tg_lens):
        raise RuntimeError(f"Expected tensor to have size {sum(tg_lens)} at dimension 0, but got size "
                           f"{targets.shape[0]} {checking}")
    if targets.ndim == 2 and max(tg_lens, default=0) > targets.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {max(tg_lens)} at dimension 1, but got size "
                           f"{targets.shape[1]} {checking}")
    ext, skip = _lattice(targets, tg_lens, blank)
    width = ext.shape[1]
    index = _tensor(np.broadcast_to(ext, (T, N, width)).copy())
    lp = O.gather(log_probs, 2, index)  # (T, N, width): log-prob of each lattice label at each step
    skip_mask = _tensor(np.where(skip, 0.0, _NEG_INF).astype(np.float32))
    start = np.full((N, width), _NEG_INF, dtype=np.float32)
    start[:, 0] = 0.0
    start[np.asarray(tg_lens) > 0, 1] = 0.0
    alpha = O.add(O.select(lp, 0, 0), _tensor(start))
    empty = np.asarray(in_lens) == 0
    if empty.any():  # no frames: the empty alignment alone (loss 0 for an empty target, else inf), no gradient
        start[:, 1] = _NEG_INF
        alpha = O.where(_tensor(empty[:, None]), _tensor(start), alpha)
    for t in range(1, T):
        step = O.add(_logaddexp(alpha, _shift(alpha, 1), O.add(_shift(alpha, 2), skip_mask)), O.select(lp, 0, t))
        running = _tensor(np.asarray([t < n for n in in_lens])[:, None])
        alpha = O.where(running, step, alpha)
    # end in the last label or the trailing blank
    last = np.asarray([2 * n for n in tg_lens])
    final = O.gather(alpha, 1, _tensor(np.stack([last, np.maximum(last - 1, 0)], 1)))
    before_last = O.where(_tensor(last > 0), O.select(final, 1, 1), _NEG_INF)
    loss = O.neg(_logaddexp(O.select(final, 1, 0), before_last))
    # PyTorch's CTC backward returns the gradient as if log_softmax came next: the true one
    # plus exp(log_probs) over each sample's frames (summing to zero over classes there, so
    # equal through log_softmax). A term that is exactly zero but has that gradient matches it.
    frames = _tensor((np.arange(T)[:, None] < np.asarray(in_lens)[None, :])[:, :, None])
    mass = O.sum(O.where(frames, O.exp(log_probs), 0.0), (0, 2))
    loss = O.add(loss, O.sub(mass, mass.detach()))
    infinite = O.eq(loss, float("inf"))
    if not zero_infinity and (type(loss._data) is not np.ndarray or bool(O.any(infinite))):
        # an infeasible sample (infinite loss) has NaN gradients over its frames in PyTorch: a
        # zero term with that gradient (sqrt's infinite slope at 0 times 0)
        lp_sum = O.sum(O.where(frames, log_probs, 0.0), (0, 2))
        loss = O.add(loss, O.sqrt(O.where(infinite, O.mul(lp_sum, 0.0), 0.0)))
    if zero_infinity:
        loss = O.where(infinite, 0.0, loss)
    if reduction == "none":
        return O.squeeze(loss, 0) if unbatched else loss
    if reduction == "sum":
        return O.sum(loss)
    if reduction == "mean":
        lengths = _tensor(np.maximum(np.asarray(tg_lens), 1).astype(np.float32)).to(loss.dtype)
        return O.mean(O.div(loss, lengths))
    raise ValueError(f"{reduction} is not a valid value for reduction")
