"""``fusegrad.utils.data``: datasets, samplers, ``default_collate`` and ``DataLoader``, as in
``torch.utils.data``."""
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset, TensorDataset,
                      random_split)
from .distributed import DistributedSampler
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)
from .worker import WorkerInfo, get_worker_info

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler",
           "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "default_collate", "default_convert",
           "get_worker_info", "random_split"]
