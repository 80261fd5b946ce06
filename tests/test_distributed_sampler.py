"""DistributedSampler against torch.utils.data.distributed.DistributedSampler (index lists
equal for the same seed and epoch), without MPI: rank and num_replicas given explicitly.
The partition across real ranks is checked under mpiexec in test_distributed.py."""
from __future__ import annotations

import pytest

from fusegrad.utils.data import DistributedSampler


@pytest.mark.torch
@pytest.mark.parametrize("n,replicas", [(10, 2), (11, 3), (2, 3), (1, 4), (100, 7), (64, 8)])
@pytest.mark.parametrize("shuffle,drop_last", [(True, False), (False, False), (True, True), (False, True)])
def test_index_lists_equal_torch(n, replicas, shuffle, drop_last):
    import torch
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for seed, epoch in ((0, 0), (17, 3)):
        for rank in range(replicas):
            ours = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                      drop_last=drop_last)
            theirs = TorchSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                                  drop_last=drop_last)
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_invalid_rank():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_epochs_reshuffle_and_partition():
    epochs = []
    for epoch in range(2):
        parts = []
        for rank in range(3):
            s = DistributedSampler(range(12), num_replicas=3, rank=rank, seed=5)
            s.set_epoch(epoch)
            parts.append(list(s))
        assert sorted(sum(parts, [])) == list(range(12))  # each index on exactly one rank
        epochs.append(parts)
    assert epochs[0] != epochs[1]
