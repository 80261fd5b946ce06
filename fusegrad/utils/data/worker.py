"""What runs in a ``DataLoader`` worker process, and ``get_worker_info``."""
from __future__ import annotations

import queue
import random
import traceback
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import numpy as np


@dataclass(frozen=True)
class WorkerInfo:
    """Inside a worker process: its ``id``, the ``num_workers``, its ``seed`` and its copy
    of the ``dataset``."""
    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: Optional[WorkerInfo] = None  # set once in each worker process


def get_worker_info() -> Optional[WorkerInfo]:
    """This worker's ``WorkerInfo``; ``None`` in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.exc_type = type(exc)
        self.msg = f"Caught {type(exc).__name__} {where}.\nOriginal {traceback.format_exc()}"

    def reraise(self) -> None:
        try:
            err = self.exc_type(self.msg)
        except Exception:  # an exception type whose constructor wants other arguments
            err = RuntimeError(self.msg)
        raise err


class IterableExhausted:
    """A worker's reply once its copy of an ``IterableDataset`` has no more samples."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


class Fetcher:
    """Reads one batch (or one sample, without automatic batching) from a dataset."""

    def __init__(self, dataset, iterable: bool, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool, batch_size: Optional[int]) -> None:
        self.dataset, self.iterable, self.auto_collation = dataset, iterable, auto_collation
        self.collate_fn, self.drop_last, self.batch_size = collate_fn, drop_last, batch_size
        self.it = iter(dataset) if iterable else None

    def fetch(self, index) -> Any:
        """The collated batch for ``index`` (a list of indices, one index, or, for an
        iterable dataset, ignored); StopIteration when an iterable dataset ends."""
        if self.iterable:
            if not self.auto_collation:
                return self.collate_fn(next(self.it))
            data: List[Any] = []
            for sample in self.it:
                data.append(sample)
                if len(data) == self.batch_size:
                    break
            if not data or (self.drop_last and len(data) < self.batch_size):
                raise StopIteration
            return self.collate_fn(data)
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        return self.collate_fn(data)


def seed_worker(seed: int) -> None:
    """Seed Python's, NumPy's and fusegrad's generators in a worker (as PyTorch does)."""
    from ...runtime.factory import manual_seed
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    manual_seed(seed)


def worker_loop(dataset, iterable: bool, index_queue, data_queue, done_event, auto_collation: bool,
                collate_fn: Callable, drop_last: bool, batch_size: Optional[int], base_seed: int,
                init_fn: Optional[Callable[[int], None]], worker_id: int, num_workers: int) -> None:
    """A worker's life: take ``(epoch, task, index)`` from ``index_queue``, put
    ``(epoch, task, batch)`` on ``data_queue`` (a wrapped exception instead when reading
    fails) until ``None`` arrives. A new epoch restarts an iterable dataset's iteration."""
    global _worker_info
    seed = base_seed + worker_id
    seed_worker(seed)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    fetcher, epoch, init_error = None, None, None
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception as e:
        init_error = ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
    while True:
        try:
            task = index_queue.get(timeout=5.0)
        except queue.Empty:
            if done_event.is_set():
                return
            continue
        if task is None:
            return
        task_epoch, task_id, index = task
        if init_error is not None:
            data = init_error
        else:
            try:
                if fetcher is None or task_epoch != epoch:
                    fetcher = Fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, batch_size)
                    epoch = task_epoch
                data = fetcher.fetch(index)
            except StopIteration:
                data = IterableExhausted(worker_id)
            except Exception as e:
                data = ExceptionWrapper(e, f"in DataLoader worker process {worker_id}")
        data_queue.put((task_epoch, task_id, data))
