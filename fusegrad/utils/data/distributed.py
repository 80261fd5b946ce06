"""``DistributedSampler``: each rank's share of a dataset, as ``torch.utils.data.distributed``."""
from __future__ import annotations

import math
from typing import Iterator, List, Optional, Sized

import numpy as np

from .sampler import Sampler


def torch_randperm(n: int, seed: int) -> List[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed))`` exactly: PyTorch's CPU
    randperm is a Fisher-Yates shuffle drawing 32-bit MT19937 numbers, and NumPy's legacy
    RandomState is the same MT19937 with the same seeding (so every rank, and PyTorch, agree)."""
    raw = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2 ** 32, size=max(n - 1, 0), dtype=np.uint32)
    steps = raw.astype(np.int64) % (n - np.arange(n - 1, dtype=np.int64))
    perm = list(range(n))
    for i, k in enumerate(steps.tolist()):
        j = i + k
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class DistributedSampler(Sampler[int]):
    """Rank ``rank``'s indices of ``dataset`` out of ``num_replicas``: every ``num_replicas``-th
    index of one permutation (seeded ``seed + epoch``, so all ranks agree; see ``set_epoch``),
    padded by repeating indices to a multiple of ``num_replicas`` or, with ``drop_last``, cut."""

    def __init__(self, dataset: Sized, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            from ... import distributed as dist
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle differently for ``epoch`` (call before each epoch's iterator, on every rank)."""
        self.epoch = epoch
