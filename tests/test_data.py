"""``fusegrad.utils.data`` against ``torch.utils.data``: batches, collation, samplers,
splits, worker processes."""
import collections

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.utils import data as fd


def plain(x):
    """A batch (of either library) as nested lists/dicts of (dtype name, values)."""
    if hasattr(x, "numpy") and hasattr(x, "dtype"):
        return (str(x.dtype).split(".")[-1], np.asarray(x.detach().numpy() if hasattr(x, "detach") else x).tolist())
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [plain(v) for v in x]
    return x


Point = collections.namedtuple("Point", "x y")


def samples(lib):
    """Datasets of several sample kinds, built the same way for each library."""
    arr = np.arange(24, dtype=np.float32).reshape(12, 2)
    return {
        "tensors": lib.utils.data.TensorDataset(lib.tensor(arr), lib.arange(12)),
        "dicts": [{"a": i, "b": float(i) / 2, "c": np.float32(i), "s": str(i)} for i in range(7)],
        "numbers": [i * 1.5 for i in range(9)],
        "ints_bools": [(i, i % 2 == 0) for i in range(6)],
        "numpy": [np.full((2, 3), i, dtype=np.int32) for i in range(5)],
        "named": [Point(lib.tensor([float(i)]), i) for i in range(5)],
        "nested": [([i, i + 1], {"k": (i, 2.0)}) for i in range(5)],
    }


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["tensors", "dicts", "numbers", "ints_bools", "numpy", "named", "nested"])
@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (4, False), (4, True), (None, False)])
def test_batches_in_order_match_torch(pt, kind, batch_size, drop_last):
    ours = fd.DataLoader(samples(fg)[kind], batch_size=batch_size, drop_last=drop_last)
    theirs = pt.utils.data.DataLoader(samples(pt)[kind], batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert [plain(b) for b in ours] == [plain(b) for b in theirs]


@pytest.mark.torch
def test_default_collate_and_convert_match_torch(pt):
    batch = [(np.float64(1.5), np.array([1, 2])), (np.float64(2.5), np.array([3, 4]))]
    assert plain(fd.default_collate(batch)) == plain(pt.utils.data.default_collate(batch))
    assert plain(fd.default_convert(batch)) == plain(pt.utils.data.default_convert(batch))
    with pytest.raises(TypeError, match="default_collate"):
        fd.default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="equal size"):
        fd.default_collate([fg.zeros(2), fg.zeros(3)])


def test_shuffle_with_generator_is_a_repeatable_permutation():
    ds = fd.TensorDataset(fg.arange(50))

    def order(seed):
        g = fg.Generator().manual_seed(seed)
        return [i for (b,) in fd.DataLoader(ds, batch_size=8, shuffle=True, generator=g) for i in b.tolist()]

    a, b, c = order(3), order(3), order(4)
    assert sorted(a) == list(range(50)) and a != list(range(50))
    assert a == b and a != c
    loader = fd.DataLoader(ds, batch_size=50, shuffle=True, generator=fg.Generator().manual_seed(3))
    e1, e2 = (next(iter(loader))[0].tolist() for _ in range(2))
    assert sorted(e1) == sorted(e2) == list(range(50)) and e1 != e2  # each epoch reshuffles
    fg.manual_seed(7)  # no generator: the default generator's seed decides
    s1 = list(fd.RandomSampler(range(20)))
    fg.manual_seed(7)
    assert list(fd.RandomSampler(range(20))) == s1 and sorted(s1) == list(range(20))


def test_random_sampler_replacement_and_num_samples():
    g = fg.Generator().manual_seed(0)
    s = list(fd.RandomSampler(range(5), replacement=True, num_samples=200, generator=g))
    assert len(s) == 200 and set(s) == set(range(5))
    s = list(fd.RandomSampler(range(5), num_samples=12, generator=g))
    assert len(s) == 12 and sorted(s[:5]) == sorted(s[5:10]) == list(range(5)) and len(set(s[10:])) == 2


