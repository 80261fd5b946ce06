"""Gradient buckets for DistributedDataParallel: each bucket's averaged all-reduce starts
(non-blocking, MPI ``Iallreduce``) as soon as all its gradients are accumulated, while the
rest of the backward runs; the last ready gradient waits for every bucket and leaves the
averages in ``.grad``.

A gradient enters its bucket slot in its own memory order: one computed transposed
(Fortran-ordered, as ``(w.t() @ x.t()).t()`` gives w) copied into a C-ordered slot and back
costs a strided transpose each way, more than the all-reduce itself. Element-wise
reduction does not care about the order as long as every rank uses the same one, so each
slot's order travels in the bucket as a tag (1 for Fortran order) summed by the same
all-reduce: a sum other than 0 or the world size means the ranks disagreed, and that slot
is reduced again in C order (and stays in C order from then on). Once the summed tags show
the ranks agree, the slot's order is settled (the same on every rank, since every rank sees
the same sums).

A settled slot takes the gradient directly: the autograd engine writes a new ``.grad`` into
it (``AccumulateGrad.grad_into``) and ``.grad`` stays a view of the bucket, so the
gradient is copied once, not into the bucket and back. Each synchronized iteration gets
fresh buckets (unless ``gradient_as_bucket_view``, where ``.grad`` is the bucket by
design), so a ``.grad`` kept from an earlier step is never overwritten by a later one."""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...distributed.collectives import ReduceOp, iallreduce
from ...distributed.process_group import ProcessGroup, _mpi
from ...runtime.grad_mode import no_grad
from ...runtime.tensor import wrap


class _Bucket:
    """Parameters whose gradients travel in one flat buffer, followed by one layout tag per
    parameter (see the module docstring)."""

    def __init__(self, params: list, index: int):
        self.params = params
        self.index = index
        self.offsets = np.cumsum([0] + [p.numel() for p in params]).tolist()
        self.renew()
        self.orders = ["C"] * len(params)
        self.settled = [False] * len(params)  # the ranks agreed on the slot's order
        self.handed: list = [None] * len(params)  # slots the engine wrote a new .grad into
        self.pending = len(params)
        self.request = None

    def renew(self) -> None:
        """A fresh flat buffer (every slot is written before its all-reduce) and tags: float32
        for bfloat16 gradients, which MPI cannot sum (``widened``: none is handed a slot)."""
        dtype = self.params[0]._data.dtype
        self.widened = dtype.name == "bfloat16"
        self.flat = np.empty(self.offsets[-1] + len(self.params), dtype=np.float32 if self.widened else dtype)
        self.tags = self.flat[self.offsets[-1]:]
        self.tags[:] = 0

    @property
    def size(self) -> int:
        """Gradient elements (without the tags)."""
        return self.offsets[-1]

    def slot(self, k: int) -> np.ndarray:
        """Slot ``k`` shaped as its parameter, in the order chosen for it this iteration."""
        shape = self.params[k]._data.shape
        return self.flat[self.offsets[k]:self.offsets[k + 1]].reshape(shape, order=self.orders[k])

    def hand(self, k: int) -> np.ndarray:
        """Settled slot ``k``, for the engine to write a new gradient into."""
        self.tags[k] = 1 if self.orders[k] == "F" else 0
        self.handed[k] = self.slot(k)
        return self.handed[k]

    def holds(self, k: int, grad) -> bool:
        """``grad`` (a Tensor or None) is the one the engine wrote into slot ``k``."""
        return grad is not None and self.handed[k] is not None and grad._data is self.handed[k]

    def fill(self, k: int, grad: Optional[np.ndarray], world: int) -> None:
        """Slot ``k`` := ``grad / world`` (zeros when None), in ``grad``'s memory order unless
        the slot's order is settled."""
        if not self.settled[k]:
            fortran = (grad is not None and grad.ndim > 1
                       and grad.flags.f_contiguous and not grad.flags.c_contiguous)
            self.orders[k] = "F" if fortran else "C"
        self.tags[k] = 1 if self.orders[k] == "F" else 0
        if grad is None:
            self.slot(k)[...] = 0
        else:
            np.divide(grad, world, out=self.slot(k))

    def settle(self, world: int) -> list:
        """After the all-reduce: settle the slots whose ranks agreed on the order; return
        those whose ranks disagreed (C order from now on)."""
        bad = [k for k, t in enumerate(self.tags) if t != 0 and t != world]
        self.settled = [True] * len(self.params)
        for k in bad:
            self.orders[k] = "C"
        return bad


def plan_buckets(params: Sequence, cap_bytes: int, first_cap_bytes: Optional[int] = None) -> List[list]:
    """Group ``params`` (registration order) into buckets in reverse order, each up to
    ``cap_bytes`` (the first up to ``first_cap_bytes``), never mixing dtypes."""
    buckets: List[list] = []
    cur: list = []
    size = 0
    for p in reversed(list(params)):
        cap = first_cap_bytes if (first_cap_bytes is not None and not buckets) else cap_bytes
        nbytes = p._data.nbytes
        if cur and (size + nbytes > cap or p._data.dtype != cur[0]._data.dtype):
            buckets.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += nbytes
    if cur:
        buckets.append(cur)
    return buckets


