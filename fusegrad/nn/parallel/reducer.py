"""Gradient buckets for DistributedDataParallel: each bucket's averaged all-reduce starts
(non-blocking, MPI ``Iallreduce``) as soon as all its gradients are accumulated, while the
rest of the backward runs; the last ready gradient waits for every bucket and writes the
averages back into ``.grad``."""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...distributed.collectives import ReduceOp, iallreduce
from ...distributed.process_group import ProcessGroup, _mpi
from ...runtime.grad_mode import no_grad
from ...runtime.tensor import wrap


class _Bucket:
    """Parameters whose gradients travel in one flat buffer."""

    def __init__(self, params: list, index: int):
        self.params = params
        self.index = index
        self.offsets = np.cumsum([0] + [p.numel() for p in params]).tolist()
        self.flat = np.zeros(self.offsets[-1], dtype=params[0]._data.dtype)
        self.pending = len(params)
        self.request = None

    def slot(self, k: int) -> np.ndarray:
        return self.flat[self.offsets[k]:self.offsets[k + 1]]


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
        self.launched_at: List[int] = []  # per bucket launch: how many gradients were ready then
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self.params]

    def remove_hooks(self) -> None:
        for h in self._handles:
            h.remove()

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

    def _mark(self, p) -> None:
        b, k = self.where[id(p)]
        g = p._grad
        if g is None:
            b.slot(k)[...] = 0
        else:
            b.slot(k)[...] = np.asarray(g._data).reshape(-1)
        self.marked.add(id(p))
        b.pending -= 1
        if b.pending == 0:
            b.request = iallreduce(self.group, b.flat, ReduceOp.SUM)
            self.launched_at.append(len(self.marked))
        self._progress()
        if len(self.marked) == len(self.params):
            self._finish()

    def _progress(self) -> None:
        """Let MPI advance the buckets in flight (MPICH progresses inside MPI calls)."""
        reqs = [b.request for b in self.buckets if b.request is not None]
        if reqs:
            _mpi().Request.Testall(reqs)

    def _finish(self) -> None:
        t0 = time.perf_counter()
        _mpi().Request.Waitall([b.request for b in self.buckets])
        self.comm_wait_s = time.perf_counter() - t0
        used = self._globally_used() if self.find_unused else None
        n = self.group.size()
        with no_grad():
            for b in self.buckets:
                b.flat /= n
                for k, p in enumerate(b.params):
                    avg = b.slot(k).reshape(p._data.shape)
                    if p._grad is None and not (used is not None and used[id(p)]):
                        continue  # unused on every rank: no gradient, as in PyTorch
                    if self.grads_as_views:
                        p._grad = wrap(avg)
                    elif p._grad is not None:
                        p._grad._data[...] = avg
                        p._grad._bump()
                    else:
                        p._grad = wrap(avg.copy())
        self.active = False

    def _globally_used(self) -> dict:
        MPI = _mpi()
        flags = np.array([0 if id(p) in self.locally_unused else 1 for p in self.params], dtype=np.int32)
        self.group.comm.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
        return {id(p): bool(f) for p, f in zip(self.params, flags)}