@pytest.mark.torch
def test_samplers_and_batch_sampler_match_torch(pt):
    for bs, dl in [(3, False), (3, True), (10, False)]:
        ours = list(fd.BatchSampler(fd.SequentialSampler(range(8)), bs, dl))
        theirs = list(pt.utils.data.BatchSampler(pt.utils.data.SequentialSampler(range(8)), bs, dl))
        assert ours == theirs
        assert len(fd.BatchSampler(range(8), bs, dl)) == len(pt.utils.data.BatchSampler(range(8), bs, dl))
    idx = [5, 9, 13, 2]
    s = list(fd.SubsetRandomSampler(idx, generator=fg.Generator().manual_seed(1)))
    assert sorted(s) == sorted(idx)
    sampler = fd.BatchSampler(fd.SubsetRandomSampler(idx), 2, False)
    loader = fd.DataLoader(list(range(20)), batch_sampler=sampler)
    assert sorted(sum((b.tolist() for b in loader), [])) == sorted(idx)
    # an explicit sampler (any iterable of indices) decides the order
    loader = fd.DataLoader(list(range(10)), sampler=[9, 1, 4], batch_size=2)
    assert [b.tolist() for b in loader] == [[9, 1], [4]]


def test_weighted_random_sampler_frequencies():
    w = [1.0, 0.0, 3.0, 6.0]
    g = fg.Generator().manual_seed(0)
    draws = np.array(list(fd.WeightedRandomSampler(w, 20000, generator=g)))
    freq = np.bincount(draws, minlength=4) / len(draws)
    np.testing.assert_allclose(freq, np.array(w) / 10, atol=0.015)
    for seed in range(20):
        picks = list(fd.WeightedRandomSampler(w, 3, replacement=False, generator=fg.Generator().manual_seed(seed)))
        assert len(set(picks)) == 3 and 1 not in picks
    first = [next(iter(fd.WeightedRandomSampler([1.0, 100.0], 1, replacement=False,
                                                generator=fg.Generator().manual_seed(s)))) for s in range(200)]
    assert 0.9 < np.mean(first) < 1.0  # the heavy index usually comes first
    # as torch: beyond the positive weights, zero-weight indices are drawn; beyond len(weights) it raises
    assert sorted(fd.WeightedRandomSampler(w, 4, replacement=False)) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="without replacement"):
        list(fd.WeightedRandomSampler(w, 5, replacement=False))
    with pytest.raises(ValueError, match="num_samples"):
        fd.WeightedRandomSampler(w, 0)


@pytest.mark.torch
def test_datasets_subset_concat_split_match_torch(pt):
    a, b = list(range(5)), list(range(100, 103))
    ours, theirs = fd.ConcatDataset([a, b]), pt.utils.data.ConcatDataset([a, b])
    assert len(ours) == len(theirs) and [ours[i] for i in range(-8, 8)] == [theirs[i] for i in range(-8, 8)]
    assert ours.cumulative_sizes == theirs.cumulative_sizes
    sub = fd.Subset(list("abcdefg"), [6, 0, 3])
    assert [sub[i] for i in range(3)] == ["g", "a", "d"] and len(sub) == 3
    assert [b for b in fd.DataLoader(sub, batch_size=2)] == [["g", "a"], ["d"]]
    for lengths in ([0.3, 0.3, 0.4], [0.5, 0.5], [3, 7], [0.1, 0.9]):
        ours = fd.random_split(range(10), lengths, generator=fg.Generator().manual_seed(0))
        theirs = pt.utils.data.random_split(range(10), lengths, generator=pt.Generator().manual_seed(0))
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        got = [x for s in ours for x in s]
        assert sorted(got) == list(range(10))
    with pytest.raises(ValueError, match="Sum of input lengths"):
        fd.random_split(range(10), [3, 3])
    td = fd.TensorDataset(fg.arange(4), fg.arange(4) * 2)
    assert [tuple(int(v) for v in td[i]) for i in range(4)] == [(i, 2 * i) for i in range(4)]
    with pytest.raises(AssertionError, match="Size mismatch"):
        fd.TensorDataset(fg.zeros(3), fg.zeros(4))
    sd = fd.StackDataset(x=[1, 2], y=["a", "b"])
    assert sd[1] == {"x": 2, "y": "b"}