class Reducer:
    """Owns the buckets and the post-accumulate-grad hooks of one DDP module."""

    def __init__(self, groups: List[list], names: Dict[int, str], process_group: ProcessGroup):
        self.group = process_group
        self.buckets = [_Bucket(ps, i) for i, ps in enumerate(groups)]
        self.where = {id(p): (b, k) for b in self.buckets for k, p in enumerate(b.params)}
        self.names = names
        self.params = [p for b in self.buckets for p in b.params]
        self.active = False  # this iteration's backward should reduce (forward not under no_sync)
        self.marked: set = set()
        self.locally_unused: set = set()
        self.find_unused = False
        self.grads_as_views = False  # gradient_as_bucket_view: .grad becomes a view of the bucket
        self.comm_wait_s = 0.0  # time the last backward spent waiting for all-reduces to finish
        # time.perf_counter() when that wait began (the last gradient's arrival) and ended: on one
        # host the clock is shared, so ranks' times tell the wait for a slower rank from communication
        self.wait_span = (0.0, 0.0)
        self.launched_at: List[int] = []  # per bucket launch: how many gradients were ready then
        self.in_flight: list = []  # requests of buckets launched and not yet seen complete
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._on_grad)
            p._accumulator().grad_into = self._into

    # -------------------------------------------------------------- per iteration
    def prepare(self, active: bool, unused: Sequence = ()) -> None:
        """Called by each forward: arm the hooks (or not, under no_sync)."""
        if self.active and self.marked and len(self.marked) < len(self.params):
            missing = [self.names[id(p)] for p in self.params if id(p) not in self.marked]
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. "
                "This error indicates that your module has parameters that were not used in producing loss. "
                "You can enable unused parameter detection by passing the keyword argument "
                "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`. Parameters "
                f"that did not receive grad: {', '.join(missing)}")
        self.active = active
        self.marked = set()
        self.launched_at = []
        for b in self.buckets:
            b.pending = len(b.params)
            b.request = None
            b.handed = [None] * len(b.params)
            if active and not self.grads_as_views:
                b.renew()
        self.in_flight = []
        self.locally_unused = {id(p) for p in unused}
        if active:
            for p in unused:
                self._mark(p)

    def _on_grad(self, p) -> None:
        if self.active:
            if id(p) in self.marked:
                raise RuntimeError(
                    f"Expected to mark a variable ready only once. Parameter {self.names[id(p)]} received its "
                    "gradient twice in one iteration (a second backward without a forward in between, or a "
                    "reentrant backward); run the second backward under no_sync() or call forward again.")
            self._mark(p)

    def _into(self, p, grad: np.ndarray) -> Optional[np.ndarray]:
        """Where the engine writes ``p``'s new ``.grad`` (its settled slot), or None."""
        if not self.active or id(p) in self.marked:
            return None
        b, k = self.where[id(p)]
        return b.hand(k) if b.settled[k] and not b.widened else None

    def _mark(self, p) -> None:
        b, k = self.where[id(p)]
        n = self.group.size()
        if b.holds(k, p._grad):
            if n > 1:  # already in its slot: averaged in place
                np.divide(b.handed[k], n, out=b.handed[k])
        else:
            b.handed[k] = None
            b.fill(k, None if p._grad is None else np.asarray(p._grad._data), n)
        self.marked.add(id(p))
        b.pending -= 1
        if b.pending == 0:
            b.request = iallreduce(self.group, b.flat, ReduceOp.SUM)
            self.in_flight.append(b.request)
            self.launched_at.append(len(self.marked))
        self.poke()
        if len(self.marked) == len(self.params):
            self._finish()

    def poke(self, *_) -> None:
        """Let MPI advance the buckets in flight: MPICH progresses non-blocking collectives only
        inside MPI calls, so DDP calls this from every gradient hook and, as a post-hook, from
        every autograd node of the backward (a ``Testall``: a few microseconds)."""
        if self.in_flight and _mpi().Request.Testall(self.in_flight):
            self.in_flight = []

    def _finish(self) -> None:
        t0 = time.perf_counter()
        _mpi().Request.Waitall([b.request for b in self.buckets])
        t1 = time.perf_counter()
        self.comm_wait_s = t1 - t0
        self.wait_span = (t0, t1)
        n = self.group.size()
        for b in self.buckets:
            bad = b.settle(n)
            if bad:  # the same sums on every rank: all of them reduce these slots again in C order
                self._reduce_again(b, bad, n)
        used = self._globally_used() if self.find_unused else None
        with no_grad():
            for b in self.buckets:
                for k, p in enumerate(b.params):
                    if b.holds(k, p._grad):
                        p._grad._bump()  # .grad is its slot, already the average
                        continue
                    avg = b.slot(k)
                    if p._grad is None and not (used is not None and used[id(p)]):
                        continue  # unused on every rank: no gradient, as in PyTorch
                    if p._grad is None or self.grads_as_views:  # (this iteration's bucket: nothing else writes it)
                        p._grad = wrap(avg.astype(p._data.dtype) if b.widened else avg)
                    else:
                        p._grad._data[...] = avg
                        p._grad._bump()
        self.active = False

    def _reduce_again(self, b: _Bucket, bad: list, n: int) -> None:
        """Slots ``bad`` of ``b`` (never handed: unsettled until now) all-reduced again, in C order."""
        parts = [np.zeros(b.params[k]._data.shape, b.flat.dtype) if b.params[k]._grad is None
                 else np.asarray(b.params[k]._grad._data) / n for k in bad]
        scratch = np.concatenate([q.ravel() for q in parts])
        iallreduce(self.group, scratch, ReduceOp.SUM, blocking=True)
        at = 0
        for k, q in zip(bad, parts):
            b.slot(k)[...] = scratch[at:at + q.size].reshape(q.shape)
            at += q.size

    def _globally_used(self) -> dict:
        MPI = _mpi()
        flags = np.array([0 if id(p) in self.locally_unused else 1 for p in self.params], dtype=np.int32)
        self.group.comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
        return {id(p): bool(f) for p, f in zip(self.params, flags)}

