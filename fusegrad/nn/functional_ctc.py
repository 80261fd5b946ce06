"""``ctc_loss``: Connectionist Temporal Classification, checked and reduced as PyTorch's, on
the ``ctc_nll`` primitive (ir/prims/ctc.py: the alpha and beta recursions over time, in NumPy).
The blank-interleaved label lattice depends only on the integer targets and lengths, so it is
built on the host."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from ..ir import prims as P
from ..runtime import ops as O
from ..runtime.autocast_state import float32_policy
from ..runtime.factory import tensor as _tensor
from ..runtime.tensor import Tensor

__all__ = ["ctc_loss"]

def _ints(x: Union[Tensor, Sequence[int]]) -> list:
    return [int(v) for v in np.atleast_1d(x.tolist() if isinstance(x, Tensor) else x)]


def _lattice(targets: Tensor, target_lengths: list, blank: int):
    """Per sample the blank-interleaved label sequence, padded with blanks."""
    tg = np.asarray(targets.tolist(), dtype=np.int64)
    n, width = len(target_lengths), 2 * max(target_lengths, default=0) + 1
    ext = np.full((n, width), blank, dtype=np.int64)
    offset = 0
    for i, length in enumerate(target_lengths):
        labels = tg[i, :length] if tg.ndim == 2 else tg[offset:offset + length]
        offset += length
        ext[i, 1:2 * length:2] = labels
    return ext


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
    for what, lens in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if isinstance(lens, Tensor) and lens._data.dtype.kind not in "iu":
            raise RuntimeError(f"{what} must be integral")
    in_lens, tg_lens = _ints(input_lengths), _ints(target_lengths)
    T, N, C = log_probs.shape
    for what, lens in (("input_lengths", in_lens), ("target_lengths", tg_lens)):
        if min(lens, default=0) < 0:
            raise RuntimeError(f"Expected {what} to have value at least 0, but got value {min(lens)} (while "
                               "checking arguments for ctc_loss_allocate_outputs)")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
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
    ext = _lattice(targets, tg_lens, blank)
    loss = P.ctc_nll(log_probs, _tensor(ext), _tensor(np.asarray(in_lens, dtype=np.int64)),
                     _tensor(np.asarray(tg_lens, dtype=np.int64)), zero_infinity=bool(zero_infinity))
    if reduction == "none":
        return O.squeeze(loss, 0) if unbatched else loss
    if reduction == "sum":
        return O.sum(loss)
    if reduction == "mean":
        lengths = _tensor(np.maximum(np.asarray(tg_lens), 1).astype(np.float32)).to(loss.dtype)
        return O.mean(O.div(loss, lengths))
    raise ValueError(f"{reduction} is not a valid value for reduction")