@pytest.mark.torch
def test_argument_errors_match_torch(pt):
    cases = [dict(batch_sampler=[[0]], batch_size=2), dict(sampler=[0], shuffle=True),
             dict(batch_size=None, drop_last=True), dict(num_workers=-1), dict(persistent_workers=True),
             dict(prefetch_factor=2)]
    for kw in cases:
        with pytest.raises(ValueError) as ours:
            fd.DataLoader(list(range(4)), **kw)
        with pytest.raises(ValueError) as theirs:
            pt.utils.data.DataLoader(list(range(4)), **kw)
        assert str(ours.value) == str(theirs.value)


class Stream(fd.IterableDataset):
    """0..n-1, split between workers by ``get_worker_info``."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = fd.get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(lo, self.n, step))

    def __len__(self):
        return self.n


class Faulty(fd.Dataset):
    def __getitem__(self, i):
        if i == 5:
            raise KeyError("bad sample 5")
        return i

    def __len__(self):
        return 8


def _record_worker(worker_id):
    info = fd.get_worker_info()
    assert info.id == worker_id and info.num_workers == 2


def test_worker_processes():
    ds = fd.TensorDataset(fg.arange(40.0).reshape(20, 2), fg.arange(20))
    single = [plain(b) for b in fd.DataLoader(ds, batch_size=3)]
    multi = fd.DataLoader(ds, batch_size=3, num_workers=2, worker_init_fn=_record_worker, pin_memory=True)
    assert [plain(b) for b in multi] == single
    assert [plain(b) for b in multi] == single  # a second epoch starts fresh workers
    # the samples are read in other processes: each reports its own pid
    import os
    pids = {p for b in fd.DataLoader(_Pid(), batch_size=2, num_workers=2) for p in b.tolist()}
    assert os.getpid() not in pids and len(pids) == 2
    # persistent workers serve several epochs, also after one left unfinished
    loader = fd.DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=True)
    it = iter(loader)
    next(it)
    assert [plain(b) for b in loader] == single and [plain(b) for b in loader] == single
    pool = loader._workers
    assert pool is not None and len({p.pid for p in pool.procs}) == 2
    # iterable datasets: each worker iterates its own copy; batches alternate between workers
    got = [b.tolist() for b in fd.DataLoader(Stream(10), batch_size=2, num_workers=2)]
    assert got == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]
    assert [b.tolist() for b in fd.DataLoader(Stream(5), batch_size=2)] == [[0, 1], [2, 3], [4]]
    # an exception in a worker reaches the main process with its type and where it happened
    with pytest.raises(KeyError, match="bad sample 5") as err:
        list(fd.DataLoader(Faulty(), batch_size=2, num_workers=2))
    assert "DataLoader worker process" in str(err.value)
    loader.__del__()


class _Pid(fd.Dataset):
    def __getitem__(self, i):
        import os
        import time
        time.sleep(0.05)
        return os.getpid()

    def __len__(self):
        return 8


@pytest.mark.torch
def test_iterable_with_workers_matches_torch(pt):
    class TorchStream(pt.utils.data.IterableDataset):
        def __iter__(self):
            info = pt.utils.data.get_worker_info()
            return iter(range(info.id, 10, info.num_workers))

    theirs = [b.tolist() for b in pt.utils.data.DataLoader(TorchStream(), batch_size=2, num_workers=2)]
    ours = [b.tolist() for b in fd.DataLoader(Stream(10), batch_size=2, num_workers=2)]
    assert ours == theirs


def test_an_epoch_iterator_has_the_loaders_length():
    torch = pytest.importorskip("torch")
    for lib in (fg, torch):
        ds = lib.utils.data.TensorDataset(lib.arange(10.0))
        for kw in ({"batch_size": 4}, {"batch_size": 4, "drop_last": True}, {"batch_size": None}):
            it = iter(lib.utils.data.DataLoader(ds, **kw))
            assert len(it) == {4: 3, None: 10}[kw["batch_size"]] - kw.get("drop_last", 0)
            assert len(list(it)) == len(lib.utils.data.DataLoader(ds, **kw))
