"""``DataLoader``: batches from a dataset, read in this process or by worker processes."""
from __future__ import annotations

import multiprocessing
import queue
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from ...runtime.factory import Generator, randint
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker import ExceptionWrapper, Fetcher, IterableExhausted, worker_loop
from .worker import get_worker_info  # noqa: F401  (torch.utils.data.dataloader exports it)

_POLL_S = 1.0  # how often a waiting main process checks that its workers are alive


class _Forever(Sampler):
    """The index source for an iterable dataset: ``None`` forever (workers ignore it)."""

    def __iter__(self):
        while True:
            yield None


class _Epoch:
    """One pass over a loader (``iter(loader)``): its batches, and ``len()`` as the loader's."""

    def __init__(self, batches, loader):
        self._batches, self._loader = batches, loader

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)


def _checked_context(ctx, num_workers: int):
    """``multiprocessing_context`` as PyTorch checks it: only with worker processes, a start
    method's name or a context."""
    if ctx is None:
        return None
    if num_workers == 0:
        raise ValueError(f"multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
                         f"but got num_workers={num_workers}")
    if isinstance(ctx, str):
        methods = multiprocessing.get_all_start_methods()
        if ctx not in methods:
            raise ValueError(f"multiprocessing_context option should specify a valid start method in {methods!r}, "
                             f"but got multiprocessing_context={ctx!r}")
    elif not isinstance(ctx, multiprocessing.context.BaseContext):
        raise TypeError(f"multiprocessing_context option should be a valid context object or a string specifying "
                        f"the start method, but got multiprocessing_context={ctx}")
    return ctx


class DataLoader:
    """PyTorch's ``DataLoader``: iterates over ``dataset`` in batches of ``batch_size``
    (``None``: samples one by one, converted by ``default_convert``), in order or shuffled
    (``shuffle=True``, repeatable with ``generator``), or in the order a ``sampler`` or
    ``batch_sampler`` gives; ``collate_fn`` (``default_collate``) makes a batch from a list
    of samples. ``num_workers > 0`` reads batches in that many worker processes (each seeded
    ``base_seed + id``; ``worker_init_fn(id)`` runs first), returned in sampler order;
    ``persistent_workers`` keeps them between epochs. ``pin_memory`` is accepted and has no
    effect on the CPU."""

    def __init__(self, dataset: Dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Union[Sampler, Iterable, None] = None,
                 batch_sampler: Union[Sampler, Iterable, None] = None, num_workers: int = 0,
                 collate_fn: Optional[Callable[[List[Any]], Any]] = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Optional[Callable[[int], None]] = None,
                 multiprocessing_context=None, generator: Optional[Generator] = None, *,
                 prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = 2 if num_workers > 0 and prefetch_factor is None else prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _checked_context(multiprocessing_context, num_workers)
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _Forever()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._workers: Optional[_WorkerPool] = None
        self._initialized = True

    def __setattr__(self, attr: str, val) -> None:
        if self.__dict__.get("_initialized") and attr in ("batch_size", "batch_sampler", "sampler", "drop_last",
                                                           "dataset", "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {type(self).__name__} is initialized")
        object.__setattr__(self, attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self):
        # every epoch draws a base seed for the workers, advancing the loader's generator
        base_seed = int(randint(0, 2 ** 62, (), generator=self.generator).item())
        if self.num_workers == 0:
            return _Epoch(self._single_process(base_seed), self)
        if self.persistent_workers and self._workers is not None and self._workers.alive():
            pool = self._workers
        else:
            pool = _WorkerPool(self, base_seed)
            if self.persistent_workers:
                self._workers = pool
        return _Epoch(pool.epoch(iter(self._index_sampler), owns_pool=not self.persistent_workers), self)

    def _single_process(self, base_seed: int):
        fetcher = Fetcher(self.dataset, self._iterable, self._auto_collation, self.collate_fn, self.drop_last,
                          self.batch_size)
        for index in self._index_sampler:
            try:
                yield fetcher.fetch(index)
            except StopIteration:
                return

    def __del__(self) -> None:
        if getattr(self, "_workers", None) is not None:
            self._workers.shutdown()


class _WorkerPool:
    """Worker processes of one loader: each has its own task queue, all share one result
    queue; tasks go round robin, at most ``prefetch_factor`` per worker outstanding, and
    results come back in task order."""

    def __init__(self, loader: DataLoader, base_seed: int) -> None:
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing.get_context()
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self.loader = loader
        self.n = loader.num_workers
        self.timeout = loader.timeout
        self.done = ctx.Event()
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(self.n)]
        self.procs = []
        self._epoch = 0
        for wid in range(self.n):
            p = ctx.Process(target=worker_loop, daemon=True,
                            args=(loader.dataset, loader._iterable, self.tasks[wid], self.results, self.done,
                                  loader._auto_collation, loader.collate_fn, loader.drop_last, loader.batch_size,
                                  base_seed, loader.worker_init_fn, wid, self.n))
            p.start()
            self.procs.append(p)

    def alive(self) -> bool:
        return all(p.is_alive() for p in self.procs)

    def epoch(self, indices, owns_pool: bool):
        """One pass over ``indices``, as a generator of batches."""
        self._epoch += 1
        epoch = self._epoch
        active = list(range(self.n))    # workers whose iterable dataset has not ended
        pending: Dict[int, int] = {}    # task id -> worker, sent and not yet yielded
        arrived: Dict[int, Any] = {}    # results that came before their turn
        sent = next_out = 0
        rr = 0
        exhausted = False
        try:
            while True:
                while not exhausted and active and len(pending) < self.loader.prefetch_factor * len(active):
                    try:
                        index = next(indices)
                    except StopIteration:
                        exhausted = True
                        break
                    wid = active[rr % len(active)]
                    rr += 1
                    self.tasks[wid].put((epoch, sent, index))
                    pending[sent] = wid
                    sent += 1
                if not pending:  # every task sent has been answered (results come in task order)
                    return
                while next_out not in arrived:
                    got_epoch, task_id, data = self._get()
                    if got_epoch == epoch:
                        arrived[task_id] = data
                data = arrived.pop(next_out)
                pending.pop(next_out)
                next_out += 1
                if isinstance(data, IterableExhausted):
                    if data.worker_id in active:
                        active.remove(data.worker_id)
                    continue
                if isinstance(data, ExceptionWrapper):
                    data.reraise()
                yield data
        finally:
            if owns_pool:
                self.shutdown()

    def _get(self):
        """The next result, waiting at most ``timeout`` seconds (0: forever) and failing
        clearly if a worker died."""
        waited = 0.0
        while True:
            step = _POLL_S if not self.timeout else min(_POLL_S, self.timeout - waited)
            try:
                return self.results.get(timeout=step)
            except queue.Empty:
                waited += step
                dead = [p for p in self.procs if not p.is_alive()]
                if dead:
                    pids = ", ".join(str(p.pid) for p in dead)
                    codes = ", ".join(str(p.exitcode) for p in dead)
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly "
                                       f"(exit code(s) {codes})") from None
                if self.timeout and waited >= self.timeout:
                    raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds") from None

    def shutdown(self) -> None:
        """Stop the workers (asking first, then terminating any that linger)."""
        if not self.procs:
            return
        self.done.set()
        for q in self.tasks:
            try:
                q.put(None)
            except (ValueError, OSError):  # the queue is already closed
                pass
        for p in self.procs:
            p.join(timeout=2.0)
            if p.is_alive():
                p.terminate()
                p.join()
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()
            q.close()
        self.procs = []
